package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/reporters/fakeapi"
)

// The image tests run gantry's container image in a real Docker engine, as
// GitHub's runner runs a container action and as GitLab's Docker executor
// runs a job. GANTRY_IMAGE names the image tarball (make test-image builds
// it and sets it).

var (
	loadOnce    sync.Once
	loadedImage string
	loadSkip    string
)

// runnerUID is the user GitHub's hosted runners run jobs as, who owns the
// workspace.
const runnerUID = 1001

// imageUnderTest loads GANTRY_IMAGE into the Docker engine once, or skips
// saying why it cannot.
func imageUnderTest(t *testing.T) string {
	t.Helper()
	loadOnce.Do(func() {
		tarball := os.Getenv("GANTRY_IMAGE")
		if tarball == "" {
			loadSkip = "GANTRY_IMAGE is not set: make test-image builds the image and runs the container tests"
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
			loadSkip = fmt.Sprintf("no Docker engine answers (docker version: %v: %s); start dockerd to run the container tests", err, strings.TrimSpace(string(out)))
			return
		}
		out, err := exec.CommandContext(ctx, "docker", "load", "-i", tarball).CombinedOutput()
		if err != nil {
			loadSkip = fmt.Sprintf("docker load -i %s: %v: %s", tarball, err, out)
			return
		}
		for _, l := range strings.Split(string(out), "\n") {
			if ref, ok := strings.CutPrefix(l, "Loaded image: "); ok {
				loadedImage = strings.TrimSpace(ref)
			}
		}
		if loadedImage == "" {
			loadSkip = "docker load named no image: " + string(out)
		}
	})
	if loadedImage == "" {
		if strings.HasPrefix(loadSkip, "docker load") {
			t.Fatal(loadSkip)
		}
		t.Skip(loadSkip)
	}
	return loadedImage
}

// docker runs the docker CLI with the variables given, passed to the
// container by name (-e NAME), as the runners pass them.
func docker(t *testing.T, vars map[string]string, stdin string, args ...string) runnerRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = os.Environ()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	return runCommand(t, cmd, "docker "+args[0])
}

// envFlags are -e NAME for each variable, sorted.
func envFlags(vars map[string]string) []string {
	var out []string
	for k := range vars {
		out = append(out, k)
	}
	slices.Sort(out)
	var flags []string
	for _, k := range out {
		flags = append(flags, "-e", k)
	}
	return flags
}

// workspace is a folder owned as a runner's workspace is: by the runner's
// user when the tests run as root, else by the user running them. Its
// parents can be traversed by that user.
func workspace(t *testing.T) (dir string, uid int) {
	t.Helper()
	dir = t.TempDir()
	uid = os.Getuid()
	if uid == 0 {
		uid = runnerUID
		for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir, uid
}

// chownTree gives every file under dir to uid, as a checkout by the runner
// leaves them.
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	if os.Getuid() != 0 {
		return
	}
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// assertRemovableBy checks that uid can delete everything in dir, as the
// runner cleans its workspace, and that it did.
func assertRemovableBy(t *testing.T, dir string, uid int) {
	t.Helper()
	var foreign []string
	_ = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err == nil && int(st.Uid) != uid {
			rel, _ := filepath.Rel(dir, p)
			foreign = append(foreign, fmt.Sprintf("%s (uid %d)", rel, st.Uid))
		}
		return nil
	})
	if len(foreign) > 0 {
		t.Errorf("files in the workspace not owned by its owner (uid %d): %s", uid, strings.Join(foreign, ", "))
	}
	cmd := exec.Command("find", dir, "-mindepth", "1", "-delete")
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the workspace's owner (uid %d) cannot clean it: %v\n%s", uid, err, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("%d entries left in the workspace after cleaning", len(entries))
	}
}

// hostServer serves h on the host's loopback, which a container on the
// host network reaches.
func hostServer(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// imageApp writes an app of a ConfigMap, a Secret and a Deployment into
// dir/deploy, and the cluster's kubeconfig into dir/kubeconfig.
func imageApp(t *testing.T, dir, ns, secretValue string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "deploy", "app.yaml"), fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: %[1]s}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: %[1]s}
stringData: {password: %[2]s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.k8s.io/pause:3.10}]
`, ns, secretValue))
	kc, err := os.ReadFile(env.Cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "kubeconfig"), string(kc))
}

// The image as GitHub's runner starts a container action: the workspace,
// home, workflow and file-command folders mounted under /github, every
// input as INPUT_*, the runner's variables, a workspace owned by the
// runner's user, and (here) the host network, to reach the local control
// plane. The Deployment becomes ready because kwok reports its pods ready.
func TestImageAsGitHubContainerAction(t *testing.T) {
	t.Parallel()
	image := imageUnderTest(t)
	env.Require(t)
	ns := env.Namespace(t)
	ws, uid := workspace(t)
	secretValue := canary("image-secret")
	imageApp(t, ws, ns, secretValue)
	chownTree(t, ws, uid)
	home, workflow, commands := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(workflow, "event.json"), `{"action":"synchronize","number":7,"pull_request":{"number":7,"head":{"sha":"0123abcd"}}}`)
	for _, f := range []string{"set_output_1", "step_summary_1", "set_env_1", "add_path_1"} {
		writeFile(t, filepath.Join(commands, f), "")
	}
	token := "ghs_" + canary("token")
	gh := &fakeapi.GitHub{T: t, Token: token, Viewer: "github-actions"}
	api := hostServer(t, gh)

	run := func(extra map[string]string) runnerRun {
		t.Helper()
		vars := actionInputs(t)
		for k, v := range map[string]string{
			"INPUT_PATH":                "deploy",
			"INPUT_INVENTORY":           "shop",
			"INPUT_INVENTORY-NAMESPACE": ns,
			"INPUT_KUBECONFIG":          "kubeconfig",
			"INPUT_TIMEOUT":             "90s",
			"INPUT_GITHUB-TOKEN":        token,
			"RUNNER_TEMP":               "/home/runner/work/_temp",
		} {
			vars[k] = v
		}
		for k, v := range pullRequestRun("/github/home", "/github/workspace", "/github/workflow/event.json", "/github/file_commands", api) {
			vars[k] = v
		}
		for k, v := range extra {
			vars[k] = v
		}
		args := []string{"run", "--rm", "--network", "host", "--workdir", "/github/workspace",
			"-v", ws + ":/github/workspace", "-v", home + ":/github/home",
			"-v", workflow + ":/github/workflow", "-v", commands + ":/github/file_commands"}
		args = append(args, envFlags(vars)...)
		return docker(t, vars, "", append(args, image)...)
	}

	first := run(map[string]string{"INPUT_COMMAND": "apply"})
	if first.code != 0 {
		t.Fatalf("apply in the container: exit %d\n%s", first.code, first.stderr)
	}
	outs := parseOutputs(t, filepath.Join(commands, "set_output_1"))
	if outs["reason"] != "ReconciliationSucceeded" || outs["created"] != "3" || outs["inventory"] != ns+"/shop" {
		t.Errorf("outputs %v", outs)
	}
	if _, err := os.Stat(filepath.Join(ws, outs["report"])); err != nil {
		t.Errorf("the report output %q is not a path in the workspace: %v", outs["report"], err)
	}
	summary := readAll(t, filepath.Join(commands, "step_summary_1"))
	if !strings.Contains(summary, "gantry apply: ReconciliationSucceeded") || !strings.Contains(summary, "actions/runs/42") {
		t.Errorf("summary:\n%s", summary)
	}
	if got := strings.Join(gh.Writes(), ", "); got != "POST 1" || !strings.Contains(gh.Comments()[0].Body, "shop") {
		t.Errorf("comment writes %q", got)
	}
	if _, err := env.Client.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{}); err != nil {
		t.Errorf("the Deployment was not applied: %v", err)
	}

	// A change, diffed as on a pull request: exit 3 with detailed-exitcode,
	// the diff on stdout, the comment updated in place.
	replaceInFile(t, filepath.Join(ws, "deploy", "app.yaml"), "replicas: 1", "replicas: 2")
	d := run(map[string]string{"INPUT_COMMAND": "diff", "INPUT_DETAILED-EXITCODE": "true"})
	if d.code != 3 || !strings.Contains(d.stdout, "+  replicas: 2") || !strings.Contains(d.stdout, "0 to create, 1 to change") {
		t.Errorf("diff in the container: exit %d, stdout:\n%s", d.code, d.stdout)
	}
	if got := strings.Join(gh.Writes(), ", "); got != "POST 1, PATCH 1" || !strings.Contains(gh.Comments()[0].Body, "change pending") {
		t.Errorf("comment writes %q", got)
	}
	// The runner is told each secret to mask (::add-mask::); nothing else
	// may carry one.
	stderr := withoutMasks(first.stderr + d.stderr)
	for name, text := range map[string]string{"stdout": first.stdout + d.stdout, "stderr": stderr, "summary": summary, "comment": gh.Comments()[0].Body, "outputs": readAll(t, filepath.Join(commands, "set_output_1"))} {
		if strings.Contains(text, secretValue) || strings.Contains(text, token) {
			t.Errorf("a secret reached the %s", name)
		}
	}
	assertRemovableBy(t, ws, uid)
}

// The image as GitLab's Docker executor runs a job of the shipped
// template: the entrypoint the template sets, a shell found in the image,
// the job's script on its stdin, the project checked out under /builds.
func TestImageAsGitLabDockerJob(t *testing.T) {
	t.Parallel()
	image := imageUnderTest(t)
	env.Require(t)
	var tmpl map[string]struct {
		Image struct {
			Entrypoint []string `json:"entrypoint"`
		} `json:"image"`
		Script []string `json:"script"`
	}
	b, err := os.ReadFile("../ci/gitlab/gantry.gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	if e := tmpl[".gantry"].Image.Entrypoint; len(e) != 1 || e[0] != "" {
		t.Fatalf("the template's entrypoint is %q; the executor needs it cleared to run the script", e)
	}
	ns := env.Namespace(t)
	ws, uid := workspace(t)
	secretValue := canary("image-secret")
	imageApp(t, ws, ns, secretValue)
	chownTree(t, ws, uid)
	token := "glpat-" + canary("token")
	gl := &fakeapi.GitLab{T: t, Token: token, Me: 77}
	api := hostServer(t, gl)
	const project = "/builds/acme/shop"

	job := func(name string) runnerRun {
		t.Helper()
		script := tmpl[name].Script
		if len(script) == 0 {
			t.Fatalf("the template has no job %s", name)
		}
		// The job's script as the executor feeds it to the shell.
		var sh bytes.Buffer
		sh.WriteString("set -eo pipefail\nset +o noclobber\ncd " + project + "\n")
		for _, l := range script {
			fmt.Fprintf(&sh, "echo '$ %s'\n%s\n", strings.ReplaceAll(l, "'", ""), l)
		}
		vars := map[string]string{
			"CI": "true", "GITLAB_CI": "true",
			"CI_PROJECT_DIR":             project,
			"CI_PROJECT_ID":              "123",
			"CI_PROJECT_URL":             "https://gitlab.example.com/acme/shop",
			"CI_API_V4_URL":              api + "/api/v4",
			"CI_PIPELINE_SOURCE":         "merge_request_event",
			"CI_MERGE_REQUEST_IID":       "9",
			"CI_COMMIT_SHA":              "0123abcd0123abcd",
			"CI_COMMIT_REF_NAME":         "feature",
			"CI_JOB_URL":                 "https://gitlab.example.com/acme/shop/-/jobs/42",
			"GANTRY_PATH":                "deploy",
			"GANTRY_INVENTORY":           "shop",
			"GANTRY_INVENTORY_NAMESPACE": ns,
			"GANTRY_TIMEOUT":             "90s",
			"GANTRY_GITLAB_TOKEN":        token,
			"KUBECONFIG":                 project + "/kubeconfig",
		}
		// The executor looks for a shell in the image, as GitLab's does.
		detect := `for s in /usr/local/bin/bash /usr/bin/bash /bin/bash /usr/local/bin/sh /usr/bin/sh /bin/sh /busybox/sh; do
  if [ -x "$s" ]; then exec "$s"; fi
done
echo "shell not found" >&2; exit 1`
		args := []string{"run", "--rm", "-i", "--network", "host", "--entrypoint", "", "--workdir", project, "-v", ws + ":" + project}
		args = append(args, envFlags(vars)...)
		return docker(t, vars, sh.String(), append(args, image, "sh", "-c", detect)...)
	}

	d := job("gantry-diff")
	if d.code != 0 || !strings.Contains(d.stdout, "3 to create") {
		t.Fatalf("gantry-diff job: exit %d\nstdout:\n%s\nstderr:\n%s", d.code, d.stdout, d.stderr)
	}
	if got := strings.Join(gl.Writes(), ", "); got != "POST 1" || !strings.Contains(gl.Notes()[0].Body, "shop") {
		t.Errorf("note writes %q", got)
	}
	dotenv := readAll(t, filepath.Join(ws, "gantry.env"))
	if !strings.Contains(dotenv, "GANTRY_REASON=Progressing") || !strings.Contains(dotenv, "GANTRY_CREATED=3") {
		t.Errorf("gantry.env:\n%s", dotenv)
	}
	if _, err := os.Stat(filepath.Join(ws, ".gantry", "report.json")); err != nil {
		t.Errorf("the report the template keeps as an artifact: %v", err)
	}

	a := job("gantry-apply")
	if a.code != 0 {
		t.Fatalf("gantry-apply job: exit %d\n%s", a.code, a.stderr)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "settings", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap was not applied: %v", err)
	}
	for name, text := range map[string]string{"stdout": d.stdout + a.stdout, "stderr": d.stderr + a.stderr, "note": gl.Notes()[0].Body, "dotenv": readAll(t, filepath.Join(ws, "gantry.env"))} {
		if strings.Contains(text, secretValue) || strings.Contains(text, token) {
			t.Errorf("a secret reached the %s", name)
		}
	}
	assertRemovableBy(t, ws, uid)
}
