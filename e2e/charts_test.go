package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/pipeline"
	"github.com/gantry-dev/gantry/result"
)

// The chart fixtures: two versions of one chart, platform. 1.0.0 has a
// CustomResourceDefinition in crds/ (Gadget), a controller Deployment, a
// ConfigMap (whose template calls lookup and reads .Release and
// .Capabilities), a Service, a pre-install hook Job and a test hook Pod;
// 2.0.0 drops the Service, changes the ConfigMap and adds a second one.
// values-v1.yaml and values-v2.yaml are the values a team gives each.
const chartGroup = "platform.gantry.test"

var gadgetsCRD = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// chartWorkspace copies the chart fixtures into a workspace of their own,
// the CRD's group made the test's own (a CRD is cluster-wide, and each
// test's inventory holds its own), in a git repository, and returns the
// workspace and the group. The CRD is deleted when the test ends.
func chartWorkspace(t *testing.T, ns string) (root, group string) {
	t.Helper()
	group = strings.ReplaceAll(ns, "-", "") + "." + chartGroup
	root = t.TempDir()
	src := filepath.Join("testdata", "charts")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(root, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), []byte(strings.ReplaceAll(string(b), chartGroup, group)), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	// A repository, as CI checks one out: a build reads the files of the
	// repository that holds its path, so values files beside the chart's
	// folder are read.
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.name=ci", "-c", "user.email=ci@example.com", "commit", "-q", "-m", "platform"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() {
		if env.Cluster == nil { // an offline run needs none, also under -short
			return
		}
		_ = env.Dynamic.Resource(gadgetsCRD).Delete(context.Background(), "gadgets."+group, metav1.DeleteOptions{})
	})
	return root, group
}

// extraNamespace creates a namespace for t besides its own, deleted when
// t ends: a chart's release namespace apart from its inventory's.
func extraNamespace(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gantry.dev/test": "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// exists says whether the object is in the cluster.
func exists(t *testing.T, gvr schema.GroupVersionResource, ns, name string) bool {
	t.Helper()
	_, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("%s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return err == nil
}

var (
	chartConfigMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	chartServices    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	chartPods        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	chartDeployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	chartJobs        = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

// chartActions is each object's action in a report, for messages.
func chartActions(r gantryRun) map[string]result.Action {
	out := map[string]result.Action{}
	for _, o := range r.res.Objects {
		out[o.Ref()] = o.Action
	}
	return out
}

// A chart's whole life as a unit: its hooks refused by default (nothing
// written, the hook named), left out or applied as objects when asked;
// the same chart again writes nothing; a diff to the next version names
// exactly what it changes; applying it prunes what it dropped; rollback
// brings the first version's objects back. The release is named by
// release-name and lives in target-namespace, apart from the inventory;
// the report names the chart and says its templates call lookup.
func TestChartUnitLifecycle(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rel := extraNamespace(t, ns+"-rel")
	root, _ := chartWorkspace(t, ns)
	ctx := context.Background()
	args := func(command, version string, extra ...string) []string {
		return append([]string{command, "--chart=" + filepath.Join(root, "platform-"+version),
			"--values=" + filepath.Join(root, "values-"+version+".yaml"), "--release-name=edge",
			"--target-namespace=" + rel, "--inventory=platform", "--inventory-namespace=" + ns, "--timeout=90s"}, extra...)
	}
	ref := func(kind, name string) string { return kind + "/" + rel + "/" + name }
	settings, features, svc, controller, migrate := ref("ConfigMap", "edge-settings"), ref("ConfigMap", "edge-features"),
		ref("Service", "edge"), ref("Deployment.apps", "edge-controller"), ref("Job.batch", "edge-migrate")

	// By default a chart's hooks are refused: the build fails, naming
	// the hook's file, before anything is read from or written to the
	// cluster.
	r := gantry(t, args("apply", "v1")...)
	if r.code != entrypoint.ExitInvalid || r.res == nil || r.res.Reason != result.ReasonBuildFailed {
		t.Fatalf("apply with a hook, refused: exit %d, want 2 with BuildFailed", r.code)
	}
	if !strings.Contains(r.stderr, "templates/migrate-job.yaml (pre-install)") || !strings.Contains(r.stderr, "chart-hooks") {
		t.Errorf("the refusal does not name the hook's file and the way out:\n%s", r.stderr)
	}
	if _, refused, ok := strings.Cut(r.stderr, "gantry does not: "); ok && strings.Contains(strings.SplitN(refused, ";", 2)[0], "test-connection") {
		t.Errorf("the refusal names the test hook, which is always left out:\n%s", r.stderr)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName("platform"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused run wrote its inventory (%v)", err)
	}
	if exists(t, gadgetsCRD, "", "gadgets."+strings.ReplaceAll(ns, "-", "")+"."+chartGroup) || exists(t, chartConfigMaps, rel, "edge-settings") ||
		exists(t, chartDeployments, rel, "edge-controller") || exists(t, chartServices, rel, "edge") {
		t.Errorf("the refused run wrote objects of the chart")
	}

	// leave-out: the chart's objects, without its hooks; the report says
	// which were left out, and that lookup was answered empty.
	r = gantry(t, args("apply", "v1", "--chart-hooks=leave-out")...)
	if r.code != entrypoint.ExitOK {
		t.Fatalf("apply v1, hooks left out: exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Created] != 4 || len(r.res.Objects) != 4 {
		t.Fatalf("apply v1, hooks left out: %v, want the CRD, Deployment, ConfigMap and Service created", chartActions(r))
	}
	if exists(t, chartJobs, rel, "edge-migrate") || exists(t, chartPods, rel, "edge-test") {
		t.Errorf("hooks left out are in the cluster")
	}
	if len(r.res.Charts) != 1 {
		t.Fatalf("the report names %d charts, want 1: %+v", len(r.res.Charts), r.res.Charts)
	}
	chart := r.res.Charts[0]
	if chart.Name != "platform 1.0.0" || !chart.Lookup || !strings.HasSuffix(chart.Folder, "platform-v1") {
		t.Errorf("the report's chart: %+v, want platform 1.0.0 from platform-v1, lookup said", chart)
	}
	if !slices.ContainsFunc(chart.LeftOut, func(s string) bool { return strings.HasSuffix(s, "templates/migrate-job.yaml (pre-install)") }) ||
		!slices.ContainsFunc(chart.LeftOut, func(s string) bool { return strings.HasSuffix(s, "templates/tests/test-connection.yaml (test)") }) {
		t.Errorf("the report's hooks left out: %v, want the Job and the test Pod", chart.LeftOut)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(rel).Get(ctx, "edge-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// .Release.Namespace is target-namespace, .Release.Name is
	// release-name, the values file is over the chart's values, and
	// .Capabilities are the cluster's (it serves apps/v1 Deployments).
	// lookup found nothing: it is answered empty, as helm template
	// answers it.
	want := map[string]string{"greeting": "hello from v1", "releaseName": "edge", "releaseNamespace": rel, "deploymentsServed": "true", "seenBefore": "false"}
	for k, v := range want {
		if cm.Data[k] != v {
			t.Errorf("ConfigMap edge-settings: %s = %q, want %q", k, cm.Data[k], v)
		}
	}
	if cm.Labels[inventory.NameLabel] != "platform" || cm.Labels[inventory.NamespaceLabel] != ns {
		t.Errorf("ConfigMap edge-settings: labels %v lack the inventory's", cm.Labels)
	}
	// The controller's pods are kwok's, simulated: it is Current once
	// kwok reports them ready.
	if o := objectByRef(r, controller); o == nil || o.Health == nil || o.Health.Status != "Current" {
		t.Errorf("the controller was not waited for: %+v", o)
	}

	// The job summary carries the chart as a fact.
	summary := filepath.Join(t.TempDir(), "summary.md")
	sr := gantryEnv(t, []string{"GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary}, args("diff", "v1", "--chart-hooks=leave-out", "--summary=true")...)
	if sr.code != entrypoint.ExitOK {
		t.Errorf("diff v1: exit %d\n%s", sr.code, sr.stderr)
	}
	if b, err := os.ReadFile(summary); err != nil || !strings.Contains(string(b), "**Chart** `platform 1.0.0` from ") ||
		!strings.Contains(string(b), "lookup") || !strings.Contains(string(b), "2 hooks left out") {
		t.Errorf("the summary does not carry the chart (%v):\n%s", err, b)
	}

	// objects: the pre-install Job is applied as an object of the set,
	// and waited for (its pod is kwok's, which completes it); the test
	// Pod is still left out. Nothing else changes.
	r = gantry(t, args("apply", "v1", "--chart-hooks=objects")...)
	if r.code != entrypoint.ExitOK {
		t.Fatalf("apply v1, hooks as objects: exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Created] != 1 || c[result.Unchanged] != 4 || objectByRef(r, migrate) == nil || objectByRef(r, migrate).Action != result.Created {
		t.Fatalf("apply v1, hooks as objects: %v, want the Job created and the rest unchanged", chartActions(r))
	}
	if o := objectByRef(r, migrate); o.Health == nil || o.Health.Status != "Current" {
		t.Errorf("the hook's Job was not waited for: %+v", o.Health)
	}
	if !exists(t, chartJobs, rel, "edge-migrate") || exists(t, chartPods, rel, "edge-test") {
		t.Errorf("hooks as objects: want the Job in the cluster and the test Pod not")
	}
	if l := r.res.Charts[0].LeftOut; len(l) != 1 || !strings.HasSuffix(l[0], "test-connection.yaml (test)") {
		t.Errorf("hooks as objects: left out %v, want the test hook alone", l)
	}
	// The Job's controller writes its status after the wait saw it
	// complete (kwok completes its pod): what gantry wrote is compared
	// once the controller is done.
	var before map[string]string
	for deadline := time.Now().Add(30 * time.Second); ; {
		before = resourceVersions(t, r)
		time.Sleep(2 * time.Second)
		if maps.Equal(before, resourceVersions(t, r)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chart's objects are still being written 30s after the apply")
		}
	}

	// The same chart again: nothing is written.
	r = gantry(t, args("apply", "v1", "--chart-hooks=objects")...)
	if r.code != entrypoint.ExitOK || r.res.Reason != result.ReasonSucceeded {
		t.Fatalf("apply v1 again: exit %d, %s\n%s", r.code, r.res.Reason, r.stderr)
	}
	if c := counts(t, r); c[result.Unchanged] != 5 || len(r.res.Objects) != 5 {
		t.Errorf("apply v1 again: %v, want all 5 unchanged", chartActions(r))
	}
	t.Logf("the no-op apply says: %s", r.res.Message)
	for ref, rv := range resourceVersions(t, r) {
		if before[ref] != rv {
			t.Errorf("%s: resourceVersion %s -> %s; the same chart again wrote it", ref, before[ref], rv)
		}
	}

	// diff to 2.0.0: exactly what it changes, nothing written.
	r = gantry(t, args("diff", "v2", "--chart-hooks=objects", "--detailed-exitcode")...)
	if r.code != entrypoint.ExitChanges {
		t.Fatalf("diff v2: exit %d, want 3\n%s", r.code, r.stderr)
	}
	changed := map[string]result.Action{}
	for ref, a := range chartActions(r) {
		if a != result.Unchanged {
			changed[ref] = a
		}
	}
	wantChanged := map[string]result.Action{settings: result.Configured, features: result.Created, svc: result.Deleted}
	if fmt.Sprint(changed) != fmt.Sprint(wantChanged) {
		t.Errorf("diff v2 changes %v, want %v", changed, wantChanged)
	}
	if r.res.Charts[0].Name != "platform 2.0.0" {
		t.Errorf("diff v2 names chart %q", r.res.Charts[0].Name)
	}
	for _, s := range []string{"+  mode: strict", "-  greeting: hello from v1", "+  greeting: hello from v2", "+  enabled: search,export"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("diff v2 does not show %q:\n%s", s, r.stdout)
		}
	}
	if !exists(t, chartServices, rel, "edge") || exists(t, chartConfigMaps, rel, "edge-features") {
		t.Errorf("diff wrote")
	}

	// apply 2.0.0: the Service it dropped is pruned.
	r = gantry(t, args("apply", "v2", "--chart-hooks=objects")...)
	if r.code != entrypoint.ExitOK {
		t.Fatalf("apply v2: exit %d\n%s", r.code, r.stderr)
	}
	if a := chartActions(r); a[svc] != result.Deleted || a[features] != result.Created || a[settings] != result.Configured {
		t.Errorf("apply v2: %v", a)
	}
	if exists(t, chartServices, rel, "edge") || !exists(t, chartConfigMaps, rel, "edge-features") {
		t.Errorf("apply v2: the Service is still there, or the new ConfigMap is not")
	}
	v2 := r.res.RecordedRevision

	// rollback: the revision before, 1.0.0 with its hook, comes back.
	r = gantry(t, "rollback", "--inventory=platform", "--inventory-namespace="+ns, "--timeout=90s")
	if r.code != entrypoint.ExitOK || r.res.Reason != result.ReasonRolledBack && !r.res.Succeeded() {
		t.Fatalf("rollback: exit %d, %s\n%s", r.code, r.res.Reason, r.stderr)
	}
	if r.res.RolledBackTo != v2-1 {
		t.Errorf("rolled back to %d, want %d", r.res.RolledBackTo, v2-1)
	}
	if a := chartActions(r); a[svc] != result.Created || a[features] != result.Deleted || a[settings] != result.Configured {
		t.Errorf("rollback: %v", a)
	}
	if !exists(t, chartServices, rel, "edge") || exists(t, chartConfigMaps, rel, "edge-features") || !exists(t, chartJobs, rel, "edge-migrate") {
		t.Errorf("rollback did not restore 1.0.0's objects")
	}
	cm, err = env.Client.CoreV1().ConfigMaps(rel).Get(ctx, "edge-settings", metav1.GetOptions{})
	if err != nil || cm.Data["greeting"] != "hello from v1" || cm.Data["mode"] != "" {
		t.Errorf("rollback: ConfigMap edge-settings %v (%v), want 1.0.0's", cm.Data, err)
	}
}

// gantryEnv is gantry with variables besides those gantry gives every
// run (a CI's, such as GITHUB_STEP_SUMMARY).
func gantryEnv(t *testing.T, extra []string, args ...string) gantryRun {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	environ := append([]string{"HOME=" + os.Getenv("HOME"), "GANTRY_KUBECONFIG=" + env.Cluster.Kubeconfig, "GANTRY_REPORT=" + report, recordKeyEnv}, extra...)
	var stdout, stderr bytes.Buffer
	code := entrypoint.Run(context.Background(), args, environ, &stdout, &stderr)
	r := gantryRun{code: code, stdout: stdout.String(), stderr: stderr.String()}
	if b, err := os.ReadFile(report); err == nil {
		r.res = &result.Result{}
		if err := json.Unmarshal(b, r.res); err != nil {
			t.Fatalf("report is not JSON: %v", err)
		}
	}
	t.Logf("gantry %s: exit %d\n%s", args[0], code, r.stderr)
	return r
}

// A run file whose first unit is a chart (its CRD and controller) and
// whose second, depending on it, applies a custom resource of that CRD
// from a plain folder: both apply, the second once the first is healthy
// (its controller's pods are kwok's, simulated).
func TestChartRunFile(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	root, group := chartWorkspace(t, ns)
	if err := os.MkdirAll(filepath.Join(root, "gadgets"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "gadgets", "gadget.yaml"), fmt.Sprintf("apiVersion: %s/v1\nkind: Gadget\nmetadata: {name: first, namespace: %s}\nspec: {size: 3}\n", group, ns))
	// A third unit: a kustomize overlay that renders the same chart
	// through helmCharts (its CRD left to the first unit, as
	// includeCRDs defaults to false) beside a Gadget of that CRD.
	if err := os.CopyFS(filepath.Join(root, "addons", "charts", "platform"), os.DirFS(filepath.Join(root, "platform-v1"))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "addons", "gadget.yaml"), fmt.Sprintf("apiVersion: %s/v1\nkind: Gadget\nmetadata: {name: second}\nspec: {size: 1}\n", group))
	writeFile(t, filepath.Join(root, "addons", "kustomization.yaml"), fmt.Sprintf(`namespace: %s
resources: [gadget.yaml]
helmCharts:
- name: platform
  releaseName: addon
  valuesFile: ../values-v1.yaml
  skipHooks: true
  skipTests: true
`, ns))
	kc := inWorkspace(t, root, env.Cluster.Kubeconfig, "a.kubeconfig")
	runFile := filepath.Join(root, "gantry.yaml")
	writeFile(t, runFile, fmt.Sprintf(`defaults:
  inventory-namespace: %[1]s
  kubeconfig: %[2]s
  timeout: 2m
units:
  - name: platform
    chart: platform-v1
    values: [values-v1.yaml]
    chart-hooks: leave-out
    target-namespace: %[1]s
    inventory: platform
    wait: false
  - name: gadgets
    depends-on: [platform]
    path: gadgets
    inventory: gadgets
  - name: addons
    depends-on: [platform]
    path: addons
    inventory: addons
`, ns, kc))
	r := gantryRunFile(t, context.Background(), "apply", "--run-file", runFile)
	if r.code != entrypoint.ExitOK || r.run == nil || r.run.Reason != result.ReasonSucceeded {
		t.Fatalf("run file: exit %d\n%s", r.code, r.stderr)
	}
	platform, gadgets := r.unit(t, "platform"), r.unit(t, "gadgets")
	if platform.Result == nil || gadgets.Result == nil {
		t.Fatalf("units without results: %+v %+v", platform, gadgets)
	}
	// The release is named after the chart when release-name is not given.
	for _, ref := range []string{"CustomResourceDefinition.apiextensions.k8s.io/gadgets." + group, "Deployment.apps/" + ns + "/platform-controller",
		"ConfigMap/" + ns + "/platform-settings", "Service/" + ns + "/platform"} {
		if o := objectIn(platform.Result, ref); o == nil || o.Action != result.Created {
			t.Errorf("platform: %s %+v, want created", ref, o)
		}
	}
	if len(platform.Result.Charts) != 1 || platform.Result.Charts[0].Name != "platform 1.0.0" {
		t.Errorf("platform's report names charts %+v", platform.Result.Charts)
	}
	// platform is depended on: its controller was waited for (kwok's
	// pods), though it says wait: false, before gadgets started.
	if o := objectIn(platform.Result, "Deployment.apps/"+ns+"/platform-controller"); o == nil || o.Health == nil || o.Health.Status != "Current" {
		t.Errorf("platform's controller was not waited for: %+v", o)
	}
	if gadgets.Started.Before(platform.Finished) {
		t.Errorf("gadgets started at %s, before platform was healthy (%s)", gadgets.Started, platform.Finished)
	}
	if o := objectIn(gadgets.Result, "Gadget."+group+"/"+ns+"/first"); o == nil || o.Action != result.Created || o.Health == nil || o.Health.Status != "Current" {
		t.Errorf("gadgets: %+v, want the Gadget created and Current", o)
	}
	addons := r.unit(t, "addons")
	if addons.Result == nil {
		t.Fatalf("addons without a result: %+v", addons)
	}
	for _, ref := range []string{"Deployment.apps/" + ns + "/addon-controller", "ConfigMap/" + ns + "/addon-settings", "Service/" + ns + "/addon", "Gadget." + group + "/" + ns + "/second"} {
		if o := objectIn(addons.Result, ref); o == nil || o.Action != result.Created {
			t.Errorf("addons: %s %+v, want created", ref, o)
		}
	}
	if o := objectIn(addons.Result, "CustomResourceDefinition.apiextensions.k8s.io/gadgets."+group); o != nil {
		t.Errorf("addons applied the chart's CRD (includeCRDs is false): %+v", o)
	}
	if len(addons.Result.Charts) != 1 || !strings.HasPrefix(addons.Result.Charts[0].Name, "platform") || !addons.Result.Charts[0].Lookup {
		t.Errorf("addons' report names charts %+v", addons.Result.Charts)
	}
}

// An install by Helm, taken over by gantry: the same chart, applied with
// gantry, fails on no conflict (Helm writes with server-side apply as
// field manager helm, and gantry applies the same values), and its
// objects are gantry's from then on, listed in its inventory. What the
// user does next is delete Helm's record of the release, the
// sh.helm.release.v1.<release>.v<N> Secret (never helm uninstall, which
// deletes the objects): gantry neither deletes it nor needs it.
func TestChartTakeOverFromHelm(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	root, group := chartWorkspace(t, ns)
	ctx := context.Background()
	helm, err := cluster.Tool("helm")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command(helm, "install", "edge", filepath.Join(root, "platform-v1"), "--namespace="+ns,
		"--values="+filepath.Join(root, "values-v1.yaml"), "--kubeconfig="+env.Cluster.Kubeconfig, "--wait", "--timeout=2m")
	cmd.Env = cluster.ToolEnv(home)
	// Helm runs the pre-install hook Job and waits for it: its pod is
	// kwok's, which completes it.
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	releaseSecret := "sh.helm.release.v1.edge.v1"
	if _, err := env.Client.CoreV1().Secrets(ns).Get(ctx, releaseSecret, metav1.GetOptions{}); err != nil {
		t.Fatalf("Helm's record of the release: %v", err)
	}
	before, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "edge-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	managers := func(m []metav1.ManagedFieldsEntry) []string {
		var out []string
		for _, e := range m {
			out = append(out, e.Manager+"/"+string(e.Operation))
		}
		return out
	}
	t.Logf("Helm's ConfigMap is managed by %v", managers(before.ManagedFields))

	args := []string{"apply", "--chart=" + filepath.Join(root, "platform-v1"), "--values=" + filepath.Join(root, "values-v1.yaml"),
		"--release-name=edge", "--target-namespace=" + ns, "--chart-hooks=leave-out", "--inventory=platform", "--inventory-namespace=" + ns, "--timeout=90s"}
	r := gantry(t, args...)
	if r.code != entrypoint.ExitOK {
		t.Fatalf("gantry apply over Helm's install: exit %d\n%s", r.code, r.stderr)
	}
	refs := []string{"CustomResourceDefinition.apiextensions.k8s.io/gadgets." + group, "Deployment.apps/" + ns + "/edge-controller",
		"ConfigMap/" + ns + "/edge-settings", "Service/" + ns + "/edge"}
	for _, ref := range refs {
		o := objectByRef(r, ref)
		if o == nil || o.Action == result.Created || o.Action == result.Failed {
			t.Errorf("%s: %+v, want Helm's object taken over", ref, o)
			continue
		}
		for _, c := range o.Conflicts {
			t.Errorf("%s: field %s of %s reported as a conflict; gantry applies the values Helm applied", ref, c.Field, c.Manager)
		}
	}
	inv, err := (&inventory.Store{Client: env.Client}).Load(ctx, ns, "platform")
	if err != nil || len(inv.Entries) != len(refs) {
		t.Fatalf("inventory: %v, %d entries, want %d", err, len(inv.Entries), len(refs))
	}
	after, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "edge-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Labels[inventory.NameLabel] != "platform" || !slices.Contains(managers(after.ManagedFields), pipeline.FieldManager+"/Apply") {
		t.Errorf("ConfigMap edge-settings: labels %v, managers %v: not gantry's", after.Labels, managers(after.ManagedFields))
	}
	// Helm's fields are gantry's now, as kubectl's are when gantry takes
	// over: a field gantry later drops from the set is removed, not left
	// to Helm.
	if m := managers(after.ManagedFields); slices.ContainsFunc(m, func(s string) bool { return strings.HasPrefix(s, "helm/") }) {
		t.Errorf("ConfigMap edge-settings: managers %v; Helm still owns fields", m)
	}
	// The same data as Helm rendered: gantry's .Capabilities are the
	// cluster's, as Helm's were, and lookup found nothing on either
	// install.
	for k, v := range before.Data {
		if after.Data[k] != v {
			t.Errorf("ConfigMap edge-settings: %s %q -> %q", k, v, after.Data[k])
		}
	}
	// Hooks Helm ran stay where Helm left them, outside gantry's set.
	if !exists(t, chartJobs, ns, "edge-migrate") {
		t.Errorf("the Job Helm's hook ran is gone")
	}
	if _, err := env.Client.CoreV1().Secrets(ns).Get(ctx, releaseSecret, metav1.GetOptions{}); err != nil {
		t.Errorf("gantry deleted Helm's record of the release: %v", err)
	}

	// The user deletes Helm's record of the release (every revision of
	// it), so that a later helm uninstall cannot delete what gantry now
	// manages; gantry's next run needs it not.
	if err := env.Client.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "owner=helm,name=edge"}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Secrets(ns).Get(ctx, releaseSecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Helm's record of the release is not labelled owner=helm,name=edge: %v", err)
	}
	r = gantry(t, args...)
	if r.code != entrypoint.ExitOK {
		t.Fatalf("gantry apply after Helm's record is deleted: exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Unchanged] != len(refs) {
		t.Errorf("gantry apply after Helm's record is deleted: %v, want all unchanged", chartActions(r))
	}
	for _, ref := range refs {
		if o := objectByRef(r, ref); o == nil {
			t.Errorf("%s left the set", ref)
		}
	}
}

// Off CI, a run records the commit checked out where its configuration
// is, and that folder as its source: for a chart unit, the chart's folder
// and the repository that holds it, wherever gantry is started from.
func TestChartRevisionIsTheChartsCommit(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	root, _ := chartWorkspace(t, ns)
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "platform-v1")
	r := gantry(t, "diff", "--chart="+chart, "--values="+filepath.Join(root, "values-v1.yaml"), "--chart-hooks=leave-out",
		"--target-namespace="+ns, "--inventory=platform", "--inventory-namespace="+ns)
	if r.code != entrypoint.ExitOK || r.res == nil {
		t.Fatalf("diff: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.res.Revision, strings.TrimSpace(string(head))) {
		t.Errorf("revision %q, want the chart's repository's commit %s", r.res.Revision, head)
	}
	if r.res.Source != chart {
		t.Errorf("source %q, want the chart's folder %s", r.res.Source, chart)
	}
}

// A pull request that upgrades a vendored chart from 1.0.0 to 2.0.0,
// previewed with diff --offline against the commit before it: no
// cluster, no credentials; the chart is rendered on both sides and the
// diff names exactly what the upgrade changes.
func TestChartOfflineDiffOfAnUpgrade(t *testing.T) {
	t.Parallel()
	root, _ := chartWorkspace(t, "offline")
	base, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The vendored chart is platform-v1, its values values-v1.yaml; the
	// pull request replaces both with 2.0.0's.
	chart, values := filepath.Join(root, "platform-v1"), filepath.Join(root, "values-v1.yaml")
	if err := os.RemoveAll(chart); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(chart, os.DirFS(filepath.Join(root, "platform-v2"))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "values-v2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, values, string(b))
	const ns = "shop"
	r := gantryWith(t, "", "diff", "--offline", "--base="+strings.TrimSpace(string(base)), "--chart="+chart, "--values="+values,
		"--release-name=edge", "--target-namespace="+ns, "--chart-hooks=objects", "--detailed-exitcode")
	if r.code != entrypoint.ExitChanges || r.res == nil {
		t.Fatalf("diff --offline: exit %d, want 3\n%s", r.code, r.stderr)
	}
	changed := map[string]result.Action{}
	for ref, a := range chartActions(r) {
		if a != result.Unchanged {
			changed[ref] = a
		}
	}
	want := map[string]result.Action{"ConfigMap/" + ns + "/edge-settings": result.Configured, "ConfigMap/" + ns + "/edge-features": result.Created, "Service/" + ns + "/edge": result.Deleted}
	if fmt.Sprint(changed) != fmt.Sprint(want) {
		t.Errorf("diff --offline changes %v, want %v", changed, want)
	}
	if len(r.res.Charts) == 0 || r.res.Charts[0].Name != "platform 2.0.0" {
		t.Errorf("diff --offline names charts %+v, want platform 2.0.0", r.res.Charts)
	}
	for _, s := range []string{"+  mode: strict", "+  greeting: hello from v2", "+  enabled: search,export"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("diff --offline does not show %q:\n%s", s, r.stdout)
		}
	}
}

// A chart's template that looks up a Secret the cluster holds, during a
// diff against that cluster, gets nothing: lookup is answered empty on
// every command, so that no diff, summary or report can carry what a
// chart from a pull request read from the cluster.
func TestChartLookupOfALiveSecretReadsNothing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	const canary = "live-secret-canary-9f3a"
	if _, err := env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		StringData: map[string]string{"password": canary}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "peek", "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "peek", "Chart.yaml"), "apiVersion: v2\nname: peek\nversion: 0.1.0\n")
	writeFile(t, filepath.Join(root, "peek", "templates", "cm.yaml"), `{{- $s := lookup "v1" "Secret" .Release.Namespace "db" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: peek
data:
  found: {{ $s | toJson | quote }}
  password: {{ (index ($s.data | default dict) "password") | default "" | b64dec | quote }}
`)
	summary := filepath.Join(t.TempDir(), "summary.md")
	r := gantryEnv(t, []string{"GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary},
		"diff", "--chart="+filepath.Join(root, "peek"), "--target-namespace="+ns, "--inventory=peek", "--inventory-namespace="+ns, "--summary=true")
	if r.code != entrypoint.ExitOK {
		t.Fatalf("diff: exit %d\n%s", r.code, r.stderr)
	}
	report, _ := json.Marshal(r.res)
	md, _ := os.ReadFile(summary)
	for what, out := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "report": string(report), "summary": string(md)} {
		if strings.Contains(out, canary) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(canary))) {
			t.Errorf("the live Secret's value is in the %s", what)
		}
	}
	// What the template got: an empty lookup, said.
	if !strings.Contains(r.stdout, "found: '{}'") && !strings.Contains(r.stdout, `found: "{}"`) {
		t.Errorf("the diff does not show the empty lookup:\n%s", r.stdout)
	}
	if len(r.res.Charts) != 1 || !r.res.Charts[0].Lookup {
		t.Errorf("the report does not say the chart looked up: %+v", r.res.Charts)
	}
}
