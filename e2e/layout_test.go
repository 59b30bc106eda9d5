package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// A repository laid out for Flux: an app's kustomization names a file of
// a shared folder and a component beside it (../../shared/cm.yaml), which
// kustomize's default load restrictions refuse and Flux's
// kustomize-controller builds (it builds with none, inside the
// repository). gantry builds it to the same objects as
// `kubectl kustomize --load-restrictor LoadRestrictionsNone`.
func TestFluxLayoutBuildsAsFluxDoes(t *testing.T) {
	t.Parallel()
	kubectl := kubectlPath(t)
	repo := t.TempDir()
	for name, content := range map[string]string{
		".git/HEAD":                      "ref: refs/heads/main\n",
		"shared/cm.yaml":                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared-settings\ndata:\n  level: info\n",
		"shared/base/kustomization.yaml": "resources: [sa.yaml]\n",
		"shared/base/sa.yaml":            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: runner\n",
		"components/team/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n" +
			"labels:\n- pairs: {team: web}\n  includeSelectors: false\n",
		"apps/web/kustomization.yaml": "namespace: web\nnamePrefix: web-\n" +
			"resources:\n- ../../shared/cm.yaml\n- ../../shared/base\n- deploy.yaml\n" +
			"components:\n- ../../components/team\n" +
			"configMapGenerator:\n- name: env\n  files: [../../shared/cm.yaml]\n",
		"apps/web/deploy.yaml": readyDeployment("web", "app"),
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(repo, name), content)
	}
	app := filepath.Join(repo, "apps", "web")

	out, err := exec.Command(kubectl, "kustomize", "--load-restrictor", "LoadRestrictionsNone", app).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	want := decodeStream(t, out)
	// kustomize's default refuses the layout: the reason repositories
	// written for Flux fail to build elsewhere.
	if err := exec.Command(kubectl, "kustomize", app).Run(); err == nil {
		t.Errorf("kubectl kustomize with the default load restrictions built the layout; the test shows nothing")
	}

	r := gantry(t, "build", "--path="+app)
	if r.code != 0 {
		t.Fatalf("gantry build: exit %d\n%s", r.code, r.stderr)
	}
	got := decodeStream(t, []byte(r.stdout))
	if len(want) != 4 {
		t.Errorf("kubectl kustomize built %d objects, want 4", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gantry's build differs from kubectl kustomize --load-restrictor LoadRestrictionsNone (-kubectl +gantry):\n%s", diff)
	}
}

// decodeStream reads a YAML stream into objects by Kind/namespace/name.
func decodeStream(t *testing.T, data []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]any
		if err := d.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding the built stream: %v", err)
		}
		if obj == nil {
			continue
		}
		u := unstructured.Unstructured{Object: obj}
		out[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = obj
	}
	return out
}
