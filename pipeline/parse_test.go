package pipeline

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resource"
)

// documents that kustomize's reader is particular about, at the end of a
// document above all: block scalars keep or chomp the newline the reader
// adds back, separators carry comments or spaces, documents are empty.
var trickyDocuments = []string{
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: clip-%d\ndata:\n  a: |\n    text\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep-%d\ndata:\n  a: |+\n    text\n\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strip-%d\ndata:\n  a: |-\n    text\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: folded-%d\ndata:\n  a: >\n    one\n    two\n",
	"# a comment only\n",
	"",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: &m\n  name: anchored-%d\ndata:\n  x: y\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ended-%d\n...\n",
	"{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"flow-%d\"}}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-%d\ndata:\n  payload: " + strings.Repeat("x", 4000) + "\n",
}

var separators = []string{"---\n", "---\n", "---\n", "--- # next\n", "---   \n", "---\n---\n"}

func parseWhole(t *testing.T, data []byte) ([]*resource.Resource, error) {
	t.Helper()
	return provider.NewDefaultDepProvider().GetResourceFactory().SliceFromBytes(data)
}

// A large stream cut into pieces parses to exactly the documents of the
// whole, in order, whatever its documents and separators.
func TestSplitManifestParsesAsTheWhole(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		var b strings.Builder
		if round%3 == 0 {
			b.WriteString("---\n") // a stream may open with a separator
		}
		for i := 0; b.Len() < 200<<10; i++ {
			if i > 0 {
				b.WriteString(separators[rng.IntN(len(separators))])
			}
			doc := trickyDocuments[rng.IntN(len(trickyDocuments))]
			if strings.Contains(doc, "%d") {
				doc = fmt.Sprintf(doc, i)
			}
			b.WriteString(doc)
		}
		data := []byte(b.String())
		whole, err := parseWhole(t, data)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, n := range []int{2, 3, 4, 8} {
			pieces := splitManifest(data, n)
			if len(pieces) < 2 {
				t.Fatalf("round %d: %d bytes not cut in %d", round, len(data), n)
			}
			var got []*resource.Resource
			for _, p := range pieces {
				res, err := parseWhole(t, p)
				if err != nil {
					t.Fatalf("round %d, %d pieces: %v", round, n, err)
				}
				got = append(got, res...)
			}
			if len(got) != len(whole) {
				t.Fatalf("round %d, %d pieces: %d documents, the whole has %d", round, n, len(got), len(whole))
			}
			for i := range whole {
				w, g := whole[i].MustYaml(), got[i].MustYaml()
				if w != g {
					t.Fatalf("round %d, %d pieces, document %d:\n%s\nwhole:\n%s", round, n, i, g, w)
				}
			}
		}
	}
}

// A small file, a stream with \r\n line endings, one without a bare
// separator, and one that may hold a List are parsed whole.
func TestSplitManifestLeavesWhole(t *testing.T) {
	t.Parallel()
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  p: " + strings.Repeat("x", 1000) + "\n"
	for name, data := range map[string]string{
		"small":      strings.Repeat(doc+"---\n", 10),
		"crlf":       strings.ReplaceAll(strings.Repeat(doc+"---\n", 200), "\n", "\r\n"),
		"commented":  strings.Repeat(doc+"--- # c\n", 200),
		"one":        doc + strings.Repeat("#"+strings.Repeat("c", 1000)+"\n", 200),
		"two, short": doc + "---\n" + strings.Repeat("#"+strings.Repeat("c", 1000)+"\n", 200),
		"a List":     strings.Repeat(doc+"---\n", 100) + "apiVersion: v1\nkind: List\nitems: []\n---\n" + strings.Repeat(doc+"---\n", 100),
		"an escape":  strings.Repeat(doc+"---\n", 200) + "a: \"\\x41\"\n",
	} {
		if n := len(splitManifest([]byte(data), 4)); n != 1 {
			t.Errorf("%s: cut in %d", name, n)
		}
	}
}

// A document that does not parse, deep in a file that is cut, is reported
// as the parser reports it for the whole file.
func TestParseErrorOfAPieceIsTheWholeFilesError(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\ndata:\n  p: %s\n", i, strings.Repeat("x", 500))
		if i == 250 {
			b.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n")
		}
	}
	_, want := parseWhole(t, []byte(b.String()))
	if want == nil {
		t.Fatal("the fixture parses")
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "all.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Build(BuildOptions{Path: root, WorkDir: root})
	if err == nil || err.Error() != "all.yaml: "+want.Error() {
		t.Errorf("error %v, want all.yaml: %v", err, want)
	}
}
