package charts

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// limitAddressSpace bounds the renderer's address space to what it has
// reserved so far (the Go runtime reserves far more than it uses) and mem
// more: an allocation past it fails at once, however fast it comes, and
// the runtime dies of it, saying "out of memory".
func limitAddressSpace(mem uint64) error {
	size, err := procStatus(os.Getpid(), "VmSize:")
	if err != nil {
		return fmt.Errorf("reading the address space: %w", err)
	}
	lim := &syscall.Rlimit{Cur: size + mem, Max: size + mem}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, lim); err != nil {
		return fmt.Errorf("bounding the address space: %w", err)
	}
	return nil
}

// childSysProcAttr kills the renderer when gantry dies.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// watchRSS kills p, and says so in over, when its resident memory goes
// over mem, until done is closed.
func watchRSS(p *os.Process, mem uint64, done <-chan struct{}, over *atomic.Bool) {
	// The address-space limit the renderer sets itself stops a sudden
	// allocation at once; this watch is the second bound, for memory
	// that grows, and looks often enough for that without taking the
	// renderer's CPU (on two cores it competes with it).
	t := time.NewTicker(40 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		rss, err := residentBytes(p.Pid)
		if err != nil {
			continue // exited, or a zombie: Wait says how
		}
		if rss > mem {
			over.Store(true)
			p.Kill()
			return
		}
	}
}

// procStatus is the value, in bytes, of a field of /proc/<pid>/status
// that the kernel gives in kB (VmRSS, VmSize).
func procStatus(pid int, field string) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		line := s.Bytes()
		if rest, ok := bytes.CutPrefix(line, []byte(field)); ok {
			rest = bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))
			kb, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status %s %q", pid, field, rest)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// residentBytes is a process's resident memory: the second field of
// /proc/<pid>/statm, in pages (one short line, cheaper to read than
// status).
func residentBytes(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/statm: %q", pid, b)
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/statm: %q", pid, b)
	}
	return pages * uint64(os.Getpagesize()), nil
}
