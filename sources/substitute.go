package sources

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gantry-dev/gantry/result"
	"sigs.k8s.io/yaml"
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
//
// Each string value is substituted on its own, never the object's YAML as
// one text: a reference and its default lie within one value, so no
// default can reach across values (a "${Y:-'" in one field closed by a
// "'}" in another would splice the fields between them, a Secret's data
// included, into the first). A value that is one reference and nothing
// else takes the type of what it is replaced with (replicas: ${REPLICAS}
// becomes a number, as Flux's substitution of the text makes it); a
// value that would read as a mapping or a list stays a string.
func substituteAll(objects []*Object, vars map[string]string) error {
	var errs []error
	for _, o := range objects {
		a := o.GetAnnotations()
		if strings.EqualFold(a[substituteAnnotation], "disabled") || strings.EqualFold(a[fluxSubstituteAnnotation], "disabled") {
			continue
		}
		missing := map[string]bool{}
		var bad error
		o.Object = substituteValue(o.Object, vars, missing, &bad).(map[string]any)
		if bad != nil {
			errs = append(errs, &BuildError{File: o.Source, Err: fmt.Errorf("%s: %w", o.Ref(), bad)})
			continue
		}
		if len(missing) > 0 {
			names := make([]string, 0, len(missing))
			for n := range missing {
				names = append(names, n)
			}
			sort.Strings(names)
			errs = append(errs, &BuildError{File: o.Source, Err: fmt.Errorf("%s: variable %s not set and has no default (strict substitution)", o.Ref(), "${"+strings.Join(names, "}, ${")+"}")})
			continue
		}
	}
	return errors.Join(errs...)
}

// number is a decimal number as YAML reads one.
var number = regexp.MustCompile(`^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$`)

// wholeRef is a value that is one variable reference and nothing else.
var wholeRef = regexp.MustCompile(`^\$\{[^}]*\}$`)

// substituteValue substitutes every string of v, keys left as they are.
func substituteValue(v any, vars map[string]string, missing map[string]bool, bad *error) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = substituteValue(e, vars, missing, bad)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = substituteValue(e, vars, missing, bad)
		}
		return t
	case string:
		out, names, err := substitute(t, vars)
		if err != nil && *bad == nil {
			*bad = err
		}
		for _, n := range names {
			missing[n] = true
		}
		if out == t || !wholeRef.MatchString(t) {
			return out
		}
		// As the YAML text it would have been: a whole number, a number
		// or a boolean takes its type; anything else stays the string.
		// Only a number that prints back as the same text: 0042 or 1.50
		// would print as 42 or 1.5, which a mask of the value (a
		// secret-named variable's) no longer matches.
		if n, err := strconv.ParseInt(out, 10, 64); err == nil && strconv.FormatInt(n, 10) == out {
			return n
		}
		if number.MatchString(out) {
			if f, err := strconv.ParseFloat(out, 64); err == nil && printsAs(f, out) {
				return f
			}
		}
		if out == "true" || out == "false" {
			return out == "true"
		}
		return out
	}
	return v
}

// printsAs says whether f prints as text both in JSON (reports, the API
// server) and in YAML (builds, diffs): 1e+20 or 1.2e-06 would not.
func printsAs(f float64, text string) bool {
	j, err := json.Marshal(f)
	if err != nil || string(j) != text {
		return false
	}
	y, err := yaml.Marshal(f)
	return err == nil && strings.TrimSpace(string(y)) == text
}

// Ref names the object for messages: Kind/namespace/name or Kind/name.
func (o *Object) Ref() string {
	return result.Ref(o.GroupVersionKind().Group, o.GetKind(), o.GetNamespace(), o.GetName())
}

// variableRef is a ${VAR} (or ${VAR:=default}, ${VAR:-default}) reference
// as substitution reads one.
var variableRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*(?::?[=-][^}]*)?\}`)

// Unsubstituted says which objects of a build without substitution still
// hold ${VAR} references, left as they are ("" when none does): as in
// Flux, substitution runs only when asked for, and such a value is
// usually meant to be replaced.
func Unsubstituted(objects []*Object) string {
	var refs []string
	seen := map[string]bool{}
	n := 0
	for _, o := range objects {
		found := false
		WalkStrings(o.Object, "", func(_, v string) {
			for _, m := range variableRef.FindAllString(v, -1) {
				found = true
				if r := o.Ref() + " holds " + m; !seen[r] {
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

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
