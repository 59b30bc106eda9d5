package pipeline

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestPatchesNamedForTheObjectsTheyTarget(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("base/kustomization.yaml", "resources: [app.yaml]\npatchesStrategicMerge:\n  - base-patch.yaml\n")
	write("base/app.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n")
	write("base/base-patch.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n")
	write("comp/kustomization.yaml", `kind: Component
patches:
  - target: {labelSelector: "tier=web"}
    patch: |-
      - op: add
        path: /metadata/annotations
        value: {x: y}
`)
	write("prod/kustomization.yaml", `resources: [../base]
components: [../comp]
namePrefix: prod-
patchesJson6902:
  - target: {group: apps, version: v1, kind: Deployment, name: "web|api"}
    path: json.yaml
patches:
  - path: smp.yaml
`)
	write("prod/smp.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {c: d}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n")
	write("prod/json.yaml", "- op: replace\n  path: /spec/replicas\n  value: 2\n")

	p := &patches{path: filepath.Join(dir, "prod"), workDir: dir}
	for _, c := range []struct {
		group, kind, name string
		labels            map[string]string
		want              []string
	}{
		{"", "ConfigMap", "prod-settings", nil, []string{"base/base-patch.yaml:1", "prod/smp.yaml:1"}},
		{"apps", "Deployment", "prod-api", map[string]string{"tier": "web"}, []string{"comp/kustomization.yaml:3", "prod/json.yaml:1"}},
		{"", "Service", "prod-web", nil, []string{"prod/smp.yaml:1"}},
		{"", "Secret", "prod-web", nil, nil},
		{"apps", "Deployment", "prod-db", nil, nil},
	} {
		if got := p.of(c.group, c.kind, "", c.name, c.labels); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s/%s: %v, want %v", c.kind, c.name, got, c.want)
		}
	}
}
