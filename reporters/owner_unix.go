//go:build unix

package reporters

import (
	"os"
	"syscall"
)

// matchOwner gives paths to the owner of parent when gantry runs as root
// and parent belongs to someone else: a container action runs as root in
// a workspace the runner's user owns, and that user must be able to
// remove what gantry wrote there.
func matchOwner(parent string, paths []string) {
	if os.Geteuid() != 0 {
		return
	}
	fi, err := os.Stat(parent)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return
	}
	for _, p := range paths {
		_ = os.Lchown(p, int(st.Uid), int(st.Gid))
	}
}
