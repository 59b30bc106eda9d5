package sources

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// A kustomization's helmCharts build, through gantry's build (its
// bounded, SOPS-decrypting file system, an overlay's namespace handed
// down to its base's charts), to the objects kustomize build
// --enable-helm builds with the helm CLI, on every fixture; each
// object names its chart's folder.
func TestHelmChartsBuildAsKustomizeEnableHelm(t *testing.T) {
	root, err := filepath.Abs("charts/testdata/kustomize")
	if err != nil {
		t.Fatal(err)
	}
	kustomize, _ := filepath.Abs("../bin/kustomize")
	helm, _ := filepath.Abs("../bin/helm")
	for _, b := range []string{kustomize, helm} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("no %s: make tools builds it", b)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	built := 0
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if FindKustomization(dir) == "" {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			cmd := exec.Command(kustomize, "build", "--enable-helm", "--helm-command", helm, "--load-restrictor", "LoadRestrictionsNone", dir)
			var env []string
			for _, v := range os.Environ() {
				if !strings.HasPrefix(v, "HELM_") && !strings.HasPrefix(v, "KUBECONFIG=") {
					env = append(env, v)
				}
			}
			cmd.Env = append(env, "KUBECONFIG="+filepath.Join(t.TempDir(), "none"), "HOME="+t.TempDir())
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kustomize build: %v", err)
			}
			want := map[string]string{}
			nodes, err := kyaml.Parse(string(out))
			_ = nodes
			for _, doc := range strings.Split(string(out), "\n---\n") {
				if strings.TrimSpace(doc) == "" {
					continue
				}
				n, err := kyaml.Parse(doc)
				if err != nil {
					t.Fatal(err)
				}
				m, err := n.Map()
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(m)
				want[n.GetKind()+"/"+n.GetNamespace()+"/"+n.GetName()] = string(b)
			}
			var notices []ChartNotice
			objects, err := Build(BuildOptions{Path: dir, WorkDir: root, ChartNotice: func(n ChartNotice) { notices = append(notices, n) }})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, o := range objects {
				b, _ := json.Marshal(o.Object)
				var m map[string]any
				_ = json.Unmarshal(b, &m)
				b, _ = json.Marshal(m)
				got[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = string(b)
				if o.Rendered && !strings.Contains(o.Source, "charts/") {
					t.Errorf("%s: rendered, from %q, not a chart's folder", o.Ref(), o.Source)
				}
			}
			for id, w := range want {
				if got[id] != w {
					t.Errorf("%s:\nkustomize: %s\ngantry:    %s", id, w, got[id])
				}
			}
			for id := range got {
				if _, ok := want[id]; !ok {
					t.Errorf("%s: built by gantry only", id)
				}
			}
			if !slices.ContainsFunc(objects, func(o *Object) bool { return o.Rendered }) && len(notices) > 0 {
				t.Errorf("charts rendered (%v) but no object marked", notices)
			}
			built++
		})
	}
	if built == 0 {
		t.Fatal("no fixture built")
	}
}
