package entrypoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/e2e/sopsfixture"
)

// A SOPS Secret encrypted whole (sops without --encrypted-regex: its name
// and namespace too) with short values, user: shop and debug: "true", in
// the namespace shop, and an encrypted ConfigMap with a port. On GitHub,
// only the long password is registered with the runner (::add-mask::);
// the namespace and the object's name print as they are, so "shop" and
// "true" are not masked in the whole job log. The short values are hidden where
// they are: the Secret's data by its kind, the ConfigMap's fields because
// they were decrypted there, whatever they hold.
func TestShortDecryptedValuesAreHiddenWhereTheyAre(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	ws := t.TempDir()
	dir := filepath.Join(ws, "app")
	const password = "canary-long-pw-5c1e"
	files := map[string]string{
		"namespace.yaml":     "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
		"secret.yaml":        "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: shop}\nstringData: {user: shop, debug: \"true\", password: " + password + "}\n",
		"settings.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {port: \"5432\", mode: brisk}\n",
		"kustomization.yaml": "resources: [namespace.yaml, secret.yaml, settings.yaml]\n",
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.Encrypt(t, filepath.Join(dir, "secret.yaml"))
	c.Encrypt(t, filepath.Join(dir, "settings.yaml"), "--encrypted-regex", "^data$")
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"build", "--path=" + dir, "--sops-age-key=" + c.Key},
		[]string{"HOME=" + t.TempDir(), "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE=" + ws}, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	log := strings.Replace(stdout.String()+stderr.String(), "::add-mask::"+password, "", 1)
	if !strings.Contains(stderr.String(), "::add-mask::"+password) {
		t.Errorf("the password is not registered with the runner:\n%s", stderr.String())
	}
	for _, short := range []string{"shop", "true", "5432", "brisk", "db", "v1", "Secret"} {
		if strings.Contains(stderr.String(), "::add-mask::"+short+"\n") {
			t.Errorf("%q is registered with the runner: every %q of the job's log would read ***", short, short)
		}
	}
	if strings.Contains(log, password) || strings.Contains(log, "5432") || strings.Contains(log, "brisk") {
		t.Errorf("a decrypted value is printed:\n%s", log)
	}
	for _, want := range []string{"name: shop\n", "name: db\n", "namespace: shop\n", "port: '***'", "mode: '***'"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the build lacks %q:\n%s", want, stdout.String())
		}
	}
}

// An offline check that refuses a value SOPS decrypted (a Service whose
// type, encrypted alone, is "PIN482") says what is wrong and where
// without the value: in the log, the summary and the JSON report.
func TestValidationErrorsHideDecryptedValues(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	ws := t.TempDir()
	dir := filepath.Join(ws, "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	svc := filepath.Join(dir, "svc.yaml")
	if err := os.WriteFile(svc, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec:\n  type: PIN482\n  ports: [{port: 80}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Encrypt(t, svc, "--encrypted-regex", "^(type)$")
	summary, report := filepath.Join(ws, "summary.md"), filepath.Join(ws, "report.json")
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"validate", "--offline", "--path=" + dir, "--sops-age-key=" + c.Key, "--report=" + report},
		[]string{"HOME=" + t.TempDir(), "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE=" + ws, "GITHUB_STEP_SUMMARY=" + summary}, &stdout, &stderr)
	if code == ExitOK {
		t.Fatalf("exit 0:\n%s", stderr.String())
	}
	all := stdout.String() + stderr.String()
	for _, f := range []string{summary, report} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all += string(b)
	}
	if strings.Contains(all, "PIN482") {
		t.Errorf("the decrypted value is shown:\n%s", all)
	}
	if !strings.Contains(stderr.String(), "spec.type: Unsupported value") {
		t.Errorf("the problem is not named:\n%s", stderr.String())
	}
}
