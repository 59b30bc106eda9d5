package sources

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/api/provider"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func summary(objects []*Object) []string {
	var out []string
	for _, o := range objects {
		out = append(out, o.Ref()+" <- "+o.Source)
	}
	sort.Strings(out)
	return out
}

func TestBuildPlainFolderKeepsOrigins(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{
		"app/a.yaml":                  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"app/sub/b.yml":               "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
		"app/README.md":               "not a manifest",
		"app/.hidden/x.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hidden\n",
		"app/kust/kustomization.yaml": "resources: [d.yaml]\nnamePrefix: k-\n",
		"app/kust/d.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n",
	})
	objects, err := Build(BuildOptions{Path: filepath.Join(root, "app"), WorkDir: root})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ConfigMap/a <- app/a.yaml",
		"ConfigMap/b <- app/sub/b.yml",
		"ConfigMap/c <- app/sub/b.yml",
		"ConfigMap/k-d <- app/kust/d.yaml",
	}
	if diff := cmp.Diff(want, summary(objects)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	for _, o := range objects {
		if _, ok := o.GetAnnotations()[originAnnotation]; ok {
			t.Errorf("%s still carries the origin annotation", o.Ref())
		}
	}
	if _, err := os.Stat(filepath.Join(root, "app", "kustomization.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the build wrote a kustomization into the user's folder")
	}
}

func TestBuildOverlayTargetNamespaceAndPatches(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{
		"base/kustomization.yaml":    "resources: [deploy.yaml]\n",
		"base/deploy.yaml":           "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: nginx}]}\n",
		"overlay/kustomization.yaml": "resources: [../base]\nconfigMapGenerator:\n  - name: settings\n    literals: [a=b]\n",
		"replicas.yaml":              "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n",
	})
	objects, err := Build(BuildOptions{
		Path:            filepath.Join(root, "overlay"),
		WorkDir:         root,
		TargetNamespace: "prod",
		Patches:         []string{filepath.Join(root, "replicas.yaml")},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := summary(objects)
	if len(got) != 2 || !strings.HasPrefix(got[0], "ConfigMap/prod/settings-") || !strings.HasSuffix(got[0], "<- overlay/kustomization.yaml") || got[1] != "Deployment.apps/prod/web <- base/deploy.yaml" {
		t.Errorf("objects: %q", got)
	}
	for _, o := range objects {
		if o.GetKind() == "Deployment" {
			if r, _, _ := nestedInt(o.Object, "spec", "replicas"); r != 3 {
				t.Errorf("replicas %d, want 3 from the patch", r)
			}
		}
	}
}

func nestedInt(m map[string]any, path ...string) (int64, bool, error) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = mm[p]
	}
	switch v := cur.(type) {
	case int64:
		return v, true, nil
	case float64:
		return int64(v), true, nil
	case int:
		return int64(v), true, nil
	}
	return 0, false, nil
}

func TestBuildErrorsNameTheFile(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"malformed yaml": {map[string]string{"app/bad.yaml": "kind: [\n"}, "bad.yaml"},
		"a key twice, in a folder": {map[string]string{
			"app/a.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
			"app/dup.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\ndata:\n  k: one\n  k: two\n",
		}, "app/dup.yaml: yaml: unmarshal errors"},
		"a key twice, in a kustomization": {map[string]string{
			"app/kustomization.yaml": "resources: [a.yaml, dup.yaml]\n",
			"app/a.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
			"app/dup.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\ndata:\n  k: one\n  k: two\n",
		}, "app/dup.yaml: yaml: unmarshal errors"},
		"missing resource":            {map[string]string{"app/kustomization.yaml": "resources: [gone.yaml]\n"}, "gone.yaml"},
		"unknown kustomization kind":  {map[string]string{"app/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomisation\nresources: [a.yaml]\n"}, "kind should be Kustomization or Component"},
		"unknown kustomization field": {map[string]string{"app/kustomization.yaml": "resourcez: [a.yaml]\n"}, `unknown field "resourcez"`},
		"unknown generator kind": {map[string]string{
			"app/kustomization.yaml": "generators: [gen.yaml]\n",
			"app/gen.yaml":           "apiVersion: builtin\nkind: NoSuchGenerator\nmetadata:\n  name: g\n",
		}, "NoSuchGenerator"},
		"exec plugin": {map[string]string{
			"app/kustomization.yaml": "generators: [gen.yaml]\n",
			"app/gen.yaml":           "apiVersion: x/v1\nkind: Gen\nmetadata:\n  name: g\n  annotations:\n    config.kubernetes.io/function: |\n      exec:\n        path: ./gen.sh\n",
		}, "plugin"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			write(t, root, tc.files)
			_, err := Build(BuildOptions{Path: filepath.Join(root, "app"), WorkDir: root})
			if err == nil {
				t.Fatal("no error")
			}
			var be *BuildError
			if !errors.As(err, &be) {
				t.Errorf("%T is not a *BuildError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
			if strings.Contains(err.Error(), os.TempDir()+"/gantry-build-") {
				t.Errorf("error leaks the temporary build dir: %q", err)
			}
		})
	}
}

func TestSubstitute(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want string
		missing  []string
	}{
		{"a: ${X}", "a: 1", nil},
		{"a: ${Y:=dflt}", "a: dflt", nil},
		{"a: ${X:=dflt}", "a: 1", nil},
		{"a: ${Y:-d2}", "a: d2", nil},
		{"a: $${X}", "a: ${X}", nil},
		{"a: $X", "a: $X", nil},
		{"a: ${B} ${A} ${B}", "a: ${B} ${A} ${B}", []string{"A", "B"}},
	}
	for _, tc := range cases {
		got, missing, err := substitute(tc.in, map[string]string{"X": "1"})
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
		}
		if got != tc.want || !cmp.Equal(missing, tc.missing) {
			t.Errorf("%q: got %q missing %v, want %q missing %v", tc.in, got, missing, tc.want, tc.missing)
		}
	}
}

func TestSubstituteStrictNamesVariableNeverValue(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{
		"app/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: ${PASSWORD}\n  b: ${MISSING}\n",
		"app/off.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: off\n  annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  a: ${MISSING}\n",
	})
	_, err := Build(BuildOptions{Path: filepath.Join(root, "app"), WorkDir: root, Substitute: map[string]string{"PASSWORD": "hunter2-canary"}})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, "app/cm.yaml: ConfigMap/c: variable ${MISSING} not set") {
		t.Errorf("error: %s", msg)
	}
	if strings.Contains(msg, "off") || strings.Contains(msg, "hunter2-canary") {
		t.Errorf("error mentions the disabled object or a value: %s", msg)
	}
}

// A plain folder is read without kustomize's accumulation, so it must give
// exactly what kustomize gives for a kustomization listing the same files.
func TestBuildPlainFolderMatchesKustomize(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"a.yaml": "# a comment\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: anchors\n  labels: &l {app: x}\n  annotations: *l\ndata:\n  octal: \"0123\"\n  yes: \"yes\"\n  empty: \"\"\n",
		"b.json": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"json"},"data":{"big":"12345678901234567890"}}`,
		"c.yaml": "apiVersion: v1\nkind: ConfigMapList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: from-list\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: from-list-2\n",
		"d.yml":  "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: other\nspec:\n  replicas: 2\n  progressDeadlineSeconds: 1.5e2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: c, image: nginx, args: [null, \"1\", 2, true]}]\n",
		"e.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-local\n  annotations:\n    config.kubernetes.io/local-config: \"false\"\n",
	}
	root := t.TempDir()
	plain, listed := filepath.Join(root, "plain"), filepath.Join(root, "listed")
	for name, content := range files {
		write(t, plain, map[string]string{name: content})
		write(t, listed, map[string]string{name: content})
	}
	write(t, listed, map[string]string{"kustomization.yaml": "resources: [a.yaml, b.json, c.yaml, d.yml, e.yaml]\n"})

	got, err := Build(BuildOptions{Path: plain, WorkDir: plain})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Build(BuildOptions{Path: listed, WorkDir: listed})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Errorf("%d objects, want 6: %v", len(got), summary(got))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plain folder differs from kustomize (-kustomize +plain):\n%s", diff)
	}
}

func TestBuildPlainFolderRefusesDuplicates(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{
		"app/a.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\n",
		"app/sub/b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\n  namespace: default\n",
	})
	_, err := Build(BuildOptions{Path: filepath.Join(root, "app"), WorkDir: root})
	if err == nil || !strings.Contains(err.Error(), "app/sub/b.yaml: ConfigMap/same is defined twice, also in app/a.yaml") {
		t.Errorf("error: %v", err)
	}
}

func TestBuildEmptyPlainFolder(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{"app/notes.md": "x", "app/empty.yaml": "# nothing\n"})
	objects, err := Build(BuildOptions{Path: filepath.Join(root, "app"), WorkDir: root})
	if err != nil || len(objects) != 0 {
		t.Errorf("objects %v, error %v", summary(objects), err)
	}
}

// Origin tracking is added in memory, through a symbolic link too, and
// next to whatever buildMetadata the user's kustomization has.
func TestBuildKustomizationOriginsInMemory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	kust := "resources: [a.yaml]\nbuildMetadata: [managedByLabel]\n"
	write(t, root, map[string]string{
		"real/app/kustomization.yaml": kust,
		"real/app/a.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
	})
	if err := os.Symlink(filepath.Join(root, "real", "app"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	objects, err := Build(BuildOptions{Path: filepath.Join(root, "link"), WorkDir: root})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ConfigMap/a <- real/app/a.yaml"}, summary(objects)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if _, ok := objects[0].GetLabels()["app.kubernetes.io/managed-by"]; !ok {
		t.Errorf("the user's buildMetadata was lost: labels %v", objects[0].GetLabels())
	}
	if _, ok := objects[0].GetAnnotations()[originAnnotation]; ok {
		t.Errorf("the origin annotation was left on the object")
	}
	if b, _ := os.ReadFile(filepath.Join(root, "real", "app", "kustomization.yaml")); string(b) != kust {
		t.Errorf("the user's kustomization was changed:\n%s", b)
	}
}

// go test ./pipeline -run XXX -bench BuildPlain -benchmem
func BenchmarkBuildPlain1000(b *testing.B) {
	dir := b.TempDir()
	var s strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&s, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%04d\n  namespace: bench\ndata:\n  key: v1\n  payload: %s\n", i, strings.Repeat("x", 200))
	}
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte(s.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Build(BuildOptions{Path: dir, WorkDir: dir}); err != nil {
			b.Fatal(err)
		}
	}
}

// nodeJSON must give what kyaml's RNode.MarshalJSON gives, which the build
// used before.
func TestNodeJSONMatchesKyaml(t *testing.T) {
	t.Parallel()
	docs := `apiVersion: v1
kind: ConfigMap
metadata:
  name: awkward
  labels: &l {app: x, "yes": "no"}
  annotations:
    <<: *l
    stamp: 2001-12-14
    stamped: 2001-12-14t21:59:43.10-05:00
data:
  octal: 0123
  hex: 0x1F
  big: 9223372036854775807
  bigger: 18446744073709551616
  float: 1.5e2
  half: 0.5
  yes11: yes
  null1: ~
  empty:
  tagged: !!str 42
  folded: >
    folded
    text
  literal: |
    keep
      indent
  list: [1, "1", 1.0, true, null]
---
apiVersion: v1
kind: List
items: []
`
	factory := provider.NewDefaultDepProvider().GetResourceFactory()
	resources, err := factory.SliceFromBytes([]byte(docs))
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range resources {
		want, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got, err := nodeJSON(res.YNode())
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", res.GetName(), got, want)
		}
	}
}

// A build without origins (what gantry build prints) gives the same
// objects, with no file; a failure found after kustomize still names the
// file, from a second build with them.
func TestBuildWithoutOriginsNamesTheFileOnFailure(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{
		"app/kustomization.yaml": "resources: [cm.yaml]\nimages: [{name: web, newTag: \"2\"}]\nnamePrefix: p-\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: ${A}\n",
	})
	opts := BuildOptions{Path: filepath.Join(root, "app"), WorkDir: root, Substitute: map[string]string{"A": "1"}}
	with, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoOrigins = true
	without, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(with) != 1 || len(without) != 1 || !reflect.DeepEqual(with[0].Object, without[0].Object) || without[0].Source != "" || with[0].Source != "app/cm.yaml" {
		t.Errorf("with origins %v (%q), without %v (%q)", with[0].Object, with[0].Source, without[0].Object, without[0].Source)
	}
	opts.Substitute = map[string]string{}
	_, err = Build(opts)
	if err == nil || !strings.Contains(err.Error(), "app/cm.yaml: ConfigMap/p-c: variable ${A} not set") {
		t.Errorf("error: %v", err)
	}
}

// One object written twice under two apiVersions is refused at build,
// naming both files, from a plain folder and from a kustomization.
func TestBuildRefusesOneObjectInTwoVersions(t *testing.T) {
	t.Parallel()
	v1 := "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  maxReplicas: 3\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
	v2 := "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  maxReplicas: 5\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
	for name, files := range map[string]map[string]string{
		"plain":         {"app/hpa-v1.yaml": v1, "app/hpa-v2.yaml": v2},
		"kustomization": {"app/kustomization.yaml": "resources: [hpa-v1.yaml, hpa-v2.yaml]\n", "app/hpa-v1.yaml": v1, "app/hpa-v2.yaml": v2},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := writeFiles(t, files)
			_, err := Build(BuildOptions{Path: filepath.Join(root, "app"), WorkDir: root, NoOrigins: true})
			var be *BuildError
			if !errors.As(err, &be) || be.File != "app/hpa-v2.yaml" || !strings.Contains(err.Error(), "is defined twice, also in app/hpa-v1.yaml") {
				t.Errorf("got %v, want a build error naming both files", err)
			}
		})
	}
}

// One Secret written once with its namespace and once without, which
// target-namespace then gives it, is one object: refused, naming both
// files and neither value.
func TestBuildRefusesOneObjectTwiceAfterTargetNamespace(t *testing.T) {
	t.Parallel()
	root := writeFiles(t, map[string]string{
		"app/kustomization.yaml": "resources: [a.yaml, b.yaml]\n",
		"app/a.yaml":             "apiVersion: v1\nkind: Secret\nmetadata:\n  name: same\nstringData: {password: canary-a-91f2}\n",
		"app/b.yaml":             "apiVersion: v1\nkind: Secret\nmetadata:\n  name: same\n  namespace: shop\nstringData: {password: canary-b-77c3}\n",
	})
	for _, noOrigins := range []bool{false, true} {
		_, err := Build(BuildOptions{Path: filepath.Join(root, "app"), WorkDir: root, TargetNamespace: "shop", NoOrigins: noOrigins})
		if err == nil || !strings.Contains(err.Error(), "Secret/shop/same is defined twice") ||
			!strings.Contains(err.Error(), "app/a.yaml") || !strings.Contains(err.Error(), "app/b.yaml") {
			t.Errorf("NoOrigins %v: got %v, want a build error naming both files", noOrigins, err)
		}
		// kustomize's own message prints both objects whole.
		if err != nil && (strings.Contains(err.Error(), "canary-a") || strings.Contains(err.Error(), "canary-b")) {
			t.Errorf("the error shows a Secret's value: %v", err)
		}
	}
}

// A patch that is a device (or a link to one) is refused before a byte
// is read from it, however the run was given it.
func TestBuildRefusesAPatchThatIsNoFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"})
	if err := os.Symlink("/dev/zero", filepath.Join(root, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, patch := range []string{"/dev/zero", filepath.Join(root, "zero.yaml")} {
		_, err := Build(BuildOptions{Path: filepath.Join(root, "app"), WorkDir: root, Patches: []string{patch}})
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("patch %s: %v, want a refusal", patch, err)
		}
	}
}

// A generator that reads the checkout's .git/config (where
// actions/checkout keeps its token) fails the build: nothing in a .git
// folder is read, though it lies inside the repository.
func TestBuildReadsNothingInAGitFolder(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{
		".git/config":              "[http]\n\textraheader = AUTHORIZATION: basic canary-checkout-token\n",
		"app/kustomization.yaml":   "configMapGenerator:\n- name: loot\n  files: [../.git/config]\n",
		"other/kustomization.yaml": "resources: [../.git/config]\n",
		"plain/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
	})
	for _, dir := range []string{"app", "other"} {
		_, err := Build(BuildOptions{Path: filepath.Join(root, dir), WorkDir: root})
		if err == nil || !strings.Contains(err.Error(), ".git folder") {
			t.Errorf("%s: %v, want a refusal naming the .git folder", dir, err)
		}
		if err != nil && strings.Contains(err.Error(), "canary") {
			t.Errorf("%s: the refusal prints what the file holds: %v", dir, err)
		}
	}
	if _, err := Build(BuildOptions{Path: filepath.Join(root, "plain"), WorkDir: root}); err != nil {
		t.Errorf("a plain folder beside .git: %v", err)
	}
}

// A name no Kubernetes object can have (a line break, a slash) is refused
// at build, naming the file: such names would otherwise reach logs and
// comments in offline previews, where no API server refuses them.
func TestNamesNoObjectCanHaveAreRefused(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"line break": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"a\\n::error::x\"\n",
		"slash":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a/b\n",
		"namespace":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: \"Shop`\"\n",
		"kind":       "apiVersion: v1\nkind: \"Config\\nMap\"\nmetadata:\n  name: a\n",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Build(BuildOptions{Path: dir, WorkDir: dir})
		var be *BuildError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("%s: got %v, want a build error naming bad.yaml", name, err)
		}
	}
	// RBAC names may hold colons, as the API server allows.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: system:aggregate-to-view\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(BuildOptions{Path: dir, WorkDir: dir}); err != nil {
		t.Errorf("a ClusterRole named with colons: %v", err)
	}
}

// A single manifest file is a set of its own: its objects, not its
// folder's, named by their file and line; with target-namespace too. A
// file that holds no manifests is refused.
func TestASingleFileAsThePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "all.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"", "shop"} {
		objs, err := Build(BuildOptions{Path: file, WorkDir: dir, TargetNamespace: ns})
		if err != nil {
			t.Fatalf("target-namespace %q: %v", ns, err)
		}
		var names []string
		for _, o := range objs {
			names = append(names, o.GetNamespace()+"/"+o.GetName()+"@"+o.Source)
		}
		want := "/a@all.yaml /b@all.yaml"
		if ns != "" {
			want = "shop/a@all.yaml shop/b@all.yaml"
		}
		if got := strings.Join(names, " "); got != want {
			t.Errorf("target-namespace %q: %s, want %s", ns, got, want)
		}
	}
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(BuildOptions{Path: notes, WorkDir: dir}); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("a text file as the path: %v", err)
	}
}

// An extra patch named relative to the working directory, as a workflow
// names it (hack/demo/three-replicas.yaml), is read.
func TestBuildReadsAPatchNamedRelativeToTheWorkingDirectory(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"app/deploy.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: nginx}]}\n",
		"patches/three.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n",
	})
	t.Chdir(root)
	objects, err := Build(BuildOptions{Path: "app", Patches: []string{"patches/three.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := nestedInt(objects[0].Object, "spec", "replicas"); r != 3 {
		t.Errorf("replicas %d, want 3 from the patch", r)
	}
}
