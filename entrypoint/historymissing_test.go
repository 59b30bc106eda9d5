package entrypoint

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// notFoundCluster is an API server that has nothing: every object asked
// for is not found. It returns a kubeconfig that points at it.
func notFoundCluster(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/version" {
			_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.0"}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found"}`))
	}))
	t.Cleanup(srv.Close)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// history of an inventory that does not exist fails, exit 1, saying so:
// a mistyped name is not an empty history.
func TestHistoryOfMissingInventory(t *testing.T) {
	t.Parallel()
	kc := notFoundCluster(t)
	for _, output := range []string{"text", "json"} {
		var stdout, stderr strings.Builder
		code := Run(t.Context(), []string{"history", "--inventory", "nosuch", "--kubeconfig", kc, "-o", output},
			[]string{"HOME=" + t.TempDir()}, &stdout, &stderr)
		if code != ExitFailed || !strings.Contains(stderr.String(), "inventory default/nosuch not found") {
			t.Errorf("%s: exit %d, want 1 and the inventory not found\n%s\n%s", output, code, stdout.String(), stderr.String())
		}
	}
}
