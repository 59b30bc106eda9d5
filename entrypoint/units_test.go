package entrypoint

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/plan"
)

// runFileWith writes a run file whose units all build the folder x.
func runFileWith(t *testing.T, content string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "gantry.yaml")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// The route of a run file, short of a cluster: a suspended unit is
// reported and exits 0; a bad run file exits 2 with a JSON report that
// says InvalidInput, and nothing else runs.
func TestRunFileRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		code       int
		reason     string
	}{
		{"suspended", "units:\n- {name: later, path: x, inventory: later, suspend: true}\n", ExitOK, "ReconciliationSucceeded"},
		{"bad", "units:\n- {name: a, path: x, inventory: a, depends-on: [b]}\n", ExitInvalid, "InvalidInput"},
		{"a path beside it", "units:\n- {name: a, path: x, inventory: a}\n", ExitInvalid, "InvalidInput"},
		{"one unit of several", "units:\n- {name: a, path: x, inventory: a, suspend: true}\n- {name: later, path: x, inventory: later, suspend: true, depends-on: [a]}\n", ExitOK, "ReconciliationSucceeded"},
		{"an unknown unit", "units:\n- {name: a, path: x, inventory: a}\n", ExitInvalid, "InvalidInput"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := runFileWith(t, tc.file)
			report := filepath.Join(t.TempDir(), "report.json")
			var stdout, stderr strings.Builder
			args := []string{"apply", "--run-file", file, "--report", report}
			switch tc.name {
			case "a path beside it":
				args = append(args, "--path", filepath.Dir(file))
			case "one unit of several":
				args = append(args, "--unit", "later")
			case "an unknown unit":
				args = append(args, "--unit", "nope")
			}
			code := Run(context.Background(), args, []string{"HOME=" + t.TempDir(), "GANTRY_WORKSPACE=" + filepath.Dir(file)}, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, stderr.String())
			}
			b, err := os.ReadFile(report)
			if err != nil {
				t.Fatal(err)
			}
			var run struct {
				Schema, Reason string
				Units          []struct{ Name, Reason string }
			}
			if err := json.Unmarshal(b, &run); err != nil {
				t.Fatal(err)
			}
			if run.Schema != "gantry.dev/run/v1" || run.Reason != tc.reason {
				t.Errorf("report %s %s, want %s", run.Schema, run.Reason, tc.reason)
			}
			if (tc.name == "suspended" || tc.name == "one unit of several") && (len(run.Units) != 1 || run.Units[0].Name != "later" || run.Units[0].Reason != "Suspended") {
				t.Errorf("units %+v, want later alone, Suspended", run.Units)
			}
		})
	}
}

// plan --format github orders units by their dependencies whatever order
// the run file lists them in: a dependency listed after its dependent
// still comes a level before it.
func TestPlanLevelsWithADependencyListedLater(t *testing.T) {
	t.Parallel()
	units := []*config.Unit{
		{Name: "web", DependsOn: []string{"db"}},
		{Name: "db", DependsOn: []string{"crds"}},
		{Name: "paused", Suspend: true},
		{Name: "worker", DependsOn: []string{"paused", "crds"}},
		{Name: "crds"},
	}
	var got []string
	for _, level := range plan.Levels(planUnits(units)) {
		var names []string
		for _, u := range level {
			names = append(names, u.Name)
		}
		got = append(got, strings.Join(names, ","))
	}
	if strings.Join(got, " -> ") != "crds -> db,worker -> web" {
		t.Errorf("levels %s, want crds -> db,worker -> web", strings.Join(got, " -> "))
	}
}

// worstExit ranks bad input over failure over pending changes.
func TestWorstExit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		codes []int
		want  int
	}{
		{nil, ExitOK},
		{[]int{ExitOK, ExitChanges}, ExitChanges},
		{[]int{ExitChanges, ExitFailed, ExitOK}, ExitFailed},
		{[]int{ExitFailed, ExitInvalid, ExitChanges}, ExitInvalid},
	} {
		if got := worstExit(tc.codes...); got != tc.want {
			t.Errorf("worstExit(%v) = %d, want %d", tc.codes, got, tc.want)
		}
	}
}
