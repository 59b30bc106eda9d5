package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is one child of the local provider.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	ports   []int
	done    chan struct{} // closed when the process has exited and been reaped
	err     error         // valid after done is closed
}

// startProcess runs bin with args, its output going to logPath.
//
// Each child gets its own process group, so a Ctrl-C in the terminal reaches
// only us and teardown stays orderly; and a parent-death signal, so that if
// this process is killed outright (SIGKILL, a test binary's timeout panic)
// the kernel still kills the children.
func startProcess(name, bin string, args []string, logPath string, ports ...int) (*process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w (run `make tools` to build it)", name, err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: creating log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, ports: ports, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, with its error.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop asks the process group to terminate, escalates to SIGKILL after grace,
// and returns once the process has been reaped.
func (p *process) stop(grace time.Duration) {
	if ok, _ := p.exited(); ok {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Anything the process forked into its group goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// tail returns the last n bytes of the process's log, for error messages.
func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// exitError describes a process that ended while it should be running.
func (p *process) exitError() error {
	_, err := p.exited()
	if err == nil {
		err = errors.New("exited with status 0")
	}
	return fmt.Errorf("%s exited early: %w; last log lines (%s):\n%s", p.name, err, p.logPath, p.tail(2000))
}
