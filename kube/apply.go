package kube

import (
	"context"
	"encoding/json"
	"path"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ApplyBody is an object's server-side apply request body: marshalled once,
// sent for the dry-run and again for the write.
func ApplyBody(u *unstructured.Unstructured) ([]byte, error) {
	return json.Marshal(u.Object)
}

// Apply sends body (see ApplyBody) as a server-side apply of u as
// fieldManager, with ownership forced or, without force, refused with a
// conflict naming every field another manager owns. With dryRun the server only validates
// and returns the result; into, when not nil, receives the object the
// server returned. Without into the response is not decoded: a write whose
// result nobody reads costs no client CPU.
//
// Errors are the API server's (apierrors can inspect them); a kind the
// cluster does not have is a meta.NoKindMatchError.
func (c *Clients) Apply(ctx context.Context, u *unstructured.Unstructured, body []byte, fieldManager string, force, dryRun bool, into *unstructured.Unstructured) error {
	p, err := c.objectPath(u)
	if err != nil {
		return err
	}
	req := c.Kube.CoreV1().RESTClient().Patch(types.ApplyPatchType).
		AbsPath(p).
		Param("fieldManager", fieldManager).
		// Server-side apply refuses unknown fields whatever this says; on
		// an apply, the default (Warn) only adds a second, strict parse of
		// the body to find duplicate keys, which a body marshalled from a
		// map cannot have. Ignore spares the server that parse (measured
		// in BENCHMARKS.md).
		Param("fieldValidation", metav1.FieldValidationIgnore).
		Body(body)
	if force {
		req = req.Param("force", "true")
	}
	if dryRun {
		req = req.Param("dryRun", metav1.DryRunAll)
	}
	if into == nil {
		// Nobody reads the object: let the server send its metadata only.
		// A server that cannot falls back to the whole object.
		req = req.SetHeader("Accept", metadataOnly)
	}
	res := req.Do(ctx)
	// Error, not Raw, decodes the server's Status (reason, details).
	if err := res.Error(); err != nil || into == nil {
		return err
	}
	raw, err := res.Raw()
	if err != nil {
		return err
	}
	return into.UnmarshalJSON(raw)
}

// metadataOnly asks for a response's metadata, as client-go's metadata
// client does, or else the object in JSON.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// RESTMapping is the mapper's mapping of gvk, remembered once found.
func (c *Clients) RESTMapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	if m, ok := c.mappings.Load(gvk); ok {
		return m.(*meta.RESTMapping), nil
	}
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	c.mappings.Store(gvk, m)
	return m, nil
}

// objectPath is u's URL path: /api/v1/... for the core group,
// /apis/<group>/<version>/... for the others.
func (c *Clients) objectPath(u *unstructured.Unstructured) (string, error) {
	gvk := u.GroupVersionKind()
	m, err := c.RESTMapping(gvk)
	if err != nil {
		return "", err
	}
	segs := []string{"/apis", gvk.Group, gvk.Version}
	if gvk.Group == "" {
		segs = []string{"/api", gvk.Version}
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		segs = append(segs, "namespaces", u.GetNamespace())
	}
	segs = append(segs, m.Resource.Resource, u.GetName())
	return path.Join(segs...), nil
}
