package sources

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getsops/sops/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gantry-dev/gantry/schemas/native"
)

// Decrypted values have provenance. gantry decrypts a SOPS file as
// kustomize reads it, so that generators can read encrypted dotenv and
// binary files as Flux's kustomize-controller lets them; kustomize can
// then copy what was decrypted anywhere (a replacement, a var, a patch),
// whole or in pieces (a replacement's delimiter and index), encoded or
// not, where masks that match whole values cannot follow it. So a build
// that decrypted anything is built a second time with every decrypted
// value changed at every character (tainted), and the two sets are
// compared. Whatever differs took its value from a decrypted one. That
// is allowed only in the objects the encrypted file itself defines, in a
// Secret a generator made, and in a ConfigMap a generator made whose
// differing values are each a whole decrypted value (masked, then, like
// any); anywhere else the build is refused, naming the object and the
// fields, never the values. Nothing here matches values to find a flow:
// the second build finds it.

// errNeedsOrigins asks Build for the build with origins: which file an
// object came from decides where a decrypted value may go.
var errNeedsOrigins = errors.New("the objects' files are needed to check where decrypted values went")

// decryptedFiles reports whether the build decrypted any file.
func (f *sopsFS) decryptedFiles() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.decrypted) > 0
}

// taintVariant says how a build changes what was given as a secret.
// Two builds with other values find what the real one took from a
// secret: the first keeps each value's shape (its length, and each
// character's class: a letter stays a letter, a digit a digit), so that
// a value that must parse still parses; the second changes its shape
// (every character of another class, the length more than doubled), so
// that what a template computes from the shape alone (len, a map of
// character classes, a count) differs too.
type taintVariant uint8

const (
	notTainted taintVariant = iota
	sameShape
	otherShape
)

// variants are the builds the provenance check compares with the real
// one, in order.
var variants = []taintVariant{sameShape, otherShape}

// taintSOPSTree changes, in place, every value SOPS decrypted (by path)
// but an object's apiVersion and kind, which kustomize needs to read it
// at all: a string gets another character at every position, a number
// another number, a boolean the other one. Names, labels and annotations
// are changed too: a piece of them is a piece of what was decrypted.
// Only a document that is an object (it has apiVersion and kind) keeps
// them; a dotenv's key named kind is a value like any.
func (tv taintVariant) taintSOPSTree(branches sops.TreeBranches, encrypted map[string]bool) {
	var object bool
	var walk func(path string, depth int, v any) any
	walk = func(path string, depth int, v any) any {
		switch t := v.(type) {
		case sops.TreeBranch:
			for i, item := range t {
				k, ok := item.Key.(string)
				if !ok || object && depth == 0 && (k == "apiVersion" || k == "kind") {
					continue
				}
				t[i].Value = walk(path+"\x00"+k, depth+1, item.Value)
			}
			return t
		case []any:
			for i, e := range t {
				t[i] = walk(fmt.Sprintf("%s\x00%d", path, i), depth+1, e)
			}
			return t
		}
		if !encrypted[path] {
			return v
		}
		switch t := v.(type) {
		case string:
			return tv.String(t)
		case int:
			return int(tv.number(int64(t)))
		case int64:
			return tv.number(t)
		case float64:
			return t + float64(tv.number(0))
		case bool:
			return !t
		}
		return v
	}
	for i, b := range branches {
		keys := map[string]bool{}
		for _, item := range b {
			if k, ok := item.Key.(string); ok {
				keys[k] = true
			}
		}
		object = keys["apiVersion"] && keys["kind"]
		branches[i] = walk(strconv.Itoa(i), 0, b).(sops.TreeBranch)
	}
}

// String is s as the variant changes it: taintString for sameShape,
// reshapeString for otherShape.
func (tv taintVariant) String(s string) string {
	if tv == otherShape {
		return reshapeString(s)
	}
	return taintString(s)
}

// number is n as the variant changes it: moved by an amount drawn from
// n and the key, and for otherShape, of the other sign too (so of
// another number of digits, most often).
func (tv taintVariant) number(n int64) int64 {
	m := taintNumber(n)
	if tv == otherShape {
		return -m
	}
	return m
}

// taintString returns s with every character replaced by another of the
// same class (letters by letters, digits by digits, anything else by a
// letter), so that no piece of it equals the same piece of s. Each
// position moves by its own amount, drawn from a key the process picks
// at random: a shift common to all would keep what a template can
// compute from the characters' differences (one's distance to the next)
// the same in both builds, and let it through unseen. The same string
// always taints the same way within one run, so that a name can be
// recognised in both builds.
func taintString(s string) string {
	var b strings.Builder
	i := uint64(0)
	for _, r := range s {
		h := mix(taintKey ^ (i+1)*0x9e3779b97f4a7c15)
		i++
		shift := func(first rune, n uint64) rune { return first + rune((uint64(r-first)+1+h%(n-1))%n) }
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(shift('a', 26))
		case r >= 'A' && r <= 'Z':
			b.WriteRune(shift('A', 26))
		case r >= '0' && r <= '9':
			b.WriteRune(shift('0', 10))
		default:
			b.WriteRune('a' + rune(h%26))
		}
	}
	return b.String()
}

// reshapeString returns s of another shape: every character replaced by
// one of another class (a lower-case letter by a capital, a capital by a
// digit, a digit, or anything else, by a lower-case letter), each drawn
// from the key and its position, and then as many characters again and
// one more, so that the length is more than doubled. What a template
// computes from the length or the characters' classes alone (len, a
// count of digits, a mask of classes) is then another value, as what it
// computes from the characters is.
func reshapeString(s string) string {
	var b strings.Builder
	n := uint64(0)
	put := func(r rune) {
		h := mix(taintKey ^ 0x5bd1e995 ^ (n+1)*0x9e3779b97f4a7c15)
		n++
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune('A' + rune(h%26))
		case r >= 'A' && r <= 'Z':
			b.WriteRune('0' + rune(h%10))
		default:
			b.WriteRune('a' + rune(h%26))
		}
	}
	runes := []rune(s)
	for _, r := range runes {
		put(r)
	}
	for i := len(runes) - 1; i >= 0; i-- {
		put(runes[i])
	}
	put('-')
	return b.String()
}

// taintNumber is another number than n, moved by an amount drawn from n
// and the key: n+1 would keep what a template computes by dividing it,
// one amount for all what it computes by subtracting two.
func taintNumber(n int64) int64 {
	return n + 1 + int64(mix(taintKey^uint64(n))%(1<<40))
}

// taintKey is drawn once per process.
var taintKey = rand.Uint64()

// mix is SplitMix64's finaliser: every bit of x moves every bit out.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// hashSuffix is the content hash kustomize appends to generated names.
var hashSuffix = regexp.MustCompile(`-[a-z0-9]{10}$`)

// ProvenanceError refuses a build in which a decrypted value went where
// it may not.
type ProvenanceError struct {
	Object string
	Fields []string
	Files  []string
	// Chart: the object is a chart's.
	Chart bool
	// Made, when set, says what of the set depends on a secret other
	// than a field (whether an object is made, the order objects come
	// in), instead of Fields.
	Made string
}

func (e *ProvenanceError) Error() string {
	if e.Made != "" {
		return fmt.Sprintf("%s: %s depends on what was decrypted or given as a secret (%s): built with other values there, it differs; which objects a set holds, and their order, are printed, so they may not depend on a secret (a template may put a secret into a value, not decide by it what to make)",
			e.Object, e.Made, strings.Join(e.Files, ", "))
	}
	fields := e.Fields
	if len(fields) > 5 {
		fields = append(slices.Clone(fields[:5]), fmt.Sprintf("and %d more", len(e.Fields)-5))
	}
	if e.Chart {
		return fmt.Sprintf("%s takes a piece of a secret, or a value a template computed from one (%s) at %s: a chart may put a secret whole into any value, where it is masked, and anything of it into a Secret, but nothing of it elsewhere, so that no output can show it in pieces",
			e.Object, strings.Join(e.Files, ", "), strings.Join(fields, ", "))
	}
	return fmt.Sprintf("%s takes a value kustomize derived from what SOPS decrypted (%s) at %s, through a replacement, a var, a patch or a generator: a decrypted value may go only into the objects its encrypted file defines, or a Secret a generator makes from it, so that no output can show it in pieces. Encrypt that object with sops instead, or keep the value in the encrypted file's own object",
		e.Object, strings.Join(e.Files, ", "), strings.Join(fields, ", "))
}

// checkProvenance builds again with every decrypted value tainted, once
// for each variant, and refuses an object that changed where a decrypted
// value may not go.
func checkProvenance(objects []*Object, opts BuildOptions, sfs *sopsFS, notices []ChartNotice) error {
	derived := map[*Object]bool{}
	for _, v := range variants {
		if err := checkVariant(objects, opts, sfs, notices, v, derived); err != nil {
			return err
		}
	}
	return validDerivedSecrets(objects, derived, sfs.encryptedFiles(), opts.Shown())
}

// validDerivedSecrets refuses a set in which a Secret whose data took
// something of a secret is not valid as the API server reads a Secret,
// without saying which: a Secret may hold anything of a secret in its
// data, masked, but whether that data is valid (base64, a registry's
// JSON) would be told for each Secret by validation, and a template
// could spell a secret with it, a bit a Secret. A set whose Secrets are
// valid is not affected.
func validDerivedSecrets(objects []*Object, derived map[*Object]bool, files []string, shown string) error {
	for _, o := range objects {
		if !derived[o] {
			continue
		}
		errs, ok := native.Validate(o.Unstructured)
		if !ok {
			continue
		}
		// Only what is wrong with its data: the rest of a Secret (its
		// namespace, given later) is judged as any object's is.
		errs = slices.DeleteFunc(errs, func(e *field.Error) bool {
			return e.Field != "" && e.Field != "<nil>" && !strings.HasPrefix(e.Field, "data") && !strings.HasPrefix(e.Field, "stringData")
		})
		if len(errs) > 0 {
			return &BuildError{File: shown, Err: fmt.Errorf("a Secret whose data took something of what was decrypted or given as a secret (%s) is not valid as the API server reads a Secret (its data's base64, or a registry's JSON): which Secret, and why, is not said, as it would tell something of the secret; check the Secrets built from it", strings.Join(files, ", "))}
		}
	}
	return nil
}

// checkVariant is checkProvenance against the build of one variant.
func checkVariant(objects []*Object, opts BuildOptions, sfs *sopsFS, notices []ChartNotice, variant taintVariant, derived map[*Object]bool) error {
	alt := opts
	alt.taint, alt.Decrypted, alt.SecretValues, alt.NoOrigins, alt.trace = variant, nil, nil, false, nil
	var taintedNotices []ChartNotice
	alt.ChartNotice = func(n ChartNotice) { taintedNotices = append(taintedNotices, n) }
	files := sfs.encryptedFiles()
	tainted, _, err := build(alt)
	if err != nil {
		// What the build with other values says is not repeated: it
		// quotes those values, which undo to the decrypted ones.
		return &BuildError{File: opts.Path, Err: fmt.Errorf("the build depends on what SOPS decrypted (%s) beyond the objects it defines: built with other values there, it fails; a decrypted value may go only into the objects its encrypted file defines", strings.Join(files, ", "))}
	}
	if !reflect.DeepEqual(notices, taintedNotices) {
		// What a chart left out, or whether it looked up, is printed:
		// it may not depend on a secret.
		return &BuildError{File: opts.Path, Err: fmt.Errorf("what a chart's rendering leaves out (hooks) or looks up depends on what was decrypted or given as a secret (%s): rendered with other values there, it differs; a secret may go only into the values of the objects it renders", strings.Join(files, ", "))}
	}
	sfs.mu.Lock()
	encrypted := map[string]bool{}
	for f := range sfs.decrypted {
		encrypted[f] = true
	}
	values := sfs.values
	identities := sfs.identities
	sfs.mu.Unlock()

	key := func(o *Object, name string) string {
		return o.GroupVersionKind().String() + "|" + o.GetNamespace() + "|" + name
	}
	real := map[string]*Object{}
	for _, o := range objects {
		real[key(o, o.GetName())] = o
	}
	// Generated names carry a hash of their content: a generated object
	// is paired by its name without it, and its tainted name is read as
	// the real one wherever it is referred to.
	byBase := map[string]*Object{}
	for _, o := range objects {
		if o.Generated {
			byBase[key(o, hashSuffix.ReplaceAllString(o.GetName(), ""))] = o
		}
	}
	renamed := map[string]string{}
	pairs := map[*Object]*Object{}
	for _, t := range tainted {
		if r, ok := real[key(t, t.GetName())]; ok {
			pairs[t] = r
			continue
		}
		if r, ok := byBase[key(t, hashSuffix.ReplaceAllString(t.GetName(), ""))]; ok && t.Generated {
			pairs[t] = r
			renamed[t.GetName()] = r.GetName()
			continue
		}
		if r := ownObject(objects, pairs, t); r != nil {
			// Its own file's object, renamed by its own values: only by
			// those its file encrypted at its identity. A name or
			// namespace that took another decrypted value (a replacement
			// of a password into metadata.name) is refused, named by its
			// kind and file, not by the name that would show the value.
			if !ownIdentity(r, t, identities[r.Source], variant) {
				return &BuildError{File: r.Source, Err: &ProvenanceError{Object: "a " + r.GetKind() + " of " + r.Source, Fields: []string{"its name or namespace"}, Files: files}}
			}
			pairs[t] = r
			renamed[t.GetName()] = r.GetName()
			continue
		}
		// Named by its file only: its kind and name in the build with
		// other values undo to a decrypted value.
		return &BuildError{File: t.Source, Err: &ProvenanceError{Object: "an object of " + t.Source, Fields: []string{"its kind, name or namespace"}, Files: files}}
	}
	if err := sameObjects(objects, tainted, pairs, renamed, files); err != nil {
		return err
	}
	for t, r := range pairs {
		// What an encrypted file defines, or a generator made, may hold a
		// decrypted value: a Secret in its data, anything as a whole
		// decrypted value (masked, then, as any). Nothing else may, and no
		// object may hold a piece of one.
		mayHold := encrypted[r.Source] || r.Generated || r.Rendered
		secret := r.GroupVersionKind().Group == "" && r.GetKind() == "Secret" && t.GetKind() == "Secret"
		var fields []string
		tObj := renameLeaves(t.Object, renamed)
		diffLeaves(r.Object, tObj, "", func(path string, realValue any) {
			s, isString := realValue.(string)
			// A path one build has and the other lacks holds a key
			// taken from a decrypted value: never named, never kept
			// as a field to mask (a mask hides values, not keys).
			shared := sharedPath(path, r.Object, tObj)
			if shared != path {
				fields = append(fields, shared+"/…")
				return
			}
			switch {
			case mayHold && path == "/metadata/namespace" && ownValue(r.GetNamespace(), t.GetNamespace(), identities[r.Source], variant):
				// Its own encrypted name or namespace: shown as every
				// object's is.
			case mayHold && secret && (strings.HasPrefix(path, "/data/") || strings.HasPrefix(path, "/stringData/")):
				derived[r] = true
			case mayHold && isString && values[s] && leafAt(tObj, path) == variant.String(s):
				// A whole secret value, and the same one in the build
				// with other values: which secret a field holds may not
				// depend on a secret either (a choice between two by a
				// bit of a third, shown by whether the object is valid).
				if !identityField(path) && !slices.Contains(r.DecryptedFields, path) {
					r.DecryptedFields = append(r.DecryptedFields, path)
				}
			default:
				fields = append(fields, path)
			}
		})
		if len(fields) > 0 {
			slices.Sort(fields)
			return &BuildError{File: r.Source, Err: &ProvenanceError{Object: objectRef(r), Fields: fields, Files: files, Chart: r.Rendered}}
		}
	}
	return nil
}

// sameObjects refuses a build whose objects, or their order, depend on
// a secret: every object of the real build must have its pair in the
// build with other values, once, and they must come in the same order.
// Which objects a set holds and in what order are printed (the set's
// list, the report's objects), so that a template could spell a secret
// by making an object only when a character of it is one value, or by
// the order it makes the same objects in, with no field of theirs taking
// anything of it. An object renamed in the other build (by its own
// encrypted name, or a generator's content hash) is left out of the
// order: its name is its own, shown as every object's is.
func sameObjects(objects, tainted []*Object, pairs map[*Object]*Object, renamed map[string]string, files []string) error {
	paired := map[*Object]bool{}
	for _, t := range tainted {
		r := pairs[t]
		if paired[r] {
			return &BuildError{File: r.Source, Err: &ProvenanceError{Object: "an object of " + r.Source, Made: "whether it is made", Files: files}}
		}
		paired[r] = true
	}
	for _, r := range objects {
		if !paired[r] {
			// Named by its file only: it exists only with the secret's
			// value, and its name may spell it.
			return &BuildError{File: r.Source, Err: &ProvenanceError{Object: "an object of " + r.Source, Made: "whether it is made", Files: files}}
		}
	}
	movedByName := map[*Object]bool{}
	for _, t := range tainted {
		if _, ok := renamed[t.GetName()]; ok {
			movedByName[pairs[t]] = true
		}
	}
	var inReal, inTainted []*Object
	for _, r := range objects {
		if !movedByName[r] {
			inReal = append(inReal, r)
		}
	}
	for _, t := range tainted {
		if r := pairs[t]; !movedByName[r] {
			inTainted = append(inTainted, r)
		}
	}
	for i := range inReal {
		if inReal[i] != inTainted[i] {
			return &BuildError{File: inReal[i].Source, Err: &ProvenanceError{Object: "the objects of " + inReal[i].Source, Made: "the order they are made in", Files: files}}
		}
	}
	return nil
}

// leafAt is the string at path (a JSON pointer) in v, "" when there is
// none.
func leafAt(v any, path string) string {
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		key := strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch t := v.(type) {
		case map[string]any:
			v = t[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(t) {
				return ""
			}
			v = t[i]
		default:
			return ""
		}
	}
	s, _ := v.(string)
	return s
}

// sharedPath is the longest part of path (a JSON pointer) that both a
// and b hold.
func sharedPath(path string, a, b any) string {
	if path == "" {
		return path
	}
	out := ""
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		key := strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		next := func(v any) (any, bool) {
			switch t := v.(type) {
			case map[string]any:
				e, ok := t[key]
				return e, ok
			case []any:
				i, err := strconv.Atoi(key)
				if err != nil || i < 0 || i >= len(t) {
					return nil, false
				}
				return t[i], true
			}
			return nil, false
		}
		na, okA := next(a)
		nb, okB := next(b)
		if !okA || !okB {
			return out
		}
		a, b, out = na, nb, out+"/"+seg
	}
	return out
}

// ownObject pairs a tainted object that its own encrypted file renamed
// (its name was encrypted too) with the one real object of that file and
// kind not paired yet; nil when there is not exactly one.
func ownObject(objects []*Object, pairs map[*Object]*Object, t *Object) *Object {
	taken := map[*Object]bool{}
	for _, r := range pairs {
		taken[r] = true
	}
	var found *Object
	for _, r := range objects {
		if r.Source == t.Source && r.GroupVersionKind() == t.GroupVersionKind() && !taken[r] {
			if found != nil {
				return nil
			}
			found = r
		}
	}
	return found
}

// ownIdentity says whether real's name and namespace, where they differ
// from the tainted build's, each hold a value its file decrypted at an
// object's identity (kustomize may have added a prefix or suffix).
func ownIdentity(real, tainted *Object, names map[string]bool, variant taintVariant) bool {
	return ownValue(real.GetName(), tainted.GetName(), names, variant) && ownValue(real.GetNamespace(), tainted.GetNamespace(), names, variant)
}

// ownValue says whether a name (or namespace) of the real build and the
// tainted one are the same, or one name its file decrypted at an
// identity and changed the same way by taint, whatever kustomize put
// around it (a prefix, a suffix). A name that took any other decrypted
// value (a password replaced into it) differs otherwise.
func ownValue(real, tainted string, names map[string]bool, variant taintVariant) bool {
	if real == tainted {
		return true
	}
	for n := range names {
		if n != "" && strings.Replace(real, n, variant.String(n), 1) == tainted {
			return true
		}
	}
	return false
}

func objectRef(o *Object) string {
	if o.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}

// renameLeaves returns v with every string that is a key of names
// replaced by its value.
func renameLeaves(v any, names map[string]string) any {
	if len(names) == 0 {
		return v
	}
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = renameLeaves(e, names)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = renameLeaves(e, names)
		}
		return out
	case string:
		if n, ok := names[t]; ok {
			return n
		}
	}
	return v
}

// diffLeaves calls fn with the JSON pointer of every place where a and b
// differ, and a's value there (nil where a has none).
func diffLeaves(a, b any, path string, fn func(path string, aValue any)) {
	switch at := a.(type) {
	case map[string]any:
		bt, ok := b.(map[string]any)
		if !ok {
			fn(cmpOrRoot(path), a)
			return
		}
		for k, av := range at {
			diffLeaves(av, bt[k], path+"/"+EscapePointer(k), fn)
		}
		for k := range bt {
			if _, ok := at[k]; !ok {
				fn(path+"/"+EscapePointer(k), nil)
			}
		}
	case []any:
		bt, ok := b.([]any)
		if !ok || len(bt) != len(at) {
			fn(cmpOrRoot(path), a)
			return
		}
		for i := range at {
			diffLeaves(at[i], bt[i], path+"/"+strconv.Itoa(i), fn)
		}
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) || (a == nil) != (b == nil) {
			fn(cmpOrRoot(path), a)
		}
	}
}

// identityField says whether a JSON pointer is an object's identity:
// apiVersion, kind, metadata.name or metadata.namespace.
func identityField(path string) bool {
	switch path {
	case "/apiVersion", "/kind", "/metadata/name", "/metadata/namespace":
		return true
	}
	return false
}

func cmpOrRoot(path string) string {
	if path == "" {
		return "/"
	}
	return path
}
