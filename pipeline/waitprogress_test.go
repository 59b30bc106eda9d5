package pipeline

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fluxcd/cli-utils/pkg/object"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The scheduler's message for a pod that fits no node of a one-node
// cluster whose node is tainted.
const taintMessage = "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."

func unschedulablePod(name, message string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: message},
		}},
	}
}

func crashingPod(name string, backoff string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name:                 "web",
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off " + backoff + " restarting failed container=web pod=" + name + "_shop(0a1b)"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}},
		}}},
	}
}

func groupPods(list ...corev1.Pod) []string {
	var g causeGroups
	for i := range list {
		g.add(statusCauses(&list[i]))
	}
	return g.lines()
}

// Pods that say the same are said once, with their number; a crash loop
// is grouped by how its container ended, not by the back-off's message,
// which names each pod; a pod that says nothing is counted as such; the
// most common cause comes first.
func TestPodCausesAreGrouped(t *testing.T) {
	t.Parallel()
	got := groupPods(
		crashingPod("web-1", "10s"),
		unschedulablePod("web-2", taintMessage),
		crashingPod("web-3", "40s"),
		unschedulablePod("web-4", taintMessage),
		unschedulablePod("web-5", taintMessage),
		corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-6"}},
	)
	want := []string{
		"3 pods unschedulable: " + taintMessage,
		"2 pods waiting in container web (CrashLoopBackOff): last ended Error, exit code 1",
		"1 pod not ready: no reason reported yet",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A pod that gives one cause twice (its status and, read for it, an
// event with the same words) counts once; a message from the cluster
// that spans lines is put on one.
func TestPodCauseCountsOncePerPod(t *testing.T) {
	t.Parallel()
	var g causeGroups
	c := podCause{what: "with event FailedMount", msg: flat("MountVolume.SetUp failed\nfor volume \"settings\"")}
	g.add([]podCause{c, c})
	g.add([]podCause{c})
	got := g.lines()
	if len(got) != 1 || got[0] != `2 pods with event FailedMount: MountVolume.SetUp failed for volume "settings"` {
		t.Errorf("got %q", got)
	}
}

// An object's causes are bounded: each on one line of at most
// maxCauseLen runes, each once, at most maxCauses lines.
func TestBoundCauses(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 2*maxCauseLen)
	in := []string{"Available: 0/2", "Available: 0/2", long, "a\nb"}
	for i := range 10 {
		in = append(in, fmt.Sprintf("cause %d", i))
	}
	got := boundCauses(in)
	if len(got) != maxCauses {
		t.Fatalf("%d lines, want %d: %q", len(got), maxCauses, got)
	}
	if got[0] != "Available: 0/2" || got[2] != "a b" {
		t.Errorf("dupes or line breaks kept: %q", got)
	}
	if n := utf8.RuneCountInString(got[1]); n != maxCauseLen || !strings.HasSuffix(got[1], "…") {
		t.Errorf("long cause: %d runes, %q", n, got[1][len(got[1])-8:])
	}
	if want := "and 8 more causes"; got[maxCauses-1] != want {
		t.Errorf("last line %q, want %q", got[maxCauses-1], want)
	}
}

// A progress line names the first few objects, each with a short why,
// and says how many more: its length is bounded however many objects
// the wait waits for and however long their messages are.
func TestProgressLineIsBounded(t *testing.T) {
	t.Parallel()
	var waiting []waitingObject
	for i := range 500 {
		waiting = append(waiting, waitingObject{ref: fmt.Sprintf("Deployment.apps/shop/web-%d", i), why: strings.Repeat("x", 1000)})
	}
	line := progressLine(waiting, 800, 5200*time.Millisecond, 24800*time.Millisecond)
	if !strings.HasPrefix(line, "still waiting for 500 of 800 objects after 5s (25s left): Deployment.apps/shop/web-0 (xxx") {
		t.Errorf("line starts %q", line[:100])
	}
	if !strings.HasSuffix(line, "; and 497 more") || strings.Contains(line, "web-3 ") || strings.Contains(line, "\n") {
		t.Errorf("line ends %q", line[len(line)-100:])
	}
	if n := utf8.RuneCountInString(line); n > 700 {
		t.Errorf("%d runes", n)
	}
	if got := progressLine([]waitingObject{{ref: "Job/shop/migrate"}}, 1, time.Second, 0); got != "still waiting for 1 of 1 object after 1s: Job/shop/migrate" {
		t.Errorf("without a why or a deadline: %q", got)
	}
}

// A failure names at most maxFailureObjects objects, and how many more.
func TestWaitFailureIsBounded(t *testing.T) {
	t.Parallel()
	var objs []notReadyObject
	for i := range 25 {
		objs = append(objs, notReadyObject{ref: fmt.Sprintf("ConfigMap/shop/c%d", i), status: "NotFound"})
	}
	msg := waitFailure(objs, 30, 0)
	lines := strings.Split(msg, "\n")
	if len(lines) != maxFailureObjects+2 || lines[0] != "25 of 30 objects not ready:" || lines[1] != "ConfigMap/shop/c0 is NotFound" ||
		lines[len(lines)-1] != "and 15 more objects not ready: the report's objects say why" {
		t.Errorf("message:\n%s", msg)
	}
}

// The wait's progress and its failure, as docs/report.md shows them: a
// Deployment of two replicas whose pods fit no node, beside a ConfigMap
// that is ready, with a timeout of 30s. The lines are made as the wait
// makes them, from the pods' status (the same for both pods), at the
// times the wait says them.
func TestWaitGolden(t *testing.T) {
	t.Parallel()
	pods := []corev1.Pod{unschedulablePod("web-7d9f8c-2xk4q", taintMessage), unschedulablePod("web-7d9f8c-9zpl7", taintMessage)}
	podLines := groupPods(pods...)
	var progress strings.Builder
	for elapsed := defaultProgressEvery; elapsed < 30*time.Second; elapsed += defaultProgressEvery {
		why := "Available: 0/2, " + podLines[0]
		progress.WriteString(progressLine([]waitingObject{{ref: "Deployment.apps/shop/web", why: why}}, 2, elapsed, 30*time.Second-elapsed) + "\n")
	}
	causes := boundCauses(append([]string{
		"Available: 0/2",
		"condition Available=False (MinimumReplicasUnavailable): Deployment does not have minimum availability.",
	}, podLines...))
	failure := waitFailure([]notReadyObject{{ref: "Deployment.apps/shop/web", status: "InProgress", causes: causes}}, 2, 30*time.Second) + "\n"
	if strings.Count(failure, "untolerated taint") != 1 {
		t.Errorf("the scheduler's message is not said once:\n%s", failure)
	}
	golden(t, "wait-progress.txt", progress.String())
	golden(t, "wait-failure.txt", failure)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n%s", path, got)
	}
}

// infos records what the run tells its observer.
type infos struct {
	mu    sync.Mutex
	lines []string
}

func (o *infos) StageStarted(string)        {}
func (o *infos) StageFinished(result.Stage) {}
func (o *infos) ObjectDone(result.Object)   {}
func (o *infos) Info(msg string)            { o.mu.Lock(); o.lines = append(o.lines, msg); o.mu.Unlock() }
func (o *infos) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.lines...)
}
func (o *infos) progress() (n int, l string) { return countPrefix(o.all(), "still waiting for ") }

func countPrefix(lines []string, prefix string) (n int, last string) {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
			last = l
		}
	}
	return n, last
}

// unschedulableRun is a run's wait on a Deployment whose two pods
// cannot be scheduled, with timeout and progress lines every
// progressEvery.
func unschedulableRun(t *testing.T, timeout, progressEvery time.Duration) (*run, *infos) {
	t.Helper()
	two := int32(2)
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 1, UID: "uid-web"},
		Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, UnavailableReplicas: 2},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	pods := []corev1.Pod{unschedulablePod("web-1", taintMessage), unschedulablePod("web-2", taintMessage)}
	set := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-7f", Namespace: "shop", UID: "uid-web-7f", Labels: map[string]string{"app": "web"}}}
	controlledBy(set, u)
	for i := range pods {
		controlledBy(&pods[i], replicaSet("web-7f", "app", "web"))
	}
	obs := &infos{}
	r := newRun("apply", Options{Timeout: timeout, Concurrency: 4}, nil, obs)
	r.clients = &kube.Clients{
		Client: fake.NewClientBuilder().WithScheme(kube.Scheme()).WithRESTMapper(mapper).WithObjects(u.DeepCopy()).Build(),
		Kube:   kubefake.NewClientset(set, &pods[0], &pods[1]),
		Mapper: mapper,
	}
	r.progressEvery = progressEvery
	r.objects = []*sources.Object{{Unstructured: u}}
	r.res.Objects = []result.Object{{Kind: "Deployment", Namespace: "shop", Name: "web", Action: result.Created}}
	r.byID[object.UnstructuredToObjMetadata(u).String()] = 0
	return r, obs
}

// The wait, on a Deployment whose two pods cannot be scheduled, until its
// deadline: it says what it waits for as it waits, naming the Deployment
// and its pods' cause, and then fails with that cause once, with the
// number of pods, in the message and in the Deployment's health.
func TestWaitSaysProgressAndGroupsItsFailure(t *testing.T) {
	t.Parallel()
	r, obs := unschedulableRun(t, 2*time.Second, 200*time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), r.opts.Timeout)
	defer cancel()
	err := r.wait(ctx)
	if err == nil {
		t.Fatal("the wait succeeded")
	}
	n, last := obs.progress()
	if n < 3 {
		t.Errorf("%d progress lines in 2s, one every 200ms: %q", n, obs.all())
	}
	if want := "still waiting for 1 of 1 object after "; !strings.HasPrefix(last, want) ||
		!strings.Contains(last, ": Deployment.apps/shop/web (Available: 0/2, 2 pods unschedulable: 0/1 nodes are available") {
		t.Errorf("progress line %q", last)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "1 of 1 object not ready within the timeout (2s):\nDeployment.apps/shop/web is InProgress:\n") ||
		!strings.Contains(msg, "\n  2 pods unschedulable: "+taintMessage) || strings.Count(msg, "untolerated taint") != 1 {
		t.Errorf("message:\n%s", msg)
	}
	h := r.res.Objects[0].Health
	if h == nil || h.Status != "InProgress" || !strings.Contains(h.Message, "\n2 pods unschedulable: "+taintMessage) || strings.Count(h.Message, "untolerated taint") != 1 {
		t.Errorf("health %+v", h)
	}
}

// A cause that appears between two progress lines is said at once, in
// a line of its own, within causeEvery; a cause already said is not
// said again before the next progress line.
func TestANewCauseIsSaidBeforeTheNextProgressLine(t *testing.T) {
	t.Parallel()
	r, obs := unschedulableRun(t, causeEvery+causeEvery/2+time.Second, time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), r.opts.Timeout)
	defer cancel()
	start := time.Now()
	if err := r.wait(ctx); err == nil {
		t.Fatal("the wait succeeded")
	}
	n, last := obs.progress()
	if n != 1 || !strings.Contains(last, "2 pods unschedulable: 0/1 nodes are available") {
		t.Errorf("%d progress lines in %s, want 1 saying the pods' cause: %q", n, time.Since(start).Round(time.Millisecond), obs.all())
	}
}

// Pods that say nothing of why come after any cause, however many they
// are: the progress line names the first, and a cause says more.
func TestPodsWithoutACauseComeLast(t *testing.T) {
	t.Parallel()
	silent := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-9"}}
	got := groupPods(silent, silent, silent, crashingPod("web-1", "10s"))
	if len(got) != 2 || !strings.Contains(got[0], "CrashLoopBackOff") || !saysNoCause(got[1]) || saysNoCause(got[0]) {
		t.Errorf("causes %q, want the crash loop first", got)
	}
}
