package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/e2e/cluster"
)

var (
	tektonTasks        = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "tasks"}
	tektonPipelines    = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "pipelines"}
	tektonPipelineRuns = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "pipelineruns"}
	tektonTaskRuns     = schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "taskruns"}
)

// tektonSystemNamespace is where Tekton's controller reads its
// ConfigMaps (SYSTEM_NAMESPACE).
const tektonSystemNamespace = "tekton-pipelines"

// tektonRig is Tekton Pipelines' controller running against the test
// cluster, with the images its TaskRun pods use and gantry's image in
// the registry of the real node, which the pods run on.
type tektonRig struct {
	gantryImage string
}

// tektonTools are the paths make tekton-tools and make image write.
type tektonTools struct {
	controller, config, busybox, gantryImage, gantryBinary, kubectl string
	cmds                                                            map[string]string // entrypoint, nop, workingdirinit, sidecarlogresults
}

// findTektonTools skips t unless make test-node runs it (GANTRY_NODE=1)
// with the Tekton tools and gantry's image built.
func findTektonTools(t *testing.T) tektonTools {
	t.Helper()
	if os.Getenv("GANTRY_NODE") == "" {
		t.Skip("make test-node runs Tekton's controller against a real node and runs this test")
	}
	env.Require(t)
	var tt tektonTools
	tt.cmds = map[string]string{}
	var missing []string
	tool := func(name string) string {
		p, err := cluster.Tool(name)
		if err != nil {
			missing = append(missing, name)
		}
		return p
	}
	tt.controller = tool("tekton/controller")
	tt.config = tool("tekton/config")
	tt.busybox = tool("busybox")
	tt.kubectl = tool("kubectl")
	for _, c := range []string{"entrypoint", "nop", "workingdirinit", "sidecarlogresults"} {
		tt.cmds[c] = tool("tekton/" + c)
	}
	// make image writes them at the root of the module, above bin/.
	dist := func(rel string) string {
		p := filepath.Join("..", rel)
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, rel)
		}
		return p
	}
	tt.gantryImage = dist("dist/gantry-image.tar")
	tt.gantryBinary, _ = filepath.Abs(dist("dist/linux-amd64/gantry"))
	if len(missing) > 0 {
		t.Skipf("the Tekton tools or gantry's image are not built (make tekton-tools image): %s", strings.Join(missing, ", "))
	}
	return tt
}

// startTekton pushes the images, installs Tekton's CRDs and ConfigMaps
// and starts its controller, which runs until t ends.
func startTekton(t *testing.T, tt tektonTools) *tektonRig {
	t.Helper()
	ctx := context.Background()
	rig := &tektonRig{}
	reg := realNode(t).Registry

	// Tekton's images, as ko lays them out: the command at
	// /ko-app/<command>, its entrypoint. Debian's busybox gives them
	// (and the shell image) a shell.
	images := map[string]string{}
	for c, bin := range tt.cmds {
		ref := reg + "/tekton/" + c + ":v1.9.0"
		d, err := cluster.PushImage(ctx, cluster.Image{Ref: ref, Busybox: tt.busybox,
			Files: []cluster.ImageFile{{Path: "ko-app/" + c, Source: bin}}, Entrypoint: []string{"/ko-app/" + c}})
		if err != nil {
			t.Fatal(err)
		}
		images[c] = reg + "/tekton/" + c + "@" + d
	}
	d, err := cluster.PushImage(ctx, cluster.Image{Ref: reg + "/tekton/shell:busybox", Busybox: tt.busybox, Entrypoint: []string{"/bin/sh"}})
	if err != nil {
		t.Fatal(err)
	}
	images["shell"] = reg + "/tekton/shell@" + d
	rig.gantryImage = pushGantryImage(t, tt.gantryImage, reg+"/gantry-dev/gantry:test")

	kubectl := func(args ...string) {
		t.Helper()
		out, err := exec.Command(tt.kubectl, append([]string{"--kubeconfig=" + env.Cluster.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kubectl("create", "namespace", tektonSystemNamespace)
	kubectl("apply", "--server-side", "-f", tt.config)
	kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/pipelineruns.tekton.dev", "crd/taskruns.tekton.dev", "crd/pipelines.tekton.dev", "crd/tasks.tekton.dev")

	logs := &syncBuffer{}
	cmd := exec.Command(tt.controller,
		"-kubeconfig="+env.Cluster.Kubeconfig, "-disable-ha",
		"-entrypoint-image="+images["entrypoint"], "-nop-image="+images["nop"],
		"-workingdirinit-image="+images["workingdirinit"], "-sidecarlogresults-image="+images["sidecarlogresults"],
		"-shell-image="+images["shell"], "-shell-image-win="+images["shell"])
	// The variables its Deployment sets; its servers on free ports.
	cmd.Env = append(os.Environ(),
		"SYSTEM_NAMESPACE="+tektonSystemNamespace, "KUBERNETES_MIN_VERSION=v1.28.0",
		"CONFIG_DEFAULTS_NAME=config-defaults", "CONFIG_LOGGING_NAME=config-logging",
		"CONFIG_OBSERVABILITY_NAME=config-observability", "CONFIG_FEATURE_FLAGS_NAME=feature-flags",
		"CONFIG_LEADERELECTION_NAME=config-leader-election-controller", "CONFIG_SPIRE=config-spire",
		"METRICS_DOMAIN=tekton.dev/pipeline",
		"PROBES_PORT="+freePort(t), "PROFILING_PORT="+freePort(t), "METRICS_PROMETHEUS_PORT="+metricsPort(t))
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("Tekton's controller logs:\n%s", lastLines(logs.String(), 60))
		}
		_ = exec.Command(tt.kubectl, "--kubeconfig="+env.Cluster.Kubeconfig, "delete", "--wait=false", "namespace", tektonSystemNamespace).Run()
	})
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(logs.String(), "Starting controllers...") {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("Tekton's controller exited: %v\n%s", err, lastLines(logs.String(), 40))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("Tekton's controller did not start its controllers in 90s:\n%s", lastLines(logs.String(), 40))
		}
	}
	return rig
}

// metricsPort is a free port that knative's metrics exporter takes: it
// parses the port as a 16-bit signed number, below the kernel's
// ephemeral ports.
func metricsPort(t *testing.T) string {
	t.Helper()
	for p := 20000 + os.Getpid()%10000; p < 32768; p++ {
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			l.Close()
			return strconv.Itoa(p)
		}
	}
	t.Fatal("no free port below 32768")
	return ""
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// pushGantryImage pushes the image make image wrote, and returns it by
// digest.
func pushGantryImage(t *testing.T, tarPath, ref string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("pushing gantry's image: %v", err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return r.Context().Name() + "@" + d.String()
}

// realNode is the cluster's real node: GANTRY_NODE=1 promises one.
func realNode(t *testing.T) *cluster.RealNode {
	t.Helper()
	if env.Cluster.RealNode == nil {
		t.Fatal("GANTRY_NODE=1, but the cluster has no real node")
	}
	return env.Cluster.RealNode
}

// tektonRepo is a repository of three units: base, app (after base) and
// web (after app), each a ConfigMap in ns. With failApp, app's Service
// has a port the API server refuses.
func tektonRepo(ns string, failApp bool) map[string]string {
	cm := func(name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  unit: %s\n", name, ns, name)
	}
	files := map[string]string{
		"gantry.yaml": fmt.Sprintf(`defaults:
  inventory-namespace: %s
units:
  - {name: base, path: base, inventory: base}
  - {name: app, depends-on: [base], path: app, inventory: app}
  - {name: web, depends-on: [app], path: web, inventory: web}
`, ns),
		"base/config.yaml": cm("base"),
		"app/config.yaml":  cm("app"),
		"web/config.yaml":  cm("web"),
	}
	if failApp {
		files["app/service.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: app\n  namespace: %s\nspec:\n  ports:\n    - port: 70000\n", ns)
	}
	return files
}

// tektonDeps are the run file's dependencies: what each unit's task must
// run after.
var tektonDeps = map[string][]string{"base": nil, "app": {"base"}, "web": {"app"}}

// planPipeline runs gantry plan --format tekton, with the binary the
// image holds, in a checkout of files, and returns the Pipeline.
func planPipeline(t *testing.T, tt tektonTools, files map[string]string) map[string]any {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, p), content)
	}
	cmd := exec.Command(tt.gantryBinary, "plan", "--run-file", "gantry.yaml", "--format", "tekton")
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + t.TempDir()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gantry plan --format tekton: %v\n%s", err, stderr.String())
	}
	var p map[string]any
	if err := yaml.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// gantryTask is ci/tekton's Task, its step's image the one the test
// pushed (a user pins theirs the same way).
func gantryTask(t *testing.T, image string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "ci", "tekton", "gantry-task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var task map[string]any
	if err := yaml.Unmarshal(b, &task); err != nil {
		t.Fatal(err)
	}
	steps, _, _ := unstructured.NestedSlice(task, "spec", "steps")
	if len(steps) != 1 {
		t.Fatalf("the Task has %d steps, want 1", len(steps))
	}
	steps[0].(map[string]any)["image"] = image
	if err := unstructured.SetNestedSlice(task, steps, "spec", "steps"); err != nil {
		t.Fatal(err)
	}
	return task
}

// pipelineRunOutcome is what Tekton wrote of one PipelineRun.
type pipelineRunOutcome struct {
	run      *unstructured.Unstructured
	taskRuns map[string]*unstructured.Unstructured // by pipeline task name
	skipped  map[string]string                     // pipeline task name: reason
}

// succeeded is the Succeeded condition's status, reason and message.
func succeeded(u *unstructured.Unstructured) (status, reason, message string) {
	c := condition(u, "Succeeded")
	if c == nil {
		return "", "", ""
	}
	s, _ := c["status"].(string)
	r, _ := c["reason"].(string)
	m, _ := c["message"].(string)
	return s, r, m
}

// results are a TaskRun's results by name.
func results(tr *unstructured.Unstructured) map[string]string {
	rs, _, _ := unstructured.NestedSlice(tr.Object, "status", "results")
	out := map[string]string{}
	for _, r := range rs {
		m, _ := r.(map[string]any)
		n, _ := m["name"].(string)
		switch v := m["value"].(type) {
		case string:
			out[n] = v
		default:
			out[n] = fmt.Sprint(v)
		}
	}
	return out
}

// runPipeline applies the Task and pipeline in ns, with the source
// workspace a ConfigMap of files and the kubeconfig workspace a Secret,
// starts a PipelineRun and waits until Tekton says it is done.
func runPipeline(t *testing.T, rig *tektonRig, ns string, files map[string]string, pipeline map[string]any) pipelineRunOutcome {
	t.Helper()
	ctx := context.Background()
	task := gantryTask(t, rig.gantryImage)
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{{tektonTasks, task}, {tektonPipelines, pipeline}} {
		u := &unstructured.Unstructured{Object: o.obj}
		u.SetNamespace(ns)
		if _, err := env.Dynamic.Resource(o.gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the %s: %v", u.GetKind(), err)
		}
	}

	// The checkout: a ConfigMap whose keys the workspace lays out as the
	// repository's files (read-only, as a checkout a task must not change).
	source := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "checkout"}, Data: map[string]string{}}
	var items []any
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		key := strings.ReplaceAll(p, "/", ".")
		source.Data[key] = files[p]
		items = append(items, map[string]any{"key": key, "path": p})
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, source, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The cluster's kubeconfig, which names the API server at 127.0.0.1:
	// the pods run in the node's network namespace (the real node is this
	// machine), where that address is the API server's.
	kc, err := os.ReadFile(env.Cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "cluster-kubeconfig"}, Data: map[string][]byte{"config": kc}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gantry-secrets"}, Data: map[string][]byte{"GANTRY_RECORD_KEY": []byte(testRecordKey)}},
	} {
		if _, err := env.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	pr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
		"metadata": map[string]any{"name": "deploy", "namespace": ns},
		"spec": map[string]any{
			"pipelineRef": map[string]any{"name": pipeline["metadata"].(map[string]any)["name"]},
			"params": []any{
				map[string]any{"name": "command", "value": "apply"},
				map[string]any{"name": "kubeconfig", "value": "/workspace/kubeconfig/config"},
			},
			"timeouts": map[string]any{"pipeline": "10m"},
			"taskRunTemplate": map[string]any{"podTemplate": map[string]any{
				"hostNetwork":  true,
				"nodeSelector": map[string]any{cluster.RealNodeKey: "real"},
				"tolerations":  []any{map[string]any{"key": cluster.RealNodeKey, "operator": "Equal", "value": "real", "effect": "NoSchedule"}},
			}},
			"workspaces": []any{
				map[string]any{"name": "source", "configMap": map[string]any{"name": "checkout", "items": items}},
				map[string]any{"name": "kubeconfig", "secret": map[string]any{"secretName": "cluster-kubeconfig"}},
			},
		},
	}}
	if _, err := env.Dynamic.Resource(tektonPipelineRuns).Namespace(ns).Create(ctx, pr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the PipelineRun: %v", err)
	}

	var out pipelineRunOutcome
	err = wait.PollUntilContextTimeout(ctx, time.Second, 8*time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := env.Dynamic.Resource(tektonPipelineRuns).Namespace(ns).Get(ctx, "deploy", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		out.run = u
		s, _, _ := succeeded(u)
		return s == "True" || s == "False", nil
	})
	if err != nil {
		t.Fatalf("the PipelineRun did not finish: %v\n%s", err, tektonState(ns, out.run))
	}
	out.taskRuns = map[string]*unstructured.Unstructured{}
	trs, err := env.Dynamic.Resource(tektonTaskRuns).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range trs.Items {
		tr := &trs.Items[i]
		out.taskRuns[tr.GetLabels()["tekton.dev/pipelineTask"]] = tr
	}
	out.skipped = map[string]string{}
	skipped, _, _ := unstructured.NestedSlice(out.run.Object, "status", "skippedTasks")
	for _, s := range skipped {
		m, _ := s.(map[string]any)
		n, _ := m["name"].(string)
		r, _ := m["reason"].(string)
		out.skipped[n] = r
	}
	return out
}

// tektonState is what a failure message shows: the PipelineRun's
// condition and each TaskRun's, and the pods'.
func tektonState(ns string, pr *unstructured.Unstructured) string {
	var b strings.Builder
	if pr != nil {
		s, r, m := succeeded(pr)
		fmt.Fprintf(&b, "PipelineRun: %s %s: %s\n", s, r, m)
	}
	ctx := context.Background()
	if trs, err := env.Dynamic.Resource(tektonTaskRuns).Namespace(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, tr := range trs.Items {
			s, r, m := succeeded(&tr)
			fmt.Fprintf(&b, "TaskRun %s: %s %s: %s; results %v\n", tr.GetName(), s, r, m, results(&tr))
		}
	}
	if pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				switch {
				case cs.State.Waiting != nil:
					fmt.Fprintf(&b, "; %s waiting %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
				case cs.State.Terminated != nil:
					fmt.Fprintf(&b, "; %s exited %d %s", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// orderProblems says which tasks started before a task the run file makes
// them depend on had finished: TaskRuns are created when Tekton starts a
// task, so a TaskRun created before its dependency's completion ran
// beside it.
func orderProblems(out pipelineRunOutcome, deps map[string][]string) []string {
	var problems []string
	ts := func(tr *unstructured.Unstructured, field string) (time.Time, bool) {
		s, _, _ := unstructured.NestedString(tr.Object, "status", field)
		at, err := time.Parse(time.RFC3339, s)
		return at, err == nil
	}
	names := make([]string, 0, len(deps))
	for n := range deps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		tr := out.taskRuns[n]
		if tr == nil {
			continue
		}
		started := tr.GetCreationTimestamp().Time
		for _, d := range deps[n] {
			dtr := out.taskRuns[d]
			if dtr == nil {
				problems = append(problems, fmt.Sprintf("%s ran, and %s, which it depends on, did not", n, d))
				continue
			}
			done, ok := ts(dtr, "completionTime")
			if !ok {
				problems = append(problems, fmt.Sprintf("%s ran, and %s, which it depends on, has no completion time", n, d))
				continue
			}
			if started.Before(done) {
				problems = append(problems, fmt.Sprintf("%s started at %s, before %s, which it depends on, finished at %s",
					n, started.Format(time.TimeOnly), d, done.Format(time.TimeOnly)))
			}
		}
	}
	return problems
}

// The Pipeline gantry plan --format tekton writes, run by Tekton
// Pipelines' own controller, each unit's task a pod on a real node that
// runs gantry's image against the same cluster. Tekton says the run
// succeeded, each task ran after the units it depends on, each TaskRun's
// results are gantry's outputs, and the objects are in the cluster; a unit
// that fails stops the units that depend on it, and Tekton says so; a
// Pipeline with a runAfter removed by hand is caught.
func TestNodeTekton(t *testing.T) {
	tt := findTektonTools(t)
	rig := startTekton(t, tt)
	ctx := context.Background()

	t.Run("apply", func(t *testing.T) {
		ns := env.Namespace(t)
		files := tektonRepo(ns, false)
		out := runPipeline(t, rig, ns, files, planPipeline(t, tt, files))
		if s, r, m := succeeded(out.run); s != "True" {
			t.Fatalf("Tekton says the PipelineRun did not succeed: %s %s: %s\n%s", s, r, m, tektonState(ns, out.run))
		}
		for _, p := range orderProblems(out, tektonDeps) {
			t.Error(p)
		}
		for unit := range tektonDeps {
			tr := out.taskRuns[unit]
			if tr == nil {
				t.Errorf("no TaskRun for %s", unit)
				continue
			}
			if s, r, m := succeeded(tr); s != "True" {
				t.Errorf("%s: TaskRun %s %s: %s", unit, s, r, m)
			}
			res := results(tr)
			want := map[string]string{"created": "1", "failed": "0", "changed": "true", "reason": "ReconciliationSucceeded",
				"inventory": ns + "/" + unit, "history-revision": "1"}
			for k, v := range want {
				if res[k] != v {
					t.Errorf("%s: result %s is %q, want %q (results %v)", unit, k, res[k], v, res)
				}
			}
			cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, unit, metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s: the unit's ConfigMap: %v", unit, err)
			} else if cm.Data["unit"] != unit {
				t.Errorf("%s: the ConfigMap holds %v", unit, cm.Data)
			}
		}
		// The delete tasks are skipped by their when expressions, and
		// nothing else is.
		for _, unit := range []string{"base", "app", "web"} {
			if r := out.skipped["delete-"+unit]; r != "When Expressions evaluated to false" {
				t.Errorf("delete-%s: skipped %q, want by its when expression", unit, r)
			}
		}
		if len(out.skipped) != 3 {
			t.Errorf("skipped tasks: %v; want the three delete tasks", out.skipped)
		}
		t.Logf("Tekton's record:\n%s", tektonState(ns, out.run))
	})

	t.Run("a failing unit stops its dependents", func(t *testing.T) {
		ns := env.Namespace(t)
		files := tektonRepo(ns, true)
		out := runPipeline(t, rig, ns, files, planPipeline(t, tt, files))
		state := tektonState(ns, out.run)
		if s, r, _ := succeeded(out.run); s != "False" || r != "Failed" {
			t.Errorf("Tekton says the PipelineRun is %s %s, want False Failed\n%s", s, r, state)
		}
		if s, _, _ := succeeded(out.taskRuns["base"]); s != "True" {
			t.Errorf("base did not succeed\n%s", state)
		}
		if tr := out.taskRuns["app"]; tr == nil {
			t.Errorf("app did not run\n%s", state)
		} else {
			if s, r, _ := succeeded(tr); s != "False" {
				t.Errorf("app's TaskRun is %s %s, want False\n%s", s, r, state)
			}
			if res := results(tr); res["reason"] == "" || res["reason"] == "ReconciliationSucceeded" {
				t.Errorf("app's results do not say why gantry failed: %v", res)
			}
		}
		if out.taskRuns["web"] != nil {
			t.Errorf("web ran after app failed\n%s", state)
		}
		if _, ok := out.skipped["web"]; !ok {
			t.Errorf("Tekton does not report web skipped: skipped %v\n%s", out.skipped, state)
		}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web", metav1.GetOptions{}); err == nil {
			t.Error("web's ConfigMap is in the cluster")
		}
		t.Logf("Tekton's record:\n%s\nskipped: %v", state, out.skipped)
	})

	// The checks above catch a plan that loses a dependency: web's
	// runAfter removed by hand, web runs beside base and app, and the
	// order the test checks says so.
	t.Run("a runAfter removed by hand is caught", func(t *testing.T) {
		ns := env.Namespace(t)
		files := tektonRepo(ns, false)
		p := planPipeline(t, tt, files)
		tasks, _, _ := unstructured.NestedSlice(p, "spec", "tasks")
		removed := false
		for _, task := range tasks {
			m := task.(map[string]any)
			if m["name"] == "web" {
				if after, _ := m["runAfter"].([]any); !slices.Contains(after, any("app")) {
					t.Fatalf("the plan's web task runs after %v, not app", after)
				}
				delete(m, "runAfter")
				removed = true
			}
		}
		if !removed {
			t.Fatal("the plan has no web task")
		}
		if err := unstructured.SetNestedSlice(p, tasks, "spec", "tasks"); err != nil {
			t.Fatal(err)
		}
		out := runPipeline(t, rig, ns, files, p)
		problems := orderProblems(out, tektonDeps)
		if !slices.ContainsFunc(problems, func(s string) bool { return strings.HasPrefix(s, "web started at") }) {
			t.Errorf("with web's runAfter removed, the order check finds %q; want web started before app finished\n%s", problems, tektonState(ns, out.run))
		}
		t.Logf("caught: %s", strings.Join(problems, "; "))
	})
}
