package diffs

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (run with -update to accept):\n%s", name, path, got)
	}
}

const liveDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: apps
  uid: 0a1b
  resourceVersion: "812"
  generation: 4
  creationTimestamp: "2026-01-01T00:00:00Z"
  labels: {app: web}
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"secret":"do not show"}'
  managedFields:
    - manager: gantry
      operation: Apply
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: web
          image: nginx:1.27
status:
  readyReplicas: 2
`

func TestConfiguredObject(t *testing.T) {
	t.Parallel()
	desired := strings.Replace(strings.Replace(liveDeployment, "replicas: 2", "replicas: 3", 1), "nginx:1.27", "nginx:1.28", 1)
	d, err := Object("Deployment/apps/web", obj(t, liveDeployment), obj(t, desired))
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"managedFields", "resourceVersion", "uid:", "generation", "creationTimestamp", "last-applied", "do not show", "readyReplicas"} {
		if strings.Contains(d, gone) {
			t.Errorf("diff shows %q", gone)
		}
	}
	if a, r := Lines(d); a != 2 || r != 2 {
		t.Errorf("lines +%d -%d, want +2 -2", a, r)
	}
	golden(t, "configured", d)
}

func TestCreatedAndDeleted(t *testing.T) {
	t.Parallel()
	created, err := Object("Deployment/apps/web", nil, obj(t, liveDeployment))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "created", created)
	deleted, err := Object("Deployment/apps/web", obj(t, liveDeployment), nil)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "deleted", deleted)
}

func TestUnchangedIsEmpty(t *testing.T) {
	t.Parallel()
	// Only server-managed fields differ.
	other := strings.Replace(liveDeployment, `resourceVersion: "812"`, `resourceVersion: "900"`, 1)
	d, err := Object("Deployment/apps/web", obj(t, liveDeployment), obj(t, other))
	if err != nil || d != "" {
		t.Errorf("diff %q, %v; want empty", d, err)
	}
}

func TestSecretValuesNeverShown(t *testing.T) {
	t.Parallel()
	live := `apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: apps}
data:
  same: Y2FuYXJ5LXNhbWU=
  rotated: Y2FuYXJ5LW9sZA==
  dropped: Y2FuYXJ5LWRyb3A=
`
	desired := `apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: apps}
data:
  same: Y2FuYXJ5LXNhbWU=
  rotated: Y2FuYXJ5LW5ldw==
stringData:
  added: canary-plain-text
`
	d, err := Object("Secret/apps/creds", obj(t, live), obj(t, desired))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"Y2FuYXJ5", "canary"} {
		if strings.Contains(d, leak) {
			t.Errorf("diff shows a secret value (%s):\n%s", leak, d)
		}
	}
	for _, want := range []string{"same: '*** (unchanged)'", "+  rotated: '*** (changed)'", "-  dropped: '***'", "+  added: '***'"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	golden(t, "secret", d)

	// A Secret whose values are all unchanged has no diff; a new one is
	// listed with masked values only.
	if d, _ := Object("Secret/apps/creds", obj(t, live), obj(t, live)); d != "" {
		t.Errorf("unchanged Secret diff: %q", d)
	}
	created, _ := Object("Secret/apps/creds", nil, obj(t, desired))
	if strings.Contains(created, "Y2FuYXJ5") || strings.Contains(created, "canary") || !strings.Contains(created, "+  added: '***'") {
		t.Errorf("created Secret diff:\n%s", created)
	}
}

// render must write what sigs.k8s.io/yaml writes, which the reports showed
// before it skipped the JSON round trip.
func TestRenderMatchesSigsYAML(t *testing.T) {
	u := obj(t, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, "yes": "no", octal: "0123", empty: ""}
  annotations: {multi: "line one\nline two\n", colon: "a: b", hash: "# c", star: "*x", num: "12"}
spec:
  replicas: 3
  ratio: 0.25
  big: 9007199254740993
  exp: 1.5e300
  nothing: null
  flags: [true, false, "true", "null", "~", ""]
  template:
    spec:
      containers:
      - name: c
        image: nginx:1.27
        args: ["--x=1", "- dash", "{brace}", "[bracket]", "  padded  ", "tab\there", "ünïcödé"]
        env: []
      nested: {}
`)
	got, err := render(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	want, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("render differs from sigs.k8s.io/yaml:\n--- got\n%s\n--- want\n%s", got, want)
	}
}

func BenchmarkObjectCreated(b *testing.B) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-0001","namespace":"ns","labels":{"a":"b","c":"d"}},"data":{"key":"v1","payload":"` + strings.Repeat("x", 200) + `"}}`)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Object("ConfigMap/ns/cm-0001", nil, u); err != nil {
			b.Fatal(err)
		}
	}
}

// A creation's or deletion's diff is written without udiff's search for
// common lines, and reads exactly as udiff writes it.
func TestWholeObjectDiffAsUdiffWritesIt(t *testing.T) {
	for _, text := range []string{"a: 1\n", "a: 1\nb: 2\n", "a: 1\nb:\n  - x\n  - y\n", "no newline", "a: 1\nlast", "\n", "a\n\nb\n"} {
		for _, deleted := range []bool{false, true} {
			before, after := "", text
			if deleted {
				before, after = text, ""
			}
			if got, want := whole("live/x", "desired/x", before, after), udiff.Unified("live/x", "desired/x", before, after); got != want {
				t.Errorf("%q → %q:\ngot  %q\nwant %q", before, after, got, want)
			}
		}
	}
}
