package entrypoint

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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
// and a secret reference, sends no request at all, and neither does a
// diff of a unit whose artifact is on a registry the run file chose.
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

	// A unit whose artifact is on the run file's registry: a live diff
	// would push the build there (with what it decrypted and what
	// references read); refused unless the workflow names the registry.
	if err := os.WriteFile(file, []byte("units:\n- {name: a, path: app, artifact: 'oci://"+reg.host+"/app:1'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out = runIn(t, ws, []string{"diff", "--run-file", file}, workflow...)
	if code != ExitInvalid || !strings.Contains(out, "registry-hosts") {
		t.Errorf("a run file's artifact on its own registry: exit %d, want %d naming registry-hosts\n%s", code, ExitInvalid, out)
	}
	if n, _ := reg.requests(); n != 0 {
		t.Errorf("the run file's registry received %d requests", n)
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
	servers := "GANTRY_RUN_FILE_SERVERS=https://127.0.0.1:1"
	code, out := runIn(t, ws, []string{"diff", "--run-file", file, "--timeout", "10s"}, servers)
	if code != ExitInvalid || !strings.Contains(out, "runs a command (exec: /bin/sh)") {
		t.Errorf("exit %d, want %d naming the plugin\n%s", code, ExitInvalid, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the kubeconfig's plugin ran")
	}
	code, out = runIn(t, ws, []string{"diff", "--run-file", file, "--timeout", "10s"}, servers, "GANTRY_ALLOW_KUBECONFIG_EXEC=true")
	if code == ExitOK {
		t.Errorf("a cluster that cannot be reached was diffed:\n%s", out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("with allow-kubeconfig-exec the plugin did not run (%v): the first check proves nothing\n%s", err, out)
	}
}

// A run file's kubeconfig reaches only the API servers the workflow
// named: a pull request that points a unit at a server of its own, to
// receive the objects gantry builds with the workflow's secrets in them,
// gets no request. Once the workflow lists that server, it gets them: the
// check can fail.
func TestARunFilesKubeconfigReachesOnlyTheWorkflowsServers(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.Method+" "+r.URL.Path+" "+string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "app", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\ndata: {v: \"${V}\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"" + srv.URL + "\", insecure-skip-tls-verify: true}\n" +
		"users:\n- name: u\n  user: {token: its-own-token}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
	if err := os.WriteFile(filepath.Join(ws, "theirs.yaml"), []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	workflowKC := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(workflowKC, []byte(strings.Replace(kc, srv.URL, "https://k8s.acme.example:6443", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(ws, "gantry.yaml")
	if err := os.WriteFile(file, []byte("units:\n- {name: a, path: app, kubeconfig: theirs.yaml, substitute: {V: {env: APP_SECRET}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	workflow := []string{"KUBECONFIG=" + workflowKC, "GANTRY_RUN_FILE_ENV=APP_SECRET", "APP_SECRET=the-workflows-secret-4e1d"}
	code, out := runIn(t, ws, []string{"diff", "--run-file", file, "--timeout", "10s"}, workflow...)
	if code != ExitInvalid || !strings.Contains(out, "is not one the workflow lets a run file reach") {
		t.Errorf("exit %d, want %d naming the server\n%s", code, ExitInvalid, out)
	}
	mu.Lock()
	if len(bodies) != 0 {
		t.Errorf("the run file's server received %d requests", len(bodies))
	}
	mu.Unlock()
	code, out = runIn(t, ws, []string{"diff", "--run-file", file, "--timeout", "10s"}, append(workflow, "GANTRY_RUN_FILE_SERVERS="+srv.URL)...)
	if code == ExitOK {
		t.Errorf("a server that answers 403 was diffed:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) == 0 {
		t.Errorf("once listed, the server got no request: the first check proves nothing\n%s", out)
	}
}

// The git history is the pull request's too: a base commit whose
// kustomization reads the runner's files through a link, an absolute path
// or the checkout's .git/config is built within the base tree alone; the
// preview refuses it and prints nothing those files hold.
func TestABaseCommitReadsNothingOutsideItsTree(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to make the repository with")
	}
	outside := filepath.Join(t.TempDir(), "runner-secret")
	if err := os.WriteFile(outside, []byte("canary-runner-secret-9f2c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	write(".git/config-canary", "canary-checkout-token-77aa\n")
	if err := os.MkdirAll(filepath.Join(ws, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "app", "leak")); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{"leak", outside, filepath.Join(ws, ".git", "config-canary")} {
		write("app/kustomization.yaml", "configMapGenerator:\n- name: loot\n  files: [\""+from+"\"]\n")
		git("add", "-A")
		git("commit", "-q", "-m", "base reads "+from)
		write("app/kustomization.yaml", "configMapGenerator:\n- name: loot\n  literals: [a=b]\n")
		code, out := runIn(t, ws, []string{"diff", "--offline", "--base", "HEAD", filepath.Join(ws, "app")})
		if code != ExitInvalid || !strings.Contains(out, "refused") {
			t.Errorf("a base that reads %s: exit %d, want %d, refused\n%s", from, code, ExitInvalid, out)
		}
		if strings.Contains(out, "canary-runner-secret-9f2c") || strings.Contains(out, "canary-checkout-token-77aa") {
			t.Errorf("a base that reads %s prints what it read:\n%s", from, out)
		}
	}
}
