package pipeline

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/result"
)

// Objects carrying either annotation with value "disabled" are left
// untouched by substitution.
const (
	substituteAnnotation     = "gantry.dev/substitute"
	fluxSubstituteAnnotation = "kustomize.toolkit.fluxcd.io/substitute"
)

// varPattern matches $${...} (an escape), ${NAME}, ${NAME:=default} and
// ${NAME:-default}, as Flux's post-build substitution does.
var varPattern = regexp.MustCompile(`\$(\$?)\{([^}:]*)(?::([=-])([^}]*))?\}`)

var varName = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

// substitute replaces the variables in s. Every variable without a value and
// without a default is returned by name, once, sorted.
func substitute(s string, vars map[string]string) (string, []string, error) {
	missing := map[string]bool{}
	var bad error
	out := varPattern.ReplaceAllStringFunc(s, func(m string) string {
		g := varPattern.FindStringSubmatch(m)
		escaped, name, op, def := g[1] != "", g[2], g[3], g[4]
		if escaped {
			return m[1:]
		}
		if !varName.MatchString(name) {
			bad = fmt.Errorf("invalid variable name %q in %s", name, m)
			return m
		}
		if v, ok := vars[name]; ok {
			return v
		}
		if op != "" {
			return def
		}
		missing[name] = true
		return m
	})
	var names []string
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	return out, names, bad
}

// substituteAll substitutes the variables in every object, strictly: an
// unset variable without a default is an error naming it, the object and its
// file. Values never appear in errors.
func substituteAll(objects []*Object, vars map[string]string) error {
	var errs []error
	for _, o := range objects {
		a := o.GetAnnotations()
		if strings.EqualFold(a[substituteAnnotation], "disabled") || strings.EqualFold(a[fluxSubstituteAnnotation], "disabled") {
			continue
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		out, missing, err := substitute(string(b), vars)
		if err != nil {
			errs = append(errs, &BuildError{File: o.Source, Err: fmt.Errorf("%s: %w", ref(o), err)})
			continue
		}
		if len(missing) > 0 {
			errs = append(errs, &BuildError{File: o.Source, Err: fmt.Errorf("%s: variable %s not set and has no default (strict substitution)", ref(o), "${"+strings.Join(missing, "}, ${")+"}")})
			continue
		}
		if out == string(b) {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(out))
		if err == nil {
			err = o.UnmarshalJSON(j)
		}
		if err != nil {
			errs = append(errs, &BuildError{File: o.Source, Err: fmt.Errorf("%s: the result of substitution is not a valid object: %w", ref(o), err)})
			continue
		}
	}
	return errors.Join(errs...)
}

// ref names an object for messages: Kind/namespace/name or Kind/name.
func ref(o *Object) string {
	return result.Ref(o.GroupVersionKind().Group, o.GetKind(), o.GetNamespace(), o.GetName())
}

// variableRef is a ${VAR} (or ${VAR:=default}, ${VAR:-default}) reference
// as substitution reads one.
var variableRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*(?::?[=-][^}]*)?\}`)

// unsubstituted says which objects of a build without substitution still
// hold ${VAR} references, left as they are ("" when none does): as in
// Flux, substitution runs only when asked for, and such a value is
// usually meant to be replaced.
func unsubstituted(objects []*Object) string {
	var refs []string
	seen := map[string]bool{}
	n := 0
	for _, o := range objects {
		found := false
		walkStrings(o.Object, "", func(_, v string) {
			for _, m := range variableRef.FindAllString(v, -1) {
				found = true
				if r := ref(o) + " holds " + m; !seen[r] {
					seen[r] = true
					refs = append(refs, r)
				}
			}
		})
		if found {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	sort.Strings(refs)
	if len(refs) > 3 {
		refs = append(refs[:3], "…")
	}
	return fmt.Sprintf("%d %s ${...} references left as they are (%s): substitution runs only when substitute is given (as Flux's postBuild); give it, even with one variable, to apply the defaults", n, plural(n, "object holds", "objects hold"), strings.Join(refs, "; "))
}
