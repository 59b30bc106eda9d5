package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// runOfUnits is one gantry invocation with a run file.
type runOfUnits struct {
	code           int
	stdout, stderr string
	run            *result.Run
}

// gantryRunFile runs gantry with a run file; each unit names its own
// kubeconfig, so none is given for the whole run. The workspace is the
// run file's folder.
func gantryRunFile(t *testing.T, ctx context.Context, args ...string) runOfUnits {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	environ := []string{"HOME=" + os.Getenv("HOME"), "GANTRY_REPORT=" + report, recordKeyEnv}
	for i, a := range args {
		if a == "--run-file" && i+1 < len(args) {
			environ = append(environ, runFileWorkflow(t, filepath.Dir(args[i+1]))...)
		}
	}
	var stdout, stderr bytes.Buffer
	code := entrypoint.Run(ctx, args, environ, &stdout, &stderr)
	r := runOfUnits{code: code, stdout: stdout.String(), stderr: stderr.String()}
	if b, err := os.ReadFile(report); err == nil {
		r.run = &result.Run{}
		if err := json.Unmarshal(b, r.run); err != nil {
			t.Fatalf("report is not JSON: %v", err)
		}
	}
	t.Logf("gantry %s --run-file: exit %d\n%s", args[0], code, r.stderr)
	return r
}

// runFileWorkflow is what a workflow gives a run file in root: root as
// the workspace, and the servers of the kubeconfigs copied there (by
// inWorkspace) as those its kubeconfigs may reach.
func runFileWorkflow(t *testing.T, root string) []string {
	t.Helper()
	kubeconfigs, err := filepath.Glob(filepath.Join(root, "*kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	var servers []string
	for _, p := range kubeconfigs {
		kc, err := clientcmd.LoadFromFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range kc.Clusters {
			servers = append(servers, c.Server)
		}
	}
	return []string{"GANTRY_WORKSPACE=" + root, "GANTRY_RUN_FILE_SERVERS=" + strings.Join(servers, "\n")}
}

// inWorkspace copies a kubeconfig into a run file's workspace, where a
// run file may name it, and returns its path there.
func inWorkspace(t *testing.T, root, kubeconfig, name string) string {
	t.Helper()
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (r runOfUnits) unit(t *testing.T, name string) result.Unit {
	t.Helper()
	if r.run == nil {
		t.Fatalf("no report")
	}
	for _, u := range r.run.Units {
		if u.Name == name {
			return u
		}
	}
	t.Fatalf("no unit %s in the report", name)
	return result.Unit{}
}

// secondControlPlane starts a control plane (etcd and kube-apiserver) for
// one test: the second cluster of a run of units.
func secondControlPlane(t *testing.T) *cluster.Cluster {
	t.Helper()
	env.Require(t)
	c, err := (&cluster.Local{}).Start(context.Background(), cluster.Options{Name: "units-b", ControlPlaneOnly: true})
	if err != nil {
		t.Fatalf("starting a second control plane: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// labelledUnlisted returns the ConfigMaps labelled for an inventory that
// the inventory does not list.
func labelledUnlisted(t *testing.T, client kubernetes.Interface, invNS, inv string) []string {
	t.Helper()
	ctx := context.Background()
	listed := map[string]bool{}
	stored, err := (&inventory.Store{Client: client}).Load(ctx, invNS, inv)
	if err == nil {
		for _, e := range stored.Entries {
			listed[e.ID] = true
		}
	}
	cms, err := client.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: inventory.NameLabel + "=" + inv + "," + inventory.NamespaceLabel + "=" + invNS})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, cm := range cms.Items {
		id := cm.Namespace + "_" + cm.Name + "__ConfigMap"
		if !listed[id] {
			out = append(out, id)
		}
	}
	return out
}

// A platform team's run over two clusters: CRDs and a controller on
// cluster A, then an app on each cluster, then a unit that depends on
// both. A failed unit stops its dependents (untouched in their cluster)
// while its sibling applies; the run after the fix converges, the two
// apps overlapping in time and starting only once the platform is
// healthy. A cycle and two units on one inventory are refused with
// nothing written; a run cancelled midway (a runner's SIGTERM) leaves
// every inventory listing what carries its labels, and the next converges.
func TestRunFileAcrossTwoClusters(t *testing.T) {
	t.Parallel()
	b := secondControlPlane(t)
	clientB, err := kubernetes.NewForConfig(b.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	if _, err := clientB.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	group := strings.ReplaceAll(ns, "-", "") + ".example.com"
	root := t.TempDir()
	files := map[string]string{
		"platform/crd.yaml":        crdYAML(group, "Widget"),
		"platform/controller.yaml": readyDeployment(ns, "widget-controller"),
		"apps/a/widget.yaml":       fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: shop, namespace: %s}\nspec: {size: 3}\n", group, ns),
		"apps/a/cm.yaml":           fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-a, namespace: %s}\ndata: {k: v}\n", ns),
		"apps/b/cm.yaml":           fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-b, namespace: %s}\ndata: {k: v}\n", ns),
		"last/cm.yaml":             fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: last, namespace: %s}\ndata: {k: v}\n", ns),
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, p), c)
	}
	runFile := filepath.Join(root, "gantry.yaml")
	writeRun := func(units string) {
		writeFile(t, runFile, fmt.Sprintf("defaults:\n  inventory-namespace: %s\n  timeout: 2m\nunits:\n%s", ns, units))
	}
	// A run file names kubeconfigs inside its workspace.
	a, bk := inWorkspace(t, root, env.Cluster.Kubeconfig, "a.kubeconfig"), inWorkspace(t, root, b.Kubeconfig, "b.kubeconfig")
	graph := fmt.Sprintf(`  - {name: platform, path: platform, inventory: platform, kubeconfig: %s, wait: false}
  - {name: app-a, depends-on: [platform], path: apps/a, inventory: app-a, kubeconfig: %s, wait: false}
  - {name: app-b, depends-on: [platform], path: apps/b, inventory: app-b, kubeconfig: %s}
  - {name: last, depends-on: [app-a, app-b], path: last, inventory: last, kubeconfig: %s}
`, a, a, bk, bk)

	// Refused before anything is written: a cycle, and one inventory on
	// one cluster twice.
	for _, tc := range []struct{ name, units, says string }{
		{"cycle", fmt.Sprintf("  - {name: x, depends-on: [y], path: last, inventory: x, kubeconfig: %s}\n  - {name: y, depends-on: [x], path: last, inventory: y, kubeconfig: %s}\n", bk, bk),
			"units depend on each other in a cycle: x -> y -> x"},
		{"one inventory twice", fmt.Sprintf("  - {name: x, path: last, inventory: same, kubeconfig: %s}\n  - {name: y, path: apps/b, inventory: same, kubeconfig: %s}\n", bk, bk),
			"use one inventory, " + ns + "/same, on one cluster"},
	} {
		writeRun(tc.units)
		r := gantryRunFile(t, context.Background(), "apply", "--run-file", runFile)
		if r.code != entrypoint.ExitInvalid || r.run == nil || r.run.Reason != result.ReasonInvalidInput || !strings.Contains(r.stderr, tc.says) {
			t.Fatalf("%s: exit %d, want 2 with reason InvalidInput, saying %q", tc.name, r.code, tc.says)
		}
		for _, inv := range []string{"x", "y", "same"} {
			if _, err := clientB.CoreV1().ConfigMaps(ns).Get(context.Background(), inventory.ConfigMapName(inv), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: inventory %s was written (%v)", tc.name, inv, err)
			}
		}
	}

	// app-b fails validation: last is not run and leaves cluster B
	// untouched; app-a, app-b's sibling, applies.
	writeFile(t, filepath.Join(root, "apps/b/cm.yaml"), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: App_B, namespace: %s}\ndata: {k: v}\n", ns))
	writeRun(graph)
	r := gantryRunFile(t, context.Background(), "apply", "--run-file", runFile)
	if r.code != entrypoint.ExitFailed {
		t.Fatalf("a failing unit: exit %d, want 1", r.code)
	}
	for name, want := range map[string]result.Reason{"platform": result.ReasonSucceeded, "app-a": result.ReasonSucceeded,
		"app-b": result.ReasonValidationFailed, "last": result.ReasonDependencyNotReady} {
		if got := r.unit(t, name).Reason; got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if _, err := clientB.CoreV1().ConfigMaps(ns).Get(context.Background(), "last", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the unit that was not run wrote its ConfigMap (%v)", err)
	}
	if _, err := clientB.CoreV1().ConfigMaps(ns).Get(context.Background(), inventory.ConfigMapName("last"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the unit that was not run wrote its inventory (%v)", err)
	}

	// Fixed: the run converges, in order, the apps side by side.
	writeFile(t, filepath.Join(root, "apps/b/cm.yaml"), files["apps/b/cm.yaml"])
	r = gantryRunFile(t, context.Background(), "apply", "--run-file", runFile)
	if r.code != 0 || r.run.Reason != result.ReasonSucceeded {
		t.Fatalf("after the fix: exit %d, %v", r.code, r.run)
	}
	platform, appA, appB, last := r.unit(t, "platform"), r.unit(t, "app-a"), r.unit(t, "app-b"), r.unit(t, "last")
	if !appA.Started.Before(appB.Finished) || !appB.Started.Before(appA.Finished) {
		t.Errorf("app-a (%s..%s) and app-b (%s..%s) did not overlap", appA.Started, appA.Finished, appB.Started, appB.Finished)
	}
	for _, app := range []result.Unit{appA, appB} {
		if app.Started.Before(platform.Finished) {
			t.Errorf("%s started at %s, before platform was healthy (%s)", app.Name, app.Started, platform.Finished)
		}
	}
	if last.Started.Before(appA.Finished) || last.Started.Before(appB.Finished) {
		t.Errorf("last started before both apps were done")
	}
	// platform is depended on: it waited for its controller (its pod is
	// kwok's, simulated) before the apps started, though it says
	// wait: false.
	if h := objectIn(platform.Result, "Deployment.apps/"+ns+"/widget-controller"); h == nil || h.Health == nil || h.Health.Status != "Current" {
		t.Errorf("platform's controller was not waited for: %+v", h)
	}
	if platform.Cluster.Server == last.Cluster.Server || platform.Cluster.Server == "" {
		t.Errorf("clusters: platform %q, last %q: want two servers", platform.Cluster.Server, last.Cluster.Server)
	}
	for _, secret := range []string{"token", "BEGIN"} {
		if strings.Contains(r.stderr, secret) {
			t.Errorf("the console shows %q", secret)
		}
	}

	// The pull request's preview: diff of every unit, one change in
	// app-b, nothing written.
	writeFile(t, filepath.Join(root, "apps/b/cm.yaml"), strings.Replace(files["apps/b/cm.yaml"], "{k: v}", "{k: changed}", 1))
	r = gantryRunFile(t, context.Background(), "diff", "--run-file", runFile, "--detailed-exitcode")
	if r.code != entrypoint.ExitChanges || r.run.Reason != result.ReasonProgressing {
		t.Errorf("diff with one change: exit %d, %s; want 3, Progressing", r.code, r.run.Reason)
	}
	for _, want := range []string{"# unit platform: NoChanges", "# unit app-b: Progressing", "+  k: changed", "# unit last: NoChanges"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the diff does not say %q:\n%s", want, r.stdout)
		}
	}
	if cm, err := clientB.CoreV1().ConfigMaps(ns).Get(context.Background(), "app-b", metav1.GetOptions{}); err != nil || cm.Data["k"] != "v" {
		t.Errorf("diff wrote: %v %v", cm.Data, err)
	}
	writeFile(t, filepath.Join(root, "apps/b/cm.yaml"), files["apps/b/cm.yaml"])

	// A runner's SIGTERM midway, to the gantry process, while the last
	// unit applies: every inventory lists what carries its labels; the
	// next run converges.
	const more = 300
	for i := range more {
		writeFile(t, filepath.Join(root, fmt.Sprintf("last/more-%03d.yaml", i)), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: more-%03d, namespace: %s}\n", i, ns))
	}
	cmd := exec.Command(gantryBinary(t), "apply", "--run-file", runFile)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cmd.Env = append([]string{"HOME=" + os.Getenv("HOME"), recordKeyEnv}, runFileWorkflow(t, root)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	for deadline := time.Now().Add(90 * time.Second); !strings.Contains(stderr.String(), "[last] ▸ apply"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run never reached the last unit's apply:\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	t.Logf("SIGTERM in the last unit's apply: %v\n%s", err, stderr.String())
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "Cancelled") {
		t.Errorf("after SIGTERM: exit %d, want 1 with the last unit Cancelled", code)
	}
	for _, c := range []struct {
		client kubernetes.Interface
		inv    string
	}{{env.Client, "platform"}, {env.Client, "app-a"}, {clientB, "app-b"}, {clientB, "last"}} {
		if orphans := labelledUnlisted(t, c.client, ns, c.inv); len(orphans) > 0 {
			t.Errorf("inventory %s does not list %v", c.inv, orphans)
		}
	}
	r = gantryRunFile(t, context.Background(), "apply", "--run-file", runFile)
	if r.code != 0 {
		t.Fatalf("the run after the cancel: exit %d", r.code)
	}
	if got := r.unit(t, "last").Counts()[result.Unchanged] + r.unit(t, "last").Counts()[result.Created]; got != more+1 {
		t.Errorf("last holds %d objects after converging, want %d", got, more+1)
	}
}

func objectIn(res *result.Result, ref string) *result.Object {
	for i, o := range res.Objects {
		if o.Ref() == ref {
			return &res.Objects[i]
		}
	}
	return nil
}

// A run file as the GitHub Action runs it: the runner sets every input of
// action.yml, at its default where the workflow gives none; only run-file
// and the token are given. The defaults do not override the units; the
// run writes one summary, one pull request comment for the run file, and
// step outputs per unit; a secret a unit reads from a variable is masked
// everywhere.
func TestRunFileAsAGitHubAction(t *testing.T) {
	t.Parallel()
	r := newGitHubRunner(t, false)
	if err := os.MkdirAll(filepath.Join(r.ws, "extra"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A value read through a reference is a secret whatever its name:
	// RELEASE_NOTE does not look like one.
	note := canary("release-note")
	writeFile(t, filepath.Join(r.ws, "extra", "cm.yaml"), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: %s}\ndata: {k: v, note: \"${RELEASE_NOTE}\"}\n", r.ns))
	writeFile(t, filepath.Join(r.ws, "gantry.yaml"), fmt.Sprintf(`defaults:
  inventory-namespace: %[1]s
  kubeconfig: kubeconfig
units:
  - name: web
    path: deploy
    inventory: shop
    substitute:
      DB_PASSWORD: {env: DB_PASSWORD}
  - {name: extra, depends-on: [web], path: extra, inventory: extra, substitute: {RELEASE_NOTE: {env: APP_RELEASE_NOTE}}}
`, r.ns))
	extra := map[string]string{"INPUT_RUN-FILE": "gantry.yaml", "INPUT_RUN-FILE-ENV": "DB_PASSWORD\nAPP_*", "DB_PASSWORD": r.dbPassword, "APP_RELEASE_NOTE": note,
		"INPUT_RUN-FILE-SERVERS": env.Cluster.RESTConfig.Host}
	defaults := actionInputs(t)
	for _, k := range []string{"INPUT_PATH", "INPUT_INVENTORY", "INPUT_INVENTORY-NAMESPACE", "INPUT_KUBECONFIG", "INPUT_TIMEOUT", "INPUT_SUBSTITUTE"} {
		extra[k] = defaults[k]
	}
	run := r.run(extra)
	if run.code != 0 {
		t.Fatalf("exit %d", run.code)
	}
	outs := parseOutputs(t, r.outputs)
	for k, want := range map[string]string{"web-reason": "ReconciliationSucceeded", "extra-reason": "ReconciliationSucceeded",
		"web-changed": "true", "extra-changed": "true", "created": "4", "reason": "ReconciliationSucceeded"} {
		if outs[k] != want {
			t.Errorf("output %s = %q, want %q", k, outs[k], want)
		}
	}
	sum := readAll(t, r.summary)
	if !strings.Contains(sum, "gantry apply: 2 units: 2 changed") || !strings.Contains(sum, "<b>web</b>") || !strings.Contains(sum, "**Order** `web` → `extra`") {
		t.Errorf("summary:\n%s", sum)
	}
	bodies := r.gh.Bodies()
	if got := strings.Join(r.gh.Writes(), ", "); got != "POST 1" || len(bodies) != 1 || !strings.Contains(bodies[0], "<!-- gantry:comment run-file=gantry.yaml -->") {
		t.Errorf("comment writes %q, want one comment for the run file", got)
	}
	if !strings.Contains(run.stderr, "[web] ▸ validate") || strings.Contains(run.stderr, "::group::") {
		t.Errorf("units' stages are not lines of their own")
	}
	// Each secret is registered with ::add-mask:: (which carries it, for
	// the runner to hide) before anything else is printed, and appears
	// nowhere else.
	var logged []string
	masked := map[string]bool{}
	for _, l := range strings.Split(run.stderr, "\n") {
		if v, ok := strings.CutPrefix(l, "::add-mask::"); ok && len(logged) == 0 {
			masked[v] = true
			continue
		}
		logged = append(logged, l)
	}
	for _, secret := range []string{r.dbPassword, r.kubeToken, r.ghToken, note} {
		if !masked[secret] {
			t.Errorf("a secret (%s…) was not masked before the first line", secret[:8])
		}
	}
	for where, text := range map[string]string{"stdout": run.stdout, "stderr": strings.Join(logged, "\n"), "summary": sum, "outputs": readAll(t, r.outputs),
		"report": readAll(t, filepath.Join(r.ws, outs["report"])), "diff": readAll(t, filepath.Join(r.ws, outs["diff"])), "comment": strings.Join(bodies, "\n")} {
		for _, secret := range []string{r.dbPassword, r.secretData, r.secretString, r.kubeToken, r.ghToken, note} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds a secret (%s…)", where, secret[:8])
			}
		}
	}
}
