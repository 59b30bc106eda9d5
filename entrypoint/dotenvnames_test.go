package entrypoint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/config"
)

// The dotenv a GitLab job leaves holds none of gantry's inputs: its
// variables win over a later job's own, and that job's gantry took this
// one's inventory (as namespace/name), report path and revision for its
// inputs. Those outputs are GANTRY_OUTPUT_<NAME>.
func TestDotenvHoldsNoInput(t *testing.T) {
	ws := t.TempDir()
	t.Chdir(ws)
	if err := os.MkdirAll(filepath.Join(ws, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "app", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\ndata: {k: v}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + t.TempDir(), "GITLAB_CI=true", "CI_COMMIT_SHA=0123456789abcdef0123456789abcdef01234567"}
	var stdout, stderr strings.Builder
	if code := Run(context.Background(), []string{"validate", "--offline", "--path=app"}, env, &stdout, &stderr); code != 0 {
		t.Fatalf("validate --offline: exit %d\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(ws, "gantry.env"))
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]bool{}
	for _, in := range config.Inputs {
		inputs[in.GantryEnvName()] = true
	}
	keys := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		key, _, _ := strings.Cut(line, "=")
		keys[key] = true
		if inputs[key] {
			t.Errorf("the dotenv sets the input %s:\n%s", key, b)
		}
	}
	for _, want := range []string{"GANTRY_OUTPUT_REVISION", "GANTRY_OUTPUT_INVENTORY", "GANTRY_OUTPUT_REPORT", "GANTRY_CHANGED", "GANTRY_REASON"} {
		if !keys[want] {
			t.Errorf("the dotenv has no %s:\n%s", want, b)
		}
	}
}
