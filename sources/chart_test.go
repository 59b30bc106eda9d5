package sources

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/e2e/sopsfixture"
	"github.com/gantry-dev/gantry/sources/charts"
)

// shopChart copies the shop chart's fixture into a workspace.
func shopChart(t *testing.T) (ws, dir string) {
	t.Helper()
	ws = t.TempDir()
	dir = filepath.Join(ws, "charts", "shop")
	if err := os.CopyFS(dir, os.DirFS("charts/testdata/shop")); err != nil {
		t.Fatal(err)
	}
	return ws, dir
}

func ids(objects []*Object) []string {
	var out []string
	for _, o := range objects {
		out = append(out, o.Ref()+" "+o.Source)
	}
	return out
}

// A chart's hooks are never dropped unsaid: refused by default, naming
// each, applied as objects or left out only when asked; test hooks are
// always left out, and said.
func TestChartHooks(t *testing.T) {
	t.Parallel()
	ws, dir := shopChart(t)
	opts := BuildOptions{WorkDir: ws, Chart: &Chart{Dir: dir, ReleaseName: "web"}}
	_, err := Build(opts)
	var be *BuildError
	if !errors.As(err, &be) || be.File != "charts/shop" || !strings.Contains(err.Error(), "charts/shop/templates/migrate-job.yaml (pre-install, pre-upgrade)") || !strings.Contains(err.Error(), "chart-hooks") {
		t.Fatalf("hooks not refused by name: %v", err)
	}
	if strings.Contains(err.Error(), "test-connection") {
		t.Errorf("a test hook is named as refused: %v", err)
	}

	for _, mode := range []string{HooksAsObjects, HooksLeaveOut} {
		var notices []ChartNotice
		opts.Chart.Hooks = mode
		opts.ChartNotice = func(n ChartNotice) { notices = append(notices, n) }
		objects, err := Build(opts)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		got := ids(objects)
		for _, want := range []string{
			"CustomResourceDefinition/widgets.shop.example charts/shop/crds/widgets.yaml",
			"Deployment/web-shop charts/shop/templates/deployment.yaml",
			"ConfigMap/default/web-shop-config charts/shop/templates/configmap.yaml",
		} {
			if !slices.ContainsFunc(got, func(s string) bool {
				return strings.HasSuffix(s, strings.SplitN(want, " ", 2)[1]) && strings.HasPrefix(s, strings.SplitN(want, "/", 2)[0])
			}) {
				t.Errorf("%s: no %s in %v", mode, want, got)
			}
		}
		job := slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "Job.batch/") })
		if job != (mode == HooksAsObjects) {
			t.Errorf("%s: the hook's Job in the set: %v (%v)", mode, job, got)
		}
		if slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "test-connection") }) {
			t.Errorf("%s: a test hook in the set: %v", mode, got)
		}
		if len(notices) != 1 || !notices[0].Lookup || notices[0].Chart != "shop 1.2.0" {
			t.Fatalf("%s: notices %+v", mode, notices)
		}
		left := strings.Join(notices[0].LeftOut, "; ")
		if !strings.Contains(left, "charts/shop/templates/tests/test-connection.yaml (test)") || strings.Contains(left, "migrate") != (mode == HooksLeaveOut) {
			t.Errorf("%s: left out %q", mode, left)
		}
		for _, o := range objects {
			if !o.Rendered {
				t.Errorf("%s: %s not marked as rendered", mode, o.Ref())
			}
		}
	}
}

// Values files and set lines reach the templates, in order; the
// release's namespace is the target namespace, and is not forced on
// objects that name another; patches apply to what the chart rendered,
// and objects still name the chart's own files.
func TestChartValuesNamespaceAndPatches(t *testing.T) {
	t.Parallel()
	ws, dir := shopChart(t)
	write(t, ws, map[string]string{
		"values/base.yaml": "replicaCount: 3\nimage:\n  tag: '1.0'\n",
		"values/prod.yaml": "replicaCount: 5\n",
		"patches/web.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-shop\n  namespace: shop\nspec:\n  template:\n    metadata:\n      annotations:\n        patched: 'yes'\n",
	})
	objects, err := Build(BuildOptions{WorkDir: ws, TargetNamespace: "shop", Patches: []string{filepath.Join(ws, "patches/web.yaml")}, Chart: &Chart{
		Dir: dir, ReleaseName: "web", Hooks: HooksLeaveOut,
		Values: []string{filepath.Join(ws, "values/base.yaml"), filepath.Join(ws, "values/prod.yaml")},
		Set:    []string{"image.tag=2.0"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var dep *Object
	for _, o := range objects {
		if o.GetKind() == "Deployment" {
			dep = o
		}
		if o.GetKind() == "ConfigMap" && o.GetNamespace() != "shop" {
			t.Errorf("ConfigMap in %q, not the release's namespace", o.GetNamespace())
		}
	}
	if dep == nil {
		t.Fatalf("no Deployment: %v", ids(objects))
	}
	if r, _, _ := unstructuredInt(dep.Object, "spec", "replicas"); r != 5 {
		t.Errorf("replicas %d, want 5 (the later values file)", r)
	}
	if s := dep.Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["annotations"]; s == nil || s.(map[string]any)["patched"] != "yes" {
		t.Errorf("not patched: %v", s)
	}
	img := dep.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]
	if img != "registry.example/shop:2.0" {
		t.Errorf("image %v: set lines come after values files", img)
	}
	if dep.Source != "charts/shop/templates/deployment.yaml" {
		t.Errorf("source %q", dep.Source)
	}
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	var v any = obj
	for _, f := range fields {
		m, ok := v.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		v = m[f]
	}
	n, ok := v.(int64)
	return n, ok, nil
}

// A values file encrypted with SOPS is decrypted as any file of a build;
// where the chart puts a decrypted value is found by provenance (the
// chart rendered again with other values), not by matching it: a Secret
// may hold it, any field may hold it whole (masked by its path), and a
// field that holds a piece of it is refused, named without the value.
func TestChartSOPSValues(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	ws := t.TempDir()
	write(t, ws, map[string]string{
		"chart/Chart.yaml":            "apiVersion: v2\nname: vault\nversion: 0.1.0\n",
		"chart/templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  url: postgres://app:{{ .Values.password }}@db\n",
		"chart/templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  token: {{ .Values.token | quote }}\n  level: {{ .Values.level | quote }}\n{{- if .Values.leak }}\n  url: postgres://app:{{ .Values.password }}@db\n{{- end }}\n",
		"values/secrets.yaml":         "password: hunter2-pass\ntoken: tok-5581\nlevel: info\n",
		"values/leak.yaml":            "leak: true\n",
	})
	c.Encrypt(t, filepath.Join(ws, "values/secrets.yaml"), "--encrypted-regex", "^(password|token)$")
	var decrypted []string
	chart := &Chart{Dir: filepath.Join(ws, "chart"), ReleaseName: "v", Values: []string{filepath.Join(ws, "values/secrets.yaml")}}
	objects, err := Build(BuildOptions{WorkDir: ws, Chart: chart, SOPSIdentities: c.Identities(t), Decrypted: func(v []string) { decrypted = append(decrypted, v...) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(decrypted, "hunter2-pass") {
		t.Errorf("decrypted values not told: %v", decrypted)
	}
	for _, o := range objects {
		if o.GetKind() == "ConfigMap" {
			if !slices.Equal(o.DecryptedFields, []string{"/data/token"}) {
				t.Errorf("ConfigMap's decrypted fields %v, want [/data/token]", o.DecryptedFields)
			}
		}
	}

	chart.Values = append(chart.Values, filepath.Join(ws, "values/leak.yaml"))
	_, err = Build(BuildOptions{WorkDir: ws, Chart: chart, SOPSIdentities: c.Identities(t)})
	var pe *ProvenanceError
	if !errors.As(err, &pe) || !slices.Contains(pe.Fields, "/data/url") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a piece of a decrypted value in a ConfigMap: %v", err)
	}
}

// A chart may not read the run's credentials, whatever names them in its
// folder: a link or a hard link to a kubeconfig is refused, named.
func TestChartRefusesCredentialFiles(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	secret := filepath.Join(t.TempDir(), "kubeconfig")
	write(t, ws, map[string]string{
		"chart/Chart.yaml":          "apiVersion: v2\nname: peek\nversion: 0.1.0\n",
		"chart/templates/peek.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: peek\ndata:\n  f: {{ .Files.Get \"files/cfg\" | quote }}\n",
	})
	if err := os.WriteFile(secret, []byte("token: s3cr3t-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "chart/files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(ws, "chart/files/cfg")); err != nil {
		t.Skip("no hard links here:", err)
	}
	_, err := Build(BuildOptions{WorkDir: ws, CredentialFiles: []string{secret}, Chart: &Chart{Dir: filepath.Join(ws, "chart")}})
	if err == nil || !strings.Contains(err.Error(), "files/cfg holds the run's credentials") || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("a hard link to the kubeconfig in a chart: %v", err)
	}
	// Without it, the same chart renders (the refusal is the guard's).
	if _, err := Build(BuildOptions{WorkDir: ws, Chart: &Chart{Dir: filepath.Join(ws, "chart")}}); err != nil {
		t.Fatal(err)
	}
}

// A chart's rendering is bounded: a tpl that renders itself for ever
// fails the build within the time bound, naming the chart, in a process
// of its own that is then killed.
func TestChartRenderingIsBounded(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	dir := filepath.Join(ws, "loop")
	if err := os.CopyFS(dir, os.DirFS("charts/testdata/bombs/tpl-loop")); err != nil {
		t.Fatal(err)
	}
	_, err := Build(BuildOptions{WorkDir: ws, Chart: &Chart{Dir: dir, Render: charts.RenderIsolated(charts.Limits{Time: 3 * time.Second})}})
	if err == nil || !strings.Contains(err.Error(), "rendering took longer than 3s") || !strings.HasPrefix(err.Error(), "loop: ") {
		t.Fatalf("a tpl loop: %v", err)
	}
}

// Values files are named as the user gives them, relative to the working
// directory, as helm --values reads them.
func TestChartValuesRelativeToTheWorkingDirectory(t *testing.T) {
	ws, _ := shopChart(t)
	write(t, ws, map[string]string{"values.yaml": "replicaCount: 7\n"})
	t.Chdir(ws)
	objects, err := Build(BuildOptions{Chart: &Chart{Dir: "charts/shop", Values: []string{"values.yaml"}, Hooks: HooksLeaveOut}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objects {
		if o.GetKind() == "Deployment" {
			if r, _, _ := unstructuredInt(o.Object, "spec", "replicas"); r != 7 {
				t.Errorf("replicas %d, want 7", r)
			}
			return
		}
	}
	t.Fatal("no Deployment")
}

// A chart's file names are said on the console and in the report (hooks
// left out, objects' sources): one that is not printable (a line break
// that would write a line of the chart's own, a direction override) is
// refused, naming it, whether the chart is a folder or was fetched.
func TestChartFileNamesArePrintable(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"x\n::error::forged.yaml", "x\u202elmay.yaml"} {
		ws, dir := shopChart(t)
		if err := os.WriteFile(filepath.Join(dir, "templates", name), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Build(BuildOptions{WorkDir: ws, Chart: &Chart{Dir: dir, ReleaseName: "web", Hooks: HooksLeaveOut}})
		if err == nil || !strings.Contains(err.Error(), "not printable") {
			t.Errorf("%q: %v", name, err)
		}
	}
}
