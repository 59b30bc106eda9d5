package entrypoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/plan"
	"github.com/gantry-dev/gantry/plan/plantest"
)

// A reference that is no variable's name (plantest.HostileEnvRef) is
// refused where the run file is read, in every format, naming the file
// and line, the unit and the input, with the name quoted; nothing is
// printed on stdout. Before, plan took it (the pattern APP_* matched it)
// and wrote the plan.
func TestPlanRefusesAnEnvReferenceThatIsNoName(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "web"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(map[string]any{"units": []any{map[string]any{
		"name": "web", "path": "web", "inventory": "web", "sops-age-key": map[string]string{"env": plantest.HostileEnvRef},
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
				plantest.CheckShape(t, format, []plan.Unit{{Name: "web"}}, []byte(stdout.String()))
			}
			if code != ExitInvalid || stdout.Len() > 0 {
				t.Errorf("exit %d, want %d and no plan\n%s", code, ExitInvalid, stdout.String())
			}
			for _, want := range []string{file + ":6", "unit web", "sops-age-key", fmt.Sprintf("{env: %q}", plantest.HostileEnvRef), "not a variable's name"} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("the refusal does not say %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}

// Whatever a run file names (units, the variables it reads, the inputs'
// values), a plan of it parses as YAML and its keys are the template's.
// Each input is a run file, through the checks of loading it; plan's
// FuzzPlanIsData puts names straight into the writer, past them. Its
// package links all of gantry, so it fuzzes only in make fuzz and make
// soak.
func FuzzPlanFromRunFile(f *testing.F) {
	f.Add("web", "db", plantest.HostileEnvRef, "platform")
	f.Add("web", "db", "APP_X", "x\n  env: {A: b}\n#")
	f.Add("1a", "unit-1a", "APP_\r::warning::x", "\u2028")
	f.Add("a", "a", "", "")
	f.Fuzz(func(t *testing.T, name1, name2, envName, value string) {
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
			if errors.As(err, new(*plan.InvalidError)) {
				continue // no such plan: a unit named delete-<unit> in a Tekton plan
			}
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			plantest.CheckShape(t, format, planUnits(units), out)
		}
	})
}
