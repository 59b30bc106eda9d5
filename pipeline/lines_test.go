package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// A problem's field is found on its line whichever way its path is
// written: the API server's, structured-merge-diff's (a list entry by its
// keys, a set's value) or the OpenAPI validator's (an index after a dot).
func TestFieldLine(t *testing.T) {
	dir := t.TempDir()
	doc := `apiVersion: v1
kind: ConfigMap
metadata: {name: other}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app.kubernetes.io/name: web
spec:
  replicas: -1
  template:
    spec:
      containers:
      - name: sidecar
        image: proxy
      - name: web
        image: nginx
        args:
        - --port
        - "8080"
        resources:
          limits:
            cpu: abc
`
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	l := &lines{workDir: dir}
	start := l.lineOf("app.yaml", "Deployment", "web")
	if start != 5 {
		t.Fatalf("Deployment starts on %d, want 5", start)
	}
	for path, want := range map[string]int{
		"spec.replicas": 12,
		"spec.template.spec.containers[1].resources.limits[cpu]":     25,
		`.spec.template.spec.containers[name="web"].image`:           19,
		"spec.template.spec.containers.1.image":                      19,
		`spec.template.spec.containers[name="web"].args[="8080"]`:    22,
		"metadata.labels[app.kubernetes.io/name]":                    10,
		"spec.template.spec.containers[0].securityContext.runAsUser": 16, // added by the build: its nearest field the file holds
		"spec.strategy": 11,
		"":              5,
		`spec.template.spec.containers[name="db"].image`: 15,
	} {
		if got := l.fieldLine("app.yaml", start, path); got != want {
			t.Errorf("%q: line %d, want %d", path, got, want)
		}
	}
	if got := l.fieldLine("app.yaml", 99, "spec.replicas"); got != 99 {
		t.Errorf("no document starting there: line %d, want the object's", got)
	}
}

// A thousand objects of one file that fail at the same moment (a run
// cancelled in its apply) read and index the file once, not once each:
// each read of a large file is a parse, and a thousand at once held a
// cancelled run up for minutes.
func TestLinesReadEachFileOnce(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "set.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int32
	defer func(orig func(func(string) ([]byte, error), string) []docStart) { readDocs = orig }(readDocs)
	readDocs = func(read func(string) ([]byte, error), path string) []docStart {
		reads.Add(1)
		time.Sleep(20 * time.Millisecond) // a large file's parse
		return readDocStarts(read, path)
	}
	l := &lines{workDir: dir}
	var wg sync.WaitGroup
	lines := make([]int, 1000)
	for i := range lines {
		wg.Go(func() { lines[i] = l.lineOf("set.yaml", "ConfigMap", fmt.Sprintf("cm-%d", i%50)) })
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("the file was read %d times, want once", n)
	}
	if lines[49] == 0 || lines[0] != 2 {
		t.Errorf("lines of cm-0 and cm-49: %d, %d", lines[0], lines[49])
	}
}

// A fetched chart's file is named by its reference (oci://…): no file of
// the workspace, even one a pull request put at that relative path
// (oci:/…), gives its lines.
func TestAFetchedChartsSourceIsReadFromNoFile(t *testing.T) {
	dir := t.TempDir()
	source := "oci://ghcr.io/acme/shop:1.2.0/templates/deployment.yaml"
	planted := filepath.Join(dir, "oci:", "ghcr.io", "acme", "shop:1.2.0", "templates", "deployment.yaml")
	if err := os.MkdirAll(filepath.Dir(planted), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "# planted\n\n\n\n\n\n\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-shop\nspec:\n  replicas: 1\n"
	if err := os.WriteFile(planted, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	l := &lines{workDir: dir}
	if n := l.lineOf(source, "Deployment", "web-shop"); n != 0 {
		t.Errorf("line %d read from the workspace's %s", n, planted)
	}
	// The planted file holds spec.replicas on line 13; what the object
	// starts on is all that is known.
	if n := l.fieldLine(source, 8, "spec.replicas"); n == 13 {
		t.Errorf("field line %d read from the workspace's %s", n, planted)
	}
}
