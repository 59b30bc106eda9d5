package gitsource

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestHeadIsTheCheckedOutCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to make the repository with")
	}
	repo := t.TempDir()
	writeFile(t, filepath.Join(repo, "deploy", "cm.yaml"), "v: 1\n")
	runGit(t, repo, "init", "-q", "-b", "trunk")
	if got := Head(filepath.Join(repo, "deploy")); got != "" {
		t.Errorf("no commit yet: got %q", got)
	}
	runGit(t, repo, "add", ".")
	runGit(t, repo, "commit", "-q", "-m", "first")
	out, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.TrimSpace(string(out))
	if got := Head(filepath.Join(repo, "deploy")); got != "trunk@sha1:"+sha {
		t.Errorf("on a branch: got %q, want trunk@sha1:%s", got, sha)
	}
	runGit(t, repo, "checkout", "-q", "--detach")
	if got := Head(filepath.Join(repo, "deploy", "cm.yaml")); got != sha {
		t.Errorf("detached: got %q, want %s", got, sha)
	}
	if got := Head(t.TempDir()); got != "" {
		t.Errorf("outside a repository: got %q", got)
	}
}
