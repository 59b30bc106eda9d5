// Package diffs renders what a run changes in one object as a unified diff
// of the live object against the desired one (the server-side dry-run
// result), with the fields the server manages removed and Secret values
// never shown. Every reporter shows these same diffs.
package diffs

import (
	"fmt"
	"strings"

	"github.com/aymanbagabas/go-udiff"
	yamlv2 "go.yaml.in/yaml/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Masks shown instead of Secret values.
const (
	MaskChanged   = "*** (changed)"
	MaskUnchanged = "*** (unchanged)"
	MaskValue     = "***"
)

// Object returns the unified diff from live to desired. A nil live object
// renders a creation, a nil desired object a deletion. Both are left
// untouched. The diff is empty when, sanitised, they are equal.
func Object(ref string, live, desired *unstructured.Unstructured) (string, error) {
	return Between(ref, "live", "desired", live, desired)
}

// Between is Object with the two sides labelled for what they are (two
// artifacts, an artifact and a folder): the diff's headers read
// <fromLabel>/<ref> and <toLabel>/<ref>.
func Between(ref, fromLabel, toLabel string, live, desired *unstructured.Unstructured) (string, error) {
	return BetweenMasked(ref, fromLabel, toLabel, live, desired, nil)
}

// ObjectMasked is Object with every string value that holds a secret
// masked (mask returns it with its secrets replaced) before the objects
// are written as YAML: however YAML quotes or folds it, no part of the
// value is left.
func ObjectMasked(ref string, live, desired *unstructured.Unstructured, mask func(string) string) (string, error) {
	return BetweenMasked(ref, "live", "desired", live, desired, mask)
}

// BetweenMasked is Between with mask applied as ObjectMasked does. A value
// whose secret changed while the rest stayed says so: its masked forms
// would otherwise read alike.
func BetweenMasked(ref, fromLabel, toLabel string, live, desired *unstructured.Unstructured, mask func(string) string) (string, error) {
	l, d := sanitize(live), sanitize(desired)
	if isSecret(live) || isSecret(desired) {
		maskSecrets(l, d)
	}
	if mask != nil {
		maskValues(l, d, mask)
	}
	before, err := render(l)
	if err != nil {
		return "", err
	}
	after, err := render(d)
	if err != nil {
		return "", err
	}
	if before == after {
		return "", nil
	}
	if before == "" || after == "" {
		return whole(fromLabel+"/"+ref, toLabel+"/"+ref, before, after), nil
	}
	return udiff.Unified(fromLabel+"/"+ref, toLabel+"/"+ref, before, after), nil
}

// whole is the unified diff of a creation or a deletion, where one side
// is empty: one hunk of every line, as udiff writes it, without its
// search for common lines (a third of a created object's diff).
func whole(from, to, before, after string) string {
	text, sign, hunk := after, "+", "@@ -0,0 +1%s @@\n"
	if after == "" {
		text, sign, hunk = before, "-", "@@ -1%s +0,0 @@\n"
	}
	n := strings.Count(text, "\n")
	if !strings.HasSuffix(text, "\n") {
		n++
	}
	count := ""
	if n != 1 {
		count = fmt.Sprintf(",%d", n)
	}
	var b strings.Builder
	b.Grow(len(from) + len(to) + len(text) + n + 32)
	fmt.Fprintf(&b, "--- %s\n+++ %s\n"+hunk, from, to, count)
	for line := range strings.Lines(text) {
		b.WriteString(sign)
		b.WriteString(line)
	}
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n\\ No newline at end of file\n")
	}
	return b.String()
}

func isSecret(u *unstructured.Unstructured) bool {
	return u != nil && u.GetKind() == "Secret" && u.GroupVersionKind().Group == ""
}

// sanitize copies u without what the server manages or what only adds noise.
func sanitize(u *unstructured.Unstructured) map[string]any {
	if u == nil {
		return nil
	}
	c := u.DeepCopy().Object
	unstructured.RemoveNestedField(c, "status")
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"} {
		unstructured.RemoveNestedField(c, "metadata", f)
	}
	if a, ok, _ := unstructured.NestedStringMap(c, "metadata", "annotations"); ok {
		delete(a, corev1.LastAppliedConfigAnnotation)
		if len(a) == 0 {
			unstructured.RemoveNestedField(c, "metadata", "annotations")
		} else {
			_ = unstructured.SetNestedStringMap(c, a, "metadata", "annotations")
		}
	}
	return c
}

// secretData folds stringData into data (as the API server does) and
// removes stringData.
func secretData(obj map[string]any) map[string]string {
	if obj == nil {
		return nil
	}
	data, _, _ := unstructured.NestedStringMap(obj, "data")
	if data == nil {
		data = map[string]string{}
	}
	if sd, ok, _ := unstructured.NestedStringMap(obj, "stringData"); ok {
		for k, v := range sd {
			// Marked as plain text so it never compares equal to the
			// base64 form by accident; changed-ness is what matters.
			data[k] = "string:" + v
		}
	}
	unstructured.RemoveNestedField(obj, "stringData")
	return data
}

// maskSecrets replaces every value of both sides with a mask that says only
// whether the key's value changed.
func maskSecrets(live, desired map[string]any) {
	ld, dd := secretData(live), secretData(desired)
	mask := func(obj map[string]any, own, other map[string]string, isLive bool) {
		if obj == nil {
			return
		}
		if len(own) == 0 {
			unstructured.RemoveNestedField(obj, "data")
			return
		}
		out := map[string]any{}
		for k, v := range own {
			o, ok := other[k]
			switch {
			case !ok || other == nil:
				out[k] = MaskValue
			case o == v:
				out[k] = MaskUnchanged
			case isLive:
				out[k] = MaskValue
			default:
				out[k] = MaskChanged
			}
		}
		obj["data"] = out
	}
	mask(live, ld, dd, true)
	mask(desired, dd, ld, false)
}

// render writes obj as YAML, the way sigs.k8s.io/yaml does (same
// encoder, same sorted keys), without its round trip through JSON: an
// unstructured object holds only JSON types already.
func render(obj map[string]any) (string, error) {
	if obj == nil {
		return "", nil
	}
	b, err := yamlv2.Marshal(obj)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Lines counts the changed lines (+ and -, headers excluded) of a diff.
func Lines(diff string) (added, removed int) {
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			added++
		case strings.HasPrefix(l, "-"):
			removed++
		}
	}
	return added, removed
}

// maskValues masks, in place, every string of live and desired that holds
// a secret; where both sides hold a value at the same place and only the
// secret in it differs, the desired one is marked as changed.
func maskValues(live, desired map[string]any, mask func(string) string) {
	var walk func(l, d any) (any, any)
	walk = func(l, d any) (any, any) {
		switch dv := d.(type) {
		case string:
			masked := mask(dv)
			ls, isString := l.(string)
			if isString {
				lm := mask(ls)
				if lm != ls || masked != dv {
					if ls != dv && lm == masked {
						masked += " (changed)"
					}
					return lm, masked
				}
				return l, d
			}
			return MaskStrings(l, mask), masked
		case map[string]any:
			lm, _ := l.(map[string]any)
			for k, v := range dv {
				var lv any
				if lm != nil {
					lv = lm[k]
				}
				nl, nd := walk(lv, v)
				dv[k] = nd
				if lm != nil {
					if _, ok := lm[k]; ok {
						lm[k] = nl
					}
				}
			}
			if lm != nil {
				for k, v := range lm {
					if _, ok := dv[k]; !ok {
						lm[k] = MaskStrings(v, mask)
					}
				}
			}
			return l, d
		case []any:
			ll, _ := l.([]any)
			for i, v := range dv {
				var lv any
				if i < len(ll) {
					lv = ll[i]
				}
				nl, nd := walk(lv, v)
				dv[i] = nd
				if i < len(ll) {
					ll[i] = nl
				}
			}
			for i := len(dv); i < len(ll); i++ {
				ll[i] = MaskStrings(ll[i], mask)
			}
			return l, d
		case nil:
			return MaskStrings(l, mask), d
		default:
			return MaskStrings(l, mask), d
		}
	}
	if desired == nil {
		MaskStrings(live, mask)
		return
	}
	if live == nil {
		MaskStrings(desired, mask)
		return
	}
	walk(live, desired)
}

// MaskStrings masks every string of v (an object as unstructured holds
// it) in place, and returns v, or the masked string.
func MaskStrings(v any, mask func(string) string) any {
	switch t := v.(type) {
	case string:
		return mask(t)
	case map[string]any:
		for k, e := range t {
			t[k] = MaskStrings(e, mask)
		}
	case []any:
		for i, e := range t {
			t[i] = MaskStrings(e, mask)
		}
	}
	return v
}
