package charts

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// rewritingFS is the disk, except that a kustomization that lists
// helmCharts reads as Kustomization rewrites it, and the files it
// returns are there too (their folder a folder): as gantry's build
// serves them.
type rewritingFS struct {
	filesys.FileSystem
	t    *testing.T
	opts func(dir string) KustomizeOptions

	mu      sync.Mutex
	files   map[string][]byte
	dirs    map[string]bool
	infos   map[string]*Inflated
	lastErr error
}

func newRewritingFS(t *testing.T, opts func(dir string) KustomizeOptions) *rewritingFS {
	return &rewritingFS{FileSystem: filesys.MakeFsOnDisk(), t: t, opts: opts,
		files: map[string][]byte{}, dirs: map[string]bool{}, infos: map[string]*Inflated{}}
}

func (f *rewritingFS) ReadFile(name string) ([]byte, error) {
	name = filepath.Clean(name)
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.files[name]; ok {
		return b, nil
	}
	content, err := f.FileSystem.ReadFile(name)
	if err != nil {
		return nil, err
	}
	for _, kf := range konfig.RecognizedKustomizationFileNames() {
		if filepath.Base(name) != kf {
			continue
		}
		out, files, info, err := Kustomization(context.Background(), name, content, os.ReadFile, f.opts(filepath.Dir(name)))
		if err != nil {
			f.lastErr = err
			return nil, err
		}
		for p, b := range files {
			f.files[p] = b
			f.dirs[filepath.Dir(p)] = true
		}
		f.infos[name] = info
		f.files[name] = out
		return out, nil
	}
	return content, nil
}

func (f *rewritingFS) virtualDir(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dirs[filepath.Clean(name)]
}

func (f *rewritingFS) virtualFile(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.files[filepath.Clean(name)]
	return ok
}

func (f *rewritingFS) Exists(name string) bool {
	return f.virtualDir(name) || f.virtualFile(name) || f.FileSystem.Exists(name)
}

func (f *rewritingFS) IsDir(name string) bool {
	return f.virtualDir(name) || f.FileSystem.IsDir(name)
}

func (f *rewritingFS) CleanedAbs(name string) (filesys.ConfirmedDir, string, error) {
	if f.virtualDir(name) {
		return filesys.ConfirmedDir(filepath.Clean(name)), "", nil
	}
	if f.virtualFile(name) {
		return filesys.ConfirmedDir(filepath.Dir(filepath.Clean(name))), filepath.Base(name), nil
	}
	return f.FileSystem.CleanedAbs(name)
}

// buildInProcess builds dir as gantry does (plugins disabled, no load
// restrictions) on the rewritten kustomizations.
func buildInProcess(t *testing.T, dir string, reorder krusty.ReorderOption, opts func(string) KustomizeOptions) (string, *rewritingFS, error) {
	t.Helper()
	fsys := newRewritingFS(t, opts)
	kopts := krusty.MakeDefaultOptions()
	kopts.Reorder = reorder
	kopts.PluginConfig = types.DisabledPluginConfig()
	kopts.LoadRestrictions = types.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(kopts).Run(fsys, dir)
	if err != nil {
		return "", fsys, err
	}
	out, err := m.AsYaml()
	return string(out), fsys, err
}

// kustomizeCLI is kustomize build --enable-helm with the helm CLI, as a
// user runs it: no kubeconfig, no namespace from the environment.
// With check, it only skips the test when the CLIs are not there.
func kustomizeCLI(t *testing.T, dir string, reorder krusty.ReorderOption, check bool) string {
	t.Helper()
	kustomize, _ := filepath.Abs(filepath.Join("..", "..", "bin", "kustomize"))
	helm, _ := filepath.Abs(filepath.Join("..", "..", "bin", "helm"))
	for _, b := range []string{kustomize, helm} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("no %s: make tools builds it", b)
		}
	}
	if check {
		return ""
	}
	cmd := exec.Command(kustomize, "build", "--reorder", string(reorder), "--enable-helm", "--helm-command", helm, "--load-restrictor", "LoadRestrictionsNone", dir)
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "HELM_") && !strings.HasPrefix(e, "KUBECONFIG=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, "KUBECONFIG="+filepath.Join(t.TempDir(), "none"), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kustomize build %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return string(out)
}

// helmKubeVersion is the Kubernetes version bin/helm renders for when
// told none: Helm takes it from the client-go of its build, which a test
// binary's build information does not list (Helm then says v1.20.0).
func helmKubeVersion(t *testing.T) string {
	t.Helper()
	helm := filepath.Join("..", "..", "bin", "helm")
	cmd := exec.Command(helm, "version", "--template", "{{ .KubeClientVersion }}")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm version: %v", err)
	}
	return strings.TrimSpace(string(out)) + ".0"
}

// helmChartsRoot is the fixtures' root, the workspace their paths must
// stay in.
func helmChartsRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("testdata", "kustomize"))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// A kustomization's helmCharts build in-process as kustomize build
// --enable-helm builds them with the helm CLI of the same Helm version,
// byte for byte: two releases of a chart with a subchart, CRDs (included
// and not), hooks (kept and skipped), tests (kept and skipped), values
// files, additional values files, valuesInline in each valuesMerge mode,
// API and Kubernetes versions, a name template, a versioned chart folder,
// the default chart home and another, configMapGenerator, secretGenerator
// and generators: beside the charts, namespace: (its own, and an
// overlay's reaching a base's charts), labels, a reference to a generated
// ConfigMap, and every order: gantry's (none: the order objects are made
// in), kustomize's default (legacy) and sortOptions' fifo.
//
// Not parallel with the package's other tests (their time bounds): its
// builds run in parallel with each other only.
func TestKustomizationIsKustomizeWithHelm(t *testing.T) {
	root := helmChartsRoot(t)
	kustomizeCLI(t, root, krusty.ReorderOptionNone, true)
	kube := helmKubeVersion(t)
	for _, tc := range []struct {
		dir       string
		inherited map[string]string
	}{
		{dir: "two"},
		{dir: "merge"},
		{dir: "tests"},
		{dir: "caps"},
		{dir: "versioned"},
		{dir: "quiet"},
		{dir: "base"},
		{dir: "overlay", inherited: map[string]string{"base": "prod"}},
	} {
		for _, reorder := range []krusty.ReorderOption{krusty.ReorderOptionNone, krusty.ReorderOptionLegacy} {
			t.Run(tc.dir+"/"+string(reorder), func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(root, tc.dir)
				want := kustomizeCLI(t, dir, reorder, false)
				got, fsys, err := buildInProcess(t, dir, reorder, func(d string) KustomizeOptions {
					return KustomizeOptions{Root: root, InheritedNamespace: tc.inherited[filepath.Base(d)], DefaultKubeVersion: kube}
				})
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("gantry's build differs from kustomize build --enable-helm:\n--- gantry\n%s\n--- kustomize\n%s", got, want)
				}
				if len(fsys.infos) == 0 {
					t.Errorf("no kustomization was rewritten")
				}
			})
		}
	}
}

// What Kustomization says of a rewrite, and where it puts the charts.
func TestKustomizationInfo(t *testing.T) {
	t.Parallel()
	root := helmChartsRoot(t)
	file := filepath.Join(root, "two", "kustomization.yaml")
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out, files, info, err := Kustomization(context.Background(), file, content, os.ReadFile, KustomizeOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Charts) != 2 || info.Charts[0].ReleaseName != "front" || info.Charts[1].Namespace != "backend" || info.Charts[0].Namespace != "shop" {
		t.Errorf("charts: %+v", info.Charts)
	}
	if !info.Lookup || info.Inherited || info.Reordered {
		t.Errorf("info: %+v", info)
	}
	for p := range files {
		if !strings.HasPrefix(p, filepath.Join(root, "two", InflatedDir)+string(filepath.Separator)) {
			t.Errorf("a file out of the kustomization's folder: %s", p)
		}
	}
	if strings.Contains(string(out), "helmCharts") || !strings.Contains(string(out), InflatedDir) {
		t.Errorf("rewritten:\n%s", out)
	}

	// No helmCharts: unchanged.
	plain := []byte("resources:\n- a.yaml\n")
	out, files, info, err = Kustomization(context.Background(), file, plain, os.ReadFile, KustomizeOptions{Root: root})
	if err != nil || string(out) != string(plain) || files != nil || info != nil {
		t.Errorf("a kustomization without helmCharts: %q %v %v %v", out, files, info, err)
	}

	// The deprecated helmChartInflationGenerator is read as kustomize
	// reads it, into helmCharts.
	old := []byte("helmChartInflationGenerator:\n- chartName: app\n  chartHome: ../charts\n  releaseName: old\n  valuesLocal: {sub: {enabled: false}}\n")
	out, files, info, err = Kustomization(context.Background(), file, old, os.ReadFile, KustomizeOptions{Root: root})
	if err != nil || len(info.Charts) != 1 || info.Charts[0].ReleaseName != "old" || len(files) != 1 || strings.Contains(string(out), "helmChartInflationGenerator") {
		t.Errorf("helmChartInflationGenerator: %s %v %+v", out, err, info)
	}

	// No release name: helm's --generate-name, from the clock.
	noName := []byte("helmGlobals: {chartHome: ../charts}\nhelmCharts:\n- name: app\n  valuesInline: {sub: {enabled: false}}\n")
	_, _, info, err = Kustomization(context.Background(), file, noName, os.ReadFile, KustomizeOptions{Root: root, Now: func() time.Time { return time.Unix(1700000000, 0) }})
	if err != nil || info.Charts[0].ReleaseName != "app-1700000000" || !info.Charts[0].GeneratedName {
		t.Errorf("a generated name: %+v %v", info, err)
	}
}

// Refusals name the kustomization and the entry: a chart not in the chart
// home (kustomize would pull it), paths absolute or out of the
// workspace, a chart folder that is a link out of it, a URL for values.
func TestKustomizationRefusals(t *testing.T) {
	t.Parallel()
	root := helmChartsRoot(t)
	file := filepath.Join(root, "two", "kustomization.yaml")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "values.yaml"), []byte("canary: outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A chart home inside the workspace whose chart folder is a link out.
	linked := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(filepath.Join(linked, "k", "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "charts", "app"), filepath.Join(linked, "k", "charts", "app")); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		file, content, root string
		want                []string
	}{
		"remote chart": {content: "helmCharts:\n- name: nginx\n  repo: https://charts.example\n  version: 1.0.0\n  releaseName: web\n",
			want: []string{"helmCharts[0]", `"nginx"`, "remote charts are not fetched", "https://charts.example"}},
		"no chart, no repo": {content: "helmCharts:\n- name: missing\n  releaseName: web\n",
			want: []string{"helmCharts[0]", `"missing"`, "remote charts are not fetched"}},
		"absolute chart home": {content: "helmGlobals: {chartHome: " + filepath.Join(root, "charts") + "}\nhelmCharts:\n- name: app\n  releaseName: web\n",
			want: []string{"chartHome", "absolute"}},
		"chart home out of the workspace": {content: "helmGlobals: {chartHome: ../../../../..}\nhelmCharts:\n- name: app\n  releaseName: web\n",
			want: []string{"chartHome", "leads out of"}},
		"values file out of the workspace": {content: "helmGlobals: {chartHome: ../charts}\nhelmCharts:\n- name: app\n  releaseName: web\n  valuesFile: ../../../../../../../../" + filepath.Join(outside, "values.yaml") + "\n",
			want: []string{"helmCharts[1]", "valuesFile", "leads out of"}},
		"absolute values file": {content: "helmGlobals: {chartHome: ../charts}\nhelmCharts:\n- name: app\n  releaseName: web\n  valuesFile: " + filepath.Join(outside, "values.yaml") + "\n",
			want: []string{"valuesFile", "absolute"}},
		"additional values file out": {content: "helmGlobals: {chartHome: ../charts}\nhelmCharts:\n- name: app\n  releaseName: web\n  additionalValuesFiles: [../../../../../../../../.." + filepath.Join(outside, "values.yaml") + "]\n",
			want: []string{"additionalValuesFiles", "leads out of"}},
		"values by URL": {content: "helmGlobals: {chartHome: ../charts}\nhelmCharts:\n- name: app\n  releaseName: web\n  valuesFile: https://example.com/values.yaml\n",
			want: []string{"valuesFile", "remote values files are not fetched"}},
		"chart name a path": {content: "helmGlobals: {chartHome: ../charts}\nhelmCharts:\n- name: ../charts/app\n  releaseName: web\n",
			want: []string{"is a path"}},
		"chart folder a link out": {file: filepath.Join(linked, "k", "kustomization.yaml"), root: linked,
			content: "helmCharts:\n- name: app\n  releaseName: web\n", want: []string{"helmCharts[0]", "chart folder", "out of"}},
		"name and template": {content: "helmGlobals: {chartHome: ../charts}\nhelmCharts:\n- name: app\n  releaseName: web\n  nameTemplate: x\n",
			want: []string{"nameTemplate"}},
		"bad merge mode": {content: "helmGlobals: {chartHome: ../charts}\nhelmCharts:\n- name: app\n  releaseName: web\n  valuesMerge: mix\n  valuesInline: {a: 1}\n",
			want: []string{"valuesMerge must be one of"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, r := file, root
			if tc.file != "" {
				f, r = tc.file, tc.root
			}
			content := tc.content
			if name == "values file out of the workspace" {
				// A first entry that renders, so the second is named.
				content = strings.Replace(content, "helmCharts:\n", "helmCharts:\n- name: app\n  releaseName: fine\n", 1)
			}
			_, _, _, err := Kustomization(context.Background(), f, []byte(content), os.ReadFile, KustomizeOptions{Root: r})
			var ke *KustomizeError
			if !errors.As(err, &ke) {
				t.Fatalf("not refused as a KustomizeError: %v", err)
			}
			if !strings.Contains(err.Error(), f) {
				t.Errorf("the kustomization file is not named: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q not in: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "canary") {
				t.Errorf("read outside: %v", err)
			}
		})
	}
	if !errors.Is(func() error {
		_, _, _, err := Kustomization(context.Background(), file, []byte("helmCharts:\n- name: nginx\n  repo: oci://r.example/c\n"), os.ReadFile, KustomizeOptions{Root: root})
		return err
	}(), ErrRemoteChart) {
		t.Errorf("a remote chart is not ErrRemoteChart")
	}
}
