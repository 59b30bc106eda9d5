package pipeline

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/gantry-dev/gantry/result"
)

// defaultProgressEvery is how often the wait says which objects it still
// waits for: a plain line in the log, as CI logs show no spinner.
const defaultProgressEvery = 5 * time.Second

// causeEvery is how often, between progress lines, the wait reads what
// the objects it names say, to say a new cause at once.
const causeEvery = time.Second

// Bounds of what the wait prints: a line of a failure, the why of an
// object in a progress line, the objects a progress line names, the
// causes said per object and the objects a failure names.
const (
	maxCauseLen       = 300
	maxProgressWhyLen = 160
	maxProgressNamed  = 3
	maxCauses         = 6
	maxFailureObjects = 10
)

// podCause is one reason a pod is not ready, as said once for every pod
// that gives it: what (unschedulable, waiting in container web
// (ImagePullBackOff), ...) and the cluster's message, on one line.
type podCause struct {
	what, msg string
	// crash, when its container is named, is the container that ended
	// with an error, whose log may say why (logCause).
	crash crashed
}

func (c podCause) String() string {
	if c.msg == "" {
		return c.what
	}
	return c.what + ": " + c.msg
}

// statusCauses says why a pod is not ready from its status alone: it
// cannot be scheduled, a container waits for a reason other than being
// created, or ended with an error.
func statusCauses(p *corev1.Pod) []podCause {
	var out []podCause
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			out = append(out, podCause{what: strings.ToLower(flat(c.Reason)), msg: flat(c.Message)})
		}
	}
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			c := podCause{what: fmt.Sprintf("waiting in container %s (%s)", flat(cs.Name), flat(w.Reason)), msg: flat(w.Message)}
			if t := cs.LastTerminationState.Terminated; w.Reason == "CrashLoopBackOff" && t != nil {
				// The back-off's message names the pod and its delay,
				// which differ from pod to pod; how the container
				// ended does not.
				c.msg = fmt.Sprintf("last ended %s, exit code %d", flat(t.Reason), t.ExitCode) + oomLimit(p, cs.Name, t)
				c.crash = crashed{container: cs.Name, previous: true}
			}
			out = append(out, c)
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			if cs.RestartCount > 0 && p.Spec.RestartPolicy != corev1.RestartPolicyNever {
				// A crash loop as a kubelet of v1.36 shows it: the
				// container stays terminated, as it ended, through its
				// back-off (earlier kubelets said CrashLoopBackOff).
				out = append(out, podCause{what: fmt.Sprintf("waiting in container %s (CrashLoopBackOff)", flat(cs.Name)),
					msg:   fmt.Sprintf("last ended %s, exit code %d", flat(t.Reason), t.ExitCode) + oomLimit(p, cs.Name, t),
					crash: crashed{container: cs.Name}})
				continue
			}
			out = append(out, podCause{what: fmt.Sprintf("with container %s terminated (%s, exit code %d%s)", flat(cs.Name), flat(t.Reason), t.ExitCode, oomLimit(p, cs.Name, t)),
				crash: crashed{container: cs.Name}})
		}
		// Running again after a failure: a crash loop between two of
		// its ends, which a pod Ready for less than minReadySeconds
		// shows.
		if t := cs.LastTerminationState.Terminated; cs.State.Running != nil && cs.RestartCount > 0 && t != nil && t.ExitCode != 0 {
			out = append(out, podCause{what: fmt.Sprintf("with container %s restarted", flat(cs.Name)),
				msg:   fmt.Sprintf("last ended %s, exit code %d", flat(t.Reason), t.ExitCode) + oomLimit(p, cs.Name, t),
				crash: crashed{container: cs.Name, previous: true}})
		}
	}
	return out
}

// oomLimit is, for a container the kernel killed for its memory, the
// limit it went over: ", memory limit 64Mi" (nothing when it has none).
func oomLimit(p *corev1.Pod, container string, t *corev1.ContainerStateTerminated) string {
	if t.Reason != "OOMKilled" {
		return ""
	}
	for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name != container {
			continue
		}
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			return ", memory limit " + q.String()
		}
	}
	return ""
}

// maxEventsRead bounds the Warning events read of one pod, and
// maxEventCauses the causes taken from them: anyone who may write events
// in the namespace can write them about any pod (a kubelet says each of
// its warnings once, with a count).
const (
	maxEventsRead  = 50
	maxEventCauses = 5
)

// eventCauses says why a pod is not ready from its Warning events: the
// first maxEventCauses distinct ones.
func eventCauses(events []corev1.Event) []podCause {
	var out []podCause
	for _, e := range events {
		c := podCause{what: "with event " + flat(e.Reason), msg: flat(e.Message)}
		if slices.Contains(out, c) {
			continue
		}
		if len(out) == maxEventCauses {
			break
		}
		out = append(out, c)
	}
	return out
}

// noCause is the cause of a pod that is not ready and says nothing of why.
var noCause = podCause{what: "not ready", msg: "no reason reported yet"}

// saysNoCause: line, of causeGroups' lines, is of the pods that say
// nothing of why.
func saysNoCause(line string) bool { return strings.HasSuffix(line, " "+noCause.String()) }

// isNote: line, of podReasons' lines, is a note of gantry's on what it
// read, "(of the first 50 pods)", not a cause (each of which starts
// with its number of pods).
func isNote(line string) bool { return strings.HasPrefix(line, "(") }

// causeGroups counts, for each distinct cause, the pods that give it: a
// cause given twice by one pod (its condition and its event) counts
// once, and the same cause of many pods is said once.
type causeGroups struct {
	order []string
	pods  map[string]int
}

// add counts one pod's causes.
func (g *causeGroups) add(causes []podCause) {
	if g.pods == nil {
		g.pods = map[string]int{}
	}
	if len(causes) == 0 {
		causes = []podCause{noCause}
	}
	seen := map[string]bool{}
	for _, c := range causes {
		s := c.String()
		if seen[s] {
			continue
		}
		seen[s] = true
		if g.pods[s] == 0 {
			if len(g.order) == maxCauseGroups {
				// Bounded: no report shows more than maxCauses.
				continue
			}
			g.order = append(g.order, s)
		}
		g.pods[s]++
	}
}

// maxCauseGroups bounds the distinct causes counted of one workload's
// pods.
const maxCauseGroups = 50

// lines are the causes, most pods first (then as first seen), each as
// "2 pods unschedulable: 0/3 nodes are available: ..."; pods that say
// nothing of why come last, however many: any cause says more.
func (g *causeGroups) lines() []string {
	order := append([]string(nil), g.order...)
	none := noCause.String()
	sort.SliceStable(order, func(i, j int) bool {
		if (order[i] == none) != (order[j] == none) {
			return order[j] == none
		}
		return g.pods[order[i]] > g.pods[order[j]]
	})
	out := make([]string, len(order))
	for i, s := range order {
		out[i] = pods(g.pods[s]) + " " + s
	}
	return out
}

func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// boundCauses keeps an object's causes readable: each on one line of at
// most maxCauseLen runes, the same line once, at most maxCauses of them
// and how many more there were.
func boundCauses(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		s = clip(flat(s), maxCauseLen)
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	if len(out) > maxCauses {
		more := len(out) - (maxCauses - 1)
		out = append(out[:maxCauses-1], fmt.Sprintf("and %d more causes", more))
	}
	return out
}

// notReadyObject is an object the wait gave up on, with why: one cause
// per line.
type notReadyObject struct {
	ref, status string
	causes      []string
}

// waitFailure is the wait's failure: how many objects are not ready, and
// for each (at most maxFailureObjects) its status and causes, one per
// line, indented under it.
func waitFailure(objects []notReadyObject, total int, timeout time.Duration) string {
	var b strings.Builder
	what := "not ready"
	if timeout > 0 {
		what = fmt.Sprintf("not ready within the timeout (%s)", timeout)
	}
	fmt.Fprintf(&b, "%d of %s %s:", len(objects), plural(total, "1 object", fmt.Sprintf("%d objects", total)), what)
	for i, o := range objects {
		if i == maxFailureObjects {
			fmt.Fprintf(&b, "\nand %d more %s not ready: the report's objects say why", len(objects)-i, plural(len(objects)-i, "object", "objects"))
			break
		}
		fmt.Fprintf(&b, "\n%s is %s", o.ref, o.status)
		if len(o.causes) > 0 {
			b.WriteString(":")
		}
		for _, c := range o.causes {
			b.WriteString("\n  " + c)
		}
	}
	return b.String()
}

// waitingObject is an object a progress line names, and a short why.
type waitingObject struct {
	ref, why string
}

// progressLine says which objects the wait still waits for, and why, on
// one line of bounded length: the first maxProgressNamed objects, and how
// many more. left is the time until the deadline (under half a second:
// not said).
func progressLine(waiting []waitingObject, total int, elapsed, left time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "still waiting for %d of %s after %s", len(waiting), plural(total, "1 object", fmt.Sprintf("%d objects", total)), roundSeconds(elapsed))
	if left := roundSeconds(left); left > 0 {
		fmt.Fprintf(&b, " (%s left)", left)
	}
	b.WriteString(": ")
	for i, w := range waiting {
		if i == maxProgressNamed {
			fmt.Fprintf(&b, "; and %d more", len(waiting)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(w.ref)
		if why := clip(flat(w.why), maxProgressWhyLen); why != "" {
			b.WriteString(" (" + why + ")")
		}
	}
	return b.String()
}

func roundSeconds(d time.Duration) time.Duration {
	return max(d.Round(time.Second), 0)
}

// flat puts a message from the cluster on one line.
func flat(s string) string { return result.OneLine(s) }

// clip cuts s to at most n runes, marking the cut with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return strings.TrimRight(string(runes[:n-1]), " ") + "…"
}
