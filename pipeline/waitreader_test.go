package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gantry-dev/gantry/kube"
)

func TestListReaderReadsWhatItListed(t *testing.T) {
	t.Parallel()
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "ns"},
	}}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	c := fake.NewClientBuilder().WithScheme(kube.Scheme()).WithRESTMapper(mapper).WithObjects(cm).Build()

	ids := object.ObjMetadataSet{
		{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Namespace: "ns", Name: "a"},
		{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Namespace: "ns", Name: "gone"},
		{GroupKind: schema.GroupKind{Group: "example.com", Kind: "Widget"}, Namespace: "ns", Name: "w"},
	}
	r, err := newListReader(c, mapper, ids, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	get := func(gvk schema.GroupVersionKind, name string) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, r.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: name}, u)
	}
	cmGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	if u, err := get(cmGVK, "a"); err != nil || u.GetName() != "a" {
		t.Errorf("a: %v, %v", u.GetName(), err)
	}
	if _, err := get(cmGVK, "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("gone: want not found, got %v", err)
	}
	if _, err := get(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "w"); !meta.IsNoMatchError(err) {
		t.Errorf("a kind the cluster lacks: want no match, got %v", err)
	}
	if _, err := get(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "x"); err == nil {
		t.Error("a kind that was not listed: no error")
	}
}

// The set's CRDs, and any kind of which the set has few in a namespace,
// are read with a GET each; a LIST is only for many objects of one kind
// in one namespace, and never for CRDs, however many. A GET that fails
// fails its own object only.
func TestListReaderListsOnlyLargeGroupsAndNeverCRDs(t *testing.T) {
	t.Parallel()
	crdGVK := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	cmGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{cmGVK.GroupVersion(), crdGVK.GroupVersion()})
	mapper.Add(cmGVK, meta.RESTScopeNamespace)
	mapper.Add(crdGVK, meta.RESTScopeRoot)
	var objs []client.Object
	var ids object.ObjMetadataSet
	add := func(gvk schema.GroupVersionKind, namespace, name string, exists bool) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(namespace)
		u.SetName(name)
		if exists {
			objs = append(objs, u)
		}
		ids = append(ids, object.ObjMetadata{GroupKind: gvk.GroupKind(), Namespace: namespace, Name: name})
	}
	for i := range listThreshold + 2 {
		add(crdGVK, "", fmt.Sprintf("crd%d.example.com", i), true)
	}
	for i := range listThreshold {
		add(cmGVK, "many", fmt.Sprintf("cm%d", i), true)
	}
	add(cmGVK, "few", "here", true)
	add(cmGVK, "few", "forbidden", true)
	add(cmGVK, "few", "gone", false)

	var mu sync.Mutex
	lists, gets := map[string]int{}, map[string]int{}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme()).WithRESTMapper(mapper).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				kind := obj.GetObjectKind().GroupVersionKind().Kind
				mu.Lock()
				gets[kind]++
				mu.Unlock()
				if key.Name == "forbidden" {
					return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, key.Name, errors.New("no"))
				}
				return c.Get(ctx, key, obj, opts...)
			},
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				mu.Lock()
				lists[list.GetObjectKind().GroupVersionKind().Kind]++
				mu.Unlock()
				return c.List(ctx, list, opts...)
			},
		}).Build()

	r, err := newListReader(c, mapper, ids, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"ConfigMapList": 1}; !maps.Equal(lists, want) {
		t.Errorf("LISTs %v, want %v", lists, want)
	}
	if want := map[string]int{"CustomResourceDefinition": listThreshold + 2, "ConfigMap": 3}; !maps.Equal(gets, want) {
		t.Errorf("GETs %v, want %v", gets, want)
	}
	get := func(gvk schema.GroupVersionKind, namespace, name string) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := r.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
			return err
		}
		if u.GetName() != name {
			t.Errorf("%s/%s: read %q", namespace, name, u.GetName())
		}
		return nil
	}
	for _, id := range ids {
		gvk := cmGVK
		if id.GroupKind.Kind == crdGVK.Kind {
			gvk = crdGVK
		}
		err := get(gvk, id.Namespace, id.Name)
		switch id.Name {
		case "forbidden":
			if !apierrors.IsForbidden(err) {
				t.Errorf("forbidden: want its own error, got %v", err)
			}
		case "gone":
			if !apierrors.IsNotFound(err) {
				t.Errorf("gone: want not found, got %v", err)
			}
		default:
			if err != nil {
				t.Errorf("%s/%s: %v", id.Namespace, id.Name, err)
			}
		}
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(cmGVK)
	if err := r.ListNamespaceScoped(t.Context(), list, "few", labels.Everything()); err == nil {
		t.Error("a group read by GETs answered a LIST with only the set's objects")
	}
}

// With the inventory's labels, a kind spread over namespaces, a few
// objects in each, is read with one LIST in all namespaces of the
// labelled objects; only what it does not find is read with a GET.
func TestListReaderListsASpreadKindByItsLabels(t *testing.T) {
	t.Parallel()
	cmGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{cmGVK.GroupVersion()})
	mapper.Add(cmGVK, meta.RESTScopeNamespace)
	labels := client.MatchingLabels{"gantry.dev/inventory-name": "inv", "gantry.dev/inventory-namespace": "ops"}
	var objs []client.Object
	var ids object.ObjMetadataSet
	for i := range listThreshold + 2 {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(cmGVK)
		u.SetNamespace(fmt.Sprintf("tenant-%d", i))
		u.SetName("settings")
		if i != 3 {
			u.SetLabels(labels) // tenant-3's lost its labels
		}
		objs = append(objs, u)
		ids = append(ids, object.ObjMetadata{GroupKind: cmGVK.GroupKind(), Namespace: u.GetNamespace(), Name: "settings"})
	}
	var mu sync.Mutex
	var lists, gets []string
	c := fake.NewClientBuilder().WithScheme(kube.Scheme()).WithRESTMapper(mapper).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				mu.Lock()
				gets = append(gets, key.Namespace)
				mu.Unlock()
				return c.Get(ctx, key, obj, opts...)
			},
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				o := &client.ListOptions{}
				o.ApplyOptions(opts)
				mu.Lock()
				lists = append(lists, fmt.Sprintf("namespace %q, labels %v", o.Namespace, o.LabelSelector))
				mu.Unlock()
				return c.List(ctx, list, opts...)
			},
		}).Build()

	r, err := newListReader(c, mapper, ids, 4, labels)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(lists) != 1 || !strings.Contains(lists[0], `namespace ""`) || !strings.Contains(lists[0], "gantry.dev/inventory-name=inv") {
		t.Errorf("LISTs %v, want one in all namespaces by the inventory's labels", lists)
	}
	if len(gets) != 1 || gets[0] != "tenant-3" {
		t.Errorf("GETs in %v, want tenant-3's only", gets)
	}
	for _, id := range ids {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(cmGVK)
		if err := r.Get(t.Context(), client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, u); err != nil || u.GetNamespace() != id.Namespace {
			t.Errorf("%s: %v (read %q)", id.Namespace, err, u.GetNamespace())
		}
	}
}

// A Deployment that timed out before gantry applied it again (a rollback
// to an earlier ReplicaSet) is in progress until its controller judges
// the new rollout; one that timed out after the apply has failed.
func TestAFailureBeforeTheApplyIsStale(t *testing.T) {
	failedAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	deployment := func(applied time.Time, manager string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "ns", "generation": int64(3)},
			"spec":     map[string]any{"replicas": int64(1)},
			"status": map[string]any{"observedGeneration": int64(3), "replicas": int64(1), "conditions": []any{
				map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
					"message": `ReplicaSet "web-1" has timed out progressing.`, "lastUpdateTime": failedAt.Format(time.RFC3339)},
			}},
		}}
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Time: &metav1.Time{Time: applied}}})
		return u
	}
	for _, c := range []struct {
		name string
		u    *unstructured.Unstructured
		want status.Status
	}{
		{"applied after the failure", deployment(failedAt.Add(10*time.Second), FieldManager), status.InProgressStatus},
		{"applied in the failure's second", deployment(failedAt, FieldManager), status.InProgressStatus},
		{"applied before the failure", deployment(failedAt.Add(-10*time.Second), FieldManager), status.FailedStatus},
		{"applied by someone else", deployment(failedAt.Add(10*time.Second), "kubectl"), status.FailedStatus},
	} {
		res, err := computeStatus(c.u)
		if err != nil || res.Status != c.want {
			t.Errorf("%s: %v, %v; want %s", c.name, res, err, c.want)
		}
	}
}
