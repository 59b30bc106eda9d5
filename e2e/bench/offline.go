package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The offline scenario: a set of apps as teams ship them (per app a
// Deployment with probes and resources, a Service, a ConfigMap, a
// HorizontalPodAutoscaler and a PodDisruptionBudget), validated with no
// cluster (validate --offline) and previewed against its base revision
// (diff --offline --base), each against the live diff of the same set on
// the bench's control plane; and the peak memory of validating twice as
// many objects offline. The Deployments ask for no replicas (their
// HorizontalPodAutoscalers stay idle then), so that no pods load the
// machine during the timings: what is timed is the tools' own work.
const objectsPerApp = 5

// appsSet writes apps apps of namespace ns into dir, one file per app;
// version changes the ConfigMap and the image of the first changed apps.
func appsSet(dir, ns string, apps, changed int, version string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "namespace.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"), 0o644); err != nil {
		return err
	}
	for i := range apps {
		v := "1.0.0"
		if i < changed {
			v = version
		}
		name := fmt.Sprintf("app-%04d", i)
		doc := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s, labels: {app: %[1]s}}
spec:
  replicas: 0
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - name: app
        image: registry.example.com/%[1]s:%[3]s
        ports: [{name: http, containerPort: 8080}]
        envFrom: [{configMapRef: {name: %[1]s}}]
        readinessProbe: {httpGet: {path: /ready, port: http}}
        resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 128Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  selector: {app: %[1]s}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: %[1]s, namespace: %[2]s}
data: {VERSION: "%[3]s", LOG_LEVEL: info}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: %[1]s}
  minReplicas: 2
  maxReplicas: 6
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: %[1]s}}
`, name, ns, v)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(doc), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) git(dir string, args ...string) error {
	cmd := exec.Command("git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (b *bench) offlineScenario(ctx context.Context) []row {
	ns, err := b.namespace(ctx, "offline")
	b.must(err)
	apps := b.offlineObjects / objectsPerApp
	changed := 1000 / objectsPerApp // 1,000 objects: each changed app's five
	// A repository whose base is the set as applied, and whose head
	// changes 1,000 objects.
	repo := filepath.Join(b.work, "offline-repo")
	dir := filepath.Join(repo, "deploy")
	b.must(appsSet(dir, ns, apps, 0, ""))
	b.must(b.git(repo, "init", "-q", "-b", "main"))
	b.must(b.git(repo, "add", "-A"))
	b.must(b.git(repo, "commit", "-q", "-m", "base"))
	b.must(b.exec(b.gantry, "apply", dir, "--inventory", "bench-offline", "--inventory-namespace", "default", "--wait=false", "--timeout", "10m"))
	b.must(os.RemoveAll(dir))
	b.must(appsSet(dir, ns, apps, changed, "1.1.0"))
	b.must(b.git(repo, "add", "-A"))
	b.must(b.git(repo, "commit", "-q", "-m", "head"))

	inRepo := func(args ...string) func() error {
		return func() error {
			cmd := exec.Command(b.gantry, args...)
			cmd.Dir = repo
			cmd.Env = append(os.Environ(), "KUBECONFIG="+b.kubeconfig)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 3) {
				return fmt.Errorf("gantry %s: %w\n%s", strings.Join(args, " "), err, tail(out))
			}
			return nil
		}
	}
	var validate, preview, live []time.Duration
	for range b.reps {
		d, err := timed(inRepo("validate", "deploy", "--offline"))
		b.must(err)
		validate = append(validate, d)
		d, err = timed(inRepo("diff", "deploy", "--offline", "--base", "HEAD~1", "--detailed-exitcode"))
		b.must(err)
		preview = append(preview, d)
		d, err = timed(inRepo("diff", "deploy", "--inventory", "bench-offline", "--inventory-namespace", "default", "--detailed-exitcode", "--timeout", "10m"))
		b.must(err)
		live = append(live, d)
		b.logf("offline: validate %s, preview %s, live diff %s", validate[len(validate)-1], preview[len(preview)-1], live[len(live)-1])
	}

	// Peak memory of validating twice as many objects offline.
	big := filepath.Join(b.work, "offline-big")
	b.must(appsSet(big, ns, 2*apps, 0, ""))
	cmd := exec.Command(b.gantry, "validate", big, "--offline")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.must(fmt.Errorf("gantry validate --offline of %d objects: %w\n%s", 2*apps*objectsPerApp, err, tail(out)))
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
	b.logf("offline: peak RSS of validating %d objects: %d MiB", 2*apps*objectsPerApp, rss>>20)
	b.must(b.exec(b.gantry, "delete", "--inventory", "bench-offline", "--inventory-namespace", "default", "--timeout", "10m"))

	n := apps*objectsPerApp + 1
	return []row{
		{name: fmt.Sprintf("offline validation of %d objects (floor: the live diff of the same set)", n),
			gantry: median(validate), flr: median(live), ratios: ratios(validate, live), target: "< 1 × the live diff"},
		{name: fmt.Sprintf("offline preview of a %d-object change, against its base revision (floor: the live diff of the same change)", changed*objectsPerApp),
			gantry: median(preview), flr: median(live), ratios: ratios(preview, live), target: "< 1 × the live diff"},
		{name: fmt.Sprintf("peak RSS, offline validation of %d objects", 2*apps*objectsPerApp+1), memory: rss, target: "≤ 300 MB"},
	}
}
