package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Every credential a kubeconfig holds is masked, offline runs included:
// tokens, passwords and keys, what an auth provider keeps and the
// environment of an exec plugin. And the files the run holds credentials
// in are listed for the build to refuse.
func TestKubeconfigCredentialsMaskedAndRefused(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	tokenFile := filepath.Join(dir, "token")
	kc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: oidc}}]
current-context: c
users:
- name: oidc
  user:
    auth-provider:
      name: oidc
      config: {client-id: shop, client-secret: client-secret-canary, id-token: id-token-canary, refresh-token: refresh-token-canary}
- name: exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: aws
      env: [{name: AWS_SECRET_ACCESS_KEY, value: aws-secret-canary}, {name: USE_GKE_GCLOUD_AUTH_PLUGIN, value: "True"}]
- name: file
  user: {tokenFile: ` + tokenFile + `}
`
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte("token-file-canary\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for _, offline := range []string{"true", "false"} {
		flags := map[string]string{"kubeconfig": kubeconfig, "inventory": "shop"}
		if offline == "true" {
			flags = map[string]string{"offline": "true", "base": "HEAD"}
		}
		c, err := Load(Given{Command: "diff", CommandOrigin: "the command line", Flags: flags,
			Env: map[string]string{"KUBECONFIG": kubeconfig, "HOME": home, "SOPS_AGE_KEY_FILE": filepath.Join(home, "keys.txt")}})
		if err != nil {
			t.Fatalf("offline %s: %v", offline, err)
		}
		for _, want := range []string{"client-secret-canary", "id-token-canary", "refresh-token-canary", "aws-secret-canary", "token-file-canary"} {
			if !slices.Contains(c.Secrets, want) {
				t.Errorf("offline %s: %s is not masked", offline, want)
			}
		}
		if slices.Contains(c.Secrets, "shop") || slices.Contains(c.Secrets, "True") {
			t.Errorf("offline %s: a client id or a short value is masked", offline)
		}
		for _, want := range []string{kubeconfig, tokenFile, filepath.Join(home, "keys.txt"), filepath.Join(home, ".docker", "config.json")} {
			if !slices.Contains(c.CredentialFiles, want) {
				t.Errorf("offline %s: %s is not a credential file: %q", offline, want, c.CredentialFiles)
			}
		}
	}
}

// A unit's own kubeconfig does not make the workflow's any less a
// credential: both are listed and masked. A kubeconfig's relative token
// file is its folder's, as client-go reads it, not the working
// directory's. Credential folders of the tools a workflow runs are listed.
func TestEveryKubeconfigIsACredential(t *testing.T) {
	workflow, unit, home := t.TempDir(), t.TempDir(), t.TempDir()
	t.Chdir(t.TempDir()) // not the kubeconfig's folder
	write := func(p, c string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kc := func(user string) string {
		return "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: " + user + "}]\n"
	}
	write(filepath.Join(workflow, "kubeconfig"), kc("{token: workflow-token-canary}"))
	write(filepath.Join(unit, "kubeconfig"), kc("{tokenFile: ci/token}"))
	write(filepath.Join(unit, "ci", "token"), "unit-token-file-canary\n")
	c, err := Load(Given{Command: "diff", CommandOrigin: "the command line",
		Flags: map[string]string{"kubeconfig": filepath.Join(unit, "kubeconfig"), "inventory": "shop"},
		Env:   map[string]string{"KUBECONFIG": filepath.Join(workflow, "kubeconfig"), "HOME": home}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"workflow-token-canary", "unit-token-file-canary"} {
		if !slices.Contains(c.Secrets, want) {
			t.Errorf("%s is not masked", want)
		}
	}
	for _, want := range []string{filepath.Join(workflow, "kubeconfig"), filepath.Join(unit, "kubeconfig"), filepath.Join(unit, "ci", "token"),
		filepath.Join(home, ".kube", "config"), filepath.Join(home, ".aws"), filepath.Join(home, ".ssh"), filepath.Join(home, ".netrc")} {
		if !slices.Contains(c.CredentialFiles, want) {
			t.Errorf("%s is not a credential file: %q", want, c.CredentialFiles)
		}
	}
}
