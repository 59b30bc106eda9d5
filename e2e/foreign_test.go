package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// An inventory edited by hand (anyone who may write the ConfigMap can) to
// list objects gantry did not create cannot make gantry delete them: an
// object of another namespace without gantry's labels, a kube-system
// object, a protected Namespace. delete leaves each alone and says why,
// and deletes what the run did create.
func TestEditedInventoryCannotDeleteForeignObjects(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	other := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "own.yaml"), configMap(ns, "own"))
	if r := gantry(t, "apply", "--path="+dir, "--inventory=edited", "--inventory-namespace="+ns); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	ctx := context.Background()
	created, err := env.Client.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: other}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	foreign := created.UID
	store := &inventory.Store{Client: env.Client}
	inv, err := store.Load(ctx, ns, "edited")
	if err != nil {
		t.Fatal(err)
	}
	inv.Entries = append(inv.Entries,
		inventory.Entry{ID: other + "_foreign__ConfigMap", Version: "v1"},
		inventory.Entry{ID: "kube-system_extension-apiserver-authentication__ConfigMap", Version: "v1"},
		inventory.Entry{ID: "_kube-system__Namespace", Version: "v1"},
		inventory.Entry{ID: "_default__Namespace", Version: "v1"},
	)
	if err := store.Save(ctx, inv); err != nil {
		t.Fatal(err)
	}

	r := gantry(t, "delete", "--inventory=edited", "--inventory-namespace="+ns)
	if r.code != 0 {
		t.Fatalf("delete: exit %d\n%s", r.code, r.stderr)
	}
	for ref, why := range map[string]string{
		"ConfigMap/" + other + "/foreign":                          "not labelled as this inventory's",
		"ConfigMap/kube-system/extension-apiserver-authentication": "not labelled as this inventory's",
		"Namespace/kube-system":                                    "not labelled as this inventory's",
		"Namespace/default":                                        "not labelled as this inventory's",
	} {
		if o := objectByRef(r, ref); o == nil || o.Action != result.Skipped || !strings.Contains(o.Error, why) {
			t.Errorf("%s: %+v, want skipped: %s", ref, o, why)
		}
	}
	if o := objectByRef(r, "ConfigMap/"+ns+"/own"); o == nil || o.Action != result.Deleted {
		t.Errorf("own: %+v, want deleted", o)
	}
	if got, err := env.Client.CoreV1().ConfigMaps(other).Get(ctx, "foreign", metav1.GetOptions{}); err != nil || got.UID != foreign {
		t.Errorf("the foreign ConfigMap was touched: %v", err)
	}
	for _, name := range []string{"kube-system", "default"} {
		if n, err := env.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err != nil || n.DeletionTimestamp != nil {
			t.Errorf("Namespace %s: %v", name, err)
		}
	}
	if _, err := env.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{}); err != nil {
		t.Errorf("kube-system ConfigMap: %v", err)
	}
}
