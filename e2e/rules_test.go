package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

func configMap(ns, name string, annotations ...string) string {
	s := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n", name, ns)
	if len(annotations) > 0 {
		s += "  annotations:\n"
		for _, a := range annotations {
			s += "    " + a + "\n"
		}
	}
	return s + "data:\n  k: v1\n"
}

func entryIDs(t *testing.T, ns, name string) []string {
	t.Helper()
	inv, err := (&inventory.Store{Client: env.Client}).Load(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range inv.Entries {
		ids = append(ids, e.ID)
	}
	return ids
}

func TestSSAAnnotations(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "once.yaml"), configMap(ns, "once", "gantry.dev/ssa: IfNotPresent"))
	writeFile(t, filepath.Join(dir, "ignored.yaml"), configMap(ns, "ignored", "kustomize.toolkit.fluxcd.io/ssa: Ignore"))
	writeFile(t, filepath.Join(dir, "off.yaml"), configMap(ns, "off", "kustomize.toolkit.fluxcd.io/reconcile: disabled"))
	args := []string{"apply", "--path=" + dir, "--inventory=annotations", "--inventory-namespace=" + ns}
	r := gantry(t, args...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Created] != 1 || c[result.Skipped] != 2 {
		t.Errorf("counts %v, want 1 created (IfNotPresent), 2 skipped (Ignore, reconcile disabled)", c)
	}
	ctx := context.Background()
	for _, name := range []string{"ignored", "off"} {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s: %v, want it left alone (not created)", name, err)
		}
	}
	// IfNotPresent: a later change to the manifest is not applied.
	replaceInFile(t, filepath.Join(dir, "once.yaml"), "k: v1", "k: v2")
	r = gantry(t, args...)
	if o := objectByRef(r, "ConfigMap/"+ns+"/once"); r.code != 0 || o == nil || o.Action != result.Skipped {
		t.Fatalf("exit %d, once: %+v, want skipped\n%s", r.code, o, r.stderr)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "once", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "v1" {
		t.Errorf("ConfigMap once: %v, data %v, want it untouched", err, cm.Data)
	}
}

func TestEmptySetNeedsAllowEmpty(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.yaml"), configMap(ns, "only"))
	args := []string{"apply", "--path=" + dir, "--inventory=empty", "--inventory-namespace=" + ns}
	if r := gantry(t, args...); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	empty := t.TempDir()
	writeFile(t, filepath.Join(empty, "README.txt"), "no manifests here")
	args[1] = "--path=" + empty
	r := gantry(t, args...)
	if r.code != entrypoint.ExitFailed || !strings.Contains(r.stderr, "allow-empty") {
		t.Fatalf("exit %d, want 1 mentioning allow-empty\n%s", r.code, r.stderr)
	}
	ctx := context.Background()
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "only", metav1.GetOptions{}); err != nil {
		t.Fatalf("ConfigMap only was pruned without allow-empty: %v", err)
	}
	r = gantry(t, append(args, "--allow-empty")...)
	if r.code != 0 {
		t.Fatalf("with allow-empty: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "only", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap only: %v, want it pruned", err)
	}
	if ids := entryIDs(t, ns, "empty"); len(ids) != 0 {
		t.Errorf("inventory entries %v, want none", ids)
	}
}

func TestProtectedNamespaceIsNeverPruned(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	t.Cleanup(func() {
		// Take gantry's labels off kube-public again.
		n, err := env.Client.CoreV1().Namespaces().Get(ctx, "kube-public", metav1.GetOptions{})
		if err == nil {
			delete(n.Labels, inventory.NameLabel)
			delete(n.Labels, inventory.NamespaceLabel)
			_, _ = env.Client.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		}
	})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ns.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-public\n")
	writeFile(t, filepath.Join(dir, "cm.yaml"), configMap(ns, "keepme"))
	args := []string{"apply", "--path=" + dir, "--inventory=protected", "--inventory-namespace=" + ns}
	if r := gantry(t, args...); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if err := removeFile(filepath.Join(dir, "ns.yaml")); err != nil {
		t.Fatal(err)
	}
	r := gantry(t, args...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	o := objectByRef(r, "Namespace/kube-public")
	if o == nil || o.Action != result.Skipped || !strings.Contains(o.Error, "protected") {
		t.Errorf("Namespace kube-public: %+v, want skipped as protected", o)
	}
	n, err := env.Client.CoreV1().Namespaces().Get(ctx, "kube-public", metav1.GetOptions{})
	if err != nil || n.DeletionTimestamp != nil {
		t.Fatalf("kube-public: %v, deletion %v", err, n.DeletionTimestamp)
	}
}

// A delete that fails (here: the impersonated account may not delete)
// keeps its entry in the inventory, so the next run retries it.
func TestFailedPruneKeepsEntry(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"delete"}},
	}
	bindServiceAccount(t, ns, "nodelete", rules)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "a"))
	writeFile(t, filepath.Join(dir, "b.yaml"), configMap(ns, "b"))
	args := []string{"apply", "--path=" + dir, "--inventory=nodelete", "--inventory-namespace=" + ns, "--service-account=" + ns + "/nodelete"}
	if r := gantry(t, args...); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if err := removeFile(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	r := gantry(t, args...)
	if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonPruneFailed {
		t.Fatalf("exit %d reason %s, want 1 PruneFailed\n%s", r.code, r.res.Reason, r.stderr)
	}
	if !strings.Contains(r.stderr, "ConfigMap/"+ns+"/b") || !strings.Contains(r.stderr, "forbidden") {
		t.Errorf("message does not name ConfigMap b and the refusal:\n%s", r.stderr)
	}
	ids := strings.Join(entryIDs(t, ns, "nodelete"), " ")
	if !strings.Contains(ids, ns+"_b__ConfigMap") || !strings.Contains(ids, ns+"_a__ConfigMap") {
		t.Errorf("inventory %s, want both a and b (b kept for a retry)", ids)
	}
	// The wait still ran: a prune failure does not stop it.
	for _, s := range r.res.Stages {
		if s.Name == "wait" && (s.Skipped != "" || s.Error != "") {
			t.Errorf("wait stage %+v, want it run and passed", s)
		}
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "b", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap b: %v", err)
	}
}

// An apply that fails after validation keeps every previous entry and
// records what was written. Two Services that ask for the same cluster IP
// each pass their dry-run (a dry-run allocates nothing); the second write
// fails.
func TestFailedApplyKeepsInventory(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	group := ns + ".gantry.test"
	t.Cleanup(func() {
		crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		_ = env.Dynamic.Resource(crd).Delete(context.Background(), "gadgets."+group, metav1.DeleteOptions{})
	})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "a"))
	args := []string{"apply", "--path=" + dir, "--inventory=keep", "--inventory-namespace=" + ns}
	if r := gantry(t, args...); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if err := removeFile(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "crd.yaml"), crdYAML(group, "Gadget"))
	writeFile(t, filepath.Join(dir, "gadget.yaml"), fmt.Sprintf("apiVersion: %s/v1\nkind: Gadget\nmetadata:\n  name: g\n  namespace: %s\nspec:\n  size: 3\n", group, ns))
	ip := fmt.Sprintf("10.96.%d.%d", 100+rand.IntN(150), 2+rand.IntN(250))
	for _, name := range []string{"one", "two"} {
		writeFile(t, filepath.Join(dir, "svc-"+name+".yaml"), fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  clusterIP: %s\n  ports:\n    - port: 80\n", name, ns, ip))
	}
	r := gantry(t, args...)
	if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonApplyFailed {
		t.Fatalf("exit %d reason %s, want 1 ApplyFailed\n%s", r.code, r.res.Reason, r.stderr)
	}
	if !strings.Contains(r.stderr, "already allocated") || !strings.Contains(r.stderr, "svc-") {
		t.Errorf("message does not name the Service, its file and the allocated IP:\n%s", r.stderr)
	}
	ids := strings.Join(entryIDs(t, ns, "keep"), " ")
	if !strings.Contains(ids, ns+"_a__ConfigMap") || !strings.Contains(ids, "_gadgets."+group+"_apiextensions.k8s.io_CustomResourceDefinition") {
		t.Errorf("inventory %s, want the previous ConfigMap a and the CRD that was written", ids)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "a", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap a: %v; a failed apply must not prune", err)
	}
}

func TestHealthChecksLimitTheWait(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.yaml"), configMap(ns, "ready"))
	writeFile(t, filepath.Join(dir, "stuck.yaml"), fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: stuck, namespace: %s}
spec:
  selector: {matchLabels: {app: stuck}}
  template:
    metadata: {labels: {app: stuck}}
    spec:
      nodeSelector: {gantry.dev/no-such-node: "true"}
      containers: [{name: c, image: registry.k8s.io/pause:3.10}]
`, ns))
	r := gantry(t, "apply", "--path="+dir, "--inventory=hc", "--inventory-namespace="+ns, "--timeout=20s", "--health-checks=ConfigMap/"+ns+"/ready")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0: only the ConfigMap is checked\n%s", r.code, r.stderr)
	}
	if o := objectByRef(r, "Deployment.apps/"+ns+"/stuck"); o == nil || o.Health != nil {
		t.Errorf("the Deployment was health-checked: %+v", o)
	}
}

func TestDiffExitCodes(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "a"))
	writeFile(t, filepath.Join(dir, "b.yaml"), configMap(ns, "b"))
	base := []string{"--path=" + dir, "--inventory=diff", "--inventory-namespace=" + ns}
	if r := gantry(t, append([]string{"apply"}, base...)...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	if r := gantry(t, append([]string{"diff", "--detailed-exitcode"}, base...)...); r.code != entrypoint.ExitOK || r.res.Reason != result.ReasonNoChanges {
		t.Fatalf("diff with no change: exit %d reason %s\n%s", r.code, r.res.Reason, r.stderr)
	}
	replaceInFile(t, filepath.Join(dir, "a.yaml"), "k: v1", "k: v2")
	if err := removeFile(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	r := gantry(t, append([]string{"diff", "--detailed-exitcode"}, base...)...)
	if r.code != entrypoint.ExitChanges {
		t.Fatalf("diff with changes: exit %d, want 3\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Configured] != 1 || c[result.Deleted] != 1 {
		t.Errorf("diff counts %v, want 1 configured and 1 deleted (prune preview)", c)
	}
	// The diff itself is printed on stdout: each object's unified diff,
	// by kind and name, then a summary line.
	for _, want := range []string{"--- live/ConfigMap/" + ns + "/a", "-  k: v1", "+  k: v2", "--- live/ConfigMap/" + ns + "/b", "0 to create, 1 to change, 0 to recreate, 1 to delete, 0 unchanged\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("diff's stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Index(r.stdout, "/a\n") > strings.Index(r.stdout, "/b\n") {
		t.Errorf("objects not in order:\n%s", r.stdout)
	}
	for _, format := range []string{"json", "yaml"} {
		out := gantry(t, append([]string{"diff", "--output=" + format}, base...)...).stdout
		if !strings.Contains(out, `"action": "deleted"`) && !strings.Contains(out, "action: deleted") {
			t.Errorf("--output=%s does not print the result:\n%s", format, out)
		}
	}
	if r := gantry(t, append([]string{"diff"}, base...)...); r.code != entrypoint.ExitOK {
		t.Errorf("diff without detailed-exitcode: exit %d, want 0", r.code)
	}
	// diff wrote nothing.
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "v1" {
		t.Errorf("ConfigMap a: %v %v, want unchanged by diff", err, cm.Data)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "b", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap b: %v, want not pruned by diff", err)
	}
	writeFile(t, filepath.Join(dir, "bad.yaml"), fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: bad, namespace: %s}\nspec:\n  ports: [{port: 99999}]\n", ns))
	if r := gantry(t, append([]string{"diff", "--detailed-exitcode"}, base...)...); r.code != entrypoint.ExitFailed {
		t.Errorf("diff with an invalid object: exit %d, want 1", r.code)
	}
}

func bindServiceAccount(t *testing.T, ns, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server's RBAC authorizer reads roles from a cache: wait
	// until it allows what the role grants before the test acts as the
	// account.
	user := "system:serviceaccount:" + ns + ":" + name
	for _, r := range rules {
		if len(r.Resources) == 0 || len(r.Verbs) == 0 || len(r.APIGroups) == 0 {
			continue
		}
		attrs := &authorizationv1.ResourceAttributes{Namespace: ns, Group: r.APIGroups[0], Resource: r.Resources[0], Verb: r.Verbs[0]}
		deadline := time.Now().Add(30 * time.Second)
		for {
			sar, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}, ResourceAttributes: attrs,
			}}, metav1.CreateOptions{})
			if err == nil && sar.Status.Allowed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is not allowed to %s %s after 30 s: %v", user, attrs.Verb, attrs.Resource, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Enough objects of one kind that the planner reads them with a LIST:
// the re-apply writes nothing, one change writes exactly one object, and
// an object missing from the LIST is created.
func TestLargeGroupsAreListed(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	for i := range 12 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("cm-%02d.yaml", i)), configMap(ns, fmt.Sprintf("cm-%02d", i)))
	}
	args := []string{"apply", "--path=" + dir, "--inventory=listed", "--inventory-namespace=" + ns}
	if r := gantry(t, args...); r.code != 0 || counts(t, r)[result.Created] != 12 {
		t.Fatalf("first apply: exit %d %v\n%s", r.code, r.res.Counts(), r.stderr)
	}
	first := gantry(t, args...)
	if c := counts(t, first); first.code != 0 || c[result.Unchanged] != 12 {
		t.Fatalf("re-apply: %v\n%s", c, first.stderr)
	}
	before := resourceVersions(t, first)
	replaceInFile(t, filepath.Join(dir, "cm-05.yaml"), "k: v1", "k: v2")
	writeFile(t, filepath.Join(dir, "cm-99.yaml"), configMap(ns, "cm-99"))
	r := gantry(t, args...)
	c := counts(t, r)
	if r.code != 0 || c[result.Configured] != 1 || c[result.Created] != 1 || c[result.Unchanged] != 11 {
		t.Fatalf("one change and one new: %v\n%s", c, r.stderr)
	}
	after := resourceVersions(t, r)
	for ref, rv := range before {
		changed := strings.HasSuffix(ref, "/cm-05")
		if (after[ref] != rv) != changed {
			t.Errorf("%s: resourceVersion %s -> %s", ref, rv, after[ref])
		}
	}
}
