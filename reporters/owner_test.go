//go:build unix

package reporters

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Run as root (as a container action is) in a workspace another user owns
// (the runner's), the report folder and files gantry creates belong to that
// user, who can then remove them.
func TestReportFilesBelongToTheWorkspaceOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as gantry runs in a container action")
	}
	ws := t.TempDir()
	const uid, gid = 1001, 127
	if err := os.Chown(ws, uid, gid); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(ws, ".gantry", "out", "report.json")
	if err := writeFile(report, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(ws, ".gantry"), filepath.Dir(report), report} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
			t.Errorf("%s belongs to %d:%d, want the workspace owner's %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
	}
}

// What pull writes into such a workspace belongs to its owner too, every
// folder and file of it.
func TestPulledTreeBelongsToTheWorkspaceOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as gantry runs in a container action")
	}
	ws := t.TempDir()
	const uid, gid = 1001, 127
	if err := os.Chown(ws, uid, gid); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(ws, "pulled")
	files := []string{out, filepath.Join(out, "app"), filepath.Join(out, "app", "deploy.yaml"), filepath.Join(out, "kustomization.yaml")}
	if err := os.MkdirAll(files[1], 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files[2:] {
		if err := os.WriteFile(f, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := GiveTree(out); err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
			t.Errorf("%s belongs to %d:%d, want the workspace owner's %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
	}
}
