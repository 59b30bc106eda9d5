package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
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
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cmd.Env = []string{"HOME=" + os.Getenv("HOME"), recordKeyEnv}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once the build has started (on a loaded machine the process takes
	// a while to get there), and a little into it.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "▸ build"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the build never started:\n%s", stderr.String())
		}
	}
	time.Sleep(200 * time.Millisecond)
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

// SIGTERM in the middle of the wait (a Deployment that cannot be
// scheduled, so the wait would last until the timeout): gantry stops
// within seconds, exits 1 with reason Cancelled, has saved the inventory
// with what it wrote, releases the inventory's lock, and says what was
// done; the next run converges.
func TestSIGTERMDuringTheWait(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.yaml"), configMap(ns, "settings"))
	writeFile(t, filepath.Join(dir, "stuck.yaml"), unschedulableDeployment(ns))
	report := filepath.Join(t.TempDir(), "report.json")
	args := []string{"apply", "--path=" + dir, "--inventory=cancel", "--inventory-namespace=" + ns, "--timeout=5m",
		"--kubeconfig=" + env.Cluster.Kubeconfig, "--report=" + report}
	cmd := exec.Command(gantryBinary(t), args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cmd.Env = []string{"HOME=" + os.Getenv("HOME"), recordKeyEnv}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "▸ wait") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("never reached the wait:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit code is checked below
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("still running 10 s after SIGTERM\n%s", stderr.String())
	}
	t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "Cancelled") {
		t.Errorf("exit %d\n%s", code, stderr.String())
	}
	ids := entryIDs(t, ns, "cancel")
	if len(ids) != 2 {
		t.Errorf("inventory after SIGTERM: %v, want the ConfigMap and the Deployment", ids)
	}
	ctx := context.Background()
	if _, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, inventory.ConfigMapName("cancel"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease after SIGTERM: %v, want released", err)
	}
	if b, err := os.ReadFile(report); err != nil || !strings.Contains(string(b), `"reason": "Cancelled"`) {
		t.Errorf("report: %v\n%s", err, b)
	}
	// The cancelled deploy is recorded as such: drift and rollback know
	// what it applied.
	if got := numbersAndOutcomes(history(t, ns, "cancel")); got != "1:Cancelled" {
		t.Errorf("history after SIGTERM: %s, want 1:Cancelled", got)
	}
	// The next run (without the stuck Deployment) converges.
	if err := os.Remove(filepath.Join(dir, "stuck.yaml")); err != nil {
		t.Fatal(err)
	}
	if r := gantry(t, "apply", "--path="+dir, "--inventory=cancel", "--inventory-namespace="+ns, "--timeout=60s"); r.code != 0 || counts(t, r)[result.Deleted] != 1 {
		t.Errorf("next run: exit %d, %v\n%s", r.code, counts(t, r), r.stderr)
	}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The connection to the API server breaks in the middle of a run, and
// the server refuses connections for a second (as one restarting does):
// the requests in flight are retried with backoff and the run succeeds,
// where each object would otherwise fail. The cut comes once the proxy
// has carried enough bytes for discovery to be done and the set's
// requests to be under way.
func TestRetriesRideOutABriefOutage(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	target := strings.TrimPrefix(env.Cluster.RESTConfig.Host, "https://")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var (
		mu       sync.Mutex
		live     []net.Conn
		carried  atomic.Int64
		cutAt    atomic.Int64 // unix nanos of the cut, 0 before it
		refused  atomic.Int32
		cutOnce  sync.Once
		cutAfter = int64(400 << 10)
	)
	cut := func() {
		cutOnce.Do(func() {
			cutAt.Store(time.Now().UnixNano())
			mu.Lock()
			for _, c := range live {
				c.Close()
			}
			mu.Unlock()
		})
	}
	count := func(dst io.Writer, src io.Reader) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
				if carried.Add(int64(n)) > cutAfter {
					cut()
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			if at := cutAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < time.Second {
				refused.Add(1)
				conn.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				conn.Close()
				continue
			}
			mu.Lock()
			live = append(live, conn, up)
			mu.Unlock()
			go func() { count(up, conn); up.Close() }()
			go func() { count(conn, up); conn.Close() }()
		}
	}()
	kc, err := os.ReadFile(env.Cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	proxied := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, proxied, strings.ReplaceAll(string(kc), target, l.Addr().String()))
	dir := t.TempDir()
	for i := range 300 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("cm%03d.yaml", i)), configMap(ns, fmt.Sprintf("cm%03d", i)))
	}
	var stdout, stderr bytes.Buffer
	code := entrypoint.Run(context.Background(), []string{"apply", "--path=" + dir, "--inventory=outage", "--inventory-namespace=" + ns, "--kubeconfig=" + proxied, "--timeout=90s"},
		[]string{"HOME=" + os.Getenv("HOME")}, &stdout, &stderr)
	t.Logf("cut after %d bytes, %d connections refused meanwhile", cutAfter, refused.Load())
	if cutAt.Load() == 0 {
		t.Fatalf("the connection was never cut (%d bytes carried)", carried.Load())
	}
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if list, err := env.Client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{}); err != nil || len(list.Items) != 302 {
		t.Errorf("%d ConfigMaps (%v), want 300, the inventory and kube-root-ca.crt", len(list.Items), err)
	}
}

// SIGTERM at seeded points of the apply of 4,000 ConfigMaps from one
// file (2 points under make test, 20 under make soak): every run stops
// within 5 s of the signal, as a runner's clean stop needs (GitHub kills
// a step about 10 s after cancelling it), exits 1 with reason Cancelled,
// records the revision and gives the Lease back.
func TestSIGTERMMidApplyStopsInTime(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the gantry binary")
	}
	ns := env.Namespace(t)
	dir := t.TempDir()
	write := func(value string) {
		var b strings.Builder
		configMaps(&b, ns, "stop", value, 4000, nil)
		writeFile(t, filepath.Join(dir, "set.yaml"), b.String())
	}
	points := 2
	if soak() {
		points = 20
	}
	rng := rand.New(rand.NewPCG(faultSeed(t), 0x5157))
	var took []time.Duration
	for i := range points {
		write(fmt.Sprintf("run-%d", i))
		delay := time.Duration(rng.IntN(1500)) * time.Millisecond
		cmd := exec.Command(gantryBinary(t), "apply", "--path="+dir, "--inventory=stop", "--inventory-namespace="+ns, "--timeout=5m",
			"--max-prune=100%", "--kubeconfig="+env.Cluster.Kubeconfig)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		cmd.Env = []string{"HOME=" + os.Getenv("HOME"), recordKeyEnv}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for !strings.Contains(stderr.String(), "▸ apply") {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("never reached the apply:\n%s", stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(delay)
		start := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait() // the exit code is checked below
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("point %d (%s into the apply): still running 60 s after SIGTERM", i, delay)
		}
		stopped := time.Since(start)
		took = append(took, stopped)
		out := stderr.String()
		if code := cmd.ProcessState.ExitCode(); code != 1 && code != 0 {
			t.Errorf("point %d: exit %d\n%s", i, code, out)
		}
		if stopped > 5*time.Second {
			t.Errorf("point %d (%s into the apply): stopped %s after SIGTERM, want within 5 s", i, delay, stopped.Round(time.Millisecond))
		}
		if !strings.Contains(out, "Cancelled") && !strings.Contains(out, "ReconciliationSucceeded") {
			t.Errorf("point %d: neither cancelled nor done:\n%s", i, out)
		}
		if _, err := env.Client.CoordinationV1().Leases(ns).Get(context.Background(), inventory.ConfigMapName("stop"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("point %d: the Lease after SIGTERM: %v, want given back", i, err)
		}
	}
	slices.Sort(took)
	t.Logf("stopped after SIGTERM over %d points: min %s, median %s, max %s", len(took), took[0].Round(time.Millisecond),
		took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}
