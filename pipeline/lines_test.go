package pipeline

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLineOfEachObject(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("app.yaml", `# the app
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
---

apiVersion: v1
kind: Service
metadata:
  name: web
`)
	write("kustomization.yaml", `resources: [app.yaml]
namePrefix: prod-
configMapGenerator:
  - name: env
    literals: [A=1]
secretGenerator:
  - name: creds
    literals: [B=2]
`)
	l := &lines{workDir: dir}
	for _, c := range []struct {
		source, kind, name string
		want               int
	}{
		{"app.yaml", "ConfigMap", "settings", 2},
		{"app.yaml", "Deployment", "web", 7},
		{"app.yaml", "Service", "web", 12},
		{"app.yaml", "Service", "prod-web", 12},          // namePrefix
		{"app.yaml", "ConfigMap", "prod-settings-x1", 2}, // renamed twice
		{"kustomization.yaml", "ConfigMap", "prod-env-5h2tt8gk8f", 4},
		{"kustomization.yaml", "Secret", "prod-creds-7fk6c5m6bb", 7},
		{"app.yaml", "Ingress", "web", 0}, // not there
		{filepath.Join(dir, "app.yaml"), "Deployment", "web", 7},
		{"missing.yaml", "Deployment", "web", 0},
	} {
		if got := l.lineOf(c.source, c.kind, c.name); got != c.want {
			t.Errorf("%s %s/%s: line %d, want %d", c.source, c.kind, c.name, got, c.want)
		}
	}
}
