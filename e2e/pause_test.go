package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// pauseLease is the Lease duration of the paused-run tests: short, so that
// a pause outlasts it in seconds.
const pauseLease = "6s"

// pausedConcurrency bounds the paused run's requests in flight, and so
// the writes that may land after it was stopped.
const pausedConcurrency = 16

// configMaps writes n ConfigMaps named prefix-NNNN into a set file and
// returns what they hold, by name.
func configMaps(b *strings.Builder, ns, prefix, value string, n int, want map[string]string) {
	for i := range n {
		name := fmt.Sprintf("%s-%04d", prefix, i)
		fmt.Fprintf(b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: %s\n", name, ns, value)
		if want != nil {
			want[name] = value
		}
	}
}

// A run's runner is stopped (SIGSTOP: a paused VM, a long GC pause, a
// throttled container) in one of its stages for longer than its Lease.
// Another run on the same inventory takes the expired Lease, applies its
// own set and prunes the first run's. Then the first run is resumed. It
// writes nothing more, saves nothing over the other run's inventory, and
// exits 1 with reason LeaseLost, naming the run that took over; no object
// carries the inventory's labels without being listed in it; and the next
// run converges.
func TestPausedRunIsFenced(t *testing.T) {
	t.Parallel()
	for _, stage := range []string{"validate", "apply", "prune", "wait"} {
		t.Run(stage, func(t *testing.T) {
			t.Parallel()
			figures.paused.Add(1)
			ns := env.Namespace(t)
			ctx := context.Background()
			args := func(dir string) []string {
				return []string{"apply", "--path=" + dir, "--inventory=paused", "--inventory-namespace=" + ns,
					"--timeout=2m", "--lease-duration=" + pauseLease, "--max-prune=100%", fmt.Sprint("--concurrency=", pausedConcurrency)}
			}

			// The first run's set: many ConfigMaps, so that its
			// validate and apply take long enough to be stopped in;
			// a Deployment to wait for.
			var sa strings.Builder
			n := 300
			if stage == "validate" || stage == "apply" {
				n = 1500
			}
			configMaps(&sa, ns, "a", "a", n, nil)
			sa.WriteString("---\n" + readyDeployment(ns, "web"))
			a := t.TempDir()
			writeFile(t, filepath.Join(a, "set.yaml"), sa.String())
			if stage == "prune" {
				// Something for the first run to prune.
				var old strings.Builder
				configMaps(&old, ns, "old", "x", 200, nil)
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, "set.yaml"), old.String())
				if r := gantry(t, args(dir)...); r.code != 0 {
					t.Fatalf("setting up what to prune: exit %d\n%s", r.code, r.stderr)
				}
			}
			// The other run's set: its own objects only.
			var sb strings.Builder
			want := map[string]string{}
			configMaps(&sb, ns, "b", "b", 300, want)
			b := t.TempDir()
			writeFile(t, filepath.Join(b, "set.yaml"), sb.String())

			report := filepath.Join(t.TempDir(), "report.json")
			cmd := exec.Command(gantryBinary(t), append(args(a), "--kubeconfig="+env.Cluster.Kubeconfig, "--report="+report)...)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			cmd.Env = []string{"HOME=" + os.Getenv("HOME"), recordKeyEnv}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill() }()
			pid := fmt.Sprintf("pid %d,", cmd.Process.Pid)
			holds := func() bool {
				l, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, inventory.ConfigMapName("paused"), metav1.GetOptions{})
				return err == nil && strings.Contains(ptr.Deref(l.Spec.HolderIdentity, ""), pid)
			}
			written := func() int {
				list, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: inventory.NameLabel + "=paused"})
				if err != nil {
					return 0
				}
				return len(list.Items)
			}
			reached := map[string]func() bool{
				"validate": holds,
				"apply":    func() bool { return written() >= 20 },
				"prune":    func() bool { return strings.Contains(stderr.String(), "▸ prune") },
				"wait":     func() bool { return strings.Contains(stderr.String(), "▸ wait") },
			}[stage]
			deadline := time.Now().Add(90 * time.Second)
			for !reached() {
				if time.Now().After(deadline) || cmd.ProcessState != nil {
					t.Fatalf("the first run never reached its %s:\n%s", stage, stderr.String())
				}
				time.Sleep(2 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stoppedWith := written()
			t.Logf("stopped in its %s, %d ConfigMaps labelled", stage, stoppedWith)
			if stage == "validate" && stoppedWith > 0 {
				t.Fatalf("stopped too late: %d ConfigMaps already written", stoppedWith)
			}

			// The other run waits for the Lease to expire, then takes it.
			other := gantry(t, args(b)...)
			if other.code != 0 {
				_ = cmd.Process.Signal(syscall.SIGCONT)
				t.Fatalf("the other run: exit %d\n%s", other.code, other.stderr)
			}

			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
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
				t.Fatalf("the resumed run was still running 60 s later:\n%s", stderr.String())
			}
			out := stderr.String()
			t.Logf("the resumed run:\n%s", out)
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("the resumed run: exit %d, want 1\n%s", code, out)
			}
			var res result.Result
			if raw, err := os.ReadFile(report); err != nil {
				t.Errorf("the resumed run wrote no report: %v", err)
			} else if err := json.Unmarshal(raw, &res); err != nil {
				t.Error(err)
			} else if res.Reason != result.ReasonLeaseLost {
				t.Errorf("the resumed run's reason: %s, want %s (%s)", res.Reason, result.ReasonLeaseLost, res.Message)
			}
			if !strings.Contains(out, "taken over by gantry") {
				t.Errorf("the resumed run does not name the run that took over:\n%s", out)
			}

			// What the other run left stands: its objects, its
			// inventory. A write the paused run had under way when
			// it was stopped may still land after the other run saved
			// its inventory: at most one per concurrent writer, each
			// one of the paused run's own, none of the other run's
			// changed. The next run prunes them.
			after := readFaultState(t, env.Client, ns, "paused", want)
			figures.lost.Add(int32(len(after.lost)))
			figures.lateWrites.Add(int32(len(after.orphans)))
			if len(after.lost)+len(after.phantoms) > 0 || len(after.orphans) > pausedConcurrency ||
				slices.ContainsFunc(after.orphans, func(name string) bool { return !strings.HasPrefix(name, "a-") }) {
				t.Fatalf("after the resumed run: %s", after)
			}
			if len(after.orphans) > 0 {
				t.Logf("writes of the paused run that landed after the other run: %v", after.orphans)
			}
			again := gantry(t, args(b)...)
			if again.code != 0 {
				t.Fatalf("the next run: exit %d\n%s", again.code, again.stderr)
			}
			end := readFaultState(t, env.Client, ns, "paused", want)
			figures.orphans.Add(int32(len(end.orphans)))
			if !end.clean() {
				t.Fatalf("after the next run: %s", end)
			}
			figures.pausedFenced.Add(1)
		})
	}
}

// readyDeployment is a Deployment of one pod that the kwok node runs and
// reports ready (kwok simulates the pod: nothing is pulled or started).
func readyDeployment(ns, name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      containers: [{name: web, image: registry.k8s.io/pause:3.10}]
`, ns, name)
}
