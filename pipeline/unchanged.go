package pipeline

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// unchangedOnServer decides, from the live object alone, that applying
// desired would change none of its values, so that it needs no dry-run.
//
// The live object's managed fields say which fields gantry's last apply
// set. The apply changes nothing when every one of those fields is still
// in desired (none would be removed), and every value desired sets equals
// the live value (none would change), with list items matched as the
// server matches them (by their keys, which the managed fields name).
//
// It is conservative: whatever it cannot decide this way (another entry of
// gantry's, an apiVersion other than the one applied, a value the server
// would normalise, a null, a list it cannot match) counts as a change,
// and the object gets its dry-run. Being wrong that way costs a request;
// the other way it would hide a change, so every rule here errs to it.
func unchangedOnServer(desired, live *unstructured.Unstructured) bool {
	if live == nil || live.GetDeletionTimestamp() != nil || needsTakeOver(live) {
		return false
	}
	var owned *fieldpath.Set
	for _, mf := range live.GetManagedFields() {
		if mf.Manager != FieldManager || mf.Subresource != "" {
			continue
		}
		if owned != nil || mf.Operation != metav1.ManagedFieldsOperationApply || mf.APIVersion != desired.GetAPIVersion() || mf.FieldsV1 == nil {
			return false
		}
		owned = &fieldpath.Set{}
		if err := owned.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
			return false
		}
	}
	if owned == nil {
		return false
	}
	// metadata is a struct, never atomic: what gantry does not own of it
	// (name, namespace) is compared field by field.
	metadata := "metadata"
	owned.Children.Descend(fieldpath.PathElement{FieldName: &metadata})
	d := desired.Object
	if md, ok := d["metadata"].(map[string]any); ok {
		if ts, ok := md["creationTimestamp"]; ok && ts == nil {
			// Written by many generators; the server ignores it.
			md = maps.Clone(md)
			delete(md, "creationTimestamp")
			d = maps.Clone(d)
			d["metadata"] = md
		}
	}
	return sameMap(d, live.Object, owned)
}

// sameMap reports whether applying the map d, whose owned fields are s,
// leaves the live value l as it is.
func sameMap(d map[string]any, l any, s *fieldpath.Set) bool {
	lm, ok := l.(map[string]any)
	if !ok {
		return false
	}
	// Every field gantry owns is still set: none would be removed.
	keep := true
	each(s, func(pe fieldpath.PathElement) {
		if pe.FieldName == nil {
			keep = false
			return
		}
		if _, ok := d[*pe.FieldName]; !ok {
			keep = false
		}
	})
	if !keep {
		return false
	}
	for name, dv := range d {
		lv, present := lm[name]
		if dv == nil {
			// A null removes what gantry owns there; it is no change only
			// when there is nothing to remove.
			if present {
				return false
			}
			continue
		}
		if !present {
			return false
		}
		pe := fieldpath.PathElement{FieldName: &name}
		child, hasChild := s.Children.Get(pe)
		if !sameValue(dv, lv, child, hasChild) {
			return false
		}
	}
	return true
}

// sameValue compares one desired value with the live one. child is the
// set of what gantry owns below it, when the managed fields go below it;
// without it the value is a leaf, a map or list owned whole (atomic), or
// not gantry's at all, and must be equal as it is.
func sameValue(dv, lv any, child *fieldpath.Set, hasChild bool) bool {
	if hasChild {
		switch dv := dv.(type) {
		case map[string]any:
			return sameMap(dv, lv, child)
		case []any:
			ll, ok := lv.([]any)
			return ok && sameList(dv, ll, child)
		}
		return false
	}
	return equalJSON(dv, lv)
}

// sameList compares a list whose items gantry owns one by one: by key (a
// list of maps with merge keys) or by value (a set of scalars). The
// desired items must be exactly the owned ones and the live ones, in the
// same order; items another manager added make it a change (how a merge
// would order them is not decided here).
func sameList(d, l []any, s *fieldpath.Set) bool {
	var elems []fieldpath.PathElement
	each(s, func(pe fieldpath.PathElement) { elems = append(elems, pe) })
	if len(elems) != len(d) || len(l) != len(d) || len(d) == 0 {
		return false
	}
	last := -1
	used := make([]bool, len(elems))
	for _, item := range d {
		e := -1
		for i, pe := range elems {
			if used[i] || !ownedItem(pe, item, s) {
				continue
			}
			if e >= 0 {
				return false // two owned items match: ambiguous
			}
			e = i
		}
		if e < 0 {
			return false
		}
		used[e] = true
		at := -1
		for j, li := range l {
			if liveItem(elems[e], li) {
				if at >= 0 {
					return false
				}
				at = j
			}
		}
		if at <= last {
			return false // missing, or in another order
		}
		last = at
		if elems[e].Key != nil {
			child, ok := s.Children.Get(elems[e])
			if !ok {
				child = &fieldpath.Set{}
			}
			dm, ok := item.(map[string]any)
			if !ok || !sameMap(dm, l[at], child) {
				return false
			}
		}
	}
	return true
}

// ownedItem reports whether the desired item is the one pe names, in the
// list whose owned set is s. A key field the item leaves out is one the
// server defaulted (a port's protocol), which pe then records: it counts
// only when gantry's last apply left it out too (it does not own the
// field), so that the same default fills it again.
func ownedItem(pe fieldpath.PathElement, item any, s *fieldpath.Set) bool {
	switch {
	case pe.Key != nil:
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		child, _ := s.Children.Get(pe)
		given := 0
		for _, f := range *pe.Key {
			v, ok := m[f.Name]
			if !ok {
				name := f.Name
				field := fieldpath.PathElement{FieldName: &name}
				if child == nil || child.Members.Has(field) {
					return false
				}
				if _, ok := child.Children.Get(field); ok {
					return false
				}
				continue
			}
			given++
			if !value.Equals(f.Value, value.NewValueInterface(v)) {
				return false
			}
		}
		return given > 0
	case pe.Value != nil:
		if _, ok := item.(map[string]any); ok {
			return false
		}
		if _, ok := item.([]any); ok {
			return false
		}
		return value.Equals(*pe.Value, value.NewValueInterface(item))
	}
	return false
}

// liveItem reports whether the live item is the one pe names, every key
// field present.
func liveItem(pe fieldpath.PathElement, item any) bool {
	switch {
	case pe.Key != nil:
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		for _, f := range *pe.Key {
			v, ok := m[f.Name]
			if !ok || !value.Equals(f.Value, value.NewValueInterface(v)) {
				return false
			}
		}
		return true
	case pe.Value != nil:
		return value.Equals(*pe.Value, value.NewValueInterface(item))
	}
	return false
}

// each calls f for every element s has directly: its members and its
// children.
func each(s *fieldpath.Set, f func(fieldpath.PathElement)) {
	seen := fieldpath.PathElementSet{}
	s.Members.Iterate(func(pe fieldpath.PathElement) {
		seen.Insert(pe)
		f(pe)
	})
	s.Children.Iterate(func(pe fieldpath.PathElement) {
		if !seen.Has(pe) {
			f(pe)
		}
	})
}

// equalJSON compares two values as their JSON: an int and a float of the
// same number are equal, as the server stores them.
func equalJSON(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	x, err := json.Marshal(a)
	if err != nil {
		return false
	}
	y, err := json.Marshal(b)
	return err == nil && bytes.Equal(x, y)
}
