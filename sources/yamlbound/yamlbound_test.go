package yamlbound

import (
	"errors"
	"strings"
	"testing"
)

// bomb is a classic "billion laughs": nine levels of nine aliases, 9^9
// strings once expanded, in under 500 bytes.
const bomb = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, data, want string
	}{
		{"bomb", bomb, "its YAML aliases expand out of proportion"},
		{"bomb in a later document", "a: 1\n---\n" + bomb, "its YAML aliases expand out of proportion"},
		{"self", "a: &a [*a]\n", "a YAML anchor contains an alias of itself"},
		{"in a mapping", "metadata: &m\n  name: x\n  labels: {loop: *m}\n", "a YAML anchor contains an alias of itself"},
		{"in proportion", "name: &n shared\nlabels:\n  app: *n\nlist: &l [1, 2]\nagain: *l\n", ""},
		{"no aliases", "a: [1, 2, 3]\n", ""},
		// Not YAML: for the reader that parses it next to report.
		{"malformed", "a: &a [*a\n", ""},
	} {
		err := Check([]byte(tc.data))
		var refused *Error
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.As(err, &refused) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Every decoder refuses what Check refuses, before decoding it, and
// decodes the rest as the library it wraps does.
func TestDecodersCheckFirst(t *testing.T) {
	t.Parallel()
	var refused *Error
	var m map[string]any
	if err := Unmarshal([]byte(bomb), &m); !errors.As(err, &refused) || m != nil {
		t.Errorf("Unmarshal: %v", err)
	}
	if _, err := YAMLToJSON([]byte(bomb)); !errors.As(err, &refused) {
		t.Errorf("YAMLToJSON: %v", err)
	}
	if _, err := Node([]byte(bomb)); !errors.As(err, &refused) {
		t.Errorf("Node: %v", err)
	}
	docs, err := Documents([]byte("a: 1\n---\n" + bomb))
	if !errors.As(err, &refused) || len(docs) != 1 {
		t.Errorf("Documents: %d documents, %v", len(docs), err)
	}

	if err := Unmarshal([]byte("a: &v 1\nb: *v\n"), &m); err != nil || m["b"] != float64(1) {
		t.Errorf("Unmarshal in proportion: %v, %v", m, err)
	}
	if j, err := YAMLToJSON([]byte("a: 1\n")); err != nil || string(j) != `{"a":1}` {
		t.Errorf("YAMLToJSON: %s, %v", j, err)
	}
	doc, err := Node([]byte("a: 1\n"))
	if err != nil || len(doc.Content) != 1 || doc.Content[0].Content[0].Value != "a" {
		t.Errorf("Node: %v", err)
	}
	if doc, err := Node(nil); err != nil || len(doc.Content) != 0 {
		t.Errorf("Node of nothing: %v", err)
	}
	if _, err := Node([]byte("a: [\n")); err == nil || errors.As(err, &refused) {
		t.Errorf("Node of malformed YAML: %v, want yaml.v3's error", err)
	}
	docs, err = Documents([]byte("a: 1\n---\nb: 2\n---\nc: [\n"))
	if err == nil || len(docs) != 2 {
		t.Errorf("Documents: %d documents, %v; want the two before the malformed one and its error", len(docs), err)
	}
}
