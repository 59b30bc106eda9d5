package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/entrypoint"
)

// No error path prints a secret: a Secret the API server rejects (its
// error can echo the object), a Secret of a type whose required keys are
// missing, a kubeconfig whose token the server refuses, a secret-named
// substitution value in an object that fails. The output, the JSON report
// and the diff file are scanned for every value.
func TestSecretsNeverPrintedOnErrorPaths(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	value, subst, token := canary("secretvalue"), canary("substvalue"), canary("token")
	b64 := base64.StdEncoding.EncodeToString([]byte(value))
	scan := func(t *testing.T, r gantryRun, report string) {
		t.Helper()
		res, _ := json.Marshal(r.res)
		files := ""
		for _, f := range []string{report, filepath.Join(filepath.Dir(report), "diff.patch")} {
			b, _ := os.ReadFile(f)
			files += string(b)
		}
		for _, leak := range scanForSecrets(r.stdout+r.stderr+string(res)+files, value, b64, subst, token) {
			t.Errorf("%q is printed or reported:\n%s", leak, r.stderr)
		}
	}
	cases := map[string]struct {
		manifest string
		args     []string
	}{
		// A data key the API server rejects; the rejection quotes the
		// object's fields.
		"rejected Secret": {fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: rejected\n  namespace: %s\ndata:\n  \"bad key!\": %s\n  good: %s\n", ns, b64, b64), nil},
		// A TLS Secret without tls.key.
		"invalid TLS Secret": {fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\n  namespace: %s\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: %s\n", ns, value), nil},
		// A substituted value in an object the server rejects.
		"rejected substitution": {fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n  namespace: %s\ndata:\n  url: postgres://app:${DB_PASSWORD}@db\n", ns), []string{"--substitute=DB_PASSWORD=" + subst}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "obj.yaml"), tc.manifest)
			report := filepath.Join(t.TempDir(), "out", "report.json")
			r := gantry(t, append([]string{"apply", "--path=" + dir, "--inventory=canary", "--inventory-namespace=" + ns, "--report=" + report}, tc.args...)...)
			if r.code == 0 {
				t.Fatalf("exit 0, want a failure:\n%s", r.stderr)
			}
			scan(t, r, report)
		})
	}
	t.Run("refused token", func(t *testing.T) {
		t.Parallel()
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		writeFile(t, kc, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: %q}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`, env.Cluster.RESTConfig.Host, token))
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "cm.yaml"), configMap(ns, "unauthorized"))
		report := filepath.Join(t.TempDir(), "report.json")
		var stdout, stderr bytes.Buffer
		code := entrypoint.Run(context.Background(), []string{"apply", "--path=" + dir, "--inventory=canary", "--inventory-namespace=" + ns, "--kubeconfig=" + kc, "--report=" + report},
			[]string{"HOME=" + os.Getenv("HOME")}, &stdout, &stderr)
		r := gantryRun{code: code, stdout: stdout.String(), stderr: stderr.String()}
		if r.code == 0 || !strings.Contains(r.stderr, "the server has asked for the client to provide credentials") {
			t.Fatalf("exit %d, want a refusal:\n%s", r.code, r.stderr)
		}
		scan(t, r, report)
	})
}
