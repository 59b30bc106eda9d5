package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gantry-dev/gantry/result"
)

// configMaps writes n ConfigMaps cm-0000... (all in ns, or without a
// namespace when ns is empty) as one YAML stream in dir.
func configMaps(dir, ns string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var s strings.Builder
	for i := range n {
		fmt.Fprintf(&s, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%04d\n", i)
		if ns != "" {
			fmt.Fprintf(&s, "  namespace: %s\n", ns)
		}
		fmt.Fprintf(&s, "data:\n  key: v1\n  payload: %s\n", strings.Repeat("x", 200))
	}
	return os.WriteFile(filepath.Join(dir, "configmaps.yaml"), []byte(s.String()), 0o644)
}

// pruneScenario: 1000 objects applied, then a run with only the first half,
// so that gantry prunes 500; the floor deletes the same 500 with DELETEs
// from its workers. kubectl has no inventory-based prune to compare with
// (its --prune needs a label selector or the alpha ApplySet).
//
// The run also validates the 500 objects it keeps (a dry-run each), which
// the floor does not; the prune stage's own time, from gantry's JSON
// report, is the second row.
func (b *bench) pruneScenario(ctx context.Context) []row {
	var g, stage, f []time.Duration
	half := b.objects / 2
	for range b.reps {
		ns, err := b.namespace(ctx, "floor")
		b.must(err)
		b.must(b.floor(ctx, ns, false))
		d, err := timed(func() error { return b.deleteFloor(ctx, ns, half, b.objects) })
		b.must(err)
		f = append(f, d)

		ns, err = b.namespace(ctx, "gantry")
		b.must(err)
		all, kept := filepath.Join(b.work, ns, "all"), filepath.Join(b.work, ns, "kept")
		b.must(configMaps(all, ns, b.objects))
		b.must(configMaps(kept, ns, half))
		args := func(path string) []string {
			return []string{"apply", "--path=" + path, "--inventory=bench", "--inventory-namespace=" + ns, "--wait=false", "--prune=true", "--timeout=5m"}
		}
		b.must(b.exec(b.gantry, args(all)...))
		report := filepath.Join(b.work, ns, "report.json")
		d, err = timed(func() error { return b.exec(b.gantry, append(args(kept), "--report="+report)...) })
		b.must(err)
		g = append(g, d)
		sd, err := stageDuration(report, "prune")
		b.must(err)
		stage = append(stage, sd)
		b.logf("prune: floor %s, gantry %s (prune stage %s)", f[len(f)-1], d, sd)
	}
	n := fmt.Sprintf("%d of %d", b.objects-half, b.objects)
	return []row{
		{name: "prune " + n + ": the whole run", gantry: median(g), flr: median(f), ratios: ratios(g, f), target: "≤ 2.0 × floor"},
		{name: "prune " + n + ": the prune stage", gantry: median(stage), flr: median(f), ratios: ratios(stage, f), target: "≤ 2.0 × floor"},
	}
}

// stageDuration reads one stage's duration from a gantry JSON report.
func stageDuration(report, stage string) (time.Duration, error) {
	b, err := os.ReadFile(report)
	if err != nil {
		return 0, err
	}
	var res result.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return 0, err
	}
	for _, s := range res.Stages {
		if s.Name == stage {
			return s.Duration, nil
		}
	}
	return 0, fmt.Errorf("%s: no stage %s", report, stage)
}

// deleteFloor deletes cm-from..cm-to-1 with the floor's workers.
func (b *bench) deleteFloor(ctx context.Context, ns string, from, to int) error {
	return b.workersDo(from, to, func(i int) error {
		return b.client.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("cm-%04d", i), metav1.DeleteOptions{})
	})
}

// workersDo runs f for from..to-1 on the floor's workers and returns the
// first error. It starts from a new connection, as a tool does: the
// harness's own requests must not hand the floor a warm one.
func (b *bench) workersDo(from, to int, f func(i int) error) error {
	utilnet.CloseIdleConnectionsFor(b.http.Transport)
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range b.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := f(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return firstErr
}

// waitScenario applies Deployments with a Service each and waits: the time
// from the last Deployment becoming Available (seen by a watch of our own)
// to the tool returning. kubectl: apply, then `kubectl wait` for the
// Available condition.
func (b *bench) waitScenario(ctx context.Context) row {
	var g, k []time.Duration
	for rep := range b.reps {
		ns, err := b.namespace(ctx, "wait-gantry")
		b.must(err)
		dir := filepath.Join(b.work, ns)
		b.must(deployments(dir, ns, b.deployments))
		d, err := b.waitLatency(ctx, ns, func() error {
			return b.exec(b.gantry, "apply", "--path="+dir, "--inventory=bench", "--inventory-namespace="+ns, "--wait=true", "--timeout=5m")
		})
		b.must(err)
		g = append(g, d)
		b.logf("wait: gantry returned %s after the last Deployment was Available", d)
		b.deleteNamespace(ctx, ns)

		if rep < b.kubectlReps {
			ns, err := b.namespace(ctx, "wait-kubectl")
			b.must(err)
			dir := filepath.Join(b.work, ns)
			b.must(deployments(dir, ns, b.deployments))
			d, err := b.waitLatency(ctx, ns, func() error {
				if err := b.exec(b.kubectl, "apply", "--server-side", "-f", filepath.Join(dir, "app.yaml")); err != nil {
					return err
				}
				return b.exec(b.kubectl, "wait", "--for=condition=Available", "deployment", "--all", "-n", ns, "--timeout=5m")
			})
			b.must(err)
			k = append(k, d)
			b.logf("wait: kubectl returned %s after the last Deployment was Available", d)
			b.deleteNamespace(ctx, ns)
		}
	}
	return row{name: fmt.Sprintf("wait: %d Deployments + Services, return after the last is Available", b.deployments),
		gantry: median(g), kubectl: median(k), target: "≤ 1 s", latency: true}
}

// deleteNamespace deletes ns and waits (up to two minutes) until it is
// gone: the controllers' cleanup would otherwise take CPU from the next
// measurement.
func (b *bench) deleteNamespace(ctx context.Context, ns string) {
	if err := b.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := b.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.logf("namespace %s still terminating after two minutes", ns)
}

func deployments(dir, ns string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var s strings.Builder
	for i := range n {
		fmt.Fprintf(&s, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%03[1]d
  namespace: %[2]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: web-%03[1]d}
  template:
    metadata:
      labels: {app: web-%03[1]d}
    spec:
      containers:
      - name: web
        image: registry.example/web:1
---
apiVersion: v1
kind: Service
metadata:
  name: web-%03[1]d
  namespace: %[2]s
spec:
  selector: {app: web-%03[1]d}
  ports:
  - port: 80
`, i, ns)
	}
	return os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(s.String()), 0o644)
}

// waitLatency runs the tool while watching the namespace's Deployments, and
// returns how long after the last one became Available the tool returned.
func (b *bench) waitLatency(ctx context.Context, ns string, run func() error) (time.Duration, error) {
	w, err := b.client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	var mu sync.Mutex
	available := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			mu.Lock()
			if _, seen := available[d.Name]; !seen && isAvailable(d) {
				available[d.Name] = time.Now()
			}
			mu.Unlock()
		}
	}()
	if err := run(); err != nil {
		return 0, err
	}
	end := time.Now()
	// The tool may see the last status before this watch delivers it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(available)
		mu.Unlock()
		if n == b.deployments || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.Stop()
	<-done
	if len(available) < b.deployments {
		return 0, fmt.Errorf("only %d of %d Deployments were seen Available", len(available), b.deployments)
	}
	var last time.Time
	for _, t := range available {
		if t.After(last) {
			last = t
		}
	}
	return end.Sub(last), nil
}

// isAvailable is kstatus's Current for a Deployment: the controller saw
// the latest spec and every replica is updated, ready and available.
func isAvailable(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != want ||
		d.Status.ReadyReplicas != want || d.Status.AvailableReplicas != want || d.Status.Replicas != want {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == "True" {
			return true
		}
	}
	return false
}

// buildScenario: gantry build against kubectl kustomize on an overlay of a
// base with n ConfigMaps (a namespace, a name prefix and labels on top).
func (b *bench) buildScenario() row {
	dir := filepath.Join(b.work, "build")
	base, overlay := filepath.Join(dir, "base"), filepath.Join(dir, "overlay")
	b.must(configMaps(base, "", b.buildObjects))
	b.must(os.WriteFile(filepath.Join(base, "kustomization.yaml"), []byte("resources: [configmaps.yaml]\n"), 0o644))
	b.must(os.MkdirAll(overlay, 0o755))
	b.must(os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte("resources: [../base]\nnamespace: bench\nnamePrefix: prod-\nlabels:\n- pairs: {env: prod}\n"), 0o644))
	var g, k []time.Duration
	for range b.reps {
		d, err := timed(func() error { return b.exec(b.gantry, "build", "--path="+overlay) })
		b.must(err)
		g = append(g, d)
		d, err = timed(func() error { return b.exec(b.kubectl, "kustomize", overlay) })
		b.must(err)
		k = append(k, d)
		b.logf("build: gantry %s, kubectl kustomize %s", g[len(g)-1], d)
	}
	return row{name: fmt.Sprintf("kustomize build of an overlay of %d resources", b.buildObjects), gantry: median(g), kubectl: median(k),
		kratios: ratios(k, g), target: "≤ 1.1 × kubectl kustomize"}
}

// memoryScenario: the peak resident memory of a gantry apply of n
// ConfigMaps, the first and then a no-op (the kernel's maximum RSS of the
// process).
func (b *bench) memoryScenario(ctx context.Context) []row {
	ns, err := b.namespace(ctx, "memory")
	b.must(err)
	dir := filepath.Join(b.work, ns)
	b.must(configMaps(dir, ns, b.memoryObjects))
	peak := func(what string) int64 {
		cmd := exec.Command(b.gantry, "apply", "--path="+dir, "--inventory=bench", "--inventory-namespace="+ns, "--wait=false", "--timeout=10m")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+b.kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.must(fmt.Errorf("gantry apply of %d: %w\n%s", b.memoryObjects, err, tail(out)))
		}
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
		b.logf("memory: %s: peak RSS %d MiB", what, rss/1024)
		return rss * 1024
	}
	first := peak("first apply")
	noop := peak("no-op")
	b.deleteNamespace(ctx, ns)
	return []row{
		{name: fmt.Sprintf("peak RSS, first apply of %d ConfigMaps", b.memoryObjects), memory: first, target: "≤ 400 MB"},
		{name: fmt.Sprintf("peak RSS, no-op re-apply of %d ConfigMaps", b.memoryObjects), memory: noop, target: "≤ 250 MB"},
	}
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}
