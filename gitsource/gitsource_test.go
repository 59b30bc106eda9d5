package gitsource

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckoutWritesTheRevisionsFiles(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to make the repository with")
	}
	repo := t.TempDir()
	writeFile(t, filepath.Join(repo, "deploy", "app", "cm.yaml"), "v: base\n")
	writeFile(t, filepath.Join(repo, "deploy", "shared", "x.yaml"), "shared\n")
	if err := os.Symlink("../shared/x.yaml", filepath.Join(repo, "deploy", "app", "x.yaml")); err != nil {
		t.Fatal(err)
	}
	runGit(t, repo, "init", "-q", "-b", "main")
	runGit(t, repo, "add", "-A")
	runGit(t, repo, "commit", "-q", "-m", "base")
	writeFile(t, filepath.Join(repo, "deploy", "app", "cm.yaml"), "v: head\n")
	writeFile(t, filepath.Join(repo, "deploy", "app", "new.yaml"), "new\n")
	runGit(t, repo, "add", "-A")
	runGit(t, repo, "commit", "-q", "-m", "head")

	tree, err := Checkout(filepath.Join(repo, "deploy", "app"), "HEAD~1")
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Remove()
	if b, err := os.ReadFile(filepath.Join(tree.Path, "cm.yaml")); err != nil || string(b) != "v: base\n" {
		t.Errorf("cm.yaml at the base: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(tree.Path, "new.yaml")); !os.IsNotExist(err) {
		t.Errorf("a file of the head is in the base: %v", err)
	}
	if to, err := os.Readlink(filepath.Join(tree.Path, "x.yaml")); err != nil || to != "../shared/x.yaml" {
		t.Errorf("the link: %q, %v", to, err)
	}
	if got := tree.Within(filepath.Join(repo, "deploy")); got != filepath.Join(tree.Root, "deploy") {
		t.Errorf("Within(deploy) = %s", got)
	}
	if got := tree.Within(t.TempDir()); got != tree.Root {
		t.Errorf("a folder outside the repository stands for %s, want the root", got)
	}
	root := tree.Root
	tree.Remove()
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("Remove left %s", root)
	}

	if _, err := Checkout(filepath.Join(repo, "deploy"), "no-such-branch"); err == nil || !strings.Contains(err.Error(), "no-such-branch") {
		t.Errorf("an unknown revision: %v", err)
	}
	if _, err := Checkout(t.TempDir(), "HEAD"); err == nil || !strings.Contains(err.Error(), "not in a git repository") {
		t.Errorf("outside a repository: %v", err)
	}
}
