package yamlenc

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// A map that holds itself (sprig's set can make one) is not followed for
// ever: it fails as yaml.Marshal fails, which a chart's toYaml writes as
// nothing; a deep value that is not a cycle is written as Marshal
// writes it.
func TestMarshalOfACycleFailsAsYAMLMarshal(t *testing.T) {
	cycle := map[string]any{"a": 1}
	cycle["self"] = cycle
	if _, err := Marshal(cycle); err == nil {
		t.Error("a map that holds itself was written")
	}
	deep := any("leaf")
	for range 1500 {
		deep = map[string]any{"k": deep}
	}
	got, err := Marshal(deep)
	want, werr := yaml.Marshal(deep)
	if string(got) != string(want) || (err == nil) != (werr == nil) {
		t.Errorf("1500 levels: %d bytes, %v; yaml.Marshal: %d bytes, %v", len(got), err, len(want), werr)
	}
}
