package entrypoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/result"
)

// A cluster whose API server refuses connections is reported as such,
// not as manifests that failed validation: exit 1, reason
// ClusterUnreachable, with the address.
func TestUnreachableClusterReason(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	example := filepath.Join("..", "examples", "hello")
	for _, command := range []string{"apply", "validate", "diff", "drift"} {
		t.Run(command, func(t *testing.T) {
			t.Parallel()
			args := []string{command, example, "--kubeconfig", kc, "--timeout", "30s", "-o", "json"}
			if command != "validate" {
				args = append(args, "--inventory", "hello")
			}
			var stdout, stderr strings.Builder
			code := Run(t.Context(), args,
				[]string{"HOME=" + t.TempDir()}, &stdout, &stderr)
			var res result.Result
			if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
				t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout.String(), stderr.String())
			}
			if code != ExitFailed || res.Reason != result.ReasonClusterUnreachable || !strings.Contains(res.Message, "https://127.0.0.1:1") {
				t.Errorf("exit %d, reason %s, message %q, want exit 1, ClusterUnreachable\n%s", code, res.Reason, res.Message, stderr.String())
			}
		})
	}
}
