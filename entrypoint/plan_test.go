package entrypoint

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-dev/gantry/config"
)

// hostileEnvRef is a reference a pull request's run file may write, which
// run-file-env 'APP_*' matched (path.Match's * matches a line ending): in
// the comment of a GitHub plan it ended the comment and gave the
// workflow an env of its own.
const hostileEnvRef = "APP_X\nenv:\n  ACTIONS_ALLOW_UNSECURE_COMMANDS: true\n  ALL: ${{ toJSON(secrets) }}\n#"

// planKeys are the keys a plan's template gives: at the top, in each job
// or task (at most these), and in a Tekton Pipeline's spec.
var planKeys = map[string]struct{ top, job, spec []string }{
	"github": {top: []string{"jobs", "name", "on", "permissions"}, job: []string{"concurrency", "name", "needs", "runs-on", "steps"}},
	"gitlab": {top: []string{".gantry-unit", "stages"}, job: []string{"extends", "needs", "resource_group", "variables"}},
	"tekton": {top: []string{"apiVersion", "kind", "metadata", "spec"}, job: []string{"name", "params", "runAfter", "taskRef", "when", "workspaces"}, spec: []string{"description", "params", "tasks", "workspaces"}},
}

// checkPlanShape is the rule of a plan's sink: what was written parses
// as YAML, and its keys are the template's, whatever the run file named:
// at the top exactly the template's (with a job per unit for GitLab), in
// each job or task no other.
func checkPlanShape(t *testing.T, format string, units []*config.Unit, out []byte) {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%s: the plan does not parse: %v\n%s", format, err, out)
	}
	want := planKeys[format]
	top := slices.Clone(want.top)
	if format == "gitlab" {
		for _, l := range planLevels(units) {
			for _, u := range l {
				top = append(top, "gantry-"+u.Name)
			}
		}
	}
	slices.Sort(top)
	if got := slices.Sorted(maps.Keys(doc)); !slices.Equal(got, top) {
		t.Fatalf("%s: top-level keys %q, want the template's %q\n%s", format, got, top, out)
	}
	var jobs []any
	switch format {
	case "github":
		m, _ := doc["jobs"].(map[string]any)
		for _, j := range m {
			jobs = append(jobs, j)
		}
	case "gitlab":
		for k, j := range doc {
			if strings.HasPrefix(k, "gantry-") {
				jobs = append(jobs, j)
			}
		}
	case "tekton":
		spec, _ := doc["spec"].(map[string]any)
		if got := slices.Sorted(maps.Keys(spec)); !slices.Equal(got, want.spec) {
			t.Fatalf("tekton: spec keys %q, want %q\n%s", got, want.spec, out)
		}
		jobs, _ = spec["tasks"].([]any)
	}
	for _, j := range jobs {
		m, ok := j.(map[string]any)
		if !ok {
			t.Fatalf("%s: a job is %T, not a mapping\n%s", format, j, out)
		}
		for k := range m {
			if !slices.Contains(want.job, k) {
				t.Fatalf("%s: a job has the key %q, which is not the template's\n%s", format, k, out)
			}
		}
	}
}

// planUnits are two units configured for a plan in format, the second
// depending on the first, each reading ref with {env:}.
func planUnits(format string, names [2]string, ref string) []*config.Unit {
	cfg := &config.Config{Format: format}
	return []*config.Unit{
		{Name: names[0], Config: cfg, EnvRefs: []string{ref}},
		{Name: names[1], Config: cfg, EnvRefs: []string{"SOPS_AGE_KEY", ref}, DependsOn: []string{names[0]}},
	}
}

// A name a plan writes in a comment (a variable's, the run file's) stays
// in the comment, whatever line endings it holds: the plan's keys are
// the template's. Before plans were written by the encoder alone, the
// GitHub plan got a top-level env from hostileEnvRef, and a GitLab plan
// one from a run file's name.
func TestPlanCommentsHoldNoKeys(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"github", "gitlab", "tekton"} {
		for _, file := range []string{"gantry.yaml", "x\nenv: {A: b}\n#.yaml", "x\r\u2028\u0085y.yaml", "bad\xff\x00.yaml"} {
			t.Run(fmt.Sprintf("%s %q", format, file), func(t *testing.T) {
				t.Parallel()
				units := planUnits(format, [2]string{"web", "1db"}, hostileEnvRef)
				out, err := planFor(units, file, []string{hostileEnvRef})
				if err != nil {
					t.Fatal(err)
				}
				checkPlanShape(t, format, units, out)
			})
		}
	}
}

// The reference above is refused where the run file is read, in every
// format, naming the file and line, the unit and the input, with the
// name quoted; nothing is printed on stdout. Before, plan took it (the
// pattern APP_* matched it) and wrote the plan.
func TestPlanRefusesAnEnvReferenceThatIsNoName(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "web"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(map[string]any{"units": []any{map[string]any{
		"name": "web", "path": "web", "inventory": "web", "sops-age-key": map[string]string{"env": hostileEnvRef},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "gantry.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"github", "gitlab", "tekton"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr strings.Builder
			code := Run(context.Background(), []string{"plan", "--run-file", file, "--format", format, "--run-file-env", "APP_*"},
				[]string{"HOME=" + root, "GANTRY_WORKSPACE=" + root}, &stdout, &stderr)
			if stdout.Len() > 0 {
				checkPlanShape(t, format, []*config.Unit{{Name: "web", Config: &config.Config{Format: format}}}, []byte(stdout.String()))
			}
			if code != ExitInvalid || stdout.Len() > 0 {
				t.Errorf("exit %d, want %d and no plan\n%s", code, ExitInvalid, stdout.String())
			}
			for _, want := range []string{file + ":6", "unit web", "sops-age-key", fmt.Sprintf("{env: %q}", hostileEnvRef), "not a variable's name"} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("the refusal does not say %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}

// Unit names are DNS labels, and a GitHub job's id must not start with a
// digit: the ids made of two names are never one (1a and unit-1a were).
func TestPlanJobIDsAreOnePerUnit(t *testing.T) {
	t.Parallel()
	units := planUnits("github", [2]string{"1a", "unit-1a"}, "SOPS_AGE_KEY")
	out, err := planFor(units, "gantry.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkPlanShape(t, "github", units, out)
	var doc struct{ Jobs map[string]any }
	if err := yaml.Unmarshal(out, &doc); err != nil || len(doc.Jobs) != 2 {
		t.Errorf("jobs %v (%v), want one per unit\n%s", slices.Sorted(maps.Keys(doc.Jobs)), err, out)
	}
}

// Whatever a run file names (units, the variables it reads, the inputs'
// values) and whatever reaches the plan's writer unchecked (a variable's
// name, the run file's), a plan parses as YAML and its keys are the
// template's. Each input is tried twice: as a run file, through the
// checks of loading it, then straight into the writer, past them.
func FuzzPlanIsData(f *testing.F) {
	f.Add("web", "db", hostileEnvRef, "platform", "gantry.yaml")
	f.Add("web", "db", "APP_X", "x\n  env: {A: b}\n#", "x\nenv:\n  A: b\n#.yaml")
	f.Add("1a", "unit-1a", "APP_\r::warning::x", "\u2028", "bad\xff.yaml")
	f.Add("a", "a", "", "", "")
	f.Fuzz(func(t *testing.T, name1, name2, envName, value, file string) {
		// As a run file: what loading refuses is no plan.
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := yaml.Marshal(map[string]any{"units": []any{
			map[string]any{"name": name1, "path": "x", "inventory": "a", "namespace": value, "sops-age-key": map[string]string{"env": envName}},
			map[string]any{"name": name2, "path": "x", "inventory": "b", "depends-on": []string{name1}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		runFile := filepath.Join(root, "gantry.yaml")
		if err := os.WriteFile(runFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"github", "gitlab", "tekton"} {
			g := config.Given{Command: "apply", CommandOrigin: "the command line",
				Flags: map[string]string{"format": format, "run-file-env": "*", "offline": "true"},
				Env:   map[string]string{"HOME": root, "GANTRY_WORKSPACE": root}}
			units, err := config.LoadUnits(g, runFile, true)
			if err != nil {
				break
			}
			out, err := planFor(units, runFile, []string{"*"})
			if errors.As(err, new(*invalidPlanError)) {
				continue // no such plan: a unit named delete-<unit> in a Tekton plan
			}
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			checkPlanShape(t, format, units, out)
		}
		// Straight into the writer: the names it puts in comments and
		// values are not checked first.
		for _, format := range []string{"github", "gitlab", "tekton"} {
			units := planUnits(format, [2]string{"web", "db"}, envName)
			out, err := planFor(units, file, []string{envName})
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			checkPlanShape(t, format, units, out)
		}
	})
}
