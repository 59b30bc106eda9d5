package pipeline

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/sources"
)

// maskedFields lists, by object id, the fields of objects (JSON pointers)
// whose value holds a secret the run masks: a substituted secret, a value
// SOPS decrypted into a ConfigMap. A Secret's data is masked by its kind
// and is not listed. A revision records them, never the values, so that
// what later reads the revision (drift, history, a rollback) masks them
// as the apply did.
//
// decrypted are the fields each object (by index in objs) holds a value
// SOPS decrypted in, whatever their values: listed too.
func maskedFields(objs []*unstructured.Unstructured, secret func(string) bool, decrypted [][]string) map[string][]string {
	out := map[string][]string{}
	for i, u := range objs {
		if u.GetAPIVersion() == "v1" && u.GetKind() == "Secret" {
			continue
		}
		var paths []string
		if i < len(decrypted) {
			paths = append(paths, decrypted[i]...)
		}
		sources.WalkStrings(u.Object, "", func(path, v string) {
			if secret != nil && secret(v) && !slices.Contains(paths, path) {
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

// hiddenValue is what a masked field shows in a diff or a build.
const hiddenValue = "***"

// MaskFields returns u with the value of each field at paths (JSON
// pointers) replaced by ***, whatever the value: how a decrypted or
// substituted value is kept out of a diff or a build by where it is, not
// by what it is, so that a short one ("true", a port) is hidden without
// hiding every such word elsewhere. u itself is not changed; u is
// returned as it is when no path is found in it.
func MaskFields(u *unstructured.Unstructured, paths []string) *unstructured.Unstructured {
	if u == nil || len(paths) == 0 {
		return u
	}
	var c *unstructured.Unstructured
	for _, p := range paths {
		if _, ok := atPointer(u.Object, p); !ok || p == "" {
			continue
		}
		if c == nil {
			c = u.DeepCopy()
		}
		setAtPointer(c.Object, p, hiddenValue)
	}
	if c == nil {
		return u
	}
	return c
}

// MaskAlike masks in u the fields at paths as they are in ref, the object
// the paths were taken from: u is another version of it (live, a dry
// run's, the base's), whose lists may hold their elements in another
// order (an env var added by hand before the encrypted one). A list
// element is found in u by what names it (name, mountPath, key,
// containerPort), as the API server merges such lists; where it has no
// such field, or ref is nil, the field is masked in every element of
// u's list.
func MaskAlike(u, ref *unstructured.Unstructured, paths []string) *unstructured.Unstructured {
	if u == nil || len(paths) == 0 {
		return u
	}
	var refObj any
	if ref != nil {
		refObj = ref.Object
	}
	var concrete []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		concrete = append(concrete, alike(u.Object, refObj, strings.Split(strings.TrimPrefix(p, "/"), "/"), "")...)
	}
	return MaskFields(u, concrete)
}

// alike are the pointers in cur of the field at toks in ref.
func alike(cur, ref any, toks []string, prefix string) []string {
	if len(toks) == 0 {
		return []string{prefix}
	}
	tok := toks[0]
	switch c := cur.(type) {
	case map[string]any:
		key := strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		next, ok := c[key]
		if !ok {
			return nil
		}
		rm, _ := ref.(map[string]any)
		return alike(next, rm[key], toks[1:], prefix+"/"+tok)
	case []any:
		var refElem any
		if rl, ok := ref.([]any); ok {
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(rl) {
				refElem = rl[i]
			}
		}
		key, id, keyed := elementID(refElem)
		var out []string
		for j, e := range c {
			if keyed {
				if m, ok := e.(map[string]any); !ok || m[key] != id {
					continue
				}
			}
			out = append(out, alike(e, refElem, toks[1:], prefix+"/"+strconv.Itoa(j))...)
		}
		return out
	}
	return nil
}

// elementID is what names a list element, as the API server merges the
// lists of built-in kinds by it.
func elementID(e any) (key string, id any, ok bool) {
	m, isMap := e.(map[string]any)
	if !isMap {
		return "", nil, false
	}
	for _, k := range []string{"name", "mountPath", "devicePath", "key", "containerPort", "ip", "topologyKey"} {
		if v, has := m[k]; has {
			switch v.(type) {
			case string, int64, float64, bool:
				return k, v, true
			}
		}
	}
	return "", nil, false
}

// setAtPointer sets the value at an existing JSON pointer in v.
func setAtPointer(v any, pointer, value string) {
	toks := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, tok := range toks {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		last := i == len(toks)-1
		switch t := v.(type) {
		case map[string]any:
			if last {
				t[tok] = value
				return
			}
			v = t[tok]
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(t) {
				return
			}
			if last {
				t[n] = value
				return
			}
			v = t[n]
		default:
			return
		}
	}
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

// hiddenFields are the fields a diff of o hides whatever their values:
// those it was decrypted into, and those the run masks in its live
// object (collectMasked).
func (r *run) hiddenFields(o *sources.Object) []string {
	live := r.liveMasked[inventory.EntryFor(o.Unstructured).ID]
	if len(live) == 0 {
		return o.DecryptedFields
	}
	return append(slices.Clone(o.DecryptedFields), live...)
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
				if s, ok := v.(string); ok && len(strings.TrimSpace(s)) >= sources.MinSecretDataMask {
					values = append(values, s)
				}
			}
		}
	}
	r.opts.Secrets(values)
}

// maskLive masks the values a live object holds in the fields that held
// a secret: in the set (a substituted or decrypted value), in the
// revision compared with or rolled back to, or in the inventory's newest
// revision. A value rotated since, or set there by hand, is shown no
// more than the applied one, in every diff of the run (prune's
// included).
func (r *run) maskLive(live *unstructured.Unstructured) {
	if r.opts.Secrets == nil || live == nil || len(r.liveMasked) == 0 {
		return
	}
	var values []string
	for _, p := range r.liveMasked[inventory.EntryFor(live).ID] {
		// A short value is hidden where it is (MaskFields), not masked
		// wherever it appears.
		if v, ok := atPointer(live.Object, p); ok {
			if s, ok := v.(string); ok && len(strings.TrimSpace(s)) >= sources.MinSecretDataMask {
				values = append(values, s)
			}
		}
	}
	if len(values) > 0 {
		r.opts.Secrets(values)
	}
}

// collectMasked sets the fields maskLive masks: those of the set, of the
// revision compared with, and of the inventory's newest revision, when
// known. It runs before the plan reads any live object.
func (r *run) collectMasked() {
	out := map[string][]string{}
	add := func(m map[string][]string) {
		for id, paths := range m {
			out[id] = append(out[id], paths...)
		}
	}
	objs := make([]*unstructured.Unstructured, 0, len(r.objects))
	var decrypted [][]string
	for _, o := range r.objects {
		objs = append(objs, o.Unstructured)
		decrypted = append(decrypted, o.DecryptedFields)
	}
	add(maskedFields(objs, r.opts.Secret, decrypted))
	if r.compared != nil {
		add(r.compared.Masked)
	}
	if r.prev != nil {
		if newest := r.prev.Newest(); newest != nil {
			add(newest.Masked)
			if r.store != nil && r.store.Key != nil && !r.warnedRecord {
				if err := r.store.Authenticate(r.prev, newest.Number); err != nil {
					// Its masked fields may have been taken out: say so.
					r.warnedRecord = true
					r.obs.Info("warning: the fields this run masks in live objects come from the inventory's newest revision, which is not as this workflow recorded it (" + err.Error() + "); a field someone took out of it is not masked")
				}
			}
		}
	}
	for id, paths := range out {
		slices.Sort(paths)
		out[id] = slices.Compact(paths)
	}
	r.liveMasked = out
	// The planner's rules keep off what the fields now known held, as
	// the wait's do (its guard is made after this).
	if r.planner != nil {
		r.planner.health = r.ruleGuard()
	}
}

// decryptedValues are the values o holds in the fields SOPS decrypted
// into (DecryptedFields), longest first.
func decryptedValues(o *sources.Object) []string {
	var out []string
	for _, p := range o.DecryptedFields {
		if v, ok := atPointer(o.Object, p); ok {
			if s, ok := v.(string); ok && s != "" {
				out = append(out, s)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// isSecretData says whether field (as a check writes it) is in a
// Secret's data or stringData.
func isSecretData(o *sources.Object, field string) bool {
	if o.GetAPIVersion() != "v1" || o.GetKind() != "Secret" {
		return false
	}
	field = strings.TrimPrefix(field, ".")
	for _, f := range []string{"data", "stringData"} {
		if field == f || strings.HasPrefix(field, f+"[") || strings.HasPrefix(field, f+".") {
			return true
		}
	}
	return false
}
