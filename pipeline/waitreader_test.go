package pipeline

import (
	"testing"

	"github.com/fluxcd/cli-utils/pkg/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
	r, err := newListReader(c, mapper, ids)
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
