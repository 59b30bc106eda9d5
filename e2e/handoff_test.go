package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// fluxApply applies a ConfigMap as Flux's kustomize-controller does:
// server-side, as field manager kustomize-controller, forcing conflicts,
// with its ownership labels.
func fluxApply(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	cm := corev1ac.ConfigMap(name, ns).WithData(data).WithLabels(map[string]string{
		"kustomize.toolkit.fluxcd.io/name":      "shop",
		"kustomize.toolkit.fluxcd.io/namespace": "flux-system",
	})
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Apply(context.Background(), cm, metav1.ApplyOptions{FieldManager: "kustomize-controller", Force: true}); err != nil {
		t.Fatal(err)
	}
}

func getConfigMap(t *testing.T, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// An app deployed with gantry, then applied by Flux, is handed over
// without an outage: delete leaves what Flux applies alone, release takes
// gantry's labels and field ownership off and deletes the inventory, and
// Flux can then remove fields.
func TestHandOffToFlux(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\ndata:\n  k1: v1\n  k2: v2\n  k3: v3\n"
	}
	writeFile(t, filepath.Join(dir, "adopted.yaml"), cm("adopted"))
	writeFile(t, filepath.Join(dir, "later.yaml"), cm("later"))
	inv := []string{"--inventory=handoff", "--inventory-namespace=" + ns}
	if r := gantry(t, append([]string{"apply", "--path=" + dir}, inv...)...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	uid := getConfigMap(t, ns, "adopted").UID

	// Flux applies the same object; while gantry's field manager co-owns
	// k3, Flux dropping it removes nothing.
	fluxApply(t, ns, "adopted", map[string]string{"k1": "v1", "k2": "v2"})
	if got := getConfigMap(t, ns, "adopted").Data; got["k3"] != "v3" {
		t.Fatalf("k3 = %q: gantry's field manager should still own it", got["k3"])
	}

	// delete leaves what Flux now applies alone, and keeps it in the
	// inventory, so that it can still be released.
	r := gantry(t, append([]string{"delete"}, inv...)...)
	if r.code != 0 {
		t.Fatalf("delete: exit %d\n%s", r.code, r.stderr)
	}
	o := objectByRef(r, "ConfigMap/"+ns+"/adopted")
	if o == nil || o.Action != result.Skipped || !strings.Contains(o.Error, "now applied by Flux Kustomization flux-system/shop") {
		t.Fatalf("adopted: %+v", o)
	}
	if got := getConfigMap(t, ns, "adopted"); got.UID != uid {
		t.Fatal("the ConfigMap Flux applies was deleted")
	}
	if ids := entryIDs(t, ns, "handoff"); len(ids) != 1 || !strings.Contains(ids[0], "_adopted_") {
		t.Fatalf("inventory entries after delete: %v", ids)
	}

	// Apply again (later is back), then release.
	if r := gantry(t, append([]string{"apply", "--path=" + dir}, inv...)...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	r = gantry(t, append([]string{"release"}, inv...)...)
	if r.code != 0 {
		t.Fatalf("release: exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Released] != 2 {
		t.Errorf("counts %v, want 2 released", c)
	}
	if !strings.Contains(r.stderr, "gantry release: ReconciliationSucceeded: 2 released, 0 skipped, 0 failed") {
		t.Errorf("summary:\n%s", r.stderr)
	}
	for _, name := range []string{"adopted", "later"} {
		got := getConfigMap(t, ns, name)
		if _, ok := got.Labels[inventory.NameLabel]; ok {
			t.Errorf("%s keeps gantry's labels: %v", name, got.Labels)
		}
		for _, m := range got.ManagedFields {
			if m.Manager == "gantry" {
				t.Errorf("%s: gantry still manages fields: %+v", name, m)
			}
		}
	}
	ctx := context.Background()
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName("handoff"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("inventory: %v, want deleted", err)
	}
	if _, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, inventory.ConfigMapName("handoff"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease: %v, want deleted", err)
	}

	// Flux now removes what its source drops: k3 of the adopted object,
	// and k2 of the one it had never applied before the release.
	fluxApply(t, ns, "adopted", map[string]string{"k1": "v1", "k2": "v2"})
	fluxApply(t, ns, "later", map[string]string{"k1": "v1", "k3": "v3"})
	if got := getConfigMap(t, ns, "adopted"); got.UID != uid || got.Data["k3"] != "" || got.Data["k2"] != "v2" {
		t.Errorf("adopted after release: uid changed %v, data %v", got.UID != uid, got.Data)
	}
	if got := getConfigMap(t, ns, "later").Data; got["k2"] != "" || got["k3"] != "v3" {
		t.Errorf("later after release: %v", got)
	}

	// The released inventory is gone: delete deletes nothing.
	r = gantry(t, append([]string{"delete"}, inv...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "inventory "+ns+"/handoff not found") {
		t.Errorf("delete after release: exit %d\n%s", r.code, r.stderr)
	}
	if got := getConfigMap(t, ns, "adopted"); got.UID != uid {
		t.Error("delete after release deleted the adopted ConfigMap")
	}
}

// release leaves an object that carries another inventory's labels as it
// is, and force makes delete remove what Flux applies.
func TestReleaseAndForceDelete(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "a"))
	inv := []string{"--inventory=forced", "--inventory-namespace=" + ns}
	if r := gantry(t, append([]string{"apply", "--path=" + dir}, inv...)...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	fluxApply(t, ns, "a", map[string]string{"k": "v1"})
	// force keeps its one meaning (recreate on immutable changes).
	r := gantry(t, append([]string{"delete", "--force"}, inv...)...)
	if r.code != 0 || counts(t, r)[result.Deleted] != 0 {
		t.Fatalf("delete --force: exit %d, %v, want the object Flux applies left alone\n%s", r.code, counts(t, r), r.stderr)
	}
	if !strings.Contains(r.stderr, "delete-flux-applied") {
		t.Errorf("delete does not say which input deletes what Flux applies:\n%s", r.stderr)
	}
	r = gantry(t, append([]string{"delete", "--delete-flux-applied"}, inv...)...)
	if r.code != 0 || counts(t, r)[result.Deleted] != 1 {
		t.Fatalf("delete --delete-flux-applied: exit %d, %v\n%s", r.code, counts(t, r), r.stderr)
	}

	// An object relabelled by hand for another inventory is left alone.
	if r := gantry(t, append([]string{"apply", "--path=" + dir}, inv...)...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	patch := `{"metadata":{"labels":{"` + inventory.NameLabel + `":"other"}}}`
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Patch(context.Background(), "a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	r = gantry(t, append([]string{"release"}, inv...)...)
	if o := objectByRef(r, "ConfigMap/"+ns+"/a"); r.code != 0 || o == nil || o.Action != result.Skipped {
		t.Fatalf("release: exit %d, %+v\n%s", r.code, o, r.stderr)
	}
	if got := getConfigMap(t, ns, "a"); got.Labels[inventory.NameLabel] != "other" {
		t.Errorf("labels changed: %v", got.Labels)
	}
}

// A release whose hand-over of fields failed after the labels came off
// keeps the object in the inventory; the retry finishes the hand-over
// instead of skipping the object as no longer labelled.
func TestRetriedReleaseFinishesTheHandOver(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	proxy := newAPIProxy(t, env.Cluster)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "a"))
	inv := []string{"--inventory=halfway", "--inventory-namespace=" + ns}
	if r := gantry(t, append([]string{"apply", "--path=" + dir}, inv...)...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	// The release's second patch (the fields, after the labels) never
	// reaches the server.
	proxy.setHook(func(class string, n int, _ *http.Request) proxyAction {
		if class == "apply" && n == 2 {
			return proxyAction{when: breakBefore}
		}
		return proxyAction{}
	})
	r := gantryWith(t, proxy.kubeconfig, append([]string{"release"}, inv...)...)
	proxy.setHook(nil)
	if r.code != 1 {
		t.Fatalf("the broken release: exit %d, want 1\n%s", r.code, r.stderr)
	}
	ctx := context.Background()
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels[inventory.NameLabel] != "" {
		t.Fatalf("the labels are still on: the test needs a release that failed after taking them off")
	}
	r = gantry(t, append([]string{"release"}, inv...)...)
	if r.code != 0 || counts(t, r)[result.Released] != 1 {
		t.Fatalf("the retried release: exit %d, %v, want 1 released\n%s", r.code, counts(t, r), r.stderr)
	}
	cm, err = env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cm.ManagedFields {
		if m.Manager == "gantry" {
			t.Errorf("gantry still owns fields after the retried release: %+v", cm.ManagedFields)
		}
	}
}
