package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Whatever path a configuration names inside a workspace that holds links
// (to a file and a folder outside it, dangling, to a file inside it), a
// write lands on a regular file inside the workspace, never through a
// link: nothing outside changes, and no link's target is written.
func FuzzSafeWrite(f *testing.F) {
	for _, p := range []string{"gantry.env", ".gantry/report.diff", "out/report.json", "../escape", "inside.json", "a/../../b", "/abs", "dir/", ".", "fifo"} {
		f.Add(p)
	}
	base := f.TempDir()
	f.Fuzz(func(t *testing.T, p string) {
		if strings.ContainsRune(p, 0) || len(p) > 200 {
			return
		}
		dir, err := os.MkdirTemp(base, "case-")
		if err != nil {
			t.Fatal(err)
		}
		ws, outside := filepath.Join(dir, "ws"), filepath.Join(dir, "outside")
		for _, d := range []string{ws, outside} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.WriteFile(filepath.Join(outside, "bashrc"), []byte("original"), 0o644))
		must(os.WriteFile(filepath.Join(ws, "kustomization.yaml"), []byte("original"), 0o644))
		must(os.Symlink(filepath.Join(outside, "bashrc"), filepath.Join(ws, "gantry.env")))
		must(os.MkdirAll(filepath.Join(ws, ".gantry"), 0o755))
		must(os.Symlink(filepath.Join(outside, "profile"), filepath.Join(ws, ".gantry", "report.diff")))
		must(os.Symlink(outside, filepath.Join(ws, "out")))
		must(os.Symlink("kustomization.yaml", filepath.Join(ws, "inside.json")))

		target := p
		if !filepath.IsAbs(p) {
			target = filepath.Join(ws, p)
		}
		inWorkspace := func() bool {
			r, err := filepath.Rel(ws, filepath.Clean(target))
			return err == nil && filepath.IsLocal(r)
		}()
		if !inWorkspace {
			return // a path the workflow gave outside it: its own to choose
		}
		t.Setenv("GITHUB_WORKSPACE", ws)
		err = Write(target, []byte("written"))
		// Outside the workspace: nothing changed, nothing created.
		entries, _ := os.ReadDir(outside)
		if len(entries) != 1 {
			t.Fatalf("Write(%q) created something outside the workspace: %v (err %v)", p, entries, err)
		}
		if b, _ := os.ReadFile(filepath.Join(outside, "bashrc")); string(b) != "original" {
			t.Fatalf("Write(%q) wrote through a link out of the workspace", p)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "kustomization.yaml")); string(b) != "original" && filepath.Clean(target) != filepath.Join(ws, "kustomization.yaml") {
			t.Fatalf("Write(%q) wrote through a link inside the workspace", p)
		}
		if err == nil {
			fi, lerr := os.Lstat(target)
			if lerr != nil || !fi.Mode().IsRegular() {
				t.Fatalf("Write(%q) succeeded, but %s is %v (%v)", p, target, fi, lerr)
			}
		}
	})
}
