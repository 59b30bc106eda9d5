//go:build unix

package safefile

import (
	"os"
	"syscall"
)

// matchOwner gives paths (relative to r) to the owner of r's folder when
// gantry runs as root and that folder belongs to someone else: a
// container action runs as root in a workspace the runner's user owns,
// and that user must be able to remove what gantry wrote there.
func matchOwner(r *os.Root, paths []string) {
	if os.Geteuid() != 0 {
		return
	}
	fi, err := r.Stat(".")
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return
	}
	for _, p := range paths {
		_ = r.Lchown(p, int(st.Uid), int(st.Gid))
	}
}

// hardLinked says whether the open file has other names: appending to it
// would write to every one of them.
func hardLinked(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode().IsRegular() && st.Nlink > 1
}
