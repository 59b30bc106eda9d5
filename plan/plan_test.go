package plan_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-dev/gantry/plan"
	"github.com/gantry-dev/gantry/plan/plantest"
)

// twoUnits are two units, the second depending on the first, each
// reading ref with {env:}.
func twoUnits(names [2]string, ref string) []plan.Unit {
	return []plan.Unit{
		{Name: names[0], EnvRefs: []string{ref}},
		{Name: names[1], EnvRefs: []string{"SOPS_AGE_KEY", ref}, DependsOn: []string{names[0]}},
	}
}

// A name a plan writes in a comment (a variable's, the run file's) stays
// in the comment, whatever line endings it holds: the plan's keys are
// the template's. Before plans were written by the encoder alone, the
// GitHub plan got a top-level env from HostileEnvRef, and a GitLab plan
// one from a run file's name.
func TestPlanCommentsHoldNoKeys(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"github", "gitlab", "tekton"} {
		for _, file := range []string{"gantry.yaml", "x\nenv: {A: b}\n#.yaml", "x\r\u2028\u0085y.yaml", "bad\xff\x00.yaml"} {
			t.Run(fmt.Sprintf("%s %q", format, file), func(t *testing.T) {
				t.Parallel()
				units := twoUnits([2]string{"web", "1db"}, plantest.HostileEnvRef)
				out, err := plan.Write(units, plan.Options{Format: format, File: file, RunFileEnv: []string{plantest.HostileEnvRef}})
				if err != nil {
					t.Fatal(err)
				}
				plantest.CheckShape(t, format, units, out)
			})
		}
	}
}

// Unit names are DNS labels, and a GitHub job's id must not start with a
// digit: the ids made of two names are never one (1a and unit-1a were).
func TestPlanJobIDsAreOnePerUnit(t *testing.T) {
	t.Parallel()
	units := twoUnits([2]string{"1a", "unit-1a"}, "SOPS_AGE_KEY")
	out, err := plan.Write(units, plan.Options{Format: "github", File: "gantry.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	plantest.CheckShape(t, "github", units, out)
	var doc struct{ Jobs map[string]any }
	if err := yaml.Unmarshal(out, &doc); err != nil || len(doc.Jobs) != 2 {
		t.Errorf("jobs %v (%v), want one per unit\n%s", slices.Sorted(maps.Keys(doc.Jobs)), err, out)
	}
}

// A Tekton plan names the run file and the run-file-env as they are,
// whatever they hold: the Pipeline is written through JSON, which writes
// DEL and the C1 controls as they are, and YAML refused DEL (there was no
// plan) and read NEL as a line break (the plan named another file).
func TestTektonPlanNamesWhatItWasGiven(t *testing.T) {
	t.Parallel()
	file, env := "a\x7f\u0085\u009f\ufffeb.yaml", "X\u0085Y\x7f"
	units := twoUnits([2]string{"web", "db"}, env)
	out, err := plan.Write(units, plan.Options{Format: "tekton", File: file, RunFileEnv: []string{env}})
	if err != nil {
		t.Fatal(err)
	}
	plantest.CheckShape(t, "tekton", units, out)
	var doc struct {
		Spec struct {
			Params []struct{ Name, Default string }
			Tasks  []struct {
				Params []struct{ Name, Value string }
			}
		}
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range doc.Spec.Params {
		if p.Name == "run-file-env" && p.Default != env {
			t.Errorf("run-file-env %q, want %q\n%s", p.Default, env, out)
		}
	}
	for _, task := range doc.Spec.Tasks {
		for _, p := range task.Params {
			if p.Name == "run-file" && p.Value != file {
				t.Errorf("run-file %q, want %q\n%s", p.Value, file, out)
			}
		}
	}
}

// Whatever reaches the plan's writer unchecked (a variable's name, the
// run file's), a plan parses as YAML and its keys are the template's.
// The names go straight into the writer, past the checks of loading a
// run file (FuzzPlanFromRunFile, in entrypoint, goes through them).
func FuzzPlanIsData(f *testing.F) {
	f.Add(plantest.HostileEnvRef, "gantry.yaml")
	f.Add("APP_X", "x\nenv:\n  A: b\n#.yaml")
	f.Add("APP_\r::warning::x", "bad\xff.yaml")
	f.Add("", "")
	f.Add("0", "\x7f") // a Tekton plan of a run file so named failed: YAML refuses DEL
	f.Fuzz(func(t *testing.T, envName, file string) {
		for _, format := range []string{"github", "gitlab", "tekton"} {
			units := twoUnits([2]string{"web", "db"}, envName)
			out, err := plan.Write(units, plan.Options{Format: format, File: file, RunFileEnv: []string{envName}})
			if errors.As(err, new(*plan.InvalidError)) {
				continue // no plan: a $ that an engine would expand, names GitHub cannot tell apart
			}
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			plantest.CheckShape(t, format, units, out)
		}
	})
}

// What an engine would expand never reaches a plan: a run file's path
// with GitHub's ${{ }}, GitLab's $VARIABLE or Tekton's $(params.x) is
// refused, as are variables a GitHub workflow cannot tell apart (its env
// keys and secrets' names ignore case): kubeconfig would have been the
// kubeconfig's key, gantry_record_key the record-key's secret.
func TestPlanRefusesWhatEnginesExpand(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"github", "gitlab", "tekton"} {
		for _, file := range []string{"gantry-${{ secrets.KUBECONFIG }}.yaml", "$CI_JOB_TOKEN/gantry.yaml", "$(params.kubeconfig).yaml"} {
			out, err := plan.Write(twoUnits([2]string{"web", "db"}, "APP_TOKEN"), plan.Options{Format: format, File: file})
			if !errors.As(err, new(*plan.InvalidError)) || !strings.Contains(err.Error(), "holds a $") {
				t.Errorf("%s, run file %q: %v\n%s", format, file, err, out)
			}
		}
	}
	for _, refs := range [][]string{{"kubeconfig"}, {"Kubeconfig_Token"}, {"gantry_record_key"}, {"input_command"}, {"APP_TOKEN", "app_token"}} {
		units := []plan.Unit{{Name: "web", EnvRefs: refs}}
		out, err := plan.Write(units, plan.Options{Format: "github", File: "gantry.yaml"})
		if refs[0] == "Kubeconfig_Token" {
			if err != nil {
				t.Errorf("%v: %v", refs, err)
			}
			continue
		}
		if !errors.As(err, new(*plan.InvalidError)) || !strings.Contains(err.Error(), "ignores case") {
			t.Errorf("%v: %v\n%s", refs, err, out)
		}
	}
}
