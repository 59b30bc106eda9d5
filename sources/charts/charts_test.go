package charts

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// kindsAndNames are the documents' kind/name, in order.
func kindsAndNames(t *testing.T, docs []Document) []string {
	t.Helper()
	var out []string
	for _, d := range docs {
		var o struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal([]byte(d.Content), &o); err != nil {
			t.Fatalf("%s: %v", d.Source, err)
		}
		out = append(out, o.Kind+"/"+o.Metadata.Name)
	}
	return out
}

// The shop chart as helm install would render it: its templates in
// Helm's install order (the ConfigMap and Service before the Deployment),
// the subchart's objects with them, the CRDs of both charts apart (the
// chart's first), the hooks apart, NOTES.txt and what .helmignore names
// left out, .Files and .Capabilities answered, lookup answered empty and
// its use said.
func TestRenderShop(t *testing.T) {
	t.Parallel()
	r, err := Render(context.Background(), Options{Dir: "testdata/shop", ReleaseName: "web", Namespace: "shop", KubeVersion: "v1.37.0",
		APIVersions: []string{"policy/v1/PodDisruptionBudget"}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(kindsAndNames(t, r.Manifests), " ")
	want := "PodDisruptionBudget/web-shop ConfigMap/web-shop-config Service/web-shop Deployment/web-shop StatefulSet/web-db"
	if got != want {
		t.Errorf("manifests:\n%s\nwant:\n%s", got, want)
	}
	if got := strings.Join(kindsAndNames(t, r.CRDs), " "); got != "CustomResourceDefinition/widgets.shop.example CustomResourceDefinition/backups.db.example" {
		t.Errorf("CRDs: %s", got)
	}
	if r.CRDs[1].Source != "shop/charts/db/crds/backups.yaml" || r.Manifests[1].Source != "shop/templates/configmap.yaml" {
		t.Errorf("sources: %s, %s", r.CRDs[1].Source, r.Manifests[1].Source)
	}
	var hooks []string
	for _, h := range r.Hooks {
		hooks = append(hooks, h.Source+" "+strings.Join(h.Events, ","))
	}
	if got := strings.Join(hooks, "; "); got != "shop/templates/tests/test-connection.yaml test; shop/templates/migrate-job.yaml pre-install,pre-upgrade" {
		t.Errorf("hooks: %s", got)
	}
	if !r.Lookup {
		t.Errorf("lookup was called and not reported")
	}
	cm := r.Manifests[1].Content
	for _, want := range []string{"listen 8080", `kube: "v1.37.0"`, `found: "0"`} {
		if !strings.Contains(cm, want) {
			t.Errorf("the ConfigMap has no %q:\n%s", want, cm)
		}
	}
	if d := r.Manifests[3].Content; !strings.Contains(d, "replicas: 2") || !strings.Contains(d, `image: "registry.example/shop:2.0"`) || !strings.Contains(d, "namespace: shop") {
		t.Errorf("the Deployment:\n%s", d)
	}
	for _, d := range append(r.Manifests, r.CRDs...) {
		if strings.Contains(d.Content, "The shop is at") {
			t.Errorf("NOTES.txt rendered as a manifest")
		}
	}
	c, err := Load("testdata/shop", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range c.Files {
		if strings.HasPrefix(f.Name, "notes/") || strings.HasSuffix(f.Name, ".bak") {
			t.Errorf("%s is in the chart though .helmignore names it", f.Name)
		}
	}
}

// Values files in order, then set lines; a subchart off by its condition
// takes its objects and CRDs with it; a Kubernetes older than the chart's
// kubeVersion is refused; a value against the schema is refused, naming
// the schema.
func TestRenderValues(t *testing.T) {
	t.Parallel()
	r, err := Render(context.Background(), Options{Dir: "testdata/shop", ReleaseName: "shop", Namespace: "prod", KubeVersion: "v1.37.0",
		Values: []Values{{Name: "prod.yaml", Content: []byte("replicaCount: 5\nimage: {tag: '2.1'}\ndb: {enabled: false}\n")},
			{Name: "more.yaml", Content: []byte("replicaCount: 7\n")}},
		Set: []string{"service.port=8443"}})
	if err != nil {
		t.Fatal(err)
	}
	// No PodDisruptionBudget: its kind is not in the capabilities given
	// (as helm template renders it without --api-versions).
	if got := strings.Join(kindsAndNames(t, r.Manifests), " "); got != "ConfigMap/shop-config Service/shop Deployment/shop" {
		t.Errorf("manifests with db off: %s", got)
	}
	if len(r.CRDs) != 1 {
		t.Errorf("CRDs with db off: %d, want the chart's own", len(r.CRDs))
	}
	if d := r.Manifests[2].Content; !strings.Contains(d, "replicas: 7") || !strings.Contains(d, "registry.example/shop:2.1") {
		t.Errorf("the Deployment:\n%s", d)
	}
	if s := r.Manifests[1].Content; !strings.Contains(s, "port: 8443") {
		t.Errorf("the Service:\n%s", s)
	}

	_, err = Render(context.Background(), Options{Dir: "testdata/shop", ReleaseName: "shop", Namespace: "prod", KubeVersion: "v1.37.0", Set: []string{"replicaCount=0"}})
	var ce *Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "values.schema.json") || !strings.Contains(err.Error(), "replicaCount") {
		t.Errorf("replicaCount 0 against the schema: %v", err)
	}
	if _, err := Render(context.Background(), Options{Dir: "testdata/shop", ReleaseName: "shop", Namespace: "prod", KubeVersion: "v1.29.0"}); err == nil || !strings.Contains(err.Error(), ">=1.30.0-0") {
		t.Errorf("Kubernetes 1.29 against kubeVersion >=1.30: %v", err)
	}
}

// writeChart writes a chart of the given files in a folder of its own.
func writeChart(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "c")
	files["Chart.yaml"] = "apiVersion: v2\nname: c\nversion: 0.1.0\n"
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// .Files sees the chart and nothing else: a path out of it, an absolute
// one, a link out of it.
func TestChartFilesStayInTheChart(t *testing.T) {
	t.Parallel()
	dir := writeChart(t, map[string]string{
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data:
  up: {{ .Files.Get "../outside" | quote }}
  git: {{ .Files.Get "../../../.git/config" | quote }}
  abs: {{ .Files.Get "/etc/hostname" | quote }}
  glob: {{ range $p, $_ := .Files.Glob "**" }}{{ $p }} {{ end }}
`,
	})
	if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "outside"), []byte("canary-outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Render(context.Background(), Options{Dir: dir, ReleaseName: "x", Namespace: "x"})
	if err != nil {
		t.Fatal(err)
	}
	cm := r.Manifests[0].Content
	if strings.Contains(cm, "canary-outside") || !strings.Contains(cm, `up: ""`) || !strings.Contains(cm, `git: ""`) || !strings.Contains(cm, `abs: ""`) {
		t.Errorf(".Files read outside the chart:\n%s", cm)
	}

	// A link out of the chart is refused, naming it.
	if err := os.Symlink(filepath.Join(filepath.Dir(dir), "outside"), filepath.Join(dir, "templates", "leak.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := Render(context.Background(), Options{Dir: dir, ReleaseName: "x", Namespace: "x"}); err == nil || !strings.Contains(err.Error(), "templates/leak.yaml") || strings.Contains(err.Error(), "canary-outside") {
		t.Errorf("a link out of the chart: %v", err)
	}
}

// A values schema that refers to another document is refused, and
// nothing is fetched: Helm's own validation would fetch it.
func TestSchemaLoadsNothing(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Write([]byte(`{"type": "object"}`))
	}))
	defer srv.Close()
	for _, ref := range []string{srv.URL + "/schema.json", "file:///etc/passwd"} {
		dir := writeChart(t, map[string]string{
			"values.yaml":        "a: 1\n",
			"values.schema.json": `{"$ref": "` + ref + `"}`,
			"templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		})
		_, err := Render(context.Background(), Options{Dir: dir, ReleaseName: "x", Namespace: "x"})
		if err == nil || !strings.Contains(err.Error(), "may not load other documents") {
			t.Errorf("$ref %s: %v", ref, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the schema's reference was fetched %d times", n)
	}
}

// A template that includes itself fails, naming it, in bounded time.
func TestIncludeLoopFails(t *testing.T) {
	t.Parallel()
	dir := writeChart(t, map[string]string{
		"templates/_loop.tpl": `{{ define "loop" }}{{ include "loop" . }}{{ end }}`,
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: {{ include \"loop\" . | quote }}}\n",
	})
	start := time.Now()
	_, err := Render(context.Background(), Options{Dir: dir, ReleaseName: "x", Namespace: "x"})
	if err == nil || !strings.Contains(err.Error(), "loop") {
		t.Errorf("an include loop: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("an include loop took %s", d)
	}
}

// helmTemplate is what helm template prints of a rendering: the CRDs
// (--include-crds) and the manifests, then the hooks, tests left out
// (--skip-tests).
func helmTemplate(r *Rendered) string {
	var b strings.Builder
	for _, d := range append(append([]Document{}, r.CRDs...), r.Manifests...) {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", d.Source, d.Content)
	}
	out := strings.TrimSpace(b.String()) + "\n"
	for _, h := range r.Hooks {
		if !slices.Contains(h.Events, "test") {
			out += fmt.Sprintf("---\n# Source: %s\n%s\n", h.Source, h.Content)
		}
	}
	return out
}

// The rendering is Helm's, byte for byte: the shop chart (a subchart,
// CRDs in both, hooks, a Capabilities check, .Files, lookup, a values
// schema) and the platform chart (a library chart, aliases, globals,
// import-values) against the helm CLI of the same version, with values
// files and set lines.
func TestRenderIsHelmTemplate(t *testing.T) {
	t.Parallel()
	helm := filepath.Join("..", "..", "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Skip("no bin/helm: make tools builds it")
	}
	values := filepath.Join(t.TempDir(), "prod.yaml")
	if err := os.WriteFile(values, []byte("replicaCount: 3\nimage: {tag: '2.1'}\ndb: {size: 5Gi}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		opts Options
		args []string
	}{
		"defaults": {Options{ReleaseName: "web", Namespace: "shop", KubeVersion: "v1.37.0"}, nil},
		// A library chart, one subchart twice under aliases (one off by
		// its condition, then on), globals, tpl, range, required and
		// import-values.
		"platform": {Options{Dir: "testdata/platform", ReleaseName: "rel", Namespace: "ops", KubeVersion: "v1.37.0"}, nil},
		"platform, both workers": {Options{Dir: "testdata/platform", ReleaseName: "rel", Namespace: "ops", KubeVersion: "v1.37.0",
			Set: []string{"export.enabled=true", "controller.replicas=3", "global.labels.tier=backend"}},
			[]string{"--set", "export.enabled=true", "--set", "controller.replicas=3", "--set", "global.labels.tier=backend"}},
		"values and capabilities": {Options{ReleaseName: "shop", Namespace: "prod", KubeVersion: "v1.36.2", APIVersions: []string{"policy/v1/PodDisruptionBudget"},
			Values: []Values{{Name: values, Content: []byte("replicaCount: 3\nimage: {tag: '2.1'}\ndb: {size: 5Gi}\n")}}, Set: []string{"service.port=8443", "db.enabled=true"}},
			[]string{"--api-versions", "policy/v1/PodDisruptionBudget", "-f", values, "--set", "service.port=8443", "--set", "db.enabled=true"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tc.opts.Dir == "" {
				tc.opts.Dir = "testdata/shop"
			}
			r, err := Render(context.Background(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			args := append([]string{"template", tc.opts.ReleaseName, tc.opts.Dir, "--namespace", tc.opts.Namespace,
				"--kube-version", tc.opts.KubeVersion, "--include-crds", "--skip-tests"}, tc.args...)
			cmd := exec.Command(helm, args...)
			cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
			want, err := cmd.Output()
			if err != nil {
				t.Fatalf("helm %v: %v", args, err)
			}
			if got := helmTemplate(r); got != string(want) {
				t.Errorf("gantry's rendering differs from helm template:\n--- gantry\n%s\n--- helm\n%s", got, want)
			}
		})
	}
}

// tgz is a chart archive of one file of n zero bytes, and of inner
// archives as files beside it.
func tgz(t *testing.T, name string, n int64, inner map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	add := func(p string, size int64, r io.Reader) {
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(tw, r, size); err != nil {
			t.Fatal(err)
		}
	}
	chartYAML := "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n"
	add(name+"/Chart.yaml", int64(len(chartYAML)), strings.NewReader(chartYAML))
	if n > 0 {
		add(name+"/files/zeros", n, zeroReader{})
	}
	for p, b := range inner {
		add(name+"/charts/"+p, int64(len(b)), bytes.NewReader(b))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A chart's archives are bounded together, before Helm loads any: one
// that expands to 1 GiB, three of 40 MiB (each within Helm's own budget
// of 100 MiB per archive), archives nested deeper than five, and both
// again under names Helm cleans into an archive's (x.tgz/.); each is
// refused in bounded time, naming the archive.
func TestChartArchivesAreBounded(t *testing.T) {
	t.Parallel()
	nested := tgz(t, "n0", 0, nil)
	for i := 1; i <= MaxArchiveDepth+1; i++ {
		nested = tgz(t, fmt.Sprintf("n%d", i), 0, map[string][]byte{fmt.Sprintf("n%d.tgz", i-1): nested})
	}
	// Names Helm cleans (x.tgz/. is charts/x.tgz to it): an archive is
	// known by its content.
	dotted := tgz(t, "d0", 0, nil)
	for i := 1; i <= MaxArchiveDepth+1; i++ {
		dotted = tgz(t, fmt.Sprintf("d%d", i), 0, map[string][]byte{fmt.Sprintf("d%d.tgz/.", i-1): dotted})
	}
	cleaned := tgz(t, "outer", 0, map[string][]byte{"a.tgz/.": tgz(t, "a", 40<<20, nil), "b.tgz/.": tgz(t, "b", 40<<20, nil), "c.tgz/.": tgz(t, "c", 40<<20, nil)})
	for name, archives := range map[string]map[string][]byte{
		"cleaned names, nested":     {"dotted.tgz": dotted},
		"cleaned names, 3 x 40 MiB": {"outer.tgz": cleaned},
		"1 GiB":                     {"big.tgz": tgz(t, "big", 1<<30, nil)},
		"3 x 40 MiB":                {"a.tgz": tgz(t, "a", 40<<20, nil), "b.tgz": tgz(t, "b", 40<<20, nil), "c.tgz": tgz(t, "c", 40<<20, nil)},
		"nested":                    {"deep.tgz": nested},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := writeChart(t, map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
			for p, b := range archives {
				if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "charts", p), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			_, err := Render(context.Background(), Options{Dir: dir, ReleaseName: "x", Namespace: "x", KubeVersion: "v1.37.0"})
			if err == nil || !strings.Contains(err.Error(), "charts/") || !(strings.Contains(err.Error(), "expand to more than") || strings.Contains(err.Error(), "nested more than")) {
				t.Errorf("%s: %v", name, err)
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("%s: refused after %s", name, d)
			}
		})
	}
	// Within the bounds, a subchart's archive loads and renders.
	dir := writeChart(t, map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "charts", "small.tgz"), tgz(t, "small", 1<<10, map[string][]byte{"inner.tgz": tgz(t, "inner", 10, nil)}), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Render(context.Background(), Options{Dir: dir, ReleaseName: "x", Namespace: "x", KubeVersion: "v1.37.0"}); err != nil {
		t.Errorf("a subchart's archive within the bounds: %v", err)
	}
}

// A value the chart's values schema refuses is named where it was set:
// the values file and line that set it last, or the set line.
func TestSchemaViolationsAtTheValuesLine(t *testing.T) {
	t.Parallel()
	_, err := Render(context.Background(), Options{Dir: "testdata/shop", ReleaseName: "web", Namespace: "shop", KubeVersion: "v1.37.0",
		Values: []Values{
			{Name: "values/base.yaml", Content: []byte("replicaCount: two\nimage:\n  tag: '1'\n")},
			{Name: "values/prod.yaml", Content: []byte("image:\n  repository: 42\n")},
		},
		Set: []string{"replicaCount=0"},
	})
	if err == nil {
		t.Fatal("rendered")
	}
	for _, want := range []string{"values/prod.yaml:2: at '/image/repository'", "set line 1: at '/replicaCount'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no %q in:\n%v", want, err)
		}
	}
}

// What helm template refuses before it renders, every chart here refuses
// too, naming the chart: a library chart, and a dependency Chart.yaml
// names that charts/ does not hold.
func TestRenderRefusesWhatHelmTemplateRefuses(t *testing.T) {
	missing := t.TempDir()
	for name, content := range map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n- name: cache\n  version: 1.0.0\n  repository: https://charts.example\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(missing, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(missing, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for dir, want := range map[string]string{
		filepath.Join("testdata", "platform", "charts", "common"): "chart common: library charts are not installable",
		missing: "chart shop: found in Chart.yaml, but missing in charts/ directory: cache",
	} {
		_, err := Render(context.Background(), Options{Dir: dir, MaxFileBytes: 1 << 20})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", dir, err, want)
		}
	}
}
