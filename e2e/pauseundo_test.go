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

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/result"
)

// A rollback, an atomic apply's rollback and drift --correct are stopped
// (SIGSTOP) in their apply, under the inventory's Lease, for longer than
// the Lease. Another run takes the expired Lease, applies its own set and
// prunes theirs. Resumed, the undo writes nothing more, saves nothing
// over the other run's inventory, records no revision, and exits 1 with
// reason LeaseLost; the next run converges.
func TestPausedUndoIsFenced(t *testing.T) {
	t.Parallel()
	for _, command := range []string{"rollback", "atomic", "drift-correct"} {
		t.Run(command, func(t *testing.T) {
			t.Parallel()
			figures.paused.Add(1)
			ns := env.Namespace(t)
			ctx := context.Background()
			base := []string{"--inventory=paused", "--inventory-namespace=" + ns, "--lease-duration=" + pauseLease, fmt.Sprint("--concurrency=", pausedConcurrency)}
			apply := func(dir string, extra ...string) gantryRun {
				return gantry(t, append(append([]string{"apply", "--path=" + dir, "--timeout=2m", "--max-prune=100%"}, base...), extra...)...)
			}
			set := func(value, extra string) string {
				var b strings.Builder
				configMaps(&b, ns, "a", value, 1500, nil)
				b.WriteString(extra)
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, "set.yaml"), b.String())
				return dir
			}
			first := set("one", "")
			if r := apply(first); r.code != 0 {
				t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
			}
			var undo []string
			// applies counts the stage starts of apply the undo must
			// have reached before it is stopped.
			applies := 1
			switch command {
			case "rollback":
				if r := apply(set("two", "")); r.code != 0 {
					t.Fatalf("second apply: exit %d\n%s", r.code, r.stderr)
				}
				undo = append([]string{"rollback", "--to=1", "--timeout=2m", "--max-prune=100%"}, base...)
			case "atomic":
				undo = append([]string{"apply", "--path=" + set("two", "---\n"+unschedulableDeployment(ns)), "--atomic", "--timeout=20s", "--max-prune=100%"}, base...)
				applies = 2
			case "drift-correct":
				g := new(errgroup.Group)
				g.SetLimit(16)
				for i := range 1500 {
					g.Go(func() error {
						_, err := env.Client.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("a-%04d", i), types.MergePatchType,
							[]byte(`{"data":{"value":"by-hand"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"})
						return err
					})
				}
				if err := g.Wait(); err != nil {
					t.Fatal(err)
				}
				undo = append([]string{"drift", "--correct", "--timeout=2m"}, base...)
			}

			var sb strings.Builder
			want := map[string]string{}
			configMaps(&sb, ns, "b", "b", 300, want)
			b := t.TempDir()
			writeFile(t, filepath.Join(b, "set.yaml"), sb.String())

			report := filepath.Join(t.TempDir(), "report.json")
			cmd := exec.Command(gantryBinary(t), append(undo, "--kubeconfig="+env.Cluster.Kubeconfig, "--report="+report)...)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			cmd.Env = []string{"HOME=" + os.Getenv("HOME"), recordKeyEnv}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill() }()
			deadline := time.Now().Add(90 * time.Second)
			for strings.Count(stderr.String(), "▸ apply") < applies {
				if time.Now().After(deadline) || cmd.ProcessState != nil {
					t.Fatalf("the %s never reached its apply:\n%s", command, stderr.String())
				}
				time.Sleep(2 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			other := gantry(t, append([]string{"apply", "--path=" + b, "--timeout=2m", "--max-prune=100%"}, base...)...)
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if other.code != 0 {
				t.Fatalf("the other run: exit %d\n%s", other.code, other.stderr)
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
				t.Fatalf("the resumed %s was still running 60 s later:\n%s", command, stderr.String())
			}
			out := stderr.String()
			t.Logf("the resumed %s:\n%s", command, out)
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("the resumed %s: exit %d, want 1", command, code)
			}
			var res result.Result
			if raw, err := os.ReadFile(report); err != nil {
				t.Errorf("no report: %v", err)
			} else if err := json.Unmarshal(raw, &res); err != nil {
				t.Error(err)
			} else if res.Reason != result.ReasonLeaseLost {
				t.Errorf("the resumed %s's reason: %s, want %s (%s)", command, res.Reason, result.ReasonLeaseLost, res.Message)
			}

			// What the other run left stands; at most one write per
			// concurrent writer of the stopped run may land after it,
			// each of its own objects.
			after := readFaultState(t, env.Client, ns, "paused", want)
			figures.lost.Add(int32(len(after.lost)))
			figures.lateWrites.Add(int32(len(after.orphans)))
			if len(after.lost)+len(after.phantoms) > 0 || len(after.orphans) > pausedConcurrency ||
				slices.ContainsFunc(after.orphans, func(name string) bool { return !strings.HasPrefix(name, "a-") }) {
				t.Fatalf("after the resumed %s: %s", command, after)
			}
			if p := revisionsConsistent(t, env.Client, ns, "paused"); len(p) > 0 {
				t.Errorf("revisions after the resumed %s: %v", command, p)
			}
			hist := history(t, ns, "paused")
			if len(hist) == 0 || hist[0]["outcome"] != string(result.ReasonSucceeded) || hist[0]["source"] != b {
				t.Errorf("the newest revision is not the other run's: %s", numbersAndOutcomes(hist))
			}
			again := apply(b)
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
