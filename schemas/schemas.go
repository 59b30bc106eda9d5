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
	"slices"
	"strconv"
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

	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/schemas/native"
	"github.com/gantry-dev/gantry/schemas/releases"
	"github.com/gantry-dev/gantry/suggest"
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
	builtins  *Builtins

	// release, offline: the Kubernetes release whose built-in kinds are
	// checked, with no cluster. Any kind that neither it nor a CRD defines
	// is then an error, unless its group is in allowUnknown.
	release      *releases.Release
	allowUnknown map[string]bool

	mu       sync.Mutex
	versions map[schema.GroupVersionKind]*crdVersion
}

// New returns a Validator for the CRDs of a set (objects of any other kind
// are ignored) and the cluster's published schemas; openapi may be nil when
// no built-in kind needs checking.
func New(set []*unstructured.Unstructured, openapi OpenAPISource) (*Validator, error) {
	return WithBuiltins(set, NewBuiltins(openapi))
}

// WithBuiltins is New with built-in kinds' schemas that other Validators
// may share.
func WithBuiltins(set []*unstructured.Unstructured, builtins *Builtins) (*Validator, error) {
	v := &Validator{
		crds:      map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition{},
		crdGroups: map[string]bool{},
		builtins:  builtins,
		versions:  map[schema.GroupVersionKind]*crdVersion{},
	}
	if err := v.addCRDs(set); err != nil {
		return nil, err
	}
	return v, nil
}

// Offline returns a Validator that needs no cluster: built-in kinds are
// checked against the schemas of a Kubernetes release, custom resources
// against the CRDs of the set and of crds (the set's win). A kind that
// neither defines is an error, a removed apiVersion naming its release and
// replacement, unless allowUnknown lists its group.
func Offline(set, crds []*unstructured.Unstructured, release *releases.Release, allowUnknown []string) (*Validator, error) {
	v := &Validator{
		crds:         map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition{},
		crdGroups:    map[string]bool{},
		builtins:     NewBuiltins(release),
		release:      release,
		allowUnknown: map[string]bool{},
		versions:     map[schema.GroupVersionKind]*crdVersion{},
	}
	for _, g := range allowUnknown {
		v.allowUnknown[g] = true
	}
	if err := v.addCRDs(crds); err != nil {
		return nil, err
	}
	if err := v.addCRDs(set); err != nil {
		return nil, err
	}
	return v, nil
}

// addCRDs reads the CRDs among objects (others are ignored).
func (v *Validator) addCRDs(objects []*unstructured.Unstructured) error {
	for _, u := range objects {
		gvk := u.GroupVersionKind()
		if gvk.Group != apiextensionsv1.GroupName || gvk.Kind != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
			return fmt.Errorf("CustomResourceDefinition/%s: %w", u.GetName(), err)
		}
		v.crds[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd
		v.crdGroups[crd.Spec.Group] = true
	}
	return nil
}

// Prepare loads the cluster's schemas of gv ahead of Validate, so that
// their cost overlaps other work; an error is reported again by Validate.
func (v *Validator) Prepare(gv schema.GroupVersion) {
	if _, ok := v.crdGroups[gv.Group]; ok {
		return
	}
	_, _ = v.builtin(gv)
}

// Namespaced reports whether objects of gvk live in a namespace, as its
// CRD or, offline, the release says; false when neither knows gvk.
func (v *Validator) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	if crd, ok := v.crds[gvk.GroupKind()]; ok {
		return crd.Spec.Scope == apiextensionsv1.NamespaceScoped, nil
	}
	if v.release == nil {
		return false, nil
	}
	return v.release.Namespaced(gvk)
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
	var msgs []Problem
	if _, ok := v.crds[gvk.GroupKind()]; ok {
		cv, err := v.crdVersion(gvk)
		if err != nil {
			if v.release == nil {
				return err
			}
			// Offline, a version the CRD does not serve is the object's
			// fault, as the server's "no matches for kind" is.
			msgs = []Problem{{Message: err.Error()}}
		} else {
			msgs = messages(cv.validate(ctx, u))
		}
	} else if v.release != nil {
		served, problem, err := v.builtinKind(gvk)
		switch {
		case err != nil:
			return err
		case problem != "":
			// A kind its group version does not have is the kind's
			// fault; anything else, the apiVersion's.
			field := "apiVersion"
			if v.release.Serves(gvk.GroupVersion()) {
				field = "kind"
			}
			msgs = []Problem{{Field: field, Message: problem}}
		case !served:
			return nil // of a group allow-unknown-kinds lets through unchecked
		default:
			b, err := v.builtin(gvk.GroupVersion())
			if err != nil {
				return err
			}
			// A kind whose handwritten validation gantry runs is checked
			// as the API server checks it: typed, then that validation.
			// Others are checked against their OpenAPI schema too.
			if msgs, err = b.check(gvk, withoutNulls(withoutSecretValues(u)), !native.Covers(gvk)); err != nil {
				return err
			}
			// The kind's handwritten rules, once the object reads as its
			// type, as the API server runs them after decoding it. Where
			// fields do not read as their type, the rules run on the
			// object without them, so that every mistake is named in one
			// run, not one a run (the API server stops at the first).
			rules := u
			if len(msgs) > 0 {
				rules = nil
				if rest, ok := withoutFields(u, msgs); ok {
					if more, err := b.check(gvk, withoutNulls(withoutSecretValues(rest)), false); err == nil && len(more) == 0 {
						rules = rest
					}
				}
			}
			if rules != nil {
				errs, _ := native.Validate(v.inNamespace(rules))
				for _, p := range messages(errs) {
					if !underAny(u.Object, p.Field, msgs) {
						msgs = append(msgs, p)
					}
				}
			}
		}
	} else {
		b, err := v.builtin(gvk.GroupVersion())
		if err != nil {
			return err
		}
		if msgs, err = b.validate(gvk, withoutNulls(withoutSecretValues(u))); err != nil {
			return err
		}
		// The kind's handwritten rules too, for an object in a namespace
		// (one the set brings, checked before it exists): a mistake they
		// catch is named with the rest, before anything is created for a
		// dry-run that would refuse it.
		if len(msgs) == 0 && u.GetNamespace() != "" {
			errs, _ := native.Validate(u)
			msgs = messages(errs)
		}
	}
	msgs = append(msgs, messages(validateMeta(u))...)
	if len(msgs) == 0 {
		return nil
	}
	return &InvalidError{Kind: gvk.Kind, Name: u.GetName(), Problems: msgs}
}

// withoutFields is u without the field of each problem, when every
// problem names one that u holds (ok); the paths are structured-merge-
// diff's (.spec.replicas, containers[name="web"], ports[0]).
func withoutFields(u *unstructured.Unstructured, problems []Problem) (*unstructured.Unstructured, bool) {
	c := u.DeepCopy()
	for _, p := range problems {
		if p.Field == "" || !removeField(c.Object, p.Field) {
			return nil, false
		}
	}
	return c, true
}

// removeField removes the field at path from obj, reporting whether it
// was there.
func removeField(obj map[string]any, path string) bool {
	steps := splitPath(strings.TrimPrefix(path, "."))
	if len(steps) == 0 {
		return false
	}
	var parent any = obj
	for i, st := range steps {
		last := i == len(steps)-1
		switch t := parent.(type) {
		case map[string]any:
			if st.bracket {
				return false
			}
			next, ok := t[st.key]
			if !ok {
				return false
			}
			if last {
				delete(t, st.key)
				return true
			}
			parent = next
		case []any:
			if !st.bracket {
				return false
			}
			at := st.element(t)
			if at < 0 {
				return false
			}
			if last {
				return false // an element, not a field: nothing to take out
			}
			parent = t[at]
		default:
			return false
		}
	}
	return false
}

// pathStep is one step of a field path: a key, or a bracket (an index,
// key=value selectors, or =value for a set).
type pathStep struct {
	key     string
	bracket bool
}

// element is the index in list of the element a bracket step names, or -1.
func (s pathStep) element(list []any) int {
	if n, err := strconv.Atoi(s.key); err == nil {
		if n >= 0 && n < len(list) {
			return n
		}
		return -1
	}
	// A key the element leaves out (a defaulted protocol) does not rule
	// it out; one it holds must match, and one must.
	found := -1
	for i, e := range list {
		match, matched := true, 0
		for _, sel := range strings.Split(s.key, ",") {
			k, want, ok := strings.Cut(sel, "=")
			if !ok {
				return -1
			}
			want = strings.Trim(want, `"`)
			var got any = e
			if k != "" {
				m, isMap := e.(map[string]any)
				if !isMap {
					match = false
					break
				}
				v, has := m[k]
				if !has {
					continue
				}
				got = v
			}
			if fmt.Sprint(got) != want {
				match = false
				break
			}
			matched++
		}
		if match && matched > 0 {
			if found >= 0 {
				return -1
			}
			found = i
		}
	}
	return found
}

func splitPath(path string) []pathStep {
	var steps []pathStep
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil
			}
			steps = append(steps, pathStep{key: path[1:end], bracket: true})
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			steps = append(steps, pathStep{key: path[:end]})
			path = path[end:]
		}
	}
	return steps
}

// underAny says whether field is the field of one of problems, or inside
// it: a problem the rules find again there is the same mistake. The
// problems' paths may select list elements by their keys; obj resolves
// them to the indexes the rules write.
func underAny(obj map[string]any, field string, problems []Problem) bool {
	field = strings.TrimPrefix(field, ".")
	for _, p := range problems {
		f := indexPath(obj, strings.TrimPrefix(p.Field, "."))
		if f != "" && (field == f || strings.HasPrefix(field, f+".") || strings.HasPrefix(field, f+"[")) {
			return true
		}
	}
	return false
}

// indexPath is path with each list element named by its index in obj, as
// the API server's validation names it (containers[0]); path as it is
// where obj does not hold it.
func indexPath(obj map[string]any, path string) string {
	var b strings.Builder
	var at any = obj
	for _, st := range splitPath(path) {
		switch t := at.(type) {
		case map[string]any:
			if st.bracket {
				return path
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(st.key)
			at = t[st.key]
		case []any:
			i := -1
			if st.bracket {
				i = st.element(t)
			}
			if i < 0 {
				return path
			}
			fmt.Fprintf(&b, "[%d]", i)
			at = t[i]
		default:
			return path
		}
	}
	return b.String()
}

func messages(errs field.ErrorList) []Problem {
	out := make([]Problem, len(errs))
	for i, fe := range errs {
		out[i] = Problem{Field: fe.Field, Message: fe.ErrorBody()}
		if fe.Field == "" || fe.Field == "<nil>" {
			out[i] = Problem{Message: fe.ErrorBody()}
		}
	}
	return out
}

// Problem is one thing wrong with an object: the field at fault, as the
// API server writes its path, and what is wrong with it (its Line is left
// to whoever knows the file).
type Problem = result.Problem

// TypingProblems reads structured-merge-diff's typing errors, as the
// server-side apply of a built-in kind words them ("errors:" and one
// ".spec.replcas: field not declared in schema" per line), into problems
// with their field.
func TypingProblems(msg string) []Problem {
	var out []Problem
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "errors:")), ".")
		if line == "" {
			continue
		}
		if path, m, ok := strings.Cut(line, ": "); ok && path != "" && !strings.Contains(path, " ") {
			out = append(out, Problem{Field: path, Message: m})
		} else {
			out = append(out, Problem{Message: line})
		}
	}
	return out
}

// InvalidError is an object that failed offline validation, worded as the
// API server words an invalid object.
type InvalidError struct {
	Kind, Name string
	// Problems each name a field and what is wrong with it, once each.
	Problems []Problem
}

// Unique is the problems, each once, in the order found.
func (e *InvalidError) Unique() []Problem {
	out := make([]Problem, 0, len(e.Problems))
	seen := map[Problem]bool{}
	for _, p := range e.Problems {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func (e *InvalidError) Error() string {
	var msgs []string
	for _, p := range e.Unique() {
		msgs = append(msgs, p.String())
	}
	if len(msgs) == 1 {
		return fmt.Sprintf("%s %q is invalid: %s", e.Kind, e.Name, msgs[0])
	}
	return fmt.Sprintf("%s %q is invalid: [%s]", e.Kind, e.Name, strings.Join(msgs, ", "))
}

// withoutNulls is u without the fields whose value is null: the API
// server decodes a built-in kind into its Go type, where a null is a field
// left out (a chart's empty "annotations:"), before anything checks it.
// u itself is returned when it holds no null.
func withoutNulls(u *unstructured.Unstructured) *unstructured.Unstructured {
	if !hasNull(u.Object) {
		return u
	}
	c := u.DeepCopy()
	dropNulls(c.Object)
	return c
}

func hasNull(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range t {
			if hasNull(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasNull(e) {
				return true
			}
		}
	}
	return false
}

func dropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range t {
			dropNulls(e)
		}
	}
}

// withoutSecretValues returns a Secret whose data and stringData values are
// replaced by stand-ins of the same shape, so that no error message can
// quote a secret: an invalid base64 value stays invalid ("!"), a valid one
// becomes "AA==", a number 0, a boolean false. Other objects are returned as
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
			// Valid base64 that is no secret: the OpenAPI validator
			// refuses an empty string as format byte.
			return "AA=="
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
	// As the API server decodes a custom resource: a null where the
	// schema allows none and gives no default is a field left out.
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, cv.structural)
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

// inNamespace gives a namespaced object without a namespace the default
// one, where a kubeconfig without a namespace applies it: the API server's
// validation needs one, and any valid name will do.
func (v *Validator) inNamespace(u *unstructured.Unstructured) *unstructured.Unstructured {
	if u.GetNamespace() != "" {
		return u
	}
	if namespaced, err := v.Namespaced(u.GroupVersionKind()); err != nil || !namespaced {
		return u
	}
	c := u.DeepCopy()
	c.SetNamespace("default")
	return c
}

// builtinKind says, offline, what is wrong with a kind no CRD defines: it
// was removed from the release, it is not in the group version it names,
// or it is no kind the release knows. served says the release serves it;
// neither served nor a problem is a kind of a group allow-unknown-kinds
// lists. A removed apiVersion is a problem whatever that list says.
func (v *Validator) builtinKind(gvk schema.GroupVersionKind) (served bool, problem string, err error) {
	r := v.release
	if ok, err := r.ServesKind(gvk); ok || err != nil {
		return ok, "", err
	}
	rm, err := r.Removed(gvk)
	if err != nil {
		return false, "", err
	}
	if rm != nil {
		return false, rm.Error(), nil
	}
	api := gvk.GroupVersion().String()
	if r.Serves(gvk.GroupVersion()) {
		msg := fmt.Sprintf("%s has no kind %s in Kubernetes %s", api, gvk.Kind, r.Version)
		if kinds, err := r.Kinds(gvk.GroupVersion()); err == nil {
			if best := suggest.Closest(gvk.Kind, kinds); best != "" {
				msg += "; did you mean " + best + "?"
			}
		}
		return false, msg, nil
	}
	if v.allowUnknown[gvk.Group] {
		return false, "", nil
	}
	meant := ""
	if best := v.apiVersionOf(gvk); best != "" {
		meant = "; did you mean apiVersion: " + best + "?"
	}
	for _, gv := range r.GroupVersions() {
		if gv.Group == gvk.Group {
			return false, fmt.Sprintf("Kubernetes %s does not serve %s (the group %s has other versions); no CRD in the set or in crds defines %s%s", r.Version, api, groupName(gvk.Group), gvk.Kind, meant), nil
		}
	}
	if meant != "" {
		return false, fmt.Sprintf("Kubernetes %s has no %s%s", r.Version, api, meant), nil
	}
	return false, fmt.Sprintf("no CRD in the set or in crds defines %s %s, and it is no built-in kind of Kubernetes %s; to let it through unchecked, list %s in allow-unknown-kinds", api, gvk.Kind, r.Version, groupName(gvk.Group)), nil
}

// apiVersionOf is the apiVersion, of those that serve gvk's kind (the
// release's, and the set's CRDs'), nearest to the one gvk names: what a
// misspelt or outdated apiVersion most likely meant. "" when none serves it.
func (v *Validator) apiVersionOf(gvk schema.GroupVersionKind) string {
	var serving []string
	for _, gv := range v.release.GroupVersions() {
		if kinds, err := v.release.Kinds(gv); err == nil && slices.Contains(kinds, gvk.Kind) {
			serving = append(serving, gv.String())
		}
	}
	for gk, crd := range v.crds {
		if gk.Kind != gvk.Kind {
			continue
		}
		for _, ver := range crd.Spec.Versions {
			if ver.Served {
				serving = append(serving, schema.GroupVersion{Group: gk.Group, Version: ver.Name}.String())
			}
		}
	}
	return suggest.Nearest(gvk.GroupVersion().String(), serving)
}

// groupName writes the core group as "core", the way allow-unknown-kinds
// takes it.
func groupName(g string) string {
	if g == "" {
		return "core"
	}
	return g
}

// ErrNoSchema is returned for a kind the cluster publishes no schema for.
var ErrNoSchema = errors.New("the cluster publishes no schema for this kind")
