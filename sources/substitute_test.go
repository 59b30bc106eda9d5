package sources

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Substitution reads each value on its own: a default cannot reach from
// one value to the next. Before, "${Y:-'" in the namespace and "x'}" in a
// Secret's data were one reference over the object's YAML, and the
// Secret's data between them (a decrypted PIN) became the namespace,
// quoted in the error that refused it. A value that is one reference
// takes the type of its value, as Flux's substitution of the text gives
// it.
func TestSubstitutionStaysInsideEachValue(t *testing.T) {
	t.Parallel()
	spliced := &Object{Unstructured: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "db", "namespace": "${Y:-'"},
		"stringData": map[string]any{"pin": "482913", "zz": "x'}"},
	}}}
	typed := &Object{Unstructured: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"env": "${ENV:=dev}", "count": "n${REPLICAS}"}},
		"spec": map[string]any{"replicas": "${REPLICAS}", "paused": "${PAUSED:-false}", "ratio": "${RATIO:-0.5}",
			"note": "${REPLICAS} replicas", "raw": "${MAP:-{a: b}}", "list": []any{"${ENV:-x}", int64(2)}},
	}}}
	if err := substituteAll([]*Object{spliced, typed}, map[string]string{"X": "1", "REPLICAS": "3"}); err != nil {
		t.Fatal(err)
	}
	if ns := spliced.GetNamespace(); ns != "${Y:-'" || strings.Contains(ns, "482913") {
		t.Errorf("namespace %q", ns)
	}
	if data := spliced.Object["stringData"].(map[string]any); data["pin"] != "482913" || data["zz"] != "x'}" {
		t.Errorf("stringData %v", data)
	}
	spec := typed.Object["spec"].(map[string]any)
	for k, want := range map[string]any{"replicas": int64(3), "paused": false, "ratio": 0.5, "note": "3 replicas", "raw": "{a: b}"} {
		if spec[k] != want {
			t.Errorf("spec.%s: %#v, want %#v", k, spec[k], want)
		}
	}
	if l := spec["list"].([]any); l[0] != "dev" && l[0] != "x" {
		t.Errorf("list %#v", l)
	}
	if labels := typed.GetLabels(); labels["env"] != "dev" || labels["count"] != "n3" {
		t.Errorf("labels %v", labels)
	}
}

// A value that is one reference takes a number's type only when the
// number prints back as the value's text: a secret-named variable's
// 000000000042 or 987654321.000 stayed a number that printed as 42 or
// 9.87654321e+08, which its mask no longer matched.
func TestSubstitutionKeepsTheValuesText(t *testing.T) {
	t.Parallel()
	o := &Object{Unstructured: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"},
		"data": map[string]any{"pin": "${PIN_TOKEN}", "f": "${F_SECRET}", "n": "${N}", "r": "${R}", "plus": "${PLUS}", "e": "${E}", "big": "${API_TOKEN}", "tiny": "${TINY_SECRET}"},
	}}}
	vars := map[string]string{"PIN_TOKEN": "000000000042", "F_SECRET": "987654321.000", "N": "42", "R": "0.25", "PLUS": "+7", "E": "1e3",
		"API_TOKEN": "100000000000000000000", "TINY_SECRET": "0.00000123456789"}
	if err := substituteAll([]*Object{o}, vars); err != nil {
		t.Fatal(err)
	}
	data := o.Object["data"].(map[string]any)
	for k, want := range map[string]any{"pin": "000000000042", "f": "987654321.000", "n": int64(42), "r": 0.25, "plus": "+7", "e": "1e3", "big": "100000000000000000000", "tiny": "0.00000123456789"} {
		if data[k] != want {
			t.Errorf("data.%s: %#v, want %#v", k, data[k], want)
		}
	}
}
