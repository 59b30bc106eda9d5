package entrypoint

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.units.gantry.test}
spec:
  group: units.gantry.test
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, maximum: 10}
`

// widget is a custom resource of widgetCRD.
func widget(name string, size int) string {
	return "apiVersion: units.gantry.test/v1\nkind: Widget\nmetadata: {name: " + name + ", namespace: default}\nspec: {size: " + strconv.Itoa(size) + "}\n"
}

// offlineUnits writes files into a workspace, a git repository of one
// commit (HEAD, the base of an offline diff).
func offlineUnits(t *testing.T, files map[string]string) string {
	t.Helper()
	ws := t.TempDir()
	for name, content := range files {
		if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "base"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return ws
}

// unitReasons reads each unit's reason from a run's JSON report.
func unitReasons(t *testing.T, report string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Units []struct{ Name, Reason string }
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range run.Units {
		got[u.Name] = u.Reason
	}
	return got
}

// Offline, a unit sees the CRDs its dependencies build, through others
// too, as if its crds input named them: validate --offline and diff
// --offline of a run file whose CRDs are in one unit and their custom
// resources in the next check them against the CRD's schema, and report
// one that breaks it. A unit that does not depend on the CRDs' unit does
// not see them.
func TestOfflineUnitsSeeTheirDependenciesCRDs(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"crds/crd.yaml":      widgetCRD,
		"app/widget.yaml":    widget("app", 3),
		"deeper/widget.yaml": widget("deeper", 4),
		"bad/widget.yaml":    widget("bad", 50),
		"loose/widget.yaml":  widget("loose", 5),
		"gantry.yaml": "units:\n- {name: crds, path: crds}\n- {name: app, path: app, depends-on: [crds]}\n" +
			"- {name: deeper, path: deeper, depends-on: [app]}\n- {name: bad, path: bad, depends-on: [crds]}\n- {name: loose, path: loose}\n",
	}
	ws := offlineUnits(t, files)
	for _, command := range [][]string{{"validate", "--offline"}, {"diff", "--offline", "--base", "HEAD"}} {
		report := filepath.Join(t.TempDir(), "report.json")
		code, out := runIn(t, ws, append(command, "--run-file", filepath.Join(ws, "gantry.yaml"), "--report", report))
		if code != ExitFailed {
			t.Errorf("%s: exit %d, want %d\n%s", command[0], code, ExitFailed, out)
		}
		ok := "ValidationSucceeded"
		if command[0] == "diff" {
			ok = "NoChanges"
		}
		want := map[string]string{"crds": ok, "app": ok, "deeper": ok, "bad": "ValidationFailed", "loose": "ValidationFailed"}
		if got := unitReasons(t, report); !maps.Equal(got, want) {
			t.Errorf("%s: units %v, want %v\n%s", command[0], got, want, out)
		}
		if !strings.Contains(out, "spec.size") || !strings.Contains(out, "no CRD in the set or in crds defines units.gantry.test/v1 Widget") {
			t.Errorf("%s: want bad's size refused and loose's kind unknown\n%s", command[0], out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "no CRD in the set") && !strings.Contains(line, "[loose]") {
				t.Errorf("%s: a unit that depends on crds does not see its CRD: %s", command[0], line)
			}
		}
	}

	// One unit selected: it still sees the CRDs of the units it depends
	// on, which are not run.
	report := filepath.Join(t.TempDir(), "report.json")
	code, out := runIn(t, ws, []string{"diff", "--offline", "--base", "HEAD", "--run-file", filepath.Join(ws, "gantry.yaml"), "--unit", "deeper", "--report", report})
	if got := unitReasons(t, report); code != ExitOK || !maps.Equal(got, map[string]string{"deeper": "NoChanges"}) {
		t.Errorf("deeper alone: exit %d, units %v\n%s", code, got, out)
	}
}

// A preview of a unit whose dependency failed still runs: app is
// validated, offline, though crds has an invalid object; the run fails
// for crds.
func TestOfflinePreviewOfAUnitWhoseDependencyFailed(t *testing.T) {
	t.Parallel()
	ws := offlineUnits(t, map[string]string{
		"crds/crd.yaml":   widgetCRD,
		"crds/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: broken, namespace: default}\ndata: {size: 3}\n",
		"app/widget.yaml": widget("app", 3),
		"gantry.yaml":     "units:\n- {name: crds, path: crds}\n- {name: app, path: app, depends-on: [crds]}\n",
	})
	for _, command := range [][]string{{"validate", "--offline"}, {"diff", "--offline", "--base", "HEAD"}} {
		report := filepath.Join(t.TempDir(), "report.json")
		code, out := runIn(t, ws, append(command, "--run-file", filepath.Join(ws, "gantry.yaml"), "--report", report))
		ok := "ValidationSucceeded"
		if command[0] == "diff" {
			ok = "NoChanges"
		}
		if got := unitReasons(t, report); code != ExitFailed || !maps.Equal(got, map[string]string{"crds": "ValidationFailed", "app": ok}) {
			t.Errorf("%s: exit %d, units %v; want %d, crds ValidationFailed and app %s\n%s", command[0], code, got, ExitFailed, ok, out)
		}
	}
}
