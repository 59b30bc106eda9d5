package entrypoint

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// On GitLab, a pull request that commits gantry.env (the dotenv's default
// path) as a link to the runner's ~/.bashrc, and .gantry/report.diff as a
// dangling link to ~/.profile, gets neither written: validate --offline
// says it refused them and writes nothing outside the workspace. Its
// branch name, which lands in GANTRY_OUTPUT_REVISION, is written so that a shell
// sourcing the dotenv (as a later job on a shell executor may) runs none
// of it.
func TestReportsNeverWriteThroughLinks(t *testing.T) {
	ws, home := t.TempDir(), t.TempDir()
	t.Chdir(ws)
	bashrc := filepath.Join(home, ".bashrc")
	if err := os.WriteFile(bashrc, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "app", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\ndata: {k: v}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bashrc, filepath.Join(ws, "gantry.env")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".gantry"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(home, ".profile"), filepath.Join(ws, ".gantry", "report.diff")); err != nil {
		t.Fatal(err)
	}
	branch := "fix$(touch${IFS}" + filepath.Join(ws, "PWNED") + ")`touch ${IFS}" + filepath.Join(ws, "PWNED2") + "`;touch " + filepath.Join(ws, "PWNED3")
	env := []string{"HOME=" + home, "GITLAB_CI=true", "CI_COMMIT_SHA=0123456789abcdef0123456789abcdef01234567", "CI_COMMIT_REF_NAME=" + branch}
	var stdout, stderr strings.Builder
	code := Run(context.Background(), []string{"validate", "--offline", "--path=app"}, env, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if code != 0 {
		t.Fatalf("validate --offline: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(bashrc); string(b) != "original\n" {
		t.Errorf("~/.bashrc was written through the committed gantry.env: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(home, ".profile")); err == nil {
		t.Errorf("~/.profile was created through the dangling .gantry/report.diff")
	}
	for _, p := range []string{"gantry.env", filepath.Join(".gantry", "report.diff")} {
		if !strings.Contains(out, "refusing to write "+p) {
			t.Errorf("the run does not say it refused %s:\n%s", p, out)
		}
	}

	// Without the links, the dotenv is written; sourced by a shell, it
	// runs nothing, and GANTRY_OUTPUT_REVISION reads back as the branch, encoded.
	for _, p := range []string{"gantry.env", filepath.Join(".gantry", "report.diff")} {
		if err := os.Remove(filepath.Join(ws, p)); err != nil {
			t.Fatal(err)
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := Run(context.Background(), []string{"validate", "--offline", "--path=app"}, env, &stdout, &stderr); code != 0 {
		t.Fatalf("validate --offline: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	got, err := exec.Command("sh", "-c", `. ./gantry.env && printf %s "$GANTRY_OUTPUT_REVISION"`).CombinedOutput()
	if err != nil {
		t.Fatalf("sourcing gantry.env: %v\n%s", err, got)
	}
	for _, f := range []string{"PWNED", "PWNED2", "PWNED3"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err == nil {
			t.Errorf("sourcing gantry.env ran a command from the branch name (%s exists)", f)
		}
	}
	if !strings.HasPrefix(string(got), "fix%24%28touch%24%7BIFS%7D") || !strings.HasSuffix(string(got), "@sha1:0123456789abcdef0123456789abcdef01234567") {
		t.Errorf("GANTRY_OUTPUT_REVISION reads %q", got)
	}
}
