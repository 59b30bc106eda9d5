package charts

import (
	"context"
	"strings"
	"testing"
)

// chartBomb is a ConfigMap whose nested aliases expand to 9^9 strings.
const chartBomb = `apiVersion: v1
kind: ConfigMap
metadata:
  name: bomb
data:
  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

const refusal = "its YAML aliases expand out of proportion"

// Every YAML the charts package reads passes the bounded parser: a
// values file, a kustomization, helm's output as kustomize's generator
// reads it, a values file merged with valuesInline.
func TestYAMLBombsRefusedByTheBoundedParser(t *testing.T) {
	t.Parallel()
	dir := writeChart(t, map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
	_, err := Render(context.Background(), Options{Dir: dir, ReleaseName: "x", Namespace: "x", Values: []Values{{Name: "bomb.yaml", Content: []byte(chartBomb)}}})
	if err == nil || !strings.Contains(err.Error(), "values bomb.yaml: "+refusal) {
		t.Errorf("values file: %v", err)
	}
	if _, err := kustomizeRead([]byte(chartBomb)); err == nil || !strings.Contains(err.Error(), "reading helm's output: "+refusal) {
		t.Errorf("helm's output: %v", err)
	}
	if _, err := mergeInline([]byte(chartBomb), map[string]any{"a": 1}, "merge"); err == nil || !strings.Contains(err.Error(), "the values file: "+refusal) {
		t.Errorf("valuesInline merged with a values file: %v", err)
	}
	kustomization := "helmCharts:\n- name: c\n" + strings.SplitN(chartBomb, "data:\n", 2)[1]
	_, _, _, err = Kustomization(context.Background(), "/ws/kustomization.yaml", []byte(kustomization), nil, KustomizeOptions{})
	if err == nil || !strings.Contains(err.Error(), "kustomization.yaml") || !strings.Contains(err.Error(), refusal) {
		t.Errorf("kustomization: %v", err)
	}
}
