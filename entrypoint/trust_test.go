package entrypoint

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// recordingRegistry answers every request as a registry that wants
// credentials, and records what each request carried.
type recordingRegistry struct {
	mu    sync.Mutex
	auths []string
	host  string
}

func newRecordingRegistry(t *testing.T) *recordingRegistry {
	t.Helper()
	r := &recordingRegistry{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.auths = append(r.auths, req.Header.Get("Authorization"))
		r.mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

func (r *recordingRegistry) requests() (n int, withAuth []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.auths {
		if a != "" {
			withAuth = append(withAuth, a)
		}
	}
	return len(r.auths), withAuth
}

// runIn runs gantry in a workspace of its own, as a CI job does.
func runIn(t *testing.T, ws string, args []string, env ...string) (int, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	environ := append([]string{"HOME=" + t.TempDir(), "GANTRY_WORKSPACE=" + ws}, env...)
	code := Run(context.Background(), args, environ, &stdout, &stderr)
	return code, stdout.String() + stderr.String()
}

// A hostile run file's registry gets nothing: validate --offline of a run
// file naming CRDs in its own registry, with the workflow's credentials
// and a secret reference, sends no request at all; a unit's artifact on a
// registry the run file chose is pulled without the workflow's
// credentials.
func TestARunFileSendsNoCredentialsToItsRegistry(t *testing.T) {
	t.Parallel()
	reg := newRecordingRegistry(t)
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "app", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	workflow := []string{"INPUT_REGISTRY-USERNAME=ci", "INPUT_REGISTRY-PASSWORD=workflow-registry-password", "STOLEN=runner-secret-value-1"}

	hostile := "units:\n- name: a\n  path: app\n  crds: [oci://" + reg.host + "/crds:1]\n  registry-username: u\n  registry-password: {env: STOLEN}\n"
	file := filepath.Join(ws, "gantry.yaml")
	if err := os.WriteFile(file, []byte(hostile), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runIn(t, ws, []string{"validate", "--offline", "--run-file", file}, workflow...)
	if code != ExitInvalid {
		t.Errorf("validate --offline of a hostile run file: exit %d, want %d\n%s", code, ExitInvalid, out)
	}
	if n, _ := reg.requests(); n != 0 {
		t.Errorf("the run file's registry received %d requests", n)
	}

	// Live diff of a unit whose artifact is on the run file's registry:
	// pulled as anyone would, never with the workflow's credentials.
	if err := os.WriteFile(file, []byte("units:\n- {name: a, artifact: 'oci://"+reg.host+"/app:1'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out = runIn(t, ws, []string{"diff", "--run-file", file}, workflow...)
	if code == ExitOK {
		t.Errorf("a pull refused with 401 succeeded:\n%s", out)
	}
	n, withAuth := reg.requests()
	if n == 0 {
		t.Fatalf("the registry was never asked: the test proves nothing\n%s", out)
	}
	if len(withAuth) > 0 {
		t.Errorf("the run file's registry received credentials: %q", withAuth)
	}
	if strings.Contains(out, "workflow-registry-password") || strings.Contains(out, "runner-secret-value-1") {
		t.Errorf("a secret is printed:\n%s", out)
	}
}

// A kubeconfig with an exec plugin, named by a run file, runs nothing:
// the run is refused before it connects, and the plugin's marker file
// stays absent. With allow-kubeconfig-exec from the workflow the same
// kubeconfig runs its plugin when gantry connects: the check can fail.
func TestARunFilesKubeconfigRunsNoPlugin(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "plugin-ran")
	if err := os.MkdirAll(filepath.Join(ws, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "app", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/sh
      args: ["-c", "touch ` + marker + `; exit 1"]
      interactiveMode: Never
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`
	if err := os.WriteFile(filepath.Join(ws, "evil.yaml"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(ws, "gantry.yaml")
	if err := os.WriteFile(file, []byte("units:\n- {name: a, path: app, kubeconfig: evil.yaml}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runIn(t, ws, []string{"diff", "--run-file", file, "--timeout", "10s"})
	if code != ExitInvalid || !strings.Contains(out, "runs a command (exec: /bin/sh)") {
		t.Errorf("exit %d, want %d naming the plugin\n%s", code, ExitInvalid, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the kubeconfig's plugin ran")
	}
	code, out = runIn(t, ws, []string{"diff", "--run-file", file, "--timeout", "10s"}, "GANTRY_ALLOW_KUBECONFIG_EXEC=true")
	if code == ExitOK {
		t.Errorf("a cluster that cannot be reached was diffed:\n%s", out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("with allow-kubeconfig-exec the plugin did not run (%v): the first check proves nothing\n%s", err, out)
	}
}
