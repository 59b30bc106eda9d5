// Package schemas validates objects without sending them to the API server,
// for the objects a server-side dry-run cannot check yet because the
// Namespace or CustomResourceDefinition they need comes with the same set.
//
// Custom resources are checked against the CRDs of the set with the API
// server's own code (k8s.io/apiextensions-apiserver): defaults, the OpenAPI
// schema, unknown fields, list types and the CEL rules of
// x-kubernetes-validations. Built-in kinds are checked against the schemas
// the cluster itself publishes at /openapi/v3: field types, unknown fields,
// required fields, enums and formats. What only the API server's native
// validation knows (replicas must not be negative, say) is left to the
// dry-run that follows once the Namespace exists.
package schemas

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// OpenAPISource gives the cluster's OpenAPI v3 document of one group
// version, as JSON (the discovery client's OpenAPIV3 paths).
type OpenAPISource interface {
	OpenAPIV3(gv schema.GroupVersion) ([]byte, error)
}

// Validator checks objects offline. It is safe for concurrent use.
type Validator struct {
	crds      map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition
	crdGroups map[string]bool
	openapi   OpenAPISource

	mu       sync.Mutex
	versions map[schema.GroupVersionKind]*crdVersion
	builtins map[schema.GroupVersion]*builtinGroup
}

// New returns a Validator for the CRDs of a set (objects of any other kind
// are ignored) and the cluster's published schemas; openapi may be nil when
// no built-in kind needs checking.
func New(set []*unstructured.Unstructured, openapi OpenAPISource) (*Validator, error) {
	v := &Validator{
		crds:      map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition{},
		crdGroups: map[string]bool{},
		openapi:   openapi,
		versions:  map[schema.GroupVersionKind]*crdVersion{},
		builtins:  map[schema.GroupVersion]*builtinGroup{},
	}
	for _, u := range set {
		gvk := u.GroupVersionKind()
		if gvk.Group != apiextensionsv1.GroupName || gvk.Kind != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
			return nil, fmt.Errorf("CustomResourceDefinition/%s: %w", u.GetName(), err)
		}
		v.crds[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd
		v.crdGroups[crd.Spec.Group] = true
	}
	return v, nil
}

// Prepare loads the cluster's schemas of gv ahead of Validate, so that
// their cost overlaps other work; an error is reported again by Validate.
func (v *Validator) Prepare(gv schema.GroupVersion) {
	if _, ok := v.crdGroups[gv.Group]; ok {
		return
	}
	_, _ = v.builtin(gv)
}

// HasCRD reports whether the set defines the kind gk.
func (v *Validator) HasCRD(gk schema.GroupKind) bool {
	_, ok := v.crds[gk]
	return ok
}

// Validate checks u: against its CRD when the set defines its kind, else
// against the cluster's schema of a built-in kind. The error lists every
// problem found, each with its field path, as the API server words them.
func (v *Validator) Validate(ctx context.Context, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	var msgs []string
	if _, ok := v.crds[gvk.GroupKind()]; ok {
		cv, err := v.crdVersion(gvk)
		if err != nil {
			return err
		}
		msgs = messages(cv.validate(ctx, u))
	} else {
		b, err := v.builtin(gvk.GroupVersion())
		if err != nil {
			return err
		}
		if msgs, err = b.validate(gvk, withoutSecretValues(u)); err != nil {
			return err
		}
	}
	msgs = append(msgs, messages(validateMeta(u))...)
	if len(msgs) == 0 {
		return nil
	}
	return &InvalidError{Kind: gvk.Kind, Name: u.GetName(), Problems: msgs}
}

func messages(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, fe := range errs {
		out[i] = fe.Error()
	}
	return out
}

// InvalidError is an object that failed offline validation, worded as the
// API server words an invalid object.
type InvalidError struct {
	Kind, Name string
	// Problems each name a field and what is wrong with it.
	Problems []string
}

func (e *InvalidError) Error() string {
	msgs := make([]string, 0, len(e.Problems))
	seen := map[string]bool{}
	for _, m := range e.Problems {
		if !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 1 {
		return fmt.Sprintf("%s %q is invalid: %s", e.Kind, e.Name, msgs[0])
	}
	return fmt.Sprintf("%s %q is invalid: [%s]", e.Kind, e.Name, strings.Join(msgs, ", "))
}

// withoutSecretValues returns a Secret whose data and stringData values are
// replaced by stand-ins of the same shape, so that no error message can
// quote a secret: an invalid base64 value stays invalid ("!"), a valid one
// becomes "", a number 0, a boolean false. Other objects are returned as
// they are.
func withoutSecretValues(u *unstructured.Unstructured) *unstructured.Unstructured {
	if u.GroupVersionKind().Group != "" || u.GetKind() != "Secret" {
		return u
	}
	c := u.DeepCopy()
	for _, field := range []string{"data", "stringData"} {
		m, ok := c.Object[field].(map[string]any)
		if !ok {
			continue
		}
		for k, val := range m {
			m[k] = standIn(val, field == "data")
		}
	}
	return c
}

func standIn(v any, base64Field bool) any {
	switch t := v.(type) {
	case string:
		if base64Field {
			if _, err := base64.StdEncoding.DecodeString(t); err != nil {
				return "!"
			}
		}
		return ""
	case bool:
		return false
	case int64, float64:
		return int64(0)
	case map[string]any:
		return map[string]any{}
	case []any:
		return []any{}
	}
	return nil
}

// validateMeta checks the name and namespace as every kind's validation
// does (a path segment; kinds that need DNS names are checked on the server).
func validateMeta(u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("metadata")
	if u.GetName() == "" {
		errs = append(errs, field.Required(p.Child("name"), "name or generateName is required"))
	}
	for _, msg := range pathSegmentName(u.GetName()) {
		errs = append(errs, field.Invalid(p.Child("name"), u.GetName(), msg))
	}
	if ns := u.GetNamespace(); ns != "" {
		for _, msg := range apimachineryvalidation.ValidateNamespaceName(ns, false) {
			errs = append(errs, field.Invalid(p.Child("namespace"), ns, msg))
		}
	}
	return errs
}

// pathSegmentName says why name cannot be a segment of a URL path, as the
// API server requires of every object's name: not "." or "..", and no "/"
// or "%".
func pathSegmentName(name string) []string {
	switch name {
	case ".", "..":
		return []string{fmt.Sprintf("may not be '%s'", name)}
	}
	var msgs []string
	for _, illegal := range []string{"/", "%"} {
		if strings.Contains(name, illegal) {
			msgs = append(msgs, fmt.Sprintf("may not contain '%s'", illegal))
		}
	}
	return msgs
}

// crdVersion is what validates the custom resources of one served version.
type crdVersion struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func (v *Validator) crdVersion(gvk schema.GroupVersionKind) (*crdVersion, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cv, ok := v.versions[gvk]; ok {
		return cv, nil
	}
	crd := v.crds[gvk.GroupKind()]
	cv, err := newCRDVersion(crd, gvk.Version)
	if err != nil {
		return nil, err
	}
	v.versions[gvk] = cv
	return cv, nil
}

func newCRDVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) (*crdVersion, error) {
	var props *apiextensionsv1.CustomResourceValidation
	found := false
	for _, ver := range crd.Spec.Versions {
		if ver.Name != version {
			continue
		}
		if !ver.Served {
			return nil, fmt.Errorf("version %s of CustomResourceDefinition %s is not served", version, crd.Name)
		}
		props, found = ver.Schema, true
	}
	if !found {
		return nil, fmt.Errorf("CustomResourceDefinition %s has no version %s", crd.Name, version)
	}
	if props == nil || props.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("version %s of CustomResourceDefinition %s has no schema", version, crd.Name)
	}
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition %s: reading the schema of %s: %w", crd.Name, version, err)
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition %s: the schema of %s is not structural: %w", crd.Name, version, err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition %s: the schema of %s: %w", crd.Name, version, err)
	}
	return &crdVersion{structural: s, schema: validator, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}, nil
}

// validate runs what the API server runs on a custom resource it creates:
// defaulting, pruning of unknown fields (an error for server-side apply),
// the schema, list types, embedded object metadata and the CEL rules.
func (cv *crdVersion) validate(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	obj := runtime.DeepCopyJSON(u.Object)
	structuraldefaulting.Default(obj, cv.structural)
	var errs field.ErrorList
	unknown := pruning.PruneWithOptions(runtime.DeepCopyJSON(obj), cv.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range unknown {
		errs = append(errs, field.Invalid(field.NewPath(p), nil, "field not declared in schema"))
	}
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, cv.schema)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, cv.structural, obj)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, cv.structural, true)...)
	if len(errs) > 0 {
		// CEL rules assume the schema holds; the server skips them too.
		return errs
	}
	celErrs, _ := cv.cel.Validate(ctx, nil, cv.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// ErrNoSchema is returned for a kind the cluster publishes no schema for.
var ErrNoSchema = errors.New("the cluster publishes no schema for this kind")
