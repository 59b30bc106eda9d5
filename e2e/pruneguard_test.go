package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// A set that shrinks to 40 % of what the inventory lists (a folder
// renamed, manifests moved elsewhere) is refused by the default guard
// before anything is written, in apply and in diff, naming the count;
// max-prune allows it.
func TestLargePruneIsRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	set := func(n int, value string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%02d\n  namespace: %s\ndata:\n  v: %s\n", i, ns, value)
		}
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "set.yaml"), b.String())
		return dir
	}
	args := func(dir string, extra ...string) []string {
		return append([]string{"--path=" + dir, "--inventory=guard", "--inventory-namespace=" + ns, "--timeout=60s"}, extra...)
	}
	if r := gantry(t, append([]string{"apply"}, args(set(20, "a"))...)...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	shrunk := set(8, "b") // 12 of 20 to prune, and a change to the 8
	const says = "prune would delete 12 of the 20 objects inventory"

	r := gantry(t, append([]string{"diff"}, args(shrunk)...)...)
	if r.code != 1 || !strings.Contains(r.stderr, says) {
		t.Errorf("diff: exit %d, want 1 saying %q\n%s", r.code, says, r.stderr)
	}
	r = gantry(t, append([]string{"apply"}, args(shrunk)...)...)
	if r.code != 1 || !strings.Contains(r.stderr, says) || r.res == nil || r.res.Reason != result.ReasonValidationFailed {
		t.Fatalf("apply: exit %d, want 1 saying %q\n%s", r.code, says, r.stderr)
	}
	list, err := env.Client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "cm-") {
			n++
			if cm.Data["v"] != "a" {
				t.Errorf("%s was written by the refused run: %v", cm.Name, cm.Data)
			}
		}
	}
	if n != 20 {
		t.Errorf("%d ConfigMaps after the refused run, want all 20", n)
	}

	r = gantry(t, append([]string{"apply"}, args(shrunk, "--max-prune=60%")...)...)
	if r.code != 0 || counts(t, r)[result.Deleted] != 12 || counts(t, r)[result.Configured] != 8 {
		t.Errorf("with max-prune=60%%: exit %d, %v, want 12 deleted and 8 configured\n%s", r.code, counts(t, r), r.stderr)
	}
}

// writeSet writes YAML documents into a new folder as one file.
func writeSet(t *testing.T, docs ...string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "set.yaml"), strings.Join(docs, "\n---\n"))
	return dir
}

// skippedWith returns the report's line for ref when it was skipped.
func skippedWith(r gantryRun, ref string) string {
	if r.res == nil {
		return ""
	}
	for _, o := range r.res.Objects {
		if o.Ref() == ref && o.Action == result.Skipped {
			return o.Error
		}
	}
	return ""
}

// The Namespace manifest of an app moves to another repository: the
// next apply keeps the Namespace, which holds the set's ConfigMap and the
// inventory, reports it kept and why, and lists it still; nothing is
// deleted by the namespace controller afterwards, and the next run
// converges.
func TestNamespaceLeavingTheSetIsKept(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t) + "-app"
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	namespace := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns
	args := func(dir string) []string {
		return []string{"apply", "--path=" + dir, "--inventory=app", "--inventory-namespace=" + ns, "--timeout=60s"}
	}
	if r := gantry(t, args(writeSet(t, namespace, configMap(ns, "settings")))...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	moved := writeSet(t, configMap(ns, "settings"))
	for run := range 2 {
		r := gantry(t, args(moved)...)
		if r.code != 0 {
			t.Fatalf("run %d without the Namespace manifest: exit %d\n%s", run, r.code, r.stderr)
		}
		if why := skippedWith(r, "Namespace/"+ns); !strings.Contains(why, "kept: it holds 1 objects of this set") {
			t.Errorf("run %d: the Namespace is not reported kept with why: %q\n%s", run, why, r.stderr)
		}
		if c := counts(t, r); c[result.Deleted] != 0 {
			t.Errorf("run %d deleted %d objects, want none", run, c[result.Deleted])
		}
	}
	ctx := context.Background()
	n, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil || n.DeletionTimestamp != nil {
		t.Fatalf("the Namespace is gone or going: %v %v", err, n.GetDeletionTimestamp())
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); err != nil {
		t.Errorf("the set's ConfigMap: %v", err)
	}
	ids := entryIDs(t, ns, "app")
	if !slices.Contains(ids, "_"+ns+"__Namespace") {
		t.Errorf("the inventory no longer lists the Namespace it keeps: %v", ids)
	}
}

// A CRD leaves the set: while the set still applies its kind, or while
// the cluster holds any resource of it, prune keeps it, says why and
// lists it still; prune-crds-with-resources lets it go.
func TestCRDLeavingTheSetIsKept(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	group := ns + ".gantry.test"
	crd := crdYAML(group, "Widget")
	widget := func(name string) string {
		return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  size: 1", group, name, ns)
	}
	ctx := context.Background()
	t.Cleanup(func() {
		_ = env.Client.CoreV1().RESTClient().Delete().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets." + group).Do(ctx).Error()
	})
	args := func(dir string, extra ...string) []string {
		return append([]string{"apply", "--path=" + dir, "--inventory=crds", "--inventory-namespace=" + ns, "--timeout=60s"}, extra...)
	}
	crdRef := "CustomResourceDefinition.apiextensions.k8s.io/widgets." + group
	if r := gantry(t, args(writeSet(t, crd, widget("mine"), configMap(ns, "settings")))...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	crdExists := func() bool {
		err := env.Client.CoreV1().RESTClient().Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets." + group).Do(ctx).Error()
		return err == nil
	}

	// The CRD moves out; the set still applies a Widget.
	r := gantry(t, args(writeSet(t, widget("mine"), configMap(ns, "settings")))...)
	if r.code != 0 || !strings.Contains(skippedWith(r, crdRef), "this set still applies Widget resources") || !crdExists() {
		t.Fatalf("the set still applies its kind: exit %d, %q, CRD there %v\n%s", r.code, skippedWith(r, crdRef), crdExists(), r.stderr)
	}

	// The Widget leaves the set too, but another one, not the set's,
	// lives in the cluster.
	foreign := writeSet(t, widget("theirs"))
	if out, err := exec.Command(kubectlPath(t), "--kubeconfig="+env.Cluster.Kubeconfig, "apply", "--server-side", "-f", filepath.Join(foreign, "set.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	only := writeSet(t, configMap(ns, "settings"))
	r = gantry(t, args(only)...)
	if r.code != 0 || !strings.Contains(skippedWith(r, crdRef), "Widget resources still exist in the cluster") || !crdExists() {
		t.Fatalf("the cluster holds a Widget: exit %d, %q, CRD there %v\n%s", r.code, skippedWith(r, crdRef), crdExists(), r.stderr)
	}
	if !slices.Contains(entryIDs(t, ns, "crds"), "_widgets."+group+"_apiextensions.k8s.io_CustomResourceDefinition") {
		t.Errorf("the kept CRD is no longer listed: %v", entryIDs(t, ns, "crds"))
	}
	r = gantry(t, args(only, "--prune-crds-with-resources")...)
	if r.code != 0 || counts(t, r)[result.Deleted] != 1 {
		t.Fatalf("with prune-crds-with-resources: exit %d, %v\n%s", r.code, counts(t, r), r.stderr)
	}
}

// An object that carries the inventory's labels and gantry's apply but
// that the inventory does not list (a write that landed after its run
// lost the Lease) is pruned by the next run, within max-prune. One a
// controller owns, or one that another manager wrote, is left alone.
func TestOrphansOfTheInventoryArePruned(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	args := func(dir string, extra ...string) []string {
		return append([]string{"apply", "--path=" + dir, "--inventory=orphans", "--inventory-namespace=" + ns, "--timeout=60s"}, extra...)
	}
	set := writeSet(t, configMap(ns, "kept"))
	if r := gantry(t, args(set)...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	labels := fmt.Sprintf("    %s: orphans\n    %s: %s\n", inventory.NameLabel, inventory.NamespaceLabel, ns)
	write := func(name, manager, extra string) {
		t.Helper()
		doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  labels:\n%s%sdata:\n  k: v\n", name, ns, labels, extra)
		dir := writeSet(t, doc)
		if out, err := exec.Command(kubectlPath(t), "--kubeconfig="+env.Cluster.Kubeconfig, "apply", "--server-side", "--field-manager="+manager, "-f", filepath.Join(dir, "set.yaml")).CombinedOutput(); err != nil {
			t.Fatalf("kubectl apply %s: %v\n%s", name, err, out)
		}
	}
	kept, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := fmt.Sprintf("  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: kept, uid: %s, controller: true}]\n", kept.UID)
	for i := range 3 {
		write(fmt.Sprintf("late-%d", i), "gantry", "")
	}
	write("owned", "gantry", owner)
	write("by-hand", "kubectl", "")

	// Three orphans against one listed object: over the default
	// max-prune? No: 3 is under its floor of 10. A limit of 1 refuses.
	if r := gantry(t, args(set, "--max-prune=1")...); r.code != entrypoint.ExitFailed || !strings.Contains(r.stderr, "3 of them labelled for it but listed nowhere") {
		t.Errorf("max-prune 1: exit %d; want 1, counting the orphans\n%s", r.code, r.stderr)
	}
	r := gantry(t, args(set)...)
	if r.code != 0 || counts(t, r)[result.Deleted] != 3 || !strings.Contains(r.stderr, "3 objects carry this inventory's labels but were listed nowhere") {
		t.Fatalf("apply: exit %d, %v; want the 3 orphans pruned\n%s", r.code, counts(t, r), r.stderr)
	}
	list, err := env.Client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" && !strings.HasPrefix(cm.Name, "gantry-") {
			names = append(names, cm.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"by-hand", "kept", "owned"}; !slices.Equal(names, want) {
		t.Errorf("ConfigMaps after the prune: %v, want %v", names, want)
	}
	if ids := entryIDs(t, ns, "orphans"); len(ids) != 1 {
		t.Errorf("the inventory lists %v, want only kept", ids)
	}
}

// force recreates a CRD whose immutable scope changed only while no
// custom resource of its kind exists: recreating it would delete them
// all, the set's and everyone else's. prune-crds-with-resources allows it.
func TestForceKeepsACRDWithResources(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	group := ns + ".gantry.test"
	crdName := "widgets." + group
	ctx := context.Background()
	t.Cleanup(func() {
		_ = env.Client.CoreV1().RESTClient().Delete().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + crdName).Do(ctx).Error()
	})
	args := func(dir string, extra ...string) []string {
		return append([]string{"apply", "--path=" + dir, "--inventory=scope", "--inventory-namespace=" + ns, "--timeout=60s", "--force"}, extra...)
	}
	crd := crdYAML(group, "Widget")
	if r := gantry(t, args(writeSet(t, crd))...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	theirs := writeSet(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: theirs\n  namespace: %s\nspec:\n  size: 1", group, ns))
	if out, err := exec.Command(kubectlPath(t), "--kubeconfig="+env.Cluster.Kubeconfig, "apply", "--server-side", "-f", filepath.Join(theirs, "set.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	widgetThere := func() bool {
		return env.Client.CoreV1().RESTClient().Get().AbsPath("/apis/"+group+"/v1/namespaces/"+ns+"/widgets/theirs").Do(ctx).Error() == nil
	}
	clusterScoped := writeSet(t, strings.Replace(crd, "scope: Namespaced", "scope: Cluster", 1))

	r := gantry(t, args(clusterScoped)...)
	if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonValidationFailed ||
		!strings.Contains(r.stderr, "spec.scope") || !strings.Contains(r.stderr, "Widget."+group+"/"+ns+"/theirs") || !strings.Contains(r.stderr, "prune-crds-with-resources") {
		t.Errorf("force with a Widget in the cluster: exit %d, %s; want 1, ValidationFailed, naming the scope, the Widget and the input that allows it\n%s", r.code, r.res.Reason, r.stderr)
	}
	if !widgetThere() {
		t.Fatal("the Widget is gone: the CRD was recreated")
	}

	r = gantry(t, args(clusterScoped, "--prune-crds-with-resources")...)
	if o := objectByRef(r, "CustomResourceDefinition.apiextensions.k8s.io/"+crdName); r.code != 0 || o == nil || o.Action != result.Recreated {
		t.Fatalf("with prune-crds-with-resources: exit %d, %+v\n%s", r.code, o, r.stderr)
	}
	if widgetThere() {
		t.Error("the Widget outlived its CRD's recreation")
	}
}

// An object is relabelled for another inventory, or annotated
// prune: disabled, after validate read it and before prune deletes it:
// prune sees the change and keeps it.
func TestPruneHonoursChangesAfterValidate(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	proxy := newAPIProxy(t, env.Cluster)
	args := func(dir string) []string {
		return []string{"apply", "--path=" + dir, "--inventory=late", "--inventory-namespace=" + ns, "--timeout=60s"}
	}
	if r := gantryWith(t, proxy.kubeconfig, args(writeSet(t, configMap(ns, "stays"), configMap(ns, "relabelled"), configMap(ns, "annotated")))...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	ctx := context.Background()
	// Every delete waits until both changes are made, as they would be
	// when they come between the read and the deletes.
	var change sync.Once
	proxy.setHook(func(class string, n int, _ *http.Request) proxyAction {
		if class != "delete" {
			return proxyAction{}
		}
		return proxyAction{when: delay, do: func() {
			change.Do(func() {
				cms := env.Client.CoreV1().ConfigMaps(ns)
				for name, change := range map[string]func(*corev1.ConfigMap){
					"relabelled": func(cm *corev1.ConfigMap) { cm.Labels["gantry.dev/inventory-name"] = "other" },
					"annotated": func(cm *corev1.ConfigMap) {
						cm.Annotations = map[string]string{"kustomize.toolkit.fluxcd.io/prune": "disabled"}
					},
				} {
					cm, err := cms.Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						t.Error(err)
						continue
					}
					change(cm)
					if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
						t.Error(err)
					}
				}
			})
		}}
	})
	r := gantryWith(t, proxy.kubeconfig, args(writeSet(t, configMap(ns, "stays")))...)
	proxy.setHook(nil)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, name := range []string{"relabelled", "annotated"} {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap %s, changed after validate, was deleted: %v", name, err)
		}
	}
	if c := counts(t, r); c[result.Deleted] != 0 || c[result.Skipped] != 2 {
		t.Errorf("counts %v, want 2 kept (skipped) and none deleted", c)
	}
}

// kubectlPath is the kubectl that make tools builds.
func kubectlPath(t *testing.T) string {
	t.Helper()
	p, err := cluster.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A custom resource whose CRD comes with the set, written with its answer
// lost every time: the run fails, and its final inventory save still
// lists it.
func TestUnansweredWriteOfANewKindStaysListed(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	group := ns + ".gantry.test"
	ctx := context.Background()
	t.Cleanup(func() {
		_ = env.Client.CoreV1().RESTClient().Delete().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets." + group).Do(ctx).Error()
	})
	proxy := newAPIProxy(t, env.Cluster)
	proxy.setHook(func(class string, _ int, r *http.Request) proxyAction {
		if class == "apply" && strings.HasSuffix(r.URL.Path, "/widgets/w") {
			return proxyAction{when: breakAfter}
		}
		return proxyAction{}
	})
	widget := fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: %s\nspec:\n  size: 1", group, ns)
	dir := writeSet(t, crdYAML(group, "Widget"), widget, configMap(ns, "settings"))
	r := gantryWith(t, proxy.kubeconfig, "apply", "--path="+dir, "--inventory=deferred", "--inventory-namespace="+ns, "--timeout=60s", "--wait=false")
	proxy.setHook(nil)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (the Widget's answer never came)\n%s", r.code, r.stderr)
	}
	path := "/apis/" + group + "/v1/namespaces/" + ns + "/widgets/w"
	if err := env.Client.CoreV1().RESTClient().Get().AbsPath(path).Do(ctx).Error(); err != nil {
		t.Fatalf("the Widget was not written, which the test needs: %v", err)
	}
	if ids := entryIDs(t, ns, "deferred"); !slices.Contains(ids, ns+"_w_"+group+"_Widget") {
		t.Errorf("the inventory does not list the Widget that was written: %v", ids)
	}
}

// An entry recorded at a version its CRD no longer serves (the CRD moved
// to v2 and stopped serving v1) is looked up at the version served, and
// pruned; it was taken for gone and dropped while the object lived on.
func TestPruneFindsAnEntryAtAServedVersion(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	group := ns + ".gantry.test"
	ctx := context.Background()
	kubectl := kubectlPath(t)
	crdPath := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets." + group
	t.Cleanup(func() { _ = env.Client.CoreV1().RESTClient().Delete().AbsPath(crdPath).Do(ctx).Error() })
	version := func(name string, served, storage bool) string {
		return fmt.Sprintf("    - name: %s\n      served: %v\n      storage: %v\n      schema:\n        openAPIV3Schema:\n          type: object\n          x-kubernetes-preserve-unknown-fields: true\n", name, served, storage)
	}
	crd := func(versions ...string) string {
		return fmt.Sprintf("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.%[1]s}\nspec:\n  group: %[1]s\n  scope: Namespaced\n  names: {kind: Gadget, plural: gadgets, singular: gadget}\n  versions:\n%[2]s", group, strings.Join(versions, ""))
	}
	kubectlApply := func(doc string) {
		t.Helper()
		dir := writeSet(t, doc)
		if out, err := exec.Command(kubectl, "--kubeconfig="+env.Cluster.Kubeconfig, "apply", "--server-side", "-f", filepath.Join(dir, "set.yaml")).CombinedOutput(); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
		if out, err := exec.Command(kubectl, "--kubeconfig="+env.Cluster.Kubeconfig, "wait", "--for=condition=Established", "--timeout=30s", "-f", filepath.Join(dir, "set.yaml")).CombinedOutput(); err != nil {
			t.Fatalf("kubectl wait: %v\n%s", err, out)
		}
	}
	kubectlApply(crd(version("v1", true, true)))
	args := func(dir string) []string {
		return []string{"apply", "--path=" + dir, "--inventory=versions", "--inventory-namespace=" + ns, "--timeout=60s"}
	}
	gadget := fmt.Sprintf("apiVersion: %s/v1\nkind: Gadget\nmetadata:\n  name: g\n  namespace: %s\nspec:\n  size: 1", group, ns)
	if r := gantry(t, args(writeSet(t, gadget, configMap(ns, "settings")))...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	kubectlApply(crd(version("v1", false, false), version("v2", true, true)))

	r := gantry(t, args(writeSet(t, configMap(ns, "settings")))...)
	if r.code != 0 || counts(t, r)[result.Deleted] != 1 {
		t.Errorf("prune: exit %d, %v, want the Gadget deleted\n%s", r.code, counts(t, r), r.stderr)
	}
	path := "/apis/" + group + "/v2/namespaces/" + ns + "/gadgets/g"
	err := env.Client.CoreV1().RESTClient().Get().AbsPath(path).Do(ctx).Error()
	for i := 0; err == nil && i < 50; i++ { // deleted in the background
		time.Sleep(100 * time.Millisecond)
		err = env.Client.CoreV1().RESTClient().Get().AbsPath(path).Do(ctx).Error()
	}
	if err == nil {
		t.Errorf("the Gadget lives on after prune")
	}
	if ids := entryIDs(t, ns, "versions"); slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(id, "Gadget") }) && err != nil {
		t.Errorf("the inventory still lists the deleted Gadget: %v", ids)
	}
}

// One ConfigMap written once with its namespace and once without, which
// the kubeconfig context's namespace then gives it: one object, refused
// before anything is written (exit 2), naming both files.
func TestOneObjectTwiceAfterDefaultingIsRefused(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	raw, err := os.ReadFile(env.Cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, kubeconfig, string(raw))
	if out, err := exec.Command(kubectlPath(t), "--kubeconfig="+kubeconfig, "config", "set-context", "--current", "--namespace="+ns).CombinedOutput(); err != nil {
		t.Fatalf("kubectl config: %v\n%s", err, out)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\ndata: {v: a}\n")
	writeFile(t, filepath.Join(dir, "b.yaml"), configMap(ns, "same"))
	r := gantryWith(t, kubeconfig, "apply", "--path="+dir, "--inventory=twice", "--inventory-namespace="+ns, "--timeout=60s")
	if r.code != entrypoint.ExitInvalid || !strings.Contains(r.stderr, "is defined twice") ||
		!strings.Contains(r.stderr, "a.yaml") || !strings.Contains(r.stderr, "b.yaml") {
		t.Errorf("exit %d, want 2 naming both files\n%s", r.code, r.stderr)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "same", metav1.GetOptions{}); err == nil {
		t.Errorf("the ConfigMap was written")
	}
}
