package sources

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

// writeDocument appends the i-th document of a random stream: a separator
// (but before the first) and one of docs, numbered i.
func writeDocument(b *strings.Builder, rng *rand.Rand, docs []string, i int) {
	if i > 0 {
		b.WriteString(separators[rng.IntN(len(separators))])
	}
	doc := docs[rng.IntN(len(docs))]
	if strings.Contains(doc, "%d") {
		doc = fmt.Sprintf(doc, i)
	}
	b.WriteString(doc)
}

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
			writeDocument(&b, rng, trickyDocuments, i)
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

// documents that de-anchoring changes, or that SliceFromBytes treats
// specially: parseDocuments must give what it gives for each of them.
var anchoredDocuments = []string{
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: merged-%d\n  labels: &l {a: b}\n  annotations:\n    <<: *l\n    c: d\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: aliased-%d\ndata:\n  x: &v one\n  y: *v\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: quoted-merge-%d\ndata:\n  \"<<\": kept?\n  z: \"1\"\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: duplicate-%d\ndata:\n  k: first\n  k: second\n  j: \"2\"\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: numeric-keys-%d\n  labels: {1: a, \"1\": b, x: c}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local-%d\n  annotations: {config.kubernetes.io/local-config: \"true\"}\n",
	"apiVersion: v1\nkind: ConfigMapList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: listed-%d}\n",
	"apiVersion: v1\nkind: Pod\nmetadata:\n  name: nil-entry-%d\nspec:\n  containers:\n  -\n",
	"apiVersion: v1\nmetadata:\n  name: no-kind-%d\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &n anchor-on-name-%d\ndata:\n  self: *n\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: commented-%d # the name\n# a foot comment\ndata:\n  # a head comment\n  a: b\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [bad-%d\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tagged-%d\ndata:\n  a: !!str 1\n  b: !custom x\n",
}

// parseDocuments gives what kustomize's SliceFromBytes gives, object for
// object and error for error, for random streams of ordinary and special
// documents, and for every YAML file in the repository.
func TestParseDocumentsIsSliceFromBytes(t *testing.T) {
	t.Parallel()
	factory := provider.NewDefaultDepProvider().GetResourceFactory()
	same := func(t *testing.T, name string, data []byte) {
		t.Helper()
		want, wantErr := factory.SliceFromBytes(data)
		got, err := parseDocuments(factory, data)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%s: error %v, want %v", name, err, wantErr)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d objects, want %d", name, len(got), len(want))
		}
		for i := range want {
			g, gErr := got[i].RNode.String()
			w, wErr := want[i].RNode.String()
			if g != w || fmt.Sprint(gErr) != fmt.Sprint(wErr) {
				t.Fatalf("%s, object %d:\n%s (%v)\nwant:\n%s (%v)", name, i, g, gErr, w, wErr)
			}
			gy, gErr := got[i].AsYAML()
			wy, wErr := want[i].AsYAML()
			if string(gy) != string(wy) || fmt.Sprint(gErr) != fmt.Sprint(wErr) {
				t.Fatalf("%s, object %d as YAML:\n%s (%v)\nwant:\n%s (%v)", name, i, gy, gErr, wy, wErr)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	all := append(append([]string(nil), trickyDocuments...), anchoredDocuments...)
	for round := range 400 {
		var b strings.Builder
		for i := range 1 + rng.IntN(6) {
			writeDocument(&b, rng, all, i)
		}
		same(t, fmt.Sprintf("round %d", round), []byte(b.String()))
	}
	files := 0
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "node_modules") {
			if err == nil {
				err = filepath.SkipDir
			}
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// A YAML bomb is refused before any parse.
		if checkAliases(data) == nil {
			same(t, path, data)
			files++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Errorf("compared %d YAML files of the repository, expected more", files)
	}
}
