package e2e

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/result"
)

// The health wait on pods a real kubelet runs (make test-node): each
// failure is said, with its cause, in the console, the job summary and
// the JSON report. Each case also logs how long after the test first saw
// the kubelet's status (a watch of the pods, Jobs and Deployments) gantry
// first said it on the console; docs/development.md records what was seen.

// nodeTestNode is the cluster's real node, or a skip.
func nodeTestNode(t *testing.T) *cluster.RealNode {
	t.Helper()
	if os.Getenv("GANTRY_NODE") != "1" {
		t.Skip("the real node: make test-node (GANTRY_NODE=1)")
	}
	env.Require(t)
	if env.Cluster.RealNode == nil {
		t.Fatal("GANTRY_NODE=1, but the cluster has no real node")
	}
	return env.Cluster.RealNode
}

var (
	nodeImagesOnce sync.Once
	nodeImagesErr  error
)

// nodeImages pushes the test images to the node's registry, once: busybox,
// and memhog (allocates until it is OOM-killed).
func nodeImages(t *testing.T, node *cluster.RealNode) (busybox, memhog string) {
	t.Helper()
	busybox = node.Registry + "/gantry-test/busybox:1"
	memhog = node.Registry + "/gantry-test/memhog:1"
	nodeImagesOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, nodeImagesErr = cluster.PushImage(ctx, cluster.Image{Ref: busybox, Busybox: node.Busybox}); nodeImagesErr != nil {
			return
		}
		_, nodeImagesErr = cluster.PushImage(ctx, cluster.Image{Ref: memhog,
			Files: []cluster.ImageFile{{Path: "memhog", Source: filepath.Join(node.BinDir, "gantry-memhog")}}, Entrypoint: []string{"/memhog"}})
	})
	if nodeImagesErr != nil {
		t.Fatal(nodeImagesErr)
	}
	return busybox, memhog
}

// onRealNode is the pod spec fields that put a pod on the real node.
const onRealNode = `nodeSelector: {"gantry.dev/node": "real"}
      tolerations: [{key: gantry.dev/node, operator: Equal, value: real, effect: NoSchedule}]`

// nodeDeployment is a Deployment of one pod on the real node; container
// is the YAML of its one container, indented by 8.
func nodeDeployment(ns, name, extraSpec, container string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 1
%[3]s  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      %[4]s
      terminationGracePeriodSeconds: 1
      containers:
%[5]s`, ns, name, extraSpec, onRealNode, container)
}

// nodeApply is one apply of gantry's binary, as a GitHub workflow runs
// it: its console line by line with when each was printed, its job
// summary and its JSON report.
type nodeApply struct {
	code    int
	lines   []timedLine
	console string
	summary string
	res     result.Result
}

func runNodeApply(t *testing.T, dir, ns, timeout string, flags ...string) nodeApply {
	t.Helper()
	tmp := t.TempDir()
	report, summary := filepath.Join(tmp, "report.json"), filepath.Join(tmp, "summary.md")
	cmd := exec.Command(gantryBinary(t), append([]string{"apply", "--path=" + dir, "--inventory=app", "--inventory-namespace=" + ns, "--timeout=" + timeout}, flags...)...)
	cmd.Env = []string{"HOME=" + os.Getenv("HOME"), "GANTRY_KUBECONFIG=" + env.Cluster.Kubeconfig, "GANTRY_REPORT=" + report, recordKeyEnv,
		"GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary, "GITHUB_OUTPUT=" + filepath.Join(tmp, "output")}
	stderr := &timedLines{}
	cmd.Stderr, cmd.Stdout = stderr, stderr
	err := cmd.Run()
	a := nodeApply{code: cmd.ProcessState.ExitCode(), lines: stderr.lines}
	if err != nil && a.code < 0 {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range a.lines {
		b.WriteString(l.text + "\n")
	}
	a.console = b.String()
	md, err := os.ReadFile(summary)
	if err != nil {
		t.Fatalf("no job summary: %v\n%s", err, a.console)
	}
	a.summary = markdownEscape.ReplaceAllString(string(md), "$1")
	js, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("no report: %v\n%s", err, a.console)
	}
	if err := json.Unmarshal(js, &a.res); err != nil {
		t.Fatal(err)
	}
	t.Logf("gantry apply: exit %d\n%s", a.code, a.console)
	return a
}

// says checks that the console, the job summary and the report's message
// all say each of want.
func (a nodeApply) says(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		for where, text := range map[string]string{"console": a.console, "job summary": a.summary, "JSON report": a.res.Message} {
			if !strings.Contains(text, w) {
				t.Errorf("the %s does not say %q:\n%s", where, w, text)
			}
		}
	}
}

// firstSaid is when gantry's console first said s.
func (a nodeApply) firstSaid(s string) time.Time {
	for _, l := range a.lines {
		if strings.Contains(l.text, s) {
			return l.at
		}
	}
	return time.Time{}
}

// kubeletWatch records when the test first saw each status of the pods,
// Jobs and Deployments of a namespace, and each of its events: the first time a text (a reason)
// appeared in any of them.
type kubeletWatch struct {
	mu    sync.Mutex
	first map[string]time.Time
	done  chan struct{}
}

func watchNamespace(t *testing.T, ns string) *kubeletWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &kubeletWatch{first: map[string]time.Time{}, done: make(chan struct{})}
	pods, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := env.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deps, err := env.Client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events, err := env.Client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, ch := range []watch.Interface{pods, jobs, deps, events} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ch.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case e, ok := <-ch.ResultChan():
					if !ok {
						return
					}
					w.record(e.Object)
				}
			}
		}()
	}
	go func() { wg.Wait(); close(w.done) }()
	t.Cleanup(func() { cancel(); <-w.done })
	return w
}

func (w *kubeletWatch) record(obj any) {
	now := time.Now()
	var texts []string
	switch o := obj.(type) {
	case *corev1.Pod:
		for _, cs := range o.Status.ContainerStatuses {
			if s := cs.State.Waiting; s != nil {
				texts = append(texts, s.Reason, s.Message)
			}
			if s := cs.LastTerminationState.Terminated; s != nil {
				texts = append(texts, s.Reason)
			}
			if s := cs.State.Terminated; s != nil {
				texts = append(texts, s.Reason)
			}
		}
		for _, c := range o.Status.Conditions {
			texts = append(texts, c.Reason, c.Message)
		}
	case *corev1.Event:
		// Kept apart: a kubelet says some reasons in an event before
		// the pod's status says them ("Error: ImagePullBackOff").
		texts = append(texts, eventText+o.Reason, eventText+o.Message)
	case *batchv1.Job:
		for _, c := range o.Status.Conditions {
			texts = append(texts, c.Reason, c.Message)
		}
	default:
		b, _ := json.Marshal(obj)
		texts = append(texts, string(b))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range texts {
		if s == "" || s == eventText {
			continue
		}
		if _, ok := w.first[s]; !ok {
			w.first[s] = now
		}
	}
}

// eventText marks the texts the watch saw in an event.
const eventText = "event\x00"

// firstSeen is when a status (or, inEvent, an event) holding s was first
// seen.
func (w *kubeletWatch) firstSeen(s string, inEvent bool) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for text, at := range w.first {
		if strings.HasPrefix(text, eventText) == inEvent && strings.Contains(text, s) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// logLag logs how long after a status said it gantry's console did.
func logLag(t *testing.T, w *kubeletWatch, a nodeApply, status, said string) {
	t.Helper()
	logLagOf(t, w, a, status, said, false)
}

// logEventLag logs how long after an event said it gantry's console did
// (a failing probe is said only in an event).
func logEventLag(t *testing.T, w *kubeletWatch, a nodeApply, text, said string) {
	t.Helper()
	logLagOf(t, w, a, text, said, true)
}

func logLagOf(t *testing.T, w *kubeletWatch, a nodeApply, text, said string, inEvent bool) {
	t.Helper()
	where := "status"
	if inEvent {
		where = "event"
	}
	seen, printed := w.firstSeen(text, inEvent), a.firstSaid(said)
	switch {
	case seen.IsZero():
		t.Logf("timing: no %s said %q", where, text)
	case printed.IsZero():
		t.Logf("timing: the console never said %q", said)
	default:
		t.Logf("timing: %q first in %s %s at %s, first on gantry's console at %s: %+.1fs",
			text, map[bool]string{false: "a", true: "an"}[inEvent], where, seen.Format("15:04:05.000"), printed.Format("15:04:05.000"), printed.Sub(seen).Seconds())
	}
}

func nodeCase(t *testing.T) (ns, dir, busybox, memhog string, w *kubeletWatch) {
	t.Helper()
	node := nodeTestNode(t)
	busybox, memhog = nodeImages(t, node)
	ns = env.Namespace(t)
	dir = t.TempDir()
	return ns, dir, busybox, memhog, watchNamespace(t, ns)
}

func failedHealth(t *testing.T, a nodeApply) {
	t.Helper()
	if a.code != 1 || a.res.Reason != result.ReasonHealthCheckFailed {
		t.Fatalf("exit %d, reason %s; want 1, HealthCheckFailed", a.code, a.res.Reason)
	}
}

// A container that exits 3 after printing, last, a line holding a
// Secret's value: CrashLoopBackOff and exit code 3, and, as the workflow
// did not ask for its log, nothing of what it printed. minReadySeconds: without it
// (or a readiness probe), the pod is Ready for the moment its container
// runs, the Deployment Available, and the wait, like kubectl rollout
// status, ends there.
func TestNodeCrashLoop(t *testing.T) {
	t.Parallel()
	ns, dir, busybox, _, w := nodeCase(t)
	token := "tok-" + strings.ToLower(rand.Text()[:12])
	writeFile(t, filepath.Join(dir, "app.yaml"), fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: %[1]s}
stringData: {token: %[2]s}
---
`, ns, token)+nodeDeployment(ns, "crasher", "  minReadySeconds: 10\n", fmt.Sprintf(`        - name: app
          image: %s
          env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: creds, key: token}}}]
          command: ["/bin/sh", "-c", "echo starting; echo \"db-$((6*7))-unreachable with $TOKEN\"; exit 3"]
`, busybox)))
	a := runNodeApply(t, dir, ns, "40s")
	failedHealth(t, a)
	a.says(t, "CrashLoopBackOff", "exit code 3")
	for where, text := range map[string]string{"console": a.console, "job summary": a.summary, "JSON report": a.res.Message} {
		if strings.Contains(text, token) {
			t.Errorf("the %s shows the Secret's value", where)
		}
		// The manifest holds the command; only the log holds what it
		// printed.
		if strings.Contains(text, "db-42-unreachable") {
			t.Errorf("the %s shows what the container printed", where)
		}
	}
	// A kubelet of v1.36 leaves the container terminated (Error) through
	// its back-off: gantry says CrashLoopBackOff from that.
	logLag(t, w, a, "Error", "Error, exit code 3")
}

// With pod-log-lines, a crash loop says the container's last log line,
// read by the kubelet, masked: the value of a Secret of the run and of a
// Secret the cluster already held, which the container is given, are
// masked alike.
func TestNodeCrashLoopLastLogLine(t *testing.T) {
	t.Parallel()
	ns, dir, busybox, _, w := nodeCase(t)
	token, held := "tok-"+strings.ToLower(rand.Text()[:12]), "held-"+strings.ToLower(rand.Text()[:12])
	if _, err := env.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: ns},
		StringData: map[string]string{"password": held}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "app.yaml"), fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: %[1]s}
stringData: {token: %[2]s}
---
`, ns, token)+nodeDeployment(ns, "crasher", "  minReadySeconds: 10\n", fmt.Sprintf(`        - name: app
          image: %s
          env:
          - {name: TOKEN, valueFrom: {secretKeyRef: {name: creds, key: token}}}
          - {name: HELD, valueFrom: {secretKeyRef: {name: held, key: password}}}
          command: ["/bin/sh", "-c", "echo starting; echo \"db-$((6*7))-unreachable with $TOKEN and $HELD\"; exit 3"]
`, busybox)))
	a := runNodeApply(t, dir, ns, "40s", "--pod-log-lines=1")
	failedHealth(t, a)
	a.says(t, "CrashLoopBackOff", "exit code 3", "exit code 3; last log line: db-42-unreachable with *** and ***")
	for where, text := range map[string]string{"console": a.console, "job summary": a.summary, "JSON report": a.res.Message} {
		if strings.Contains(text, token) || strings.Contains(text, held) {
			t.Errorf("the %s shows a Secret's value", where)
		}
	}
	// The log line is part of the crash loop's cause, which a progress
	// line says as soon as the wait reads it.
	logLag(t, w, a, "Error", "; last log line: db-42")
}

// An image the registry does not have: ErrImagePull or ImagePullBackOff,
// naming it.
func TestNodeImageMissing(t *testing.T) {
	t.Parallel()
	ns, dir, busybox, _, w := nodeCase(t)
	image := strings.TrimSuffix(busybox, "busybox:1") + "no-such-image:1"
	writeFile(t, filepath.Join(dir, "app.yaml"), nodeDeployment(ns, "missing", "", fmt.Sprintf(`        - name: app
          image: %s
`, image)))
	a := runNodeApply(t, dir, ns, "30s")
	failedHealth(t, a)
	a.says(t, image)
	for where, text := range map[string]string{"console": a.console, "job summary": a.summary, "JSON report": a.res.Message} {
		if !strings.Contains(text, "ErrImagePull") && !strings.Contains(text, "ImagePullBackOff") {
			t.Errorf("the %s says neither ErrImagePull nor ImagePullBackOff:\n%s", where, text)
		}
	}
	logLag(t, w, a, "ErrImagePull", "ErrImagePull")
	logLag(t, w, a, "ImagePullBackOff", "ImagePullBackOff")
}

// A readiness probe that fails: its message.
func TestNodeReadinessProbeFails(t *testing.T) {
	t.Parallel()
	ns, dir, busybox, _, w := nodeCase(t)
	writeFile(t, filepath.Join(dir, "app.yaml"), nodeDeployment(ns, "unready", "", fmt.Sprintf(`        - name: app
          image: %s
          command: ["/bin/sleep", "3600"]
          readinessProbe:
            exec: {command: ["/bin/sh", "-c", "echo database not reachable; exit 1"]}
            periodSeconds: 1
`, busybox)))
	a := runNodeApply(t, dir, ns, "30s")
	failedHealth(t, a)
	a.says(t, "Readiness probe failed", "database not reachable")
	logEventLag(t, w, a, "Readiness probe failed", "Readiness probe failed")
}

// A container over its memory limit: OOMKilled, with the limit (and
// minReadySeconds, as for the crash loop).
func TestNodeOOMKilled(t *testing.T) {
	t.Parallel()
	ns, dir, _, memhog, w := nodeCase(t)
	writeFile(t, filepath.Join(dir, "app.yaml"), nodeDeployment(ns, "hog", "  minReadySeconds: 10\n", fmt.Sprintf(`        - name: app
          image: %s
          resources: {limits: {memory: 48Mi}}
`, memhog)))
	a := runNodeApply(t, dir, ns, "40s")
	failedHealth(t, a)
	a.says(t, "OOMKilled", "48Mi")
	logLag(t, w, a, "OOMKilled", "OOMKilled")
}

// A ConfigMap a container needs that does not exist:
// CreateContainerConfigError, naming it.
func TestNodeConfigMapMissing(t *testing.T) {
	t.Parallel()
	ns, dir, busybox, _, w := nodeCase(t)
	writeFile(t, filepath.Join(dir, "app.yaml"), nodeDeployment(ns, "configless", "", fmt.Sprintf(`        - name: app
          image: %s
          command: ["/bin/sleep", "3600"]
          env: [{name: MODE, valueFrom: {configMapKeyRef: {name: settings, key: mode}}}]
`, busybox)))
	a := runNodeApply(t, dir, ns, "30s")
	failedHealth(t, a)
	a.says(t, "CreateContainerConfigError", `configmap "settings" not found`)
	logLag(t, w, a, "CreateContainerConfigError", "CreateContainerConfigError")
}

// A Job whose pods fail until its backoff limit: BackoffLimitExceeded.
func TestNodeJobFails(t *testing.T) {
	t.Parallel()
	ns, dir, busybox, _, w := nodeCase(t)
	writeFile(t, filepath.Join(dir, "job.yaml"), fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  namespace: %s
spec:
  backoffLimit: 1
  template:
    spec:
      %s
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
        - name: migrate
          image: %s
          command: ["/bin/sh", "-c", "echo migration 42 failed; exit 1"]
`, ns, onRealNode, busybox))
	a := runNodeApply(t, dir, ns, "90s")
	failedHealth(t, a)
	a.says(t, "BackoffLimitExceeded")
	logLag(t, w, a, "BackoffLimitExceeded", "BackoffLimitExceeded")
}

// A rollout that succeeds: two pods, ready by their probe.
func TestNodeRolloutSucceeds(t *testing.T) {
	t.Parallel()
	ns, dir, busybox, _, _ := nodeCase(t)
	writeFile(t, filepath.Join(dir, "app.yaml"), strings.Replace(nodeDeployment(ns, "web", "", fmt.Sprintf(`        - name: app
          image: %s
          command: ["/bin/sleep", "3600"]
          readinessProbe:
            exec: {command: ["/bin/true"]}
            periodSeconds: 1
`, busybox)), "replicas: 1", "replicas: 2", 1))
	began := time.Now()
	a := runNodeApply(t, dir, ns, "60s")
	if a.code != 0 || a.res.Reason != "" && a.res.Reason != result.ReasonSucceeded {
		t.Fatalf("exit %d, reason %s; want success", a.code, a.res.Reason)
	}
	d, err := env.Client.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || d.Status.ReadyReplicas != 2 {
		t.Fatalf("after the apply: %v, %d ready", err, d.Status.ReadyReplicas)
	}
	t.Logf("timing: the rollout of 2 pods took %s, gantry's whole apply", time.Since(began).Round(100*time.Millisecond))
}

// A rollout that makes no progress for longer than its
// progressDeadlineSeconds: ProgressDeadlineExceeded, before the timeout.
func TestNodeRolloutStalls(t *testing.T) {
	t.Parallel()
	ns, dir, busybox, _, w := nodeCase(t)
	writeFile(t, filepath.Join(dir, "app.yaml"), nodeDeployment(ns, "stuck", "  progressDeadlineSeconds: 10\n", fmt.Sprintf(`        - name: app
          image: %s
          command: ["/bin/sleep", "3600"]
          readinessProbe:
            exec: {command: ["/bin/sh", "-c", "echo cache cold; exit 1"]}
            periodSeconds: 1
`, busybox)))
	a := runNodeApply(t, dir, ns, "60s")
	failedHealth(t, a)
	a.says(t, "ProgressDeadlineExceeded")
	logLag(t, w, a, "ProgressDeadlineExceeded", "ProgressDeadlineExceeded")
}
