//go:build !linux

package charts

import (
	"os"
	"sync/atomic"
	"syscall"
)

// Elsewhere than on Linux the renderer is bounded in time only, and its
// collector held to its memory bound (debug.SetMemoryLimit), which is no
// hard bound. CI runners are Linux.
func limitAddressSpace(uint64) error { return nil }

func childSysProcAttr() *syscall.SysProcAttr { return nil }

func watchRSS(*os.Process, uint64, <-chan struct{}, *atomic.Bool) {}
