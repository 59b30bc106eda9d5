package health

import (
	"fmt"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CheckSchemas finds, in each of the user's rules for a kind that one of
// crds defines, every field its expressions read that the kind's schema
// (of the rule's version, else the storage version) does not have: a
// typo that would otherwise show only as a wait that never ends. Paths
// under metadata, and under a field that keeps unknown fields, are not
// checked; nor are rules for a whole group.
func (s *Set) CheckSchemas(crds []*unstructured.Unstructured) []error {
	if s == nil {
		return nil
	}
	var errs []error
	for _, r := range s.Rules() {
		if r.Origin == BuiltIn || r.Kind == "" {
			continue
		}
		root := schemaOf(crds, r)
		if root == nil {
			continue
		}
		for _, e := range r.expressions() {
			env, err := celEnv()
			if err != nil {
				return []error{err}
			}
			parsed, iss := env.Parse(e.expr)
			if iss != nil && iss.Err() != nil {
				continue // reported when compiled
			}
			for _, p := range fieldPaths(parsed.NativeRep()) {
				if missing := missingIn(root, p); missing != "" {
					where := r.Origin
					if line := r.Lines[e.name]; line > 0 {
						where = fmt.Sprintf("%s:%d", fileOf(r.Origin), line)
					}
					errs = append(errs, fmt.Errorf("%s: health rule for %s: %s reads %s, but the schema of %s has no field %s",
						where, r.what(), e.name, dotted(p), r.groupKind(), missing))
				}
			}
		}
	}
	return errs
}

// schemaOf is the openAPIV3Schema that crds give r's kind: of the rule's
// version when served, else of the storage version.
func schemaOf(crds []*unstructured.Unstructured, r *Rule) map[string]any {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return nil
	}
	for _, crd := range crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		if group != gv.Group || kind != r.Kind {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		var storage map[string]any
		for _, v := range versions {
			m, _ := v.(map[string]any)
			s, _, _ := unstructured.NestedMap(m, "schema", "openAPIV3Schema")
			if name, _ := m["name"].(string); name == gv.Version && s != nil {
				return s
			}
			if st, _ := m["storage"].(bool); st {
				storage = s
			}
		}
		return storage
	}
	return nil
}

// fieldPaths lists the paths of the object's fields an expression reads:
// selections (and optional ones, and indexes) from the object's top-level
// fields, through the elements of lists a macro ranges over ("[]").
func fieldPaths(a *celast.AST) [][]string {
	var out [][]string
	seen := map[string]bool{}
	add := func(p []string) {
		if len(p) < 2 {
			return // a top-level field alone: every object may lack it
		}
		k := strings.Join(p, "\x00")
		if !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	// pathOf is the path e reads, with vars the ranges' element paths;
	// nil when e is not a path of the object.
	var pathOf func(e celast.Expr, vars map[string][]string) []string
	pathOf = func(e celast.Expr, vars map[string][]string) []string {
		switch e.Kind() {
		case celast.IdentKind:
			name := e.AsIdent()
			if p, ok := vars[name]; ok {
				return p
			}
			switch name {
			case "apiVersion", "kind", "metadata", "spec", "status":
				return []string{name}
			}
			if _, bound := vars[name]; !bound && !strings.HasPrefix(name, "@") {
				return []string{name} // another top-level field
			}
		case celast.SelectKind:
			if p := pathOf(e.AsSelect().Operand(), vars); p != nil {
				return append(append([]string{}, p...), e.AsSelect().FieldName())
			}
		case celast.CallKind:
			c := e.AsCall()
			switch {
			case c.FunctionName() == operators.OptSelect && len(c.Args()) == 2 && c.Args()[1].Kind() == celast.LiteralKind:
				field, ok := c.Args()[1].AsLiteral().Value().(string)
				if p := pathOf(c.Args()[0], vars); p != nil && ok {
					return append(append([]string{}, p...), field)
				}
			case (c.FunctionName() == operators.Index || c.FunctionName() == operators.OptIndex) && len(c.Args()) == 2:
				p := pathOf(c.Args()[0], vars)
				if p == nil {
					return nil
				}
				if c.Args()[1].Kind() == celast.LiteralKind {
					if field, ok := c.Args()[1].AsLiteral().Value().(string); ok {
						return append(append([]string{}, p...), field)
					}
				}
				return append(append([]string{}, p...), "[]")
			case c.IsMemberFunction() && (c.FunctionName() == "orValue" || c.FunctionName() == "value"):
				return pathOf(c.Target(), vars)
			}
		}
		return nil
	}
	var walk func(e celast.Expr, vars map[string][]string)
	walk = func(e celast.Expr, vars map[string][]string) {
		if p := pathOf(e, vars); p != nil {
			add(p)
		}
		switch e.Kind() {
		case celast.SelectKind:
			walk(e.AsSelect().Operand(), vars)
		case celast.CallKind:
			c := e.AsCall()
			if c.IsMemberFunction() {
				walk(c.Target(), vars)
			}
			for _, arg := range c.Args() {
				walk(arg, vars)
			}
		case celast.ListKind:
			for _, el := range e.AsList().Elements() {
				walk(el, vars)
			}
		case celast.MapKind:
			for _, en := range e.AsMap().Entries() {
				walk(en.AsMapEntry().Key(), vars)
				walk(en.AsMapEntry().Value(), vars)
			}
		case celast.ComprehensionKind:
			c := e.AsComprehension()
			walk(c.IterRange(), vars)
			inner := map[string][]string{}
			for k, v := range vars {
				inner[k] = v
			}
			if p := pathOf(c.IterRange(), vars); p != nil && !c.HasIterVar2() {
				inner[c.IterVar()] = append(append([]string{}, p...), "[]")
			} else {
				inner[c.IterVar()] = nil // not a path of the object
			}
			inner[c.AccuVar()] = nil
			walk(c.AccuInit(), inner)
			walk(c.LoopCondition(), inner)
			walk(c.LoopStep(), inner)
			walk(c.Result(), inner)
		}
	}
	walk(a.Expr(), map[string][]string{})
	return out
}

// missingIn is the first field of path the schema does not have ("" when
// it has them all, or cannot tell).
func missingIn(root map[string]any, path []string) string {
	if path[0] == "metadata" || path[0] == "apiVersion" || path[0] == "kind" {
		return ""
	}
	s := root
	for i, seg := range path {
		if s == nil {
			return ""
		}
		if keep, _ := s["x-kubernetes-preserve-unknown-fields"].(bool); keep {
			return ""
		}
		if seg == "[]" {
			items, _ := s["items"].(map[string]any)
			if items == nil {
				return "" // a map's keys, or a schema that does not say
			}
			s = items
			continue
		}
		props, _ := s["properties"].(map[string]any)
		if next, ok := props[seg].(map[string]any); ok {
			s = next
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case map[string]any:
			s = ap
			continue
		case bool:
			if ap {
				return ""
			}
		}
		if props == nil && s["type"] == nil {
			return "" // a schema that says nothing of its fields
		}
		return dotted(path[:i+1])
	}
	return ""
}

// dotted writes a path as a rule reads it: status.conditions[].type.
func dotted(path []string) string {
	return strings.ReplaceAll(strings.Join(path, "."), ".[]", "[]")
}
