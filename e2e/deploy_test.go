// Package e2e holds gantry's end-to-end tests: the gantry entrypoint, run
// with real flags and environment, against a real control plane.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gantry-dev/gantry/e2e/cluster/clustertest"
	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources/charts"
)

var env = clustertest.New()

func TestMain(m *testing.M) {
	// The test binary renders charts in a process of its own, as
	// gantry does: it is that process, started again.
	if child, code := charts.ChildMain(); child {
		os.Exit(code)
	}
	code := env.Run(m)
	writeFigures(faultSeedFromEnv())
	os.Exit(code)
}

// gantryRun is the outcome of one gantry invocation.
type gantryRun struct {
	code           int
	stdout, stderr string
	res            *result.Result
	took           time.Duration
}

// gantry runs the entrypoint in-process, as the binary would, with a JSON
// report, and returns what it printed and reported.
func gantry(t *testing.T, args ...string) gantryRun {
	t.Helper()
	kubeconfig := ""
	if env.Cluster != nil { // a build needs none, also under -short
		kubeconfig = env.Cluster.Kubeconfig
	}
	return gantryWith(t, kubeconfig, args...)
}

// testRecordKey is the workflow's record-key in the tests: every run is
// given it, as a workflow gives its secret to each of its runs.
const testRecordKey = "e2e-record-key-0123456789abcdef0123456789"

var recordKeyEnv = "GANTRY_RECORD_KEY=" + testRecordKey

// gantryWith is gantry against the cluster that kubeconfig reaches.
func gantryWith(t *testing.T, kubeconfig string, args ...string) gantryRun {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	// As variables, which every command reads; a flag would be refused by
	// the commands that do not use it.
	environ := []string{"HOME=" + os.Getenv("HOME"), "GANTRY_KUBECONFIG=" + kubeconfig, "GANTRY_REPORT=" + report, recordKeyEnv}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := entrypoint.Run(context.Background(), args, environ, &stdout, &stderr)
	r := gantryRun{code: code, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if b, err := os.ReadFile(report); err == nil {
		r.res = &result.Result{}
		if err := json.Unmarshal(b, r.res); err != nil {
			t.Fatalf("report is not JSON: %v", err)
		}
	}
	t.Logf("gantry %s: exit %d in %s\n%s", strings.Join(args[:min(len(args), 1)], " "), code, r.took.Round(time.Millisecond), r.stderr)
	return r
}

// app copies the test fixture for one test and returns its folder and the
// namespace its objects go to.
func app(t *testing.T, fixture string) (dir, appNS string) {
	t.Helper()
	ns := env.Namespace(t)
	appNS = ns + "-app"
	dir = filepath.Join(t.TempDir(), fixture)
	src := filepath.Join("testdata", fixture)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.CoreV1().Namespaces().Delete(ctx, appNS, metav1.DeleteOptions{})
		crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		_ = env.Dynamic.Resource(crd).Delete(ctx, "widgets."+appNS+".gantry.test", metav1.DeleteOptions{})
	})
	return dir, appNS
}

// applyArgs are the arguments of an apply of the app fixture.
func applyArgs(dir, invNS, appNS string, extra ...string) []string {
	return append([]string{"apply", "--path=" + dir, "--inventory=app", "--inventory-namespace=" + invNS,
		"--substitute=NS=" + appNS, "--timeout=90s"}, extra...)
}

func counts(t *testing.T, r gantryRun) map[result.Action]int {
	t.Helper()
	if r.res == nil {
		t.Fatalf("no report; stderr:\n%s", r.stderr)
	}
	return r.res.Counts()
}

func objectByRef(r gantryRun, ref string) *result.Object {
	for i := range r.res.Objects {
		if r.res.Objects[i].Ref() == ref {
			return &r.res.Objects[i]
		}
	}
	return nil
}

func removeFile(path string) error { return os.Remove(path) }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func replaceInFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	writeFile(t, path, strings.Replace(string(b), old, new, 1))
}

// resourceVersions reads the resourceVersion of every object in the report.
func resourceVersions(t *testing.T, r gantryRun) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range r.res.Objects {
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err != nil {
			t.Fatal(err)
		}
		mapping, err := env.Mapper(t).RESTMapping(gv.WithKind(o.Kind).GroupKind(), gv.Version)
		if err != nil {
			t.Fatalf("%s: %v", o.Ref(), err)
		}
		u, err := env.Dynamic.Resource(mapping.Resource).Namespace(o.Namespace).Get(context.Background(), o.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", o.Ref(), err)
		}
		out[o.Ref()] = u.GetResourceVersion()
	}
	return out
}

// Acceptance 1 and 2: the overlay applies in one run and becomes healthy;
// the same run again writes nothing.
func TestApplyOverlayThenNoop(t *testing.T) {
	t.Parallel()
	dir, appNS := app(t, "app")
	invNS := strings.TrimSuffix(appNS, "-app")

	first := gantry(t, applyArgs(dir, invNS, appNS)...)
	if first.code != entrypoint.ExitOK {
		t.Fatalf("first apply: exit %d, want 0\n%s", first.code, first.stderr)
	}
	c := counts(t, first)
	// Namespace, CRD, Widget, ConfigMap, Deployment, Service, HPA.
	if c[result.Created] != 7 || c[result.Failed] != 0 {
		t.Fatalf("first apply counts %v, want 7 created", c)
	}
	d, err := env.Client.AppsV1().Deployments(appNS).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.AvailableReplicas != 2 {
		t.Errorf("Deployment web: %d available replicas after apply returned, want 2", d.Status.AvailableReplicas)
	}
	if d.Labels[inventory.NameLabel] != "app" || d.Labels[inventory.NamespaceLabel] != invNS {
		t.Errorf("Deployment web labels %v lack the inventory's", d.Labels)
	}
	if o := objectByRef(first, "Deployment.apps/"+appNS+"/web"); o == nil || o.Source != "deployment.yaml" && !strings.HasSuffix(o.Source, "/deployment.yaml") {
		t.Errorf("Deployment web source = %+v, want deployment.yaml", o)
	}
	if o := objectByRef(first, "Deployment.apps/"+appNS+"/web"); o == nil || o.Health == nil || o.Health.Status != "Current" {
		t.Errorf("Deployment web health = %+v, want Current", o)
	}
	inv, err := (&inventory.Store{Client: env.Client}).Load(context.Background(), invNS, "app")
	if err != nil || len(inv.Entries) != 7 {
		t.Fatalf("inventory: %v, %d entries, want 7", err, len(inv.Entries))
	}
	before := resourceVersions(t, first)

	show := gantry(t, "inventory", "--inventory=app", "--inventory-namespace="+invNS)
	if show.code != 0 || !strings.Contains(show.stdout, appNS+"_web_apps_Deployment\tv1") || strings.Count(show.stdout, "\n") != 8 {
		t.Errorf("inventory show: exit %d\n%s%s", show.code, show.stdout, show.stderr)
	}
	list := gantry(t, "inventory", "--inventory-namespace="+invNS)
	if list.code != 0 || !strings.HasPrefix(list.stdout, invNS+"/app\t7 objects\tgit revision ") {
		t.Errorf("inventory list: exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}

	second := gantry(t, applyArgs(dir, invNS, appNS)...)
	if second.code != entrypoint.ExitOK {
		t.Fatalf("second apply: exit %d\n%s", second.code, second.stderr)
	}
	if c := counts(t, second); c[result.Unchanged] != 7 {
		t.Fatalf("second apply counts %v, want 7 unchanged", c)
	}
	after := resourceVersions(t, second)
	for ref, rv := range before {
		if after[ref] != rv {
			t.Errorf("%s: resourceVersion %s -> %s; a no-op run wrote it", ref, rv, after[ref])
		}
	}
}

// Acceptance 3: one changed field configures exactly one object; a removed
// object is pruned; one annotated prune: disabled is kept and reported
// skipped.
func TestChangePruneAndKeep(t *testing.T) {
	t.Parallel()
	dir, appNS := app(t, "app")
	invNS := strings.TrimSuffix(appNS, "-app")
	extra := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: ${NS}\ndata:\n  a: b\n"
	keep := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  namespace: ${NS}\n  annotations:\n    kustomize.toolkit.fluxcd.io/prune: disabled\ndata:\n  a: b\n"
	writeFile(t, filepath.Join(dir, "extra.yaml"), extra)
	writeFile(t, filepath.Join(dir, "keep.yaml"), keep)
	replaceInFile(t, filepath.Join(dir, "kustomization.yaml"), "  - hpa.yaml\n", "  - hpa.yaml\n  - extra.yaml\n  - keep.yaml\n")
	if r := gantry(t, applyArgs(dir, invNS, appNS)...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}

	replaceInFile(t, filepath.Join(dir, "widget.yaml"), "size: 3", "size: 4")
	replaceInFile(t, filepath.Join(dir, "kustomization.yaml"), "  - extra.yaml\n  - keep.yaml\n", "")
	r := gantry(t, applyArgs(dir, invNS, appNS)...)
	if r.code != 0 {
		t.Fatalf("second apply: exit %d\n%s", r.code, r.stderr)
	}
	c := counts(t, r)
	if c[result.Configured] != 1 || c[result.Deleted] != 1 || c[result.Skipped] != 1 || c[result.Created] != 0 {
		t.Fatalf("counts %v, want 1 configured, 1 deleted, 1 skipped", c)
	}
	if o := objectByRef(r, "Widget."+appNS+".gantry.test/"+appNS+"/sprocket"); o == nil || o.Action != result.Configured {
		t.Errorf("Widget sprocket: %+v, want configured", o)
	}
	if o := objectByRef(r, "ConfigMap/"+appNS+"/keep"); o == nil || o.Action != result.Skipped || !strings.Contains(o.Error, "prune: disabled") {
		t.Errorf("ConfigMap keep: %+v, want skipped for prune: disabled", o)
	}
	ctx := context.Background()
	if _, err := env.Client.CoreV1().ConfigMaps(appNS).Get(ctx, "extra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap extra: %v, want it pruned", err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(appNS).Get(ctx, "keep", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap keep: %v, want it kept", err)
	}
	inv, _ := (&inventory.Store{Client: env.Client}).Load(ctx, invNS, "app")
	for _, e := range inv.Entries {
		if strings.Contains(e.ID, "_extra_") || strings.Contains(e.ID, "_keep_") {
			t.Errorf("inventory still lists %s", e.ID)
		}
	}
}

// appliedApp applies the app fixture without waiting, and returns it with
// its namespaces and its live Deployment web.
func appliedApp(t *testing.T) (dir, appNS, invNS string, web *appsv1.Deployment) {
	t.Helper()
	dir, appNS = app(t, "app")
	invNS = strings.TrimSuffix(appNS, "-app")
	if r := gantry(t, applyArgs(dir, invNS, appNS, "--wait=false")...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	web, err := env.Client.AppsV1().Deployments(appNS).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, appNS, invNS, web
}

// Acceptance 4: a changed immutable field fails naming the field; with
// force the object is recreated.
func TestImmutableFieldNeedsForce(t *testing.T) {
	t.Parallel()
	dir, appNS, invNS, old := appliedApp(t)
	ctx := context.Background()
	path := filepath.Join(dir, "deployment.yaml")
	b, _ := os.ReadFile(path)
	writeFile(t, path, strings.ReplaceAll(string(b), "app: web", "app: web2"))

	r := gantry(t, applyArgs(dir, invNS, appNS, "--wait=false")...)
	if r.code != entrypoint.ExitFailed {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "spec.selector") || !strings.Contains(r.stderr, "immutable") || !strings.Contains(r.stderr, "Deployment.apps/"+appNS+"/web") {
		t.Errorf("error does not name the Deployment and its immutable spec.selector:\n%s", r.stderr)
	}
	if r.res.Reason != result.ReasonValidationFailed {
		t.Errorf("reason %s, want ValidationFailed", r.res.Reason)
	}

	diffArgs := applyArgs(dir, invNS, appNS, "--force")
	diffArgs[0] = "diff"
	if r := gantry(t, diffArgs...); r.code != 0 || objectByRef(r, "Deployment.apps/"+appNS+"/web") == nil || objectByRef(r, "Deployment.apps/"+appNS+"/web").Action != result.Recreated {
		t.Errorf("diff with force: exit %d, web %+v", r.code, objectByRef(r, "Deployment.apps/"+appNS+"/web"))
	}
	r = gantry(t, applyArgs(dir, invNS, appNS, "--wait=false", "--force")...)
	if r.code != 0 {
		t.Fatalf("with force: exit %d\n%s", r.code, r.stderr)
	}
	if o := objectByRef(r, "Deployment.apps/"+appNS+"/web"); o == nil || o.Action != result.Recreated || !strings.Contains(r.stderr, "1 recreated") {
		t.Errorf("web reported as %+v, want recreated\n%s", o, r.stderr)
	}
	d, err := env.Client.AppsV1().Deployments(appNS).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == old.UID {
		t.Errorf("Deployment web keeps UID %s; want it recreated", d.UID)
	}
	if d.Spec.Selector.MatchLabels["app"] != "web2" {
		t.Errorf("selector %v, want app=web2", d.Spec.Selector.MatchLabels)
	}
}

// force recreates only what the server would accept as new: a change that
// is invalid in itself (replicas: -1, alone or beside an immutable
// selector change) fails validation, says nothing of immutability, and
// leaves the live Deployment where it was.
func TestForceNeverDeletesWhatItCannotCreate(t *testing.T) {
	t.Parallel()
	dir, appNS, invNS, old := appliedApp(t)
	ctx := context.Background()
	path := filepath.Join(dir, "deployment.yaml")
	orig, _ := os.ReadFile(path)
	if !regexp.MustCompile(`replicas: \d+`).Match(orig) {
		t.Fatalf("the fixture's Deployment sets no replicas:\n%s", orig)
	}
	invalid := regexp.MustCompile(`replicas: \d+`).ReplaceAllString(string(orig), "replicas: -1")
	for name, content := range map[string]string{
		"invalid":                       invalid,
		"invalid and a selector change": strings.ReplaceAll(invalid, "app: web", "app: web2"),
	} {
		writeFile(t, path, content)
		r := gantry(t, applyArgs(dir, invNS, appNS, "--wait=false", "--force")...)
		if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonValidationFailed {
			t.Errorf("%s, with force: exit %d, reason %s; want 1, ValidationFailed\n%s", name, r.code, r.res.Reason, r.stderr)
		}
		if !strings.Contains(r.stderr, "spec.replicas") || strings.Contains(r.stderr, "immutable") {
			t.Errorf("%s: the error should name spec.replicas and not call it immutable:\n%s", name, r.stderr)
		}
		d, err := env.Client.AppsV1().Deployments(appNS).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || d.UID != old.UID || d.Spec.Selector.MatchLabels["app"] != "web" {
			t.Fatalf("%s: the live Deployment was deleted or changed (error %v)", name, err)
		}
	}
}

// The force input alone does not recreate a bound PersistentVolumeClaim:
// deleting it releases its volume, whose reclaim policy may delete the
// data. Annotated gantry.dev/force: enabled itself, the claim is recreated.
func TestForceKeepsABoundClaim(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              ns,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
		},
	}
	if _, err := env.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	claim := func(mode, annotations string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: %s
  annotations: {%s}
spec:
  storageClassName: %s
  accessModes: [%s]
  resources: {requests: {storage: 1Gi}}
`, ns, annotations, ns, mode)
	}
	args := func(dir string) []string {
		return []string{"apply", "--path=" + dir, "--inventory=claim", "--inventory-namespace=" + ns, "--timeout=60s", "--force", "--wait=false"}
	}
	if r := gantry(t, args(writeSet(t, claim("ReadWriteOnce", "")))...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	var old *corev1.PersistentVolumeClaim
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		old = c
		return err == nil && c.Status.Phase == corev1.ClaimBound, nil
	}); err != nil {
		t.Fatalf("the claim never bound to %s: %v", pv.Name, err)
	}

	r := gantry(t, args(writeSet(t, claim("ReadWriteMany", "")))...)
	if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonValidationFailed || !strings.Contains(r.stderr, "bound to PersistentVolume "+pv.Name) {
		t.Errorf("force on a bound claim: exit %d, %s; want 1, ValidationFailed, naming its volume\n%s", r.code, r.res.Reason, r.stderr)
	}
	if c, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{}); err != nil || c.UID != old.UID {
		t.Fatalf("the bound claim was deleted (error %v)", err)
	}

	r = gantry(t, args(writeSet(t, claim("ReadWriteMany", "gantry.dev/force: enabled")))...)
	if o := objectByRef(r, "PersistentVolumeClaim/"+ns+"/data"); r.code != 0 || o == nil || o.Action != result.Recreated {
		t.Fatalf("annotated: exit %d, %+v\n%s", r.code, o, r.stderr)
	}
}

// Nor does it recreate a StatefulSet whose claim retention policy deletes
// its claims with it; annotated itself, the StatefulSet is recreated.
func TestForceKeepsAStatefulSetThatDeletesItsClaims(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	sts := func(size, annotations string) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  namespace: %[1]s
  annotations: {%[3]s}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete, whenScaled: Retain}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: registry.k8s.io/pause:3.10, volumeMounts: [{name: data, mountPath: /data}]}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: %[2]s}}
`, ns, size, annotations)
	}
	args := func(dir string) []string {
		return []string{"apply", "--path=" + dir, "--inventory=db", "--inventory-namespace=" + ns, "--timeout=60s", "--force", "--wait=false"}
	}
	if r := gantry(t, args(writeSet(t, sts("1Gi", "")))...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	old, err := env.Client.AppsV1().StatefulSets(ns).Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := gantry(t, args(writeSet(t, sts("2Gi", "")))...)
	if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonValidationFailed || !strings.Contains(r.stderr, "persistentVolumeClaimRetentionPolicy deletes its claims") {
		t.Errorf("force on the StatefulSet: exit %d, %s; want 1, ValidationFailed, naming its retention policy\n%s", r.code, r.res.Reason, r.stderr)
	}
	if s, err := env.Client.AppsV1().StatefulSets(ns).Get(context.Background(), "db", metav1.GetOptions{}); err != nil || s.UID != old.UID {
		t.Fatalf("the StatefulSet was deleted (error %v)", err)
	}
	r = gantry(t, args(writeSet(t, sts("2Gi", "gantry.dev/force: enabled")))...)
	if o := objectByRef(r, "StatefulSet.apps/"+ns+"/db"); r.code != 0 || o == nil || o.Action != result.Recreated {
		t.Fatalf("annotated: exit %d, %+v\n%s", r.code, o, r.stderr)
	}
}

// Acceptance 5: one object the API server rejects among twenty valid ones:
// nothing is written, the error names the object and its file, exit 1.
func TestRejectedObjectWritesNothing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	for i := range 20 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("cm-%02d.yaml", i)),
			fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%02d\n  namespace: %s\ndata:\n  k: v\n", i, ns))
	}
	writeFile(t, filepath.Join(dir, "bad-service.yaml"),
		fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: bad\n  namespace: %s\nspec:\n  ports:\n    - port: 99999\n", ns))

	r := gantry(t, "apply", "--path="+dir, "--inventory=rejected", "--inventory-namespace="+ns)
	if r.code != entrypoint.ExitFailed {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "Service/"+ns+"/bad") || !strings.Contains(r.stderr, "bad-service.yaml") || !strings.Contains(r.stderr, "99999") {
		t.Errorf("error does not name Service/%s/bad, its file and the value:\n%s", ns, r.stderr)
	}
	cms, err := env.Client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" {
			t.Errorf("ConfigMap %s was written", cm.Name)
		}
	}
	if _, err := env.Client.CoreV1().Services(ns).Get(context.Background(), "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service bad: %v", err)
	}
}

// unschedulableDeployment is a Deployment named stuck whose pods no node
// can take: its wait lasts until the timeout, or fails after 10 s of no
// progress.
func unschedulableDeployment(ns string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: stuck
  namespace: %s
spec:
  progressDeadlineSeconds: 10
  replicas: 1
  selector:
    matchLabels: {app: stuck}
  template:
    metadata:
      labels: {app: stuck}
    spec:
      nodeSelector:
        gantry.dev/no-such-node: "true"
      containers:
        - name: c
          image: registry.k8s.io/pause:3.10
`, ns)
}

// Acceptance 6: an unschedulable Deployment fails the wait within the
// timeout, naming the Deployment and why its pods are not ready.
func TestUnschedulableDeploymentSaysWhy(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "stuck.yaml"), unschedulableDeployment(ns))
	r := gantry(t, "apply", "--path="+dir, "--inventory=stuck", "--inventory-namespace="+ns, "--timeout=60s")
	if r.code != entrypoint.ExitFailed {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if r.took > 60*time.Second {
		t.Errorf("took %s, longer than the 60s timeout", r.took)
	}
	if r.res.Reason != result.ReasonHealthCheckFailed {
		t.Errorf("reason %s, want HealthCheckFailed", r.res.Reason)
	}
	for _, want := range []string{"Deployment.apps/" + ns + "/stuck", "unschedulable", "node affinity/selector"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	o := objectByRef(r, "Deployment.apps/"+ns+"/stuck")
	if o == nil || o.Health == nil || !strings.Contains(o.Health.Message, "unschedulable") {
		t.Errorf("report health of the Deployment: %+v", o)
	}
}

// Acceptance 7: two runs on one inventory started together: one waits for
// the other, both succeed, and the inventory lists every object.
func TestConcurrentRunsOnOneInventory(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dirs := [2]string{t.TempDir(), t.TempDir()}
	for i, dir := range dirs {
		for j := range 10 {
			writeFile(t, filepath.Join(dir, fmt.Sprintf("cm-%d.yaml", j)),
				fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: run%d-cm-%d\n  namespace: %s\ndata:\n  k: v\n", i, j, ns))
		}
	}
	// Several rounds of two simultaneous runs: each round is a chance for
	// them to interleave, which the lock must prevent. (Same-holder
	// identities once let both in; the inventory then lost a run's objects.)
	for round := range 4 {
		var wg sync.WaitGroup
		runs := make([]gantryRun, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// prune off: each run's set is different, and both must stay.
				runs[i] = gantry(t, "apply", "--path="+dirs[i], "--inventory=shared", "--inventory-namespace="+ns, "--prune=false")
			}()
		}
		wg.Wait()
		for i, r := range runs {
			if r.code != 0 {
				t.Fatalf("round %d, run %d: exit %d\n%s", round, i, r.code, r.stderr)
			}
		}
	}
	inv, err := (&inventory.Store{Client: env.Client}).Load(context.Background(), ns, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Entries) != 20 {
		t.Errorf("inventory has %d entries, want all 20", len(inv.Entries))
	}
}

// The lock itself: a second holder waits, and fails naming the first when
// its deadline passes.
func TestLockRefusesWithHolder(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	store := &inventory.Store{Client: env.Client}
	held, err := store.Lock(context.Background(), ns, "locked", "first run", inventory.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: "+ns+"\n")
	r := gantry(t, "apply", "--path="+dir, "--inventory=locked", "--inventory-namespace="+ns, "--timeout=2s")
	if r.code != entrypoint.ExitFailed || !strings.Contains(r.stderr, "locked by first run") {
		t.Fatalf("exit %d, want 1 naming the holder\n%s", r.code, r.stderr)
	}
	if r.res.Reason != result.ReasonLocked {
		t.Errorf("reason %s, want %s", r.res.Reason, result.ReasonLocked)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap x was written while the inventory was locked: %v", err)
	}
}

// Acceptance 8: impersonating a service account whose Role covers one
// namespace, an object in another namespace is refused clearly.
func TestServiceAccountBoundsTheRun(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	other := env.Namespace(t)
	ctx := context.Background()
	bindServiceAccount(t, ns, "deployer", []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "mine.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine\n  namespace: "+ns+"\n")
	writeFile(t, filepath.Join(dir, "theirs.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: theirs\n  namespace: "+other+"\n")

	r := gantry(t, "apply", "--path="+dir, "--inventory=bounded", "--inventory-namespace="+ns, "--service-account="+ns+"/deployer")
	if r.code != entrypoint.ExitFailed {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"ConfigMap/" + other + "/theirs", "theirs.yaml", "forbidden", "system:serviceaccount:" + ns + ":deployer"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap mine was written although the run was refused: %v", err)
	}

	// Within its namespace the same account deploys.
	if err := os.Remove(filepath.Join(dir, "theirs.yaml")); err != nil {
		t.Fatal(err)
	}
	if r := gantry(t, "apply", "--path="+dir, "--inventory=bounded", "--inventory-namespace="+ns, "--service-account="+ns+"/deployer"); r.code != 0 {
		t.Fatalf("within its namespace: exit %d\n%s", r.code, r.stderr)
	}
}

// Acceptance 9: bad inputs exit as documented, name the culprit, and write
// nothing to the cluster.
func TestBadInputs(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	good := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\n  namespace: " + ns + "\n"
	cases := []struct {
		name  string
		files map[string]string
		args  []string
		code  int
		want  []string
	}{
		{
			name:  "malformed YAML",
			files: map[string]string{"good.yaml": good, "broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [oops\n"},
			code:  entrypoint.ExitInvalid,
			want:  []string{"broken.yaml"},
		},
		{
			name: "missing path",
			args: []string{"--path=does/not/exist"},
			code: entrypoint.ExitInvalid,
			want: []string{"path (from --path)", "does/not/exist does not exist"},
		},
		{
			name:  "timeout abc",
			files: map[string]string{"good.yaml": good},
			args:  []string{"--timeout=abc"},
			code:  entrypoint.ExitInvalid,
			want:  []string{"timeout (from --timeout)", `"abc"`},
		},
		{
			name: "exec plugin",
			files: map[string]string{
				"good.yaml":          good,
				"kustomization.yaml": "resources:\n  - good.yaml\ntransformers:\n  - plugin.yaml\n",
				"plugin.yaml":        "apiVersion: example.com/v1\nkind: Evil\nmetadata:\n  name: evil\n  annotations:\n    config.kubernetes.io/function: |\n      exec:\n        path: /bin/sh\n",
			},
			code: entrypoint.ExitInvalid,
			want: []string{"plugin"},
		},
		{
			name:  "unset variable",
			files: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\n  namespace: " + ns + "\ndata:\n  a: ${SET}\n  b: ${UNSET_VAR}\n"},
			args:  []string{"--substitute=SET=x"},
			code:  entrypoint.ExitInvalid,
			want:  []string{"cm.yaml", "${UNSET_VAR}", "ConfigMap/" + ns + "/good"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				writeFile(t, filepath.Join(dir, name), content)
			}
			args := append([]string{"apply", "--path=" + dir, "--inventory=bad", "--inventory-namespace=" + ns}, tc.args...)
			r := gantry(t, args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("message lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
	ctx := context.Background()
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "good", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap good was written by a bad run: %v", err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName("bad"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an inventory was written by a bad run: %v", err)
	}
}

// Objects gantry takes over from kubectl lose kubectl's last-applied
// annotation and managers.
func TestTakesOverFromKubectl(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns, Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: `{"apiVersion":"v1","kind":"ConfigMap"}`,
	}}, Data: map[string]string{"k": "old"}}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: legacy\n  namespace: "+ns+"\ndata:\n  k: new\n")
	r := gantry(t, "apply", "--path="+dir, "--inventory=legacy", "--inventory-namespace="+ns)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	got, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		t.Error("kubectl's last-applied annotation is still there")
	}
	for _, mf := range got.ManagedFields {
		if mf.Manager == "kubectl-client-side-apply" {
			t.Errorf("manager %s still owns fields", mf.Manager)
		}
	}
	if got.Data["k"] != "new" {
		t.Errorf("data k = %q, want new", got.Data["k"])
	}
}

// delete removes what the inventory tracks, then the inventory.
func TestDeleteInventory(t *testing.T) {
	t.Parallel()
	dir, appNS := app(t, "app")
	invNS := strings.TrimSuffix(appNS, "-app")
	if r := gantry(t, applyArgs(dir, invNS, appNS, "--wait=false")...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	r := gantry(t, "delete", "--inventory=app", "--inventory-namespace="+invNS)
	if r.code != 0 {
		t.Fatalf("delete: exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Deleted] != 7 {
		t.Errorf("counts %v, want 7 deleted", c)
	}
	ctx := context.Background()
	if _, err := env.Client.AppsV1().Deployments(appNS).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment web: %v, want deleted", err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(invNS).Get(ctx, inventory.ConfigMapName("app"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("inventory ConfigMap: %v, want deleted", err)
	}
}
