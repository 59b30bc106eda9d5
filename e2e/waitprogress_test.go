package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/reporters"
	"github.com/gantry-dev/gantry/result"
)

// markdownEscape is a character Markdown reads as itself.
var markdownEscape = regexp.MustCompile("\\\\([!-/:-@\\[-`{-~])")

// timedLines keeps what is written to it, line by line, with when each
// line was ended.
type timedLines struct {
	mu      sync.Mutex
	partial strings.Builder
	lines   []timedLine
}

type timedLine struct {
	at   time.Time
	text string
}

func (w *timedLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for _, b := range p {
		if b == '\n' {
			w.lines = append(w.lines, timedLine{now, w.partial.String()})
			w.partial.Reset()
			continue
		}
		w.partial.WriteByte(b)
	}
	return len(p), nil
}

// An apply whose Deployment cannot be scheduled (a nodeSelector no node
// matches; the real scheduler decides, the nodes are kwok's, and the
// pods, never bound, stay Pending) waits until its timeout. While it
// waits, it says every 5 s, on a plain line, which object it waits for
// and why, its pods' cause included; then it fails saying that cause
// once, with the number of pods, in the log, the JSON report's message
// and health, and the Markdown summary.
func TestWaitSaysWhatItWaitsForAndGroupsWhy(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %s
spec:
  progressDeadlineSeconds: 600
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector: {gantry.dev/no-such-node: "true"}
      containers:
        - name: web
          image: registry.k8s.io/pause:3.10
`, ns))
	report := filepath.Join(t.TempDir(), "report.json")
	environ := []string{"HOME=" + os.Getenv("HOME"), "GANTRY_KUBECONFIG=" + env.Cluster.Kubeconfig, "GANTRY_REPORT=" + report, recordKeyEnv}
	var stdout bytes.Buffer
	stderr := &timedLines{}
	code := entrypoint.Run(context.Background(),
		[]string{"apply", "--path=" + dir, "--inventory=web", "--inventory-namespace=" + ns, "--timeout=20s"}, environ, &stdout, stderr)
	end := time.Now()
	var log strings.Builder
	for _, l := range stderr.lines {
		log.WriteString(l.text + "\n")
	}
	t.Logf("exit %d\n%s", code, log.String())
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var res result.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if code != entrypoint.ExitFailed || res.Reason != result.ReasonHealthCheckFailed {
		t.Fatalf("exit %d, reason %s; want 1, HealthCheckFailed", code, res.Reason)
	}

	// Progress, as it happens: lines 5 s apart, the first well before the
	// end, each naming the Deployment; once the scheduler has judged the
	// pods, with their cause.
	dep := "Deployment.apps/" + ns + "/web"
	var progress []timedLine
	failedAt := time.Time{}
	for _, l := range stderr.lines {
		if strings.HasPrefix(l.text, "  still waiting for 1 of 1 object after ") {
			progress = append(progress, l)
		}
		if strings.Contains(l.text, "wait failed after") {
			failedAt = l.at
		}
	}
	if len(progress) < 2 {
		t.Fatalf("%d progress lines in a wait of about 20s, want one every 5s", len(progress))
	}
	if failedAt.IsZero() || end.Sub(progress[0].at) < 8*time.Second || !progress[len(progress)-1].at.Before(failedAt) {
		t.Errorf("progress at %v, the wait failed at %v, the run ended at %v: not as it waited",
			progress[0].at.Format(time.StampMilli), failedAt.Format(time.StampMilli), end.Format(time.StampMilli))
	}
	for i, l := range progress {
		if !strings.Contains(l.text, dep+" (") || len(l.text) > 600 {
			t.Errorf("progress line %q does not name %s, or is long", l.text, dep)
		}
		if i > 0 {
			if gap := l.at.Sub(progress[i-1].at); gap < 4*time.Second || gap > 8*time.Second {
				t.Errorf("progress lines %s apart, want 5s", gap)
			}
		}
	}
	if last := progress[len(progress)-1].text; !strings.Contains(last, "2 pods unschedulable: 0/") {
		t.Errorf("the last progress line does not say why: %q", last)
	}

	// The failure: the scheduler's message once, for both pods, in the
	// message and the Deployment's health; in the log's summary once.
	const why = "node affinity/selector"
	if !strings.Contains(res.Message, "\n  2 pods unschedulable: 0/") || strings.Count(res.Message, why) != 1 || strings.Contains(res.Message, "1 pod unschedulable") {
		t.Errorf("message does not group the pods' cause:\n%s", res.Message)
	}
	if len(res.Message) > 2000 {
		t.Errorf("message of %d bytes", len(res.Message))
	}
	o := objectByRef(gantryRun{res: &res}, dep)
	if o == nil || o.Health == nil || !strings.Contains(o.Health.Message, "2 pods unschedulable: 0/") || strings.Count(o.Health.Message, why) != 1 {
		t.Errorf("health of the Deployment: %+v", o)
	}
	_, summary, ok := strings.Cut(log.String(), "gantry apply: HealthCheckFailed")
	if !ok || !strings.Contains(summary, "2 pods unschedulable: 0/") || strings.Count(summary, why) != 1 {
		t.Errorf("the log's summary does not group the pods' cause:\n%s", summary)
	}
	md := reporters.Markdown(&res, reporters.Page{}, reporters.ObjectsOnly)
	var quoted strings.Builder
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "> ") {
			// As it reads: without Markdown's escapes.
			quoted.WriteString(markdownEscape.ReplaceAllString(l, "$1") + "\n")
		}
	}
	if !strings.Contains(quoted.String(), "2 pods unschedulable: 0/") || strings.Count(quoted.String(), why) != 1 {
		t.Errorf("the Markdown summary's message does not group the pods' cause:\n%s", md)
	}
}
