package e2e

import (
	"flag"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/gantry-dev/gantry/reporters/fakeapi"
)

// previewRepo is a git repository of two commits, as a pull request
// leaves it: an overlay built from a base and a component, with generators
// and a SOPS-encrypted Secret, and a head commit that changes the image,
// the replicas, a generated ConfigMap and the Secret's password, adds a
// ConfigMap and removes the PodDisruptionBudget. It returns the
// repository's folder and the base commit.
func previewRepo(t *testing.T, id *age.X25519Identity) (dir, base string) {
	t.Helper()
	dir = t.TempDir()
	src := filepath.Join("testdata", "offline", "shapes", "web")
	if err := os.CopyFS(filepath.Join(dir, "deploy"), os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	prod := filepath.Join(dir, "deploy", "overlays", "prod")
	writeFile(t, filepath.Join(prod, "db-secret.yaml"), sopsSecret(t, "shapes-web", "base-password-1f3e", id))
	kust := filepath.Join(prod, "kustomization.yaml")
	b, err := os.ReadFile(kust)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, kust, strings.Replace(string(b), "  - ingress.yaml\n", "  - ingress.yaml\n  - db-secret.yaml\n", 1))
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=dev", "-c", "user.email=dev@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	base = git("rev-parse", "HEAD")

	edit := func(path, from, to string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), from) {
			t.Fatalf("%s has no %q", path, from)
		}
		writeFile(t, path, strings.Replace(string(b), from, to, 1))
	}
	edit(kust, "newTag: 1.5.0", "newTag: 1.6.0")
	edit(kust, "count: 3", "count: 4")
	edit(filepath.Join(dir, "deploy", "base", "kustomization.yaml"), "LOG_LEVEL=info", "LOG_LEVEL=debug")
	edit(filepath.Join(dir, "deploy", "base", "kustomization.yaml"), "  - pdb.yaml\n", "")
	if err := os.Remove(filepath.Join(dir, "deploy", "base", "pdb.yaml")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(prod, "db-secret.yaml"), sopsSecret(t, "shapes-web", "head-password-9c2a", id))
	writeFile(t, filepath.Join(prod, "flags.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flags}\ndata: {checkout-v2: \"true\"}\n")
	edit(kust, "  - db-secret.yaml\n", "  - db-secret.yaml\n  - flags.yaml\n")
	git("add", "-A")
	git("commit", "-q", "-m", "head")
	return dir, base
}

// TestOfflinePreviewOfAPullRequest runs diff --offline --base as a pull
// request's workflow runs it, in the container action's environment and
// without any cluster credentials: the summary and the comment are
// compared with golden files; a fork's read-only token degrades to the
// summary, said once; no Secret value, decrypted or not, is printed.
func TestOfflinePreviewOfAPullRequest(t *testing.T) {
	t.Parallel()
	bin := gantryBinary(t)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	ws, base := previewRepo(t, id)
	run := func(t *testing.T, forbid bool, extra map[string]string) (runnerRun, *fakeapi.GitHub, string, map[string]string) {
		t.Helper()
		token := "ghs_" + canary("token")
		gh := &fakeapi.GitHub{T: t, Token: token, Viewer: "github-actions", Forbid: forbid}
		srv := httptest.NewServer(gh)
		t.Cleanup(srv.Close)
		home, commands := t.TempDir(), t.TempDir()
		event := filepath.Join(t.TempDir(), "event.json")
		writeFile(t, event, `{"action":"synchronize","number":7,"pull_request":{"number":7,"head":{"sha":"0123abcd"}}}`)
		vars := actionInputs(t)
		for k, v := range map[string]string{
			"INPUT_COMMAND":      "diff",
			"INPUT_PATH":         "deploy/overlays/prod",
			"INPUT_OFFLINE":      "true",
			"INPUT_BASE":         base,
			"INPUT_GITHUB-TOKEN": token,
		} {
			vars[k] = v
		}
		for k, v := range pullRequestRun(home, ws, event, commands, srv.URL) {
			vars[k] = v
		}
		for k, v := range extra {
			vars[k] = v
		}
		return runAsAction(t, bin, ws, vars), gh, readAll(t, filepath.Join(commands, "step_summary_1")), parseOutputs(t, filepath.Join(commands, "set_output_1"))
	}
	secrets := []string{"base-password-1f3e", "head-password-9c2a", id.String()}
	noSecrets := func(t *testing.T, what, text string) {
		t.Helper()
		if found := scanForSecrets(text, secrets...); len(found) > 0 {
			t.Errorf("%s shows secret values %q", what, found)
		}
	}

	t.Run("pull request", func(t *testing.T) {
		res, gh, summary, outs := run(t, false, nil)
		if res.code != 0 {
			t.Fatalf("exit %d, want 0 (changes pending without detailed-exitcode)", res.code)
		}
		if outs["reason"] != "Progressing" || outs["changed"] != "true" || outs["created"] != "2" || outs["configured"] != "2" || outs["deleted"] != "2" {
			t.Errorf("outputs %v", outs)
		}
		comments := gh.Comments()
		if len(comments) != 1 {
			t.Fatalf("%d comments, want 1", len(comments))
		}
		if !strings.Contains(comments[0].Body, "<!-- gantry:comment offline-diff inventory=none -->") {
			t.Errorf("the comment has no marker of its own:\n%s", comments[0].Body)
		}
		golden(t, filepath.Join("testdata", "offline", "golden", "summary.md"), previewStable(summary, base))
		golden(t, filepath.Join("testdata", "offline", "golden", "comment.md"), previewStable(comments[0].Body, base))
		for what, text := range map[string]string{"stdout": res.stdout, "stderr": withoutMasks(res.stderr), "summary": summary, "comment": comments[0].Body} {
			noSecrets(t, what, text)
		}
	})

	t.Run("with the key", func(t *testing.T) {
		res, _, summary, outs := run(t, false, map[string]string{"INPUT_SOPS-AGE-KEY": id.String()})
		if res.code != 0 || outs["configured"] != "2" {
			t.Errorf("exit %d, outputs %v", res.code, outs)
		}
		if !strings.Contains(summary, "Secret/shapes-web/db") {
			t.Errorf("the decrypted Secret's change is not in the summary:\n%s", summary)
		}
		for what, text := range map[string]string{"stdout": res.stdout, "stderr": withoutMasks(res.stderr), "summary": summary} {
			noSecrets(t, what, text)
		}
	})

	t.Run("run file", func(t *testing.T) {
		// Two units of one repository, previewed as one run: one comment
		// for the run file, with a marker of its own.
		runFile := filepath.Join(ws, "gantry.yaml")
		writeFile(t, runFile, "units:\n  - {name: prod, path: deploy/overlays/prod}\n  - {name: base, path: deploy/base, depends-on: [prod]}\n")
		t.Cleanup(func() { _ = os.Remove(runFile) })
		res, gh, summary, outs := run(t, false, map[string]string{"INPUT_RUN-FILE": "gantry.yaml", "INPUT_PATH": ""})
		if res.code != 0 {
			t.Fatalf("exit %d, want 0", res.code)
		}
		if outs["prod-changed"] != "true" || outs["base-changed"] != "true" {
			t.Errorf("outputs %v", outs)
		}
		comments := gh.Comments()
		if len(comments) != 1 || !strings.Contains(comments[0].Body, "<!-- gantry:comment offline-diff run-file=gantry.yaml -->") {
			t.Fatalf("want one comment with the run file's offline marker, got %d: %v", len(comments), comments)
		}
		for _, unit := range []string{"prod", "base"} {
			if !strings.Contains(summary, unit) || !strings.Contains(comments[0].Body, unit) {
				t.Errorf("unit %s is not in the summary or the comment", unit)
			}
		}
		noSecrets(t, "comment", comments[0].Body)
	})

	t.Run("fork", func(t *testing.T) {
		res, gh, summary, _ := run(t, true, nil)
		if res.code != 0 {
			t.Fatalf("exit %d, want 0", res.code)
		}
		if len(gh.Comments()) != 0 {
			t.Errorf("a comment was written with a read-only token: %v", gh.Comments())
		}
		if n := strings.Count(res.stderr, "the token may not write comments"); n != 1 {
			t.Errorf("the read-only token is said %d times, want once:\n%s", n, res.stderr)
		}
		if !strings.Contains(summary, "gantry diff against") {
			t.Errorf("no summary:\n%s", summary)
		}
	})
}

// previewStable replaces what differs from run to run (the base commit,
// times, SOPS ciphertext) so that a golden file can hold the rest.
func previewStable(s, base string) string {
	s = strings.ReplaceAll(s, base, "BASE")
	s = regexp.MustCompile(`(build|validate|base|diff) [0-9.]+(ms|µs|s)\b`).ReplaceAllString(s, "$1 TIME")
	s = regexp.MustCompile(`ENC\[[^\]]*\]`).ReplaceAllString(s, "ENC[…]")
	s = regexp.MustCompile(`gantry-content [0-9a-f]+`).ReplaceAllString(s, "gantry-content KEY")
	return s
}

var updateGolden = flag.Bool("update", false, "rewrite the golden files")

// golden compares got with the file, or rewrites it under -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./e2e -run %s -update writes it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// netnsCommand runs gantry in a network namespace of its own, with no
// interface but a loopback that is down: any connection it tried would
// fail. It skips where namespaces cannot be made.
func netnsCommand(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	if out, err := exec.Command("unshare", "--net", "--", "true").CombinedOutput(); err != nil {
		t.Skipf("no network namespace can be made here (unshare --net: %v, %s)", err, out)
	}
	return exec.Command("unshare", append([]string{"--net", "--", bin}, args...)...)
}

// validate --offline and diff --offline --base need no network: run in a
// network namespace with nothing but loopback, with the workflow's
// kubeconfig and registry credentials set as a CI job would have them,
// they pass, read no kubeconfig (its server and context are named
// nowhere), and the diff is the same as outside.
func TestOfflineNeedsNoNetwork(t *testing.T) {
	t.Parallel()
	bin := gantryBinary(t)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	ws, base := previewRepo(t, id)
	writeFile(t, filepath.Join(ws, "gantry.yaml"), "units:\n  - {name: prod, path: deploy/overlays/prod}\n  - {name: base, path: deploy/base}\n")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: "https://canary-cluster.example:6443"}
users:
- name: deployer
  user: {token: canary-kube-token-5f1e}
contexts:
- name: canary-prod-context
  context: {cluster: prod, user: deployer}
current-context: canary-prod-context
`)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"validate", []string{"validate", "--offline", "deploy/overlays/prod"}, 0},
		{"validate a run file", []string{"validate", "--offline", "--run-file", "gantry.yaml"}, 0},
		{"diff", []string{"diff", "--offline", "--base", base, "deploy/overlays/prod"}, 0},
		{"diff a run file", []string{"diff", "--offline", "--base", base, "--run-file", "gantry.yaml", "--detailed-exitcode"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			commands := t.TempDir()
			cmd := netnsCommand(t, bin, tc.args...)
			cmd.Dir = ws
			cmd.Env = []string{"HOME=" + t.TempDir(), "KUBECONFIG=" + kubeconfig, "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE=" + ws,
				"GITHUB_STEP_SUMMARY=" + filepath.Join(commands, "summary"), "GITHUB_OUTPUT=" + filepath.Join(commands, "outputs"),
				"INPUT_REGISTRY-USERNAME=ci", "INPUT_REGISTRY-PASSWORD=canary-registry-password", "INPUT_COMMENT=false"}
			res := runCommand(t, cmd, "gantry "+tc.name+" (no network)")
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d", res.code, tc.code)
			}
			outs := parseOutputs(t, filepath.Join(commands, "outputs"))
			report := readAll(t, filepath.Join(ws, outs["report"]))
			if tc.name == "diff" && (outs["changed"] != "true" || outs["configured"] != "2") {
				t.Errorf("outputs %v", outs)
			}
			for where, text := range map[string]string{"stdout": res.stdout, "stderr": withoutMasks(res.stderr), "summary": readAll(t, filepath.Join(commands, "summary")), "report": report} {
				for _, s := range []string{"canary-cluster.example", "canary-prod-context", "canary-kube-token", "canary-registry-password"} {
					if strings.Contains(text, s) {
						t.Errorf("%s names %s: an offline run read the kubeconfig or printed a credential", where, s)
					}
				}
			}
		})
	}
}
