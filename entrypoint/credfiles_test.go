package entrypoint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pull request's kustomization that generates a ConfigMap from the
// kubeconfig the workflow wrote into the checkout (as a plan's job once
// did), through a link, gets the build refused: the diff, the summary and
// the report never hold the cluster's credentials, online or offline.
func TestBuildNeverReadsTheWorkflowsKubeconfig(t *testing.T) {
	ws, home := t.TempDir(), t.TempDir()
	t.Chdir(ws)
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("kubeconfig", "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {auth-provider: {name: oidc, config: {client-id: shop, id-token: id-token-canary-0123456789}}}}]\n")
	write("leak/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: placeholder, namespace: default}\ndata: {a: b}\n")
	write("leak/kustomization.yaml", "resources: [cm.yaml]\nconfigMapGenerator:\n- {name: leak, namespace: default, files: [kc]}\n")
	if err := os.Symlink("../kubeconfig", filepath.Join(ws, "leak", "kc")); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(home, "summary.md")
	env := []string{"HOME=" + home, "GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary, "KUBECONFIG=" + filepath.Join(ws, "kubeconfig")}
	for _, args := range [][]string{
		{"diff", "leak", "--inventory=leak", "--kubeconfig=kubeconfig", "--report=report.json"},
		{"validate", "--offline", "leak", "--report=report.json"},
	} {
		var stdout, stderr strings.Builder
		code := Run(context.Background(), args, env, &stdout, &stderr)
		report, _ := os.ReadFile(filepath.Join(ws, "report.json"))
		sum, _ := os.ReadFile(summary)
		out := stdout.String() + stderr.String() + string(report) + string(sum)
		if code != ExitInvalid || !strings.Contains(out, "holds credentials this run uses") {
			t.Errorf("%v: exit %d, want %d and the kubeconfig refused\n%s", args, code, ExitInvalid, out)
		}
		var shown []string // what the runner shows: masks are told, not shown
		for _, l := range strings.Split(out, "\n") {
			if !strings.HasPrefix(l, "::add-mask::") {
				shown = append(shown, l)
			}
		}
		if s := strings.Join(shown, "\n"); strings.Contains(s, "id-token-canary") || strings.Contains(s, "127.0.0.1:1") {
			t.Errorf("%v: the kubeconfig's content is in the output:\n%s", args, out)
		}
	}
}
