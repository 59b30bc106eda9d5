package entrypoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// build prints the objects for a person or a log; Secret values never
// appear, while everything else does.
func TestBuildPrintsObjectsWithSecretsRedacted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const canary = "canary-7f3a9c"
	files := map[string]string{
		"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: " + canary + "\ndata:\n  token: Y2FuYXJ5LTdmM2E5Yw==\n",
		"cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: hello\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"build", "--path=" + dir}, nil, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	out := stdout.String() + stderr.String()
	for _, leak := range []string{canary, "Y2FuYXJ5LTdmM2E5Yw=="} {
		if strings.Contains(out, leak) {
			t.Errorf("output contains the secret value %q:\n%s", leak, out)
		}
	}
	for _, want := range []string{"name: creds", "password: '*** (redacted)'", "token: '*** (redacted)'", "greeting: hello", "\n---\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
}
