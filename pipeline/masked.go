package pipeline

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/inventory"
)

// maskedFields lists, by object id, the fields of objects (JSON pointers)
// whose value holds a secret the run masks: a substituted secret, a value
// SOPS decrypted into a ConfigMap. A Secret's data is masked by its kind
// and is not listed. A revision records them, never the values, so that
// what later reads the revision (drift, history, a rollback) masks them
// as the apply did.
func maskedFields(objs []*unstructured.Unstructured, secret func(string) bool) map[string][]string {
	if secret == nil {
		return nil
	}
	out := map[string][]string{}
	for _, u := range objs {
		if u.GetAPIVersion() == "v1" && u.GetKind() == "Secret" {
			continue
		}
		var paths []string
		walkStrings(u.Object, "", func(path, v string) {
			if secret(v) {
				paths = append(paths, path)
			}
		})
		if len(paths) > 0 {
			out[inventory.EntryFor(u).ID] = paths
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// walkStrings calls fn with the JSON pointer and value of every string in
// v.
func walkStrings(v any, path string, fn func(path, v string)) {
	switch t := v.(type) {
	case string:
		fn(path, t)
	case map[string]any:
		for k, e := range t {
			walkStrings(e, path+"/"+escapePointer(k), fn)
		}
	case []any:
		for i, e := range t {
			walkStrings(e, path+"/"+strconv.Itoa(i), fn)
		}
	}
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// atPointer returns the value at a JSON pointer in v.
func atPointer(v any, pointer string) (any, bool) {
	if pointer == "" {
		return v, true
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch t := v.(type) {
		case map[string]any:
			e, ok := t[tok]
			if !ok {
				return nil, false
			}
			v = e
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// maskRecorded masks, from now on, the values a revision says were
// secret: those of its objects' recorded fields.
func (r *run) maskRecorded(objs []*unstructured.Unstructured, masked map[string][]string) {
	if r.opts.Secrets == nil || len(masked) == 0 {
		return
	}
	var values []string
	for _, u := range objs {
		for _, p := range masked[inventory.EntryFor(u).ID] {
			if v, ok := atPointer(u.Object, p); ok {
				if s, ok := v.(string); ok {
					values = append(values, s)
				}
			}
		}
	}
	r.opts.Secrets(values)
}

// maskLive masks the values live objects hold in the fields a revision
// says were secret: a value set there by hand is shown no more than the
// applied one.
func (r *run) maskLive(live *unstructured.Unstructured) {
	if r.opts.Secrets == nil || r.compared == nil || live == nil {
		return
	}
	var values []string
	for _, p := range r.compared.Masked[inventory.EntryFor(live).ID] {
		if v, ok := atPointer(live.Object, p); ok {
			if s, ok := v.(string); ok {
				values = append(values, s)
			}
		}
	}
	if len(values) > 0 {
		r.opts.Secrets(values)
	}
}
