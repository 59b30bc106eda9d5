// Package plantest checks plans the way the CI engines read them, for the
// tests of plan and of the command that writes plans.
package plantest

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-dev/gantry/plan"
)

// HostileEnvRef is a reference a pull request's run file may write, which
// run-file-env 'APP_*' matched (path.Match's * matches a line ending): in
// the comment of a GitHub plan it ended the comment and gave the
// workflow an env of its own.
const HostileEnvRef = "APP_X\nenv:\n  ACTIONS_ALLOW_UNSECURE_COMMANDS: true\n  ALL: ${{ toJSON(secrets) }}\n#"

// planKeys are the keys a plan's template gives: at the top, in each job
// or task (at most these), and in a Tekton Pipeline's spec.
var planKeys = map[string]struct{ top, job, spec []string }{
	"github": {top: []string{"jobs", "name", "on", "permissions"}, job: []string{"concurrency", "name", "needs", "runs-on", "steps"}},
	"gitlab": {top: []string{".gantry-unit", "stages"}, job: []string{"extends", "needs", "resource_group", "variables"}},
	"tekton": {top: []string{"apiVersion", "kind", "metadata", "spec"}, job: []string{"name", "params", "runAfter", "taskRef", "when", "workspaces"}, spec: []string{"description", "params", "tasks", "workspaces"}},
}

// CheckShape is the rule of a plan's sink: what was written parses as
// YAML, and its keys are the template's, whatever the run file named: at
// the top exactly the template's (with a job per unit for GitLab), in
// each job or task no other.
func CheckShape(t testing.TB, format string, units []plan.Unit, out []byte) {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%s: the plan does not parse: %v\n%s", format, err, out)
	}
	want := planKeys[format]
	top := slices.Clone(want.top)
	if format == "gitlab" {
		for _, l := range plan.Levels(units) {
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
