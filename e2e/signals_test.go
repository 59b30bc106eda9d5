package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A runner cancels a job with SIGTERM: a long kustomize build (3000
// resources in one kustomization, seconds of CPU) stops at once, exits
// non-zero and says why, instead of when the build returns.
func TestSIGTERMStopsALongBuild(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the gantry binary")
	}
	dir := t.TempDir()
	var k strings.Builder
	k.WriteString("resources:\n")
	for i := range 3000 {
		name := fmt.Sprintf("cm%04d.yaml", i)
		writeFile(t, filepath.Join(dir, name), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\ndata:\n  a: v\n", i))
		k.WriteString("- " + name + "\n")
	}
	writeFile(t, filepath.Join(dir, "kustomization.yaml"), k.String())

	cmd := exec.Command(gantryBinary(t), "build", "--path="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = []string{"HOME=" + os.Getenv("HOME")}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(start)
		if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "Cancelled") || !strings.Contains(stderr.String(), "build stopped: terminated signal received") {
			t.Errorf("exit %d (%v)\n%s", cmd.ProcessState.ExitCode(), err, stderr.String())
		}
		t.Logf("stopped %s after SIGTERM", took.Round(time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("took %s to stop", took)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("still running 10 s after SIGTERM\n%s", stderr.String())
	}
}
