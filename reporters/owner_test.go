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
