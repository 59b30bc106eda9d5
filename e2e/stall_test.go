package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/pipeline"
	"github.com/gantry-dev/gantry/result"
)

// The API server stops answering in the middle of the apply (a proxy holds
// every request from the 50th write on), or answers every request only
// after 120 ms: with a short timeout the run ends soon after it, exits 1,
// says once what the timeout left undone, and lists the rest of what it did
// in the report. The next run converges, with nothing untracked.
func TestStalledAndSlowAPIServerEndAtTheTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hook func() func(string, int, *http.Request) proxyAction
	}{
		{"stalled", func() func(string, int, *http.Request) proxyAction {
			var stalled atomic.Bool
			return func(class string, n int, _ *http.Request) proxyAction {
				if class == "apply" && n == 50 {
					stalled.Store(true)
				}
				if stalled.Load() {
					return proxyAction{when: hold}
				}
				return proxyAction{}
			}
		}},
		{"slow", func() func(string, int, *http.Request) proxyAction {
			return func(string, int, *http.Request) proxyAction {
				return proxyAction{when: delay, do: func() { time.Sleep(120 * time.Millisecond) }}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			proxy := newAPIProxy(t, env.Cluster)
			dir := t.TempDir()
			var b strings.Builder
			want := map[string]string{}
			for i := range 400 {
				fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%03d\n  namespace: %s\ndata:\n  value: a\n---\n", i, ns)
				want[fmt.Sprintf("cm-%03d", i)] = "a"
			}
			writeFile(t, filepath.Join(dir, "set.yaml"), b.String())
			// 16 requests in flight: the slow server's 800 requests
			// (a dry-run and an apply each) then take about 6 s, past
			// the timeout.
			args := []string{"apply", "--path=" + dir, "--inventory=stalled", "--inventory-namespace=" + ns, "--concurrency=16"}
			proxy.setHook(tc.hook())
			const timeout = 5 * time.Second
			r := gantryWith(t, proxy.kubeconfig, append(args, "--timeout="+timeout.String())...)
			if r.code != entrypoint.ExitFailed {
				t.Fatalf("exit %d, want %d", r.code, entrypoint.ExitFailed)
			}
			// The inventory write and the Lease get a few seconds more:
			// a run that stops at its timeout still records what it did.
			if r.took > timeout+10*time.Second {
				t.Errorf("the run took %s with a timeout of %s", r.took, timeout)
			}
			if n := strings.Count(r.stderr, "the run's timeout passed;"); n != 1 {
				t.Errorf("the timeout is said %d times in the summary, want once:\n%s", n, r.stderr)
			}
			done, cut := 0, 0
			for _, o := range r.res.Objects {
				switch {
				case o.Action == result.Created:
					done++
				case o.Unanswered && o.Error == pipeline.TimedOut:
					cut++
				}
			}
			t.Logf("%s: %d created, %d cut short by the timeout, in %s", tc.name, done, cut, r.took.Round(time.Millisecond))
			if cut == 0 || done+cut != len(r.res.Objects) {
				t.Errorf("%d created and %d cut short of %d objects in the report", done, cut, len(r.res.Objects))
			}
			if s := readFaultState(t, env.Client, ns, "stalled", nil); figures.orphans.Add(int32(len(s.orphans))) > 0 {
				t.Errorf("after the run that timed out: %s", s)
			}
			proxy.setHook(nil)
			if again := gantry(t, args...); again.code != 0 {
				t.Fatalf("the next run: exit %d\n%s", again.code, again.stderr)
			}
			s := readFaultState(t, env.Client, ns, "stalled", want)
			figures.lost.Add(int32(len(s.lost)))
			if !s.clean() {
				t.Fatalf("after the next run: %s", s)
			}
		})
	}
}
