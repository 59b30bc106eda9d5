package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// corpus copies one set of e2e/testdata/validate for a test. ns is the
// test's own namespace (it exists); appNS is the one the set's ${NS} names,
// which exists only if the set creates it. The set's CRDs are in group
// <appNS>.gantry.test.
func corpus(t *testing.T, name string) (dir, ns, appNS string) {
	t.Helper()
	ns = env.Namespace(t)
	appNS = ns + "-app"
	dir = filepath.Join(t.TempDir(), name)
	src := filepath.Join("testdata", "validate", name)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, e.Name()), string(b))
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.CoreV1().Namespaces().Delete(ctx, appNS, metav1.DeleteOptions{})
		crds, err := env.Dynamic.Resource(crdResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, c := range crds.Items {
			if strings.HasSuffix(c.GetName(), "."+appNS+".gantry.test") {
				_ = env.Dynamic.Resource(crdResource).Delete(ctx, c.GetName(), metav1.DeleteOptions{})
			}
		}
		for _, name := range []string{appNS + "-operator"} {
			_ = env.Client.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
			_ = env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		}
	})
	return dir, ns, appNS
}

func setArgs(command, dir, ns, appNS, inventoryName string, extra ...string) []string {
	return append([]string{command, "--path=" + dir, "--inventory=" + inventoryName, "--inventory-namespace=" + ns,
		"--substitute=NS=" + appNS, "--timeout=60s"}, extra...)
}

// nothingLeft asserts that a failed run left nothing of its set: no
// Namespace appNS, no CRD of its group, no inventory, and none of the
// named ConfigMaps in ns.
func nothingLeft(t *testing.T, ns, appNS, inventoryName string, configMaps ...string) {
	t.Helper()
	ctx := context.Background()
	if n, err := env.Client.CoreV1().Namespaces().Get(ctx, appNS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Namespace %s exists after the failed run (phase %v, err %v)", appNS, n.Status.Phase, err)
	}
	crds, err := env.Dynamic.Resource(crdResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds.Items {
		if strings.HasSuffix(c.GetName(), "."+appNS+".gantry.test") {
			t.Errorf("CustomResourceDefinition %s exists after the failed run", c.GetName())
		}
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName(inventoryName), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("inventory %s/%s exists after the failed run: %v", ns, inventoryName, err)
	}
	for _, name := range configMaps {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s/%s exists after the failed run: %v", ns, name, err)
		}
	}
}

// failedRefs lists the report's failed objects, and checks that each names
// its file.
func failedRefs(t *testing.T, r gantryRun) []string {
	t.Helper()
	var out []string
	for _, o := range r.res.Objects {
		if o.Action == result.Failed {
			out = append(out, o.Ref())
			if o.Source == "" {
				t.Errorf("%s failed without naming its file", o.Ref())
			}
		}
	}
	return out
}

func wantFailed(t *testing.T, r gantryRun, total int, refs ...string) {
	t.Helper()
	if r.code != entrypoint.ExitFailed {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if r.res.Reason != result.ReasonValidationFailed {
		t.Errorf("reason %s, want ValidationFailed", r.res.Reason)
	}
	got := failedRefs(t, r)
	if strings.Join(got, " ") != strings.Join(refs, " ") {
		t.Errorf("failed objects %v, want %v", got, refs)
	}
	c := counts(t, r)
	if c[result.Failed] != len(refs) || c[result.Skipped] != total-len(refs) || len(r.res.Objects) != total {
		t.Errorf("counts %v over %d objects in the report, want %d failed and %d skipped", c, len(r.res.Objects), len(refs), total-len(refs))
	}
}

// A set with its own Namespace and a Deployment only the API server's
// native validation rejects (negative replicas): the Namespace is created
// to dry-run the Deployment, removed again, and nothing stays.
func TestOwnNamespaceInvalidObjectLeavesNothing(t *testing.T) {
	t.Parallel()
	dir, ns, appNS := corpus(t, "own-namespace-invalid")
	r := gantry(t, setArgs("apply", dir, ns, appNS, "own")...)
	wantFailed(t, r, 3, "Deployment.apps/"+appNS+"/web")
	for _, want := range []string{"Deployment.apps/" + appNS + "/web", "deployment.yaml", "replicas"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	nothingLeft(t, ns, appNS, "own")

	// Fixed, the same set applies, and its Namespace holds both objects.
	replaceInFile(t, filepath.Join(dir, "deployment.yaml"), "replicas: -1", "replicas: 1")
	r = gantry(t, setArgs("apply", dir, ns, appNS, "own")...)
	if r.code != 0 {
		t.Fatalf("fixed set: exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Created] != 3 {
		t.Errorf("counts %v, want 3 created", c)
	}
	if _, err := env.Client.AppsV1().Deployments(appNS).Get(context.Background(), "web", metav1.GetOptions{}); err != nil {
		t.Errorf("Deployment web: %v", err)
	}
}

// Typos the schema knows (an unknown field, a wrong type) are found offline:
// the Namespace is never created.
func TestOwnNamespaceTypoCaughtOffline(t *testing.T) {
	t.Parallel()
	dir, ns, appNS := corpus(t, "own-namespace-typo")
	r := gantry(t, setArgs("apply", dir, ns, appNS, "typo")...)
	wantFailed(t, r, 3, "Deployment.apps/"+appNS+"/web")
	for _, want := range []string{"replcas", "containerPort", "deployment.yaml"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "creating Namespace") {
		t.Errorf("the Namespace was created although offline validation failed:\n%s", r.stderr)
	}
	nothingLeft(t, ns, appNS, "typo")
}

// A CRD with a CEL rule, and a custom resource that breaks it: refused
// offline with the rule's message; neither CRD nor Namespace is created.
func TestCELRuleBrokenByCustomResource(t *testing.T) {
	t.Parallel()
	dir, ns, appNS := corpus(t, "cel-rule")
	r := gantry(t, setArgs("apply", dir, ns, appNS, "cel")...)
	wantFailed(t, r, 4, "Scaler."+appNS+".gantry.test/"+appNS+"/inverted")
	for _, want := range []string{"minReplicas must not exceed maxReplicas", "scalers.yaml"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "creating ") {
		t.Errorf("something was created although offline validation failed:\n%s", r.stderr)
	}
	nothingLeft(t, ns, appNS, "cel")

	// The defaulted minReplicas (1) satisfies the rule for the other one:
	// with the broken one fixed, everything applies.
	replaceInFile(t, filepath.Join(dir, "scalers.yaml"), "minReplicas: 5", "minReplicas: 2")
	if r := gantry(t, setArgs("apply", dir, ns, appNS, "cel", "--wait=false")...); r.code != 0 {
		t.Fatalf("fixed set: exit %d\n%s", r.code, r.stderr)
	}
}

// A CRD with a valid and an invalid custom resource in an existing
// namespace: the invalid one is named with each of its problems.
func TestCRDWithValidAndInvalidCustomResource(t *testing.T) {
	t.Parallel()
	dir, ns, appNS := corpus(t, "crd-valid-invalid")
	replaceInFile(t, filepath.Join(dir, "gadgets.yaml"), "namespace: ${NS}", "namespace: "+ns)
	replaceInFile(t, filepath.Join(dir, "gadgets.yaml"), "namespace: ${NS}", "namespace: "+ns)
	r := gantry(t, setArgs("apply", dir, ns, appNS, "gadgets")...)
	wantFailed(t, r, 3, "Gadget."+appNS+".gantry.test/"+ns+"/bad")
	for _, want := range []string{"spec.size", "color", "gadgets.yaml"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	nothingLeft(t, ns, appNS, "gadgets")
}

// An operator-shaped set (its Namespace, a CRD over 256 KiB, RBAC, a
// Deployment, 60 custom resources, 60 ConfigMaps) with two typos far apart:
// both are named, nothing is written; fixed, all 127 objects apply.
func TestLargeSetWithTwoTypos(t *testing.T) {
	t.Parallel()
	dir, ns, appNS := corpus(t, "large-two-typos")
	r := gantry(t, setArgs("apply", dir, ns, appNS, "operator")...)
	wantFailed(t, r, 127, "ConfigMap/"+appNS+"/shard-17", "Database."+appNS+".gantry.test/"+appNS+"/db-41")
	for _, want := range []string{"postgress", "dtaa", "databases.yaml", "shards.yaml"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	nothingLeft(t, ns, appNS, "operator")
	ctx := context.Background()
	if _, err := env.Client.RbacV1().ClusterRoles().Get(ctx, appNS+"-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole %s-operator exists after the failed run: %v", appNS, err)
	}

	replaceInFile(t, filepath.Join(dir, "databases.yaml"), "engine: postgress", "engine: postgres")
	replaceInFile(t, filepath.Join(dir, "shards.yaml"), "dtaa:", "data:")
	r = gantry(t, setArgs("apply", dir, ns, appNS, "operator", "--wait=false")...)
	if r.code != 0 {
		t.Fatalf("fixed set: exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Created] != 127 {
		t.Errorf("counts %v, want 127 created", c)
	}
	if r := gantry(t, "delete", "--inventory=operator", "--inventory-namespace="+ns); r.code != 0 {
		t.Errorf("delete: exit %d\n%s", r.code, r.stderr)
	}
}

// A kind the cluster does not know, among valid objects and two the API
// server rejects: all three are named in one run, each with its file, and
// every object is in the report once.
func TestUnknownKindAndInvalidObjectsTogether(t *testing.T) {
	t.Parallel()
	dir, ns, _ := corpus(t, "unknown-kind-and-invalid")
	r := gantry(t, setArgs("apply", dir, ns, ns, "mixed")...)
	wantFailed(t, r, 5, "Job.batch/"+ns+"/no-containers", "Phantom.nowhere.gantry.test/"+ns+"/ghost", "Service/"+ns+"/bad-port")
	for _, want := range []string{"Phantom", "nowhere.gantry.test/v1", "unknown.yaml", "99999", "service.yaml", "job.yaml"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	nothingLeft(t, ns, ns+"-none", "mixed", "one", "two")
}

// An object another inventory applied is refused, naming both
// inventories, unless take-ownership; the first inventory's delete then
// leaves it alone.
func TestObjectOfAnotherInventory(t *testing.T) {
	t.Parallel()
	dir, ns, _ := corpus(t, "other-inventory")
	if r := gantry(t, setArgs("apply", dir, ns, ns, "first")...); r.code != 0 {
		t.Fatalf("first inventory: exit %d\n%s", r.code, r.stderr)
	}
	replaceInFile(t, filepath.Join(dir, "configmap.yaml"), "owner: second", "owner: third")
	r := gantry(t, setArgs("apply", dir, ns, ns, "second")...)
	wantFailed(t, r, 1, "ConfigMap/"+ns+"/shared-settings")
	for _, want := range []string{ns + "/first", ns + "/second", "take-ownership"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	ctx := context.Background()
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "shared-settings", metav1.GetOptions{})
	if err != nil || cm.Data["owner"] != "second" || cm.Labels[inventory.NameLabel] != "first" {
		t.Fatalf("the refused run changed the object: %v %v", cm.Data, err)
	}

	if r := gantry(t, setArgs("apply", dir, ns, ns, "second", "--take-ownership")...); r.code != 0 {
		t.Fatalf("with take-ownership: exit %d\n%s", r.code, r.stderr)
	}
	if r := gantry(t, "delete", "--inventory=first", "--inventory-namespace="+ns); r.code != 0 {
		t.Fatalf("delete of the first inventory: exit %d\n%s", r.code, r.stderr)
	}
	cm, err = env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "shared-settings", metav1.GetOptions{})
	if err != nil || cm.Labels[inventory.NameLabel] != "second" || cm.Data["owner"] != "third" {
		t.Errorf("after the first inventory's delete: %v, labels %v, data %v; want it kept for the second", err, cm.Labels, cm.Data)
	}
}

// A cluster that cannot be reached fails once, with its address and the
// connection error, exit 1.
func TestUnreachableClusterFailsOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 20 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("cm-%02d.yaml", i)), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%02d\n  namespace: default\n", i))
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters:
  - name: gone
    cluster:
      server: https://127.0.0.1:1
      insecure-skip-tls-verify: true
users:
  - name: u
    user:
      token: not-a-real-token
contexts:
  - name: gone
    context: {cluster: gone, user: u}
current-context: gone
`)
	var stdout, stderr bytes.Buffer
	code := entrypoint.Run(context.Background(), []string{"apply", "--path=" + dir, "--inventory=gone", "--kubeconfig=" + kubeconfig, "--timeout=20s"},
		[]string{"HOME=" + os.Getenv("HOME")}, &stdout, &stderr)
	if code != entrypoint.ExitFailed {
		t.Fatalf("exit %d, want 1\n%s", code, stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "cannot reach the cluster at https://127.0.0.1:1") || !strings.Contains(out, "connection refused") {
		t.Errorf("message lacks the address and the connection error:\n%s", out)
	}
	if n := strings.Count(out, "connection refused"); n > 2 {
		t.Errorf("the connection error is repeated %d times:\n%s", n, out)
	}
	if strings.Contains(out, "is its CRD installed") || strings.Contains(out, "not-a-real-token") {
		t.Errorf("misleading or secret output:\n%s", out)
	}
}

// diff on a fresh cluster: failures are listed with their reason, every
// object it would create has its diff, and nothing is created.
func TestDiffOnFreshCluster(t *testing.T) {
	t.Parallel()
	dir, ns, appNS := corpus(t, "own-namespace-typo")
	r := gantry(t, setArgs("diff", dir, ns, appNS, "fresh")...)
	if r.code != entrypoint.ExitFailed || !strings.Contains(r.stderr, "replcas") {
		t.Fatalf("diff of a set with a typo: exit %d, want 1 naming the typo\n%s", r.code, r.stderr)
	}
	if o := objectByRef(r, "Deployment.apps/"+appNS+"/web"); o == nil || o.Action != result.Failed {
		t.Errorf("Deployment web in the diff's report: %+v, want failed", o)
	}

	replaceInFile(t, filepath.Join(dir, "deployment.yaml"), "replcas: 2", "replicas: 2")
	replaceInFile(t, filepath.Join(dir, "deployment.yaml"), "containerPort: http", "containerPort: 8080")
	r = gantry(t, setArgs("diff", dir, ns, appNS, "fresh")...)
	if r.code != 0 {
		t.Fatalf("diff of the fixed set: exit %d\n%s", r.code, r.stderr)
	}
	c := counts(t, r)
	if c[result.Created] != 3 || c[result.Failed] != 0 {
		t.Errorf("counts %v, want 3 created", c)
	}
	for _, o := range r.res.Objects {
		if o.Action == result.Created && !strings.Contains(o.Diff, "name: "+o.Name) {
			t.Errorf("%s would be created but has no diff: %q", o.Ref(), o.Diff)
		}
	}
	nothingLeft(t, ns, appNS, "fresh")
}

// diff without an inventory reports an applied set as unchanged; diff of
// an empty build refuses as apply does.
func TestDiffAgreesWithApply(t *testing.T) {
	t.Parallel()
	dir, ns, _ := corpus(t, "other-inventory")
	if r := gantry(t, setArgs("apply", dir, ns, ns, "agree")...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	r := gantry(t, "diff", "--path="+dir, "--substitute=NS="+ns)
	if r.code != 0 || r.res.Changed() {
		t.Errorf("diff without inventory: exit %d, changed %v, want no change\n%s", r.code, r.res.Changed(), r.stderr)
	}
	empty := t.TempDir()
	for _, command := range []string{"diff", "apply"} {
		r := gantry(t, command, "--path="+empty, "--inventory=agree", "--inventory-namespace="+ns)
		if r.code != entrypoint.ExitFailed || !strings.Contains(r.stderr, "allow-empty") {
			t.Errorf("%s of an empty build: exit %d, want 1 naming allow-empty\n%s", command, r.code, r.stderr)
		}
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "shared-settings", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap shared-settings: %v, want it kept", err)
	}
}

// The inventory may live in a namespace the set itself creates.
func TestInventoryInNamespaceOfTheSet(t *testing.T) {
	t.Parallel()
	dir, ns, appNS := corpus(t, "own-namespace-invalid")
	_ = ns
	replaceInFile(t, filepath.Join(dir, "deployment.yaml"), "replicas: -1", "replicas: 1")
	args := []string{"apply", "--path=" + dir, "--inventory=self", "--inventory-namespace=" + appNS, "--substitute=NS=" + appNS, "--timeout=60s"}
	r := gantry(t, args...)
	if r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	inv, err := (&inventory.Store{Client: env.Client}).Load(context.Background(), appNS, "self")
	if err != nil || len(inv.Entries) != 3 {
		t.Fatalf("inventory: %v, %d entries, want 3", err, len(inv.Entries))
	}
	r = gantry(t, args...)
	if c := counts(t, r); r.code != 0 || c[result.Unchanged] != 3 {
		t.Errorf("second apply: exit %d, counts %v, want 3 unchanged\n%s", r.code, c, r.stderr)
	}
}

// A Deployment whose ReplicaSet cannot create pods (a quota forbids them)
// says why on the first run: the explanation reads the Deployment as it is
// when the wait ends, not as the poller first saw it.
func TestWaitExplainsReplicaFailure(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if _, err := env.Client.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission enforces a quota only once its controller has filled in
	// its status; on a busy control plane that can take longer than the
	// pod takes to be created.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		q, err := env.Client.CoreV1().ResourceQuotas(ns).Get(ctx, "no-pods", metav1.GetOptions{})
		if err == nil && q.Status.Hard != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the quota's status was not filled in: %v", err)
		}
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: blocked
  namespace: %s
spec:
  replicas: 1
  selector:
    matchLabels: {app: blocked}
  template:
    metadata:
      labels: {app: blocked}
    spec:
      containers:
        - name: c
          image: registry.k8s.io/pause:3.10
`, ns))
	// No progress deadline within the timeout: the Deployment stays
	// InProgress, so the poller reports no new status once the
	// ReplicaSet's failure shows.
	r := gantry(t, "apply", "--path="+dir, "--inventory=blocked", "--inventory-namespace="+ns, "--timeout=8s")
	if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonHealthCheckFailed {
		t.Fatalf("exit %d reason %s, want 1 HealthCheckFailed\n%s", r.code, r.res.Reason, r.stderr)
	}
	o := objectByRef(r, "Deployment.apps/"+ns+"/blocked")
	if o == nil || o.Health == nil || !strings.Contains(o.Health.Message, "ReplicaFailure") || !strings.Contains(o.Health.Message, "exceeded quota") {
		t.Errorf("health of the Deployment does not say that its pods are refused by the quota: %+v", o)
	}
}

// An invalid Secret in a namespace the set creates is refused offline
// without its values appearing anywhere.
func TestInvalidSecretInNewNamespaceLeaksNothing(t *testing.T) {
	t.Parallel()
	dir, ns, appNS := corpus(t, "own-namespace-typo")
	const canary = "canary-3f9a1c77"
	writeFile(t, filepath.Join(dir, "secret.yaml"), "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: ${NS}\nstringData:\n  password: "+canary+"\n  pin: 1234567\n")
	replaceInFile(t, filepath.Join(dir, "deployment.yaml"), "replcas: 2", "replicas: 2")
	replaceInFile(t, filepath.Join(dir, "deployment.yaml"), "containerPort: http", "containerPort: 8080")
	for _, command := range []string{"diff", "apply"} {
		r := gantry(t, setArgs(command, dir, ns, appNS, "secret")...)
		if r.code != entrypoint.ExitFailed || !strings.Contains(r.stderr, "stringData.pin") {
			t.Fatalf("%s: exit %d, want 1 naming stringData.pin\n%s", command, r.code, r.stderr)
		}
		report, _ := json.Marshal(r.res)
		for _, out := range []string{r.stdout, r.stderr, string(report)} {
			if strings.Contains(out, canary) || strings.Contains(out, "1234567") {
				t.Errorf("%s printed or reported a Secret value:\n%s", command, out)
			}
		}
	}
	// Valid, the Secret's creation diff masks its values too.
	// A value no timestamp or duration of the report can hold by chance.
	replaceInFile(t, filepath.Join(dir, "secret.yaml"), "pin: 1234567", "pin: \"pin-5b7e2d91\"")
	r := gantry(t, setArgs("diff", dir, ns, appNS, "secret")...)
	if r.code != 0 {
		t.Fatalf("diff of the valid set: exit %d\n%s", r.code, r.stderr)
	}
	if o := objectByRef(r, "Secret/"+appNS+"/creds"); o == nil || o.Action != result.Created || !strings.Contains(o.Diff, "***") {
		t.Errorf("Secret creds in the diff: %+v, want created with masked values", o)
	}
	report, _ := json.Marshal(r.res)
	for _, out := range []string{r.stdout, r.stderr, string(report)} {
		if strings.Contains(out, canary) || strings.Contains(out, "pin-5b7e2d91") {
			t.Errorf("diff printed or reported a Secret value:\n%s", out)
		}
	}
	nothingLeft(t, ns, appNS, "secret")
}

// A CRD that already exists gains a version, and a custom resource of the
// new version comes with it: the resource is checked offline against the
// new version's schema before anything is written (the CRD's update
// included), and dry-run on the server once the CRD is updated.
func TestNewVersionOfExistingCRD(t *testing.T) {
	t.Parallel()
	dir, ns, appNS := corpus(t, "crd-valid-invalid")
	gadgets := filepath.Join(dir, "gadgets.yaml")
	writeFile(t, gadgets, "apiVersion: ${NS}.gantry.test/v1\nkind: Gadget\nmetadata:\n  name: good\n  namespace: "+ns+"\nspec:\n  size: 2\n")
	if r := gantry(t, setArgs("apply", dir, ns, appNS, "versions", "--wait=false")...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	v2 := `    - name: v2
      served: true
      storage: false
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [size, shape]
              properties:
                size: {type: integer}
                shape: {type: string, enum: [round, square]}
`
	b, err := os.ReadFile(filepath.Join(dir, "crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "crd.yaml"), string(b)+v2)
	writeFile(t, filepath.Join(dir, "gadgets-v2.yaml"), "apiVersion: ${NS}.gantry.test/v2\nkind: Gadget\nmetadata:\n  name: new\n  namespace: "+ns+"\nspec:\n  size: 3\n  shape: oval\n")

	r := gantry(t, setArgs("apply", dir, ns, appNS, "versions", "--wait=false")...)
	wantFailed(t, r, 3, "Gadget."+appNS+".gantry.test/"+ns+"/new")
	if !strings.Contains(r.stderr, "spec.shape") || !strings.Contains(r.stderr, "gadgets-v2.yaml") {
		t.Errorf("message does not name spec.shape and its file:\n%s", r.stderr)
	}
	crd, err := env.Dynamic.Resource(crdResource).Get(context.Background(), "gadgets."+appNS+".gantry.test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions"); len(versions) != 1 {
		t.Errorf("the CRD has %d versions after the failed run, want it unchanged (1)", len(versions))
	}

	replaceInFile(t, filepath.Join(dir, "gadgets-v2.yaml"), "shape: oval", "shape: round")
	r = gantry(t, setArgs("apply", dir, ns, appNS, "versions", "--wait=false")...)
	if r.code != 0 {
		t.Fatalf("with a valid v2 resource: exit %d\n%s", r.code, r.stderr)
	}
	if o := objectByRef(r, "Gadget."+appNS+".gantry.test/"+ns+"/new"); o == nil || o.Action != result.Created {
		t.Errorf("Gadget new: %+v, want created", o)
	}
}

// The server's dry-run still refuses unknown fields although gantry asks
// it not to check its bodies for duplicate keys (fieldValidation=Ignore,
// which spares a second parse): server-side apply refuses them itself. A
// write whose response nobody reads asks for the metadata only.
func TestServerRefusesUnknownFieldsWithoutStrictParse(t *testing.T) {
	t.Parallel()
	env.Require(t)
	proxy := newAPIProxy(t, env.Cluster)
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "settings.yaml"), fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: %[1]s}
dtaa: {level: debug}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: flags, namespace: %[1]s}
data: {beta: "on"}
`, ns))
	run := func() (gantryRun, []seenRequest) {
		t.Helper()
		seen := proxy.record()
		r := gantryWith(t, proxy.kubeconfig, "apply", dir, "--inventory=strict", "--inventory-namespace="+ns, "--wait=false")
		return r, seen()
	}
	patches := func(seen []seenRequest) (dryRuns, writes []seenRequest) {
		for _, r := range seen {
			if r.method != http.MethodPatch || !strings.Contains(r.path, "/configmaps/") || strings.Contains(r.path, "gantry-") {
				continue
			}
			if !strings.Contains(r.query, "fieldValidation=Ignore") {
				t.Errorf("PATCH %s?%s without fieldValidation=Ignore", r.path, r.query)
			}
			if strings.Contains(r.query, "dryRun=All") {
				dryRuns = append(dryRuns, r)
			} else {
				writes = append(writes, r)
			}
		}
		return dryRuns, writes
	}

	r, seen := run()
	wantFailed(t, r, 2, "ConfigMap/"+ns+"/settings")
	for _, want := range []string{"dtaa", "settings.yaml"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, r.stderr)
		}
	}
	if dryRuns, writes := patches(seen); len(dryRuns) != 2 || len(writes) != 0 {
		t.Errorf("%d dry-runs and %d writes of the ConfigMaps, want 2 and 0", len(dryRuns), len(writes))
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "flags", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap flags written although settings failed validation: %v", err)
	}

	replaceInFile(t, filepath.Join(dir, "settings.yaml"), "dtaa:", "data:")
	r, seen = run()
	if r.code != 0 {
		t.Fatalf("fixed set: exit %d\n%s", r.code, r.stderr)
	}
	dryRuns, writes := patches(seen)
	if len(dryRuns) != 2 || len(writes) != 2 {
		t.Fatalf("%d dry-runs and %d writes of the ConfigMaps, want 2 and 2", len(dryRuns), len(writes))
	}
	for _, w := range writes {
		if !strings.Contains(w.accept, "as=PartialObjectMetadata") {
			t.Errorf("write %s asked for %q, not the metadata only", w.path, w.accept)
		}
	}
	for _, d := range dryRuns {
		if strings.Contains(d.accept, "as=PartialObjectMetadata") {
			t.Errorf("dry-run %s asked for the metadata only; its result is compared with the live object", d.path)
		}
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "settings", metav1.GetOptions{})
	if err != nil || cm.Data["level"] != "debug" {
		t.Errorf("ConfigMap settings after the fixed run: %v, %v", cm.Data, err)
	}
}
