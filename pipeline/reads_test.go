package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gantry-dev/gantry/kube"
)

var (
	cmGVK     = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	saGVK     = schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}
	crdGVK    = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
)

// readsCluster is a fake cluster that lets nobody list Secrets, cannot
// list ConfigMaps in namespace "busy" (it times out), and records the
// LISTs it answers.
func readsCluster(t *testing.T, objs []client.Object) (client.Client, meta.RESTMapper, func() []string) {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{cmGVK.GroupVersion(), crdGVK.GroupVersion()})
	mapper.Add(cmGVK, meta.RESTScopeNamespace)
	mapper.Add(secretGVK, meta.RESTScopeNamespace)
	mapper.Add(saGVK, meta.RESTScopeNamespace)
	mapper.Add(crdGVK, meta.RESTScopeRoot)
	var mu sync.Mutex
	var seen []string
	c := fake.NewClientBuilder().WithScheme(kube.Scheme()).WithRESTMapper(mapper).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				o := &client.ListOptions{}
				o.ApplyOptions(opts)
				kind := list.GetObjectKind().GroupVersionKind().Kind
				mu.Lock()
				by := ""
				if o.LabelSelector != nil {
					by = o.LabelSelector.String()
				}
				seen = append(seen, fmt.Sprintf("%s in %q by %q", kind, o.Namespace, by))
				mu.Unlock()
				if kind == "SecretList" {
					return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("may get, not list"))
				}
				if o.Namespace == "busy" {
					return apierrors.NewTimeoutError("the server is busy", 1)
				}
				return c.List(ctx, list, opts...)
			},
		}).Build()
	return c, mapper, func() []string {
		mu.Lock()
		defer mu.Unlock()
		s := slices.Clone(seen)
		slices.Sort(s)
		return s
	}
}

func newObject(gvk schema.GroupVersionKind, namespace, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// The read policy: a LIST for a group of many objects, never for CRDs; one
// LIST by the inventory's labels for a kind spread over namespaces, and
// only with those labels to select by; a group whose LIST fails is left
// to GETs, not taken for empty.
func TestListGroupsReadPolicy(t *testing.T) {
	t.Parallel()
	inv := map[string]string{"gantry.dev/inventory-name": "inv", "gantry.dev/inventory-namespace": "ops"}
	var objs []client.Object
	groups := map[groupKey]int{}
	add := func(u *unstructured.Unstructured, exists bool) {
		if exists {
			objs = append(objs, u)
		}
		groups[keyOf(u).group]++
	}
	for i := range listThreshold {
		add(newObject(cmGVK, "many", fmt.Sprintf("cm-%d", i), nil), i != 0)
		add(newObject(secretGVK, "many", fmt.Sprintf("s-%d", i), nil), true)
		add(newObject(crdGVK, "", fmt.Sprintf("crd%d.example.com", i), nil), true)
		labels := inv
		if i == 3 {
			labels = nil // lost its labels: left to a GET
		}
		add(newObject(cmGVK, fmt.Sprintf("tenant-%d", i), "settings", labels), true)
	}
	// A group of a few: its labelled objects with one LIST, the set's
	// and one labelled for the inventory that the set lacks.
	add(newObject(saGVK, "few", "runner", inv), true)
	objs = append(objs, newObject(saGVK, "few", "orphan", inv), newObject(saGVK, "few", "someone-elses", nil))
	objs = append(objs, newObject(cmGVK, "many", "not-the-sets", nil), newObject(cmGVK, "elsewhere", "settings", inv))
	c, _, seen := readsCluster(t, objs)

	found := listGroups(t.Context(), c, groups, inv, 4)
	want := []string{
		`ConfigMapList in "" by "gantry.dev/inventory-name=inv,gantry.dev/inventory-namespace=ops"`,
		`ConfigMapList in "many" by ""`,
		`SecretList in "many" by ""`,
		`ServiceAccountList in "few" by "gantry.dev/inventory-name=inv,gantry.dev/inventory-namespace=ops"`,
	}
	if got := seen(); !slices.Equal(got, want) {
		t.Errorf("LISTs\n%q\nwant\n%q", got, want)
	}
	if got := len(found.whole[groupKey{cmGVK, "many"}]); got != listThreshold {
		t.Errorf("the ConfigMaps of many: %d listed, want %d (7 of the set's and another)", got, listThreshold)
	}
	if _, ok := found.whole[groupKey{secretGVK, "many"}]; ok {
		t.Error("the Secrets, whose LIST failed, were taken as listed whole")
	}
	var tenants, few []string
	for k := range found.labelled {
		if k.group.namespace == "few" {
			few = append(few, k.name)
			continue
		}
		tenants = append(tenants, k.group.namespace)
	}
	slices.Sort(few)
	if want := []string{"orphan", "runner"}; !slices.Equal(few, want) {
		t.Errorf("labelled ServiceAccounts found in few: %v, want %v", few, want)
	}
	slices.Sort(tenants)
	if want := []string{"tenant-0", "tenant-1", "tenant-2", "tenant-4", "tenant-5", "tenant-6", "tenant-7"}; !slices.Equal(tenants, want) {
		t.Errorf("labelled objects found in %v, want %v (not tenant-3, which lost its labels, nor a namespace outside the set)", tenants, want)
	}

	// Without labels to select by, the spread kind is left to GETs.
	c, _, seen = readsCluster(t, objs)
	if found := listGroups(t.Context(), c, groups, nil, 4); len(found.labelled) != 0 || len(seen()) != 2 {
		t.Errorf("without a selector: LISTs %q, %d found by labels", seen(), len(found.labelled))
	}
}

// The wait reads the objects of a group it may not list with a GET each;
// a group whose LIST failed otherwise (a timeout) fails its objects until
// the next poll, without a GET of each.
func TestListReaderReadsByGetsWhatItMayNotList(t *testing.T) {
	t.Parallel()
	var objs []client.Object
	var ids object.ObjMetadataSet
	for i := range listThreshold {
		u := newObject(secretGVK, "ns", fmt.Sprintf("s-%d", i), nil)
		if i != 0 {
			objs = append(objs, u)
		}
		ids = append(ids, object.ObjMetadata{GroupKind: secretGVK.GroupKind(), Namespace: "ns", Name: u.GetName()})
		cm := newObject(cmGVK, "busy", fmt.Sprintf("cm-%d", i), nil)
		objs = append(objs, cm)
		ids = append(ids, object.ObjMetadata{GroupKind: cmGVK.GroupKind(), Namespace: "busy", Name: cm.GetName()})
	}
	c, mapper, seen := readsCluster(t, objs)
	var mu sync.Mutex
	gets := map[string]int{}
	c = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			mu.Lock()
			gets[key.Namespace]++
			mu.Unlock()
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r, err := newListReader(c, mapper, ids, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := seen(); len(got) != 2 {
		t.Errorf("LISTs %q, want the Secrets' and the ConfigMaps'", got)
	}
	if want := map[string]int{"ns": listThreshold}; !maps.Equal(gets, want) {
		t.Errorf("GETs by namespace %v, want %v", gets, want)
	}
	for _, id := range ids {
		gvk := secretGVK
		if id.Namespace == "busy" {
			gvk = cmGVK
		}
		u := newObject(gvk, "", "", nil)
		err := r.Get(t.Context(), client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, u)
		switch {
		case id.Namespace == "busy" && !apierrors.IsTimeout(err):
			t.Errorf("%s: want the LIST's timeout, got %v", id.Name, err)
		case id.Name == "s-0" && !apierrors.IsNotFound(err):
			t.Errorf("s-0: want not found, got %v", err)
		case id.Namespace == "ns" && id.Name != "s-0" && (err != nil || u.GetName() != id.Name):
			t.Errorf("%s: %v (read %q)", id.Name, err, u.GetName())
		}
	}
}
