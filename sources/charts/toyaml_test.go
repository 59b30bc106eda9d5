package charts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// toYaml writes what Helm's toYaml writes, byte for byte, for every kind
// of value a template can hand it: values of each YAML type and at the
// edges of JSON's numbers, the values' own named map type, Helm's
// structs (.Chart, .Release, .Capabilities), sprig's lists and dicts,
// typed slices, and values JSON cannot write (NaN, infinity), which
// both write as nothing. Checked against the helm CLI of the same
// version, with set lines (which give int64s) too.
func TestToYamlIsHelms(t *testing.T) {
	t.Parallel()
	helm := filepath.Join("..", "..", "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Skip("no bin/helm: make tools builds it")
	}
	exprs := []string{
		".Values", ".Values.numbers", ".Values.strings", ".Values.nested", ".Values.empty", ".Values.none", `(float64 "+Inf")`,
		".Values.numbers.big", ".Values.strings.multi", ".Chart", ".Release", ".Capabilities.KubeVersion",
		".Capabilities.APIVersions", `(list 1 "two" 3.5 nil true)`, `(dict "b" 1.5 "a" (list) "c" (dict))`,
		`(splitList "," "a,b,c")`, `(float64 "NaN")`, `3`, `"str"`, `nil`, `(int64 7)`, `(now | date "2006")`,
		`.Values.set`, `(fromYaml "a: [1, {b: 2}]")`, `(until 3)`, `(toDecimal "0777")`, `(b64enc "x")`,
	}
	var tmpl strings.Builder
	tmpl.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: toyaml\ndata:\n")
	for i, e := range exprs {
		tmpl.WriteString("  v" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + ": |-\n    {{- toYaml " + e + " | nindent 4 }}\n")
	}
	dir := writeChart(t, map[string]string{
		"templates/cm.yaml": tmpl.String(),
		"values.yaml": `numbers: {zero: 0, half: 0.5, neg: -2.25, e6: 1e6, e20: 1e20, e21: 1e21, big: 12345678901234567890, tiny: 1e-7, negzero: -0.0, max: 9223372036854775807}
strings: {t: "true", n: "null", oct: "012", hex: "0x1F", colon: "a: b", dash: "- x", hash: "#h", multi: "line one\nline two\n", sp: " lead", uni: "é 漢字 🙂", tab: "a\tb", q: "it's \"q\"", html: "<a&b>"}
nested: {list: [1, [2, [3]], {k: v}], map: {z: 1, a: {b: {c: []}}}, "key with space": x, "1e3": y, "108": z}
empty: {}
none: null
`,
	})
	set := []string{"set.int=42", "set.neg=-7", "set.str=abc", "set.b=true", "set.list={1,2,3}", "set.f=1.5"}
	r, err := Render(context.Background(), Options{Dir: dir, ReleaseName: "rel", Namespace: "ns", KubeVersion: "v1.37.0", Set: set})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"template", "rel", dir, "--namespace", "ns", "--kube-version", "v1.37.0"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helm, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %v: %v", args, err)
	}
	got := helmTemplate(r)
	if got != string(want) {
		t.Errorf("gantry's toYaml differs from helm template's:\n%s", lineDiff(got, string(want)))
	}
	if !strings.Contains(got, "line two") || !strings.Contains(got, "key with space") || !strings.Contains(got, "int: 42") {
		t.Errorf("the rendering lacks values it toYamls:\n%s", got)
	}
}

// lineDiff is the first lines where a and b differ, with each side's.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: gantry %q\n         helm   %q", i+1, x, y)
		}
	}
	return ""
}
