package entrypoint

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/gantry-dev/gantry/e2e/cluster"
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

// Substitution values whose names suggest a secret are masked in build's
// output too, wherever they land; other values print as they are.
func TestBuildMasksSecretSubstitutionValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  url: postgres://app:${DB_PASSWORD}@db/${DB_NAME}\n"
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"build", "--path=" + dir, "--substitute=DB_PASSWORD=canary-subst-91c\nDB_NAME=orders"}, nil, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if out := stdout.String() + stderr.String(); strings.Contains(out, "canary-subst-91c") {
		t.Errorf("the DB_PASSWORD value is printed:\n%s", out)
	}
	if !strings.Contains(stdout.String(), "url: postgres://app:***@db/orders") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
}

// A ConfigMap generated from a SOPS-encrypted file prints with the
// decrypted values masked: nothing decrypted is ever printed.
func TestBuildMasksDecryptedValues(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the sops CLI built by make tools")
	}
	sopsBin, err := cluster.Tool("sops")
	if err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := filepath.Join(dir, "app.env")
	if err := os.WriteFile(env, []byte("LOG_LEVEL=debug\nAPI_URL=https://canary-dec-61b.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sopsBin, "--encrypt", "--age", id.Recipient().String(), "--in-place", env)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sops: %v\n%s", err, out)
	}
	k := "configMapGenerator:\n- name: app\n  envs: [app.env]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"build", "--path=" + dir, "--sops-age-key=" + id.String()}, nil, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if out := stdout.String() + stderr.String(); strings.Contains(out, "canary-dec-61b") || strings.Contains(out, "ENC[") {
		t.Errorf("output:\n%s", out)
	}
	if !strings.Contains(stdout.String(), "API_URL: '***'") || !strings.Contains(stdout.String(), "LOG_LEVEL: '***'") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	// A build says what it built, not counts of cluster actions.
	if !strings.Contains(stderr.String(), "gantry build: 1 object, written to stdout\n") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}
