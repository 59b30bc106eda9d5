package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	openapierrors "k8s.io/kube-openapi/pkg/validation/errors"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// builtinGroup holds the cluster's schemas of one group version.
type builtinGroup struct {
	defs      map[string]*spec.Schema
	converter managedfields.TypeConverter
	// byKind names each kind's schema; inlined holds it with its
	// references inlined, as the OpenAPI validator needs it, made on first
	// use.
	byKind     map[string]*spec.Schema
	mu         sync.Mutex
	validators map[string]*validate.SchemaValidator
}

// Builtins are the schemas of built-in kinds that one source publishes,
// read and parsed once per group version however many Validators use
// them: the units of a run on one cluster share them. Safe for concurrent
// use.
type Builtins struct {
	src    OpenAPISource
	mu     sync.Mutex
	groups map[schema.GroupVersion]*builtinGroup
}

// NewBuiltins reads the schemas of built-in kinds from src when first
// asked for each group version; src may be nil when none is.
func NewBuiltins(src OpenAPISource) *Builtins {
	return &Builtins{src: src, groups: map[schema.GroupVersion]*builtinGroup{}}
}

func (v *Validator) builtin(gv schema.GroupVersion) (*builtinGroup, error) {
	return v.builtins.group(gv)
}

// group reads and parses gv's schemas, once: a failure is not kept, so
// that the next use asks again.
func (bs *Builtins) group(gv schema.GroupVersion) (*builtinGroup, error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b, ok := bs.groups[gv]; ok {
		return b, nil
	}
	if bs.src == nil {
		return nil, ErrNoSchema
	}
	raw, err := bs.src.OpenAPIV3(gv)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's schema of %s: %w", gv, err)
	}
	doc := &spec3.OpenAPI{}
	if err := json.Unmarshal(raw, doc); err != nil {
		return nil, fmt.Errorf("reading the cluster's schema of %s: %w", gv, err)
	}
	if doc.Components == nil {
		return nil, fmt.Errorf("reading the cluster's schema of %s: no components", gv)
	}
	b := &builtinGroup{defs: doc.Components.Schemas, byKind: map[string]*spec.Schema{}, validators: map[string]*validate.SchemaValidator{}}
	if b.converter, err = managedfields.NewTypeConverter(b.defs, false); err != nil {
		return nil, fmt.Errorf("reading the cluster's schema of %s: %w", gv, err)
	}
	for _, s := range b.defs {
		for _, k := range gvksOf(s) {
			if k.Group == gv.Group && k.Version == gv.Version {
				b.byKind[k.Kind] = s
			}
		}
	}
	bs.groups[gv] = b
	return b, nil
}

// validate checks u as server-side apply types it (field types, unknown
// fields, list keys) and against the OpenAPI schema (required fields,
// enums, formats, bounds).
func (b *builtinGroup) validate(gvk schema.GroupVersionKind, u *unstructured.Unstructured) ([]Problem, error) {
	return b.check(gvk, u, true)
}

// check is validate; without openAPI only the typing runs, as the API
// server decodes an object before its handwritten validation (which then
// checks what the OpenAPI schema says of required fields and enums, and
// more).
func (b *builtinGroup) check(gvk schema.GroupVersionKind, u *unstructured.Unstructured, openAPI bool) ([]Problem, error) {
	sv, err := b.validator(gvk)
	if err != nil {
		return nil, err
	}
	var msgs []Problem
	if _, err := b.converter.ObjectToTyped(u); err != nil {
		msgs = TypingProblems(err.Error())
	}
	if !openAPI {
		return msgs, nil
	}
	res := sv.Validate(u.Object)
	for _, e := range res.Errors {
		p := Problem{Message: e.Error()}
		var ve *openapierrors.Validation
		if errors.As(e, &ve) && ve.Name != "" && ve.Name != "." {
			p.Field = ve.Name
		}
		msgs = append(msgs, p)
	}
	return msgs, nil
}

// validator returns the OpenAPI validator of gvk's schema with its
// references inlined, made once per kind (it is safe for concurrent use, as
// the API server uses its own).
func (b *builtinGroup) validator(gvk schema.GroupVersionKind) (*validate.SchemaValidator, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if sv, ok := b.validators[gvk.Kind]; ok {
		return sv, nil
	}
	s, ok := b.byKind[gvk.Kind]
	if !ok {
		return nil, fmt.Errorf("%s: %w", gvk, ErrNoSchema)
	}
	sv := validate.NewSchemaValidator(inline(s, b.defs, 0), nil, "", strfmt.Default)
	b.validators[gvk.Kind] = sv
	return sv, nil
}

// gvksOf reads a schema's x-kubernetes-group-version-kind.
func gvksOf(s *spec.Schema) []schema.GroupVersionKind {
	raw, ok := s.Extensions["x-kubernetes-group-version-kind"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var out []schema.GroupVersionKind
	if err := json.Unmarshal(b, &out); err != nil {
		return nil
	}
	return out
}

// maxInlineDepth bounds the inlining of references: built-in kinds nest
// far less deeply, and a recursive type stops being checked below it.
const maxInlineDepth = 24

// maxRecursion is how many times one definition may be inlined inside
// itself: a recursive type (a CRD's JSONSchemaProps refers to itself from
// some twenty fields) is checked one level down, not expanded twenty to
// the power of the depth.
const maxRecursion = 2

// inline returns s with every $ref (and every single-element allOf around
// one, as the API server writes them) replaced by the schema it names.
func inline(s *spec.Schema, defs map[string]*spec.Schema, depth int) *spec.Schema {
	return inlineWithin(s, defs, depth, map[string]int{})
}

// inlineWithin is inline, open tells how many times each definition is
// being inlined around s.
func inlineWithin(s *spec.Schema, defs map[string]*spec.Schema, depth int, open map[string]int) *spec.Schema {
	if s == nil {
		return nil
	}
	if depth > maxInlineDepth {
		return &spec.Schema{}
	}
	ref := s.Ref.String()
	if ref == "" && len(s.AllOf) == 1 && s.AllOf[0].Ref.String() != "" {
		ref = s.AllOf[0].Ref.String()
	}
	if ref != "" {
		name := refName(ref)
		target, ok := defs[name]
		if !ok || open[name] >= maxRecursion {
			return &spec.Schema{}
		}
		open[name]++
		defer func() { open[name]-- }()
		return inlineWithin(target, defs, depth+1, open)
	}
	out := *s
	if out.Format != "" && !strfmt.Default.ContainsName(out.Format) {
		// Formats the API server names but the validator does not know
		// (int-or-string, quantity): the types around them say enough.
		out.Format = ""
	}
	if len(s.Properties) > 0 {
		out.Properties = make(map[string]spec.Schema, len(s.Properties))
		for k, p := range s.Properties {
			out.Properties[k] = *inlineWithin(&p, defs, depth+1, open)
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		out.Items = &spec.SchemaOrArray{Schema: inlineWithin(s.Items.Schema, defs, depth+1, open)}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		out.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: inlineWithin(s.AdditionalProperties.Schema, defs, depth+1, open)}
	}
	if len(s.AllOf) > 0 {
		out.AllOf = make([]spec.Schema, len(s.AllOf))
		for i := range s.AllOf {
			out.AllOf[i] = *inlineWithin(&s.AllOf[i], defs, depth+1, open)
		}
	}
	return &out
}

func refName(ref string) string {
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == '/' {
			return ref[i+1:]
		}
	}
	return ref
}
