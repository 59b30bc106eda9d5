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
	ws := foreignWorkspace(t)
	report := filepath.Join(ws, ".gantry", "out", "report.json")
	if err := writeFile(report, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	assertOwnedByWorkspaceOwner(t, filepath.Join(ws, ".gantry"), filepath.Dir(report), report)
}

// What pull writes into such a workspace belongs to its owner too, every
// folder and file of it.
func TestPulledTreeBelongsToTheWorkspaceOwner(t *testing.T) {
	ws := foreignWorkspace(t)
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
	assertOwnedByWorkspaceOwner(t, files...)
}

// The runner's user and group, who own the workspace.
const ownerUID, ownerGID = 1001, 127

// foreignWorkspace is a folder the runner's user owns, for a test run as
// root; without root the test is skipped.
func foreignWorkspace(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, as gantry runs in a container action")
	}
	ws := t.TempDir()
	if err := os.Chown(ws, ownerUID, ownerGID); err != nil {
		t.Fatal(err)
	}
	return ws
}

func assertOwnedByWorkspaceOwner(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != ownerUID || st.Gid != ownerGID {
			t.Errorf("%s belongs to %d:%d, want the workspace owner's %d:%d", p, st.Uid, st.Gid, ownerUID, ownerGID)
		}
	}
}
