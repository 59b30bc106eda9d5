package gitsource

import (
	"errors"
	"fmt"
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

	trees := &Trees{}
	defer trees.Remove()
	tree, err := trees.Checkout(filepath.Join(repo, "deploy", "app"), "HEAD~1")
	if err != nil {
		t.Fatal(err)
	}
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
	trees.Remove()
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("Remove left %s", root)
	}

	if _, err := trees.Checkout(filepath.Join(repo, "deploy"), "no-such-branch"); err == nil || !strings.Contains(err.Error(), "no-such-branch") {
		t.Errorf("an unknown revision: %v", err)
	}
	if _, err := trees.Checkout(t.TempDir(), "HEAD"); err == nil || !strings.Contains(err.Error(), "not in a git repository") {
		t.Errorf("outside a repository: %v", err)
	}
}

// A tree that names one blob 10,000 times is refused within the bounds a
// build has (the defaults of max-objects and max-file-bytes), before it
// fills the disk; one revision asked for by many units is written once.
func TestTreesAreBoundedAndWrittenOnce(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to make the repository with")
	}
	repo := t.TempDir()
	runGit(t, repo, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(repo, "deploy", "cm.yaml"), "v: 1\n")
	runGit(t, repo, "add", "-A")
	runGit(t, repo, "commit", "-q", "-m", "small")
	// 64 KiB of YAML, named by 10,000 paths: 640 MiB if written whole.
	blob := filepath.Join(t.TempDir(), "blob")
	writeFile(t, blob, "# "+strings.Repeat("x", 64<<10)+"\n")
	out, err := exec.Command("git", "-C", repo, "hash-object", "-w", blob).Output()
	if err != nil {
		t.Fatal(err)
	}
	var index strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&index, "100644 %s\tdeploy/copies/%05d.yaml\n", strings.TrimSpace(string(out)), i)
	}
	cmd := exec.Command("git", "-C", repo, "update-index", "--add", "--index-info")
	cmd.Stdin = strings.NewReader(index.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("update-index: %v\n%s", err, out)
	}
	runGit(t, repo, "commit", "-q", "-m", "one blob, 10,000 names")

	defaults := Limits{MaxFiles: 100_000, MaxFileBytes: 32 << 20, MaxBytes: 8 * (32 << 20)}
	trees := &Trees{Limits: defaults}
	defer trees.Remove()
	_, err = trees.Checkout(filepath.Join(repo, "deploy"), "HEAD")
	var limit *LimitError
	if !errors.As(err, &limit) || !strings.Contains(err.Error(), "more than 268435456 bytes") {
		t.Fatalf("the tree of 10,000 copies: %v, want a refusal over the bytes' bound", err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(os.TempDir(), "gantry-base-*")); len(trees.written) != 0 {
		t.Errorf("a refused tree is kept: %v", leftovers)
	}
	if _, err := (&Trees{Limits: Limits{MaxFiles: 5000}}).Checkout(repo, "HEAD"); err == nil || !strings.Contains(err.Error(), "more than 5000 files") {
		t.Errorf("over the files' bound: %v", err)
	}

	a, err := trees.Checkout(filepath.Join(repo, "deploy"), "HEAD~1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := trees.Checkout(repo, "main~1")
	if err != nil {
		t.Fatal(err)
	}
	if a.Root != b.Root || len(trees.written) != 1 {
		t.Errorf("one revision written twice: %s and %s", a.Root, b.Root)
	}
	trees.Remove()
	if _, err := os.Stat(a.Root); !os.IsNotExist(err) {
		t.Errorf("Remove left %s", a.Root)
	}
}
