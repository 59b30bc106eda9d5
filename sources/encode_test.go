package sources

import (
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// EncodeYAML gives the bytes of sigs.k8s.io/yaml.Marshal for every value
// an object can hold: the numbers at the edges of each integer type and
// of JSON's exponent form, strings YAML would read as something else,
// strings that are not UTF-8, and random trees of all of them.
func TestEncodeYAMLIsMarshal(t *testing.T) {
	edges := []any{
		nil, true, false, int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64), 7,
		0.0, math.Copysign(0, -1), 0.5, -2.25, 1.0, 1e6, 123456789.5, 1e-6, 1e-7, 1e20, 1e21, 1.5e21, -1e21,
		math.MaxInt64, float64(math.MaxInt64) * 1.5, float64(math.MaxUint64), 3e300, math.SmallestNonzeroFloat64,
		"", "plain", "true", "null", "~", "0x1F", "1e3", "012", "1_000", ":colon", "- dash", "#hash", "a: b",
		"multi\nline\n", "trailing space ", " leading", "tab\there", "quote'\"", "\x00nul", "\u2028sep",
		"é ü 漢字 🙂", "\xff\xfe not utf-8", "{\"json\": [1, 2]}", strings.Repeat("long ", 200),
	}
	check := func(t *testing.T, name string, fields map[string]any) {
		t.Helper()
		want, wantErr := yaml.Marshal(fields)
		got, err := EncodeYAML(fields)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%s: EncodeYAML gives\n%s(%v)\nyaml.Marshal gives\n%s(%v)", name, got, err, want, wantErr)
		}
	}
	for i, v := range edges {
		check(t, fmt.Sprintf("edge %d (%#v)", i, v), map[string]any{"v": v, "list": []any{v}, fmt.Sprint(v): "key"})
	}
	check(t, "NaN", map[string]any{"v": math.NaN()})
	check(t, "a type Unstructured does not hold", map[string]any{"v": []string{"a"}, "w": int32(3)})

	// Keys that start with digits and go on with letters ("1e3" beside
	// "108" and "2"), or hold runs of more than 18 digits, are left out:
	// yaml.Marshal's key order is not transitive for them (it compares
	// digit runs as numbers, letters as letters, a digit before a letter
	// as greater, and int64s that overflow), so it orders them differently
	// from one call to the next, and no encoder can match it.
	keys := []string{"", "a", "b10", "b9", "true", "- dash", "é", "multi\nline", "z z", "10", "012", "x0x1F"}
	rng := rand.New(rand.NewPCG(1, 2))
	var tree func(depth int) any
	tree = func(depth int) any {
		switch n := rng.IntN(10); {
		case depth > 3 || n < 5:
			return edges[rng.IntN(len(edges))]
		case n < 8:
			m := map[string]any{}
			for range rng.IntN(5) {
				m[keys[rng.IntN(len(keys))]+fmt.Sprint(rng.IntN(12))] = tree(depth + 1)
			}
			return m
		default:
			l := make([]any, rng.IntN(4))
			for i := range l {
				l[i] = tree(depth + 1)
			}
			return l
		}
	}
	for i := range 3000 {
		check(t, fmt.Sprintf("tree %d", i), map[string]any{"root": tree(0), "k10": 1, "k9": 2})
	}

	// Every document of the repository's test data, as parsed for a build.
	docs := 0
	_ = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, "testdata") || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for j, doc := range bytes.Split(raw, []byte("\n---")) {
			var fields map[string]any
			if yaml.Unmarshal(doc, &fields) != nil || fields == nil {
				continue
			}
			docs++
			check(t, fmt.Sprintf("%s document %d", path, j), fields)
		}
		return nil
	})
	if docs < 200 {
		t.Fatalf("only %d test documents found: the comparison covers too little", docs)
	}
	t.Logf("%d test documents encoded as yaml.Marshal encodes them", docs)
}

func BenchmarkEncodeYAML(b *testing.B) {
	fields := map[string]any{}
	if err := yaml.Unmarshal([]byte(benchDoc), &fields); err != nil {
		b.Fatal(err)
	}
	b.Run("EncodeYAML", func(b *testing.B) {
		for b.Loop() {
			if _, err := EncodeYAML(fields); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("yaml.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := yaml.Marshal(fields); err != nil {
				b.Fatal(err)
			}
		}
	})
}

var benchDoc = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: frontend, release: bench}
spec:
  replicas: 3
  template:
    spec:
      containers:
      - name: web
        image: registry.example/web:1.2.3
        args: ["--port=8080", "--metrics", "--log-level=info"]
        resources: {limits: {cpu: 500m, memory: 256Mi}, requests: {cpu: 100m, memory: 64Mi}}
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 10, timeoutSeconds: 1.5}
      tolerations: [{key: a, operator: Exists, effect: NoSchedule}]
  dashboard: "{\"panels\": [{\"id\": 1, \"title\": \"requests\", \"targets\": [{\"expr\": \"sum(rate(http_requests_total[5m]))\"}]}]}"
`
