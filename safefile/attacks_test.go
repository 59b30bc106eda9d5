package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustA(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func clearCI(t *testing.T) {
	t.Setenv("GITHUB_WORKSPACE", "")
	t.Setenv("CI_PROJECT_DIR", "")
}

func landed(t *testing.T, p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// S1: cwd is a subfolder of the checkout (working-directory), the CI is not
// GitHub/GitLab; a report path "../reports/r.txt" goes through a committed
// link "reports" -> outside.
func TestAttackRelativeParentThroughLink(t *testing.T) {
	clearCI(t)
	base, outside := t.TempDir(), t.TempDir()
	ws := filepath.Join(base, "ws")
	mustA(t, os.MkdirAll(filepath.Join(ws, "app"), 0o755))
	mustA(t, os.Symlink(outside, filepath.Join(ws, "reports")))
	t.Chdir(filepath.Join(ws, "app"))
	err := Write("../reports/r.txt", []byte("pwn\n"))
	t.Logf("Write: %v; landed outside: %v", err, landed(t, filepath.Join(outside, "r.txt")))
	if landed(t, filepath.Join(outside, "r.txt")) {
		t.Errorf("LEAK: wrote outside through a committed link")
	}
}

// S2: GITHUB_WORKSPACE is spelled through a link (runner mount), the
// path is given by its real spelling: not recognised as the workspace.
func TestAttackWorkspaceSpelledOtherwise(t *testing.T) {
	clearCI(t)
	base, outside, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	real := filepath.Join(base, "real")
	mustA(t, os.MkdirAll(real, 0o755))
	mustA(t, os.Symlink(real, filepath.Join(base, "ws")))
	t.Setenv("GITHUB_WORKSPACE", filepath.Join(base, "ws"))
	t.Chdir(elsewhere)
	mustA(t, os.Symlink(outside, filepath.Join(real, "evil"))) // committed link
	err := Write(filepath.Join(real, "evil", "r.txt"), []byte("pwn\n"))
	t.Logf("Write: %v; landed outside: %v", err, landed(t, filepath.Join(outside, "r.txt")))
	if landed(t, filepath.Join(outside, "r.txt")) {
		t.Errorf("LEAK: wrote outside through a committed link")
	}
	// and the linked spelling, via an absolute path
	err = Write(filepath.Join(base, "ws", "evil", "r2.txt"), []byte("pwn\n"))
	t.Logf("Write linked spelling: %v; landed: %v", err, landed(t, filepath.Join(outside, "r2.txt")))
	if landed(t, filepath.Join(outside, "r2.txt")) {
		t.Errorf("LEAK2")
	}
}

// S3: the working folder is itself a committed link out of the workspace
// (working-directory: app, app -> outside).
func TestAttackCwdIsALink(t *testing.T) {
	clearCI(t)
	ws, outside := t.TempDir(), t.TempDir()
	mustA(t, os.Symlink(outside, filepath.Join(ws, "app")))
	t.Setenv("GITHUB_WORKSPACE", ws)
	t.Chdir(filepath.Join(ws, "app"))
	wd, _ := os.Getwd()
	err := Write("r.txt", []byte("pwn\n"))
	t.Logf("Getwd=%s Write: %v; landed outside: %v", wd, err, landed(t, filepath.Join(outside, "r.txt")))
	if landed(t, filepath.Join(outside, "r.txt")) {
		t.Errorf("LEAK: wrote outside the workspace (cwd is a committed link)")
	}
}

// S4: links inside the workspace: inside target allowed, outside refused,
// and ".." climbing through a link.
func TestAttackIntermediateLinks(t *testing.T) {
	clearCI(t)
	ws, outside := t.TempDir(), t.TempDir()
	t.Chdir(ws)
	mustA(t, os.MkdirAll("realdir", 0o755))
	mustA(t, os.Symlink("realdir", "in"))
	mustA(t, os.Symlink(outside, "out"))
	t.Logf("in/a.txt: %v", Write("in/a.txt", []byte("ok\n")))
	t.Logf("out/a.txt: %v", Write("out/a.txt", []byte("pwn\n")))
	t.Logf("out/new/a.txt: %v", Write("out/new/a.txt", []byte("pwn\n")))
	t.Logf("in/../out/b.txt: %v", Write("in/../out/b.txt", []byte("pwn\n")))
	t.Logf("Append out/c.txt: %v", Append("out/c.txt", []byte("pwn\n")))
	for _, n := range []string{"a.txt", "new", "b.txt", "c.txt"} {
		if landed(t, filepath.Join(outside, n)) {
			t.Errorf("LEAK: %s outside", n)
		}
	}
}

// S5: a regular file that is a hard link to a file outside the
// workspace: Append refuses it, as it refuses a symbolic link; Write
// replaces the name and leaves the other file as it was.
func TestAttackAppendHardlink(t *testing.T) {
	clearCI(t)
	ws, outside := t.TempDir(), t.TempDir()
	t.Chdir(ws)
	victim := filepath.Join(outside, "victim")
	mustA(t, os.WriteFile(victim, []byte("orig\n"), 0o644))
	mustA(t, os.Link(victim, "out.txt"))
	var le *LinkError
	if err := Append("out.txt", []byte("pwn\n")); !errors.As(err, &le) || !strings.Contains(err.Error(), "hard link") {
		t.Errorf("Append through a hard link: %v, want it refused", err)
	}
	mustA(t, os.Link(victim, "out2.txt"))
	if err := Write("out2.txt", []byte("pwn2\n")); err != nil {
		t.Errorf("Write over a hard link: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "orig\n" {
		t.Errorf("the file outside was written through a hard link: %q", b)
	}
	if b, _ := os.ReadFile("out2.txt"); string(b) != "pwn2\n" {
		t.Errorf("out2.txt: %q", b)
	}
}
