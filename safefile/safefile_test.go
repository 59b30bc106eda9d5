package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A report path that a pull request committed as a link (to a file of the
// runner's home, dangling, or to a file of the workspace itself), or as a
// FIFO, is never written through; a path that climbs out of the
// workspace through a linked folder is refused too. What is refused is
// left as it was, and nothing is created where the links point.
func TestNoWriteThroughALink(t *testing.T) {
	ws, home := t.TempDir(), t.TempDir()
	t.Chdir(ws)
	bashrc := filepath.Join(home, ".bashrc")
	if err := os.WriteFile(bashrc, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(bashrc, "gantry.env"))
	must(os.MkdirAll(".gantry", 0o755))
	must(os.Symlink(filepath.Join(home, ".profile"), filepath.Join(".gantry", "report.diff")))
	must(os.WriteFile("kustomization.yaml", []byte("resources: []\n"), 0o644))
	must(os.Symlink("kustomization.yaml", "inside.json"))
	must(os.Symlink(home, "out"))
	must(syscall.Mkfifo("fifo", 0o644))

	for _, p := range []string{"gantry.env", filepath.Join(".gantry", "report.diff"), "inside.json", filepath.Join(ws, "gantry.env"), "fifo"} {
		var le *LinkError
		if err := Write(p, []byte("X=1\n")); !errors.As(err, &le) {
			t.Errorf("Write(%s): %v, want a LinkError", p, err)
		}
		if err := Append(p, []byte("X=1\n")); !errors.As(err, &le) {
			t.Errorf("Append(%s): %v, want a LinkError", p, err)
		}
	}
	if err := Write(filepath.Join("out", "report.json"), []byte("{}")); err == nil {
		t.Errorf("a write through a linked folder out of the workspace succeeded")
	}
	if b, _ := os.ReadFile(bashrc); string(b) != "original\n" {
		t.Errorf("~/.bashrc was written: %q", b)
	}
	for _, f := range []string{".profile", "report.json"} {
		if _, err := os.Lstat(filepath.Join(home, f)); err == nil {
			t.Errorf("%s was created in the home folder", f)
		}
	}
	if b, _ := os.ReadFile("kustomization.yaml"); string(b) != "resources: []\n" {
		t.Errorf("the linked workspace file was written: %q", b)
	}
}

// An ordinary write creates its folders, replaces what was there whole,
// and leaves no temporary file behind; Append appends.
func TestWriteAndAppend(t *testing.T) {
	ws := t.TempDir()
	t.Chdir(ws)
	p := filepath.Join(".gantry", "out", "report.json")
	for _, content := range []string{"first, longer\n", "second\n"} {
		if err := Write(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != content {
			t.Errorf("read back %q, want %q", b, content)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("%d files beside the report, want none: %v", len(entries)-1, entries)
	}
	out := filepath.Join(t.TempDir(), "github_output")
	for range 2 {
		if err := Append(out, []byte("a=1\n")); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(out); string(b) != "a=1\na=1\n" {
		t.Errorf("appended %q", b)
	}
}
