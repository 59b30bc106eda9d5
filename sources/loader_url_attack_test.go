package sources

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// kustomize's loader fetches any path it reads that is an http(s) URL,
// with a client of its own (no timeout, no bound on the answer), and the
// answer lands in the set: a generator's data, a patch. Only resources
// and components were looked at before the build; a pull request's
// kustomization could make the runner fetch an address of its network
// (a cloud's metadata service) and print the answer, or hang it, or fill
// its memory. Every field the loader reads is looked at now, and nothing
// is fetched.
func TestKustomizationFetchesNoURL(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {fetched: INTERNAL-BODY}\n"))
	}))
	defer srv.Close()
	u := srv.URL
	for name, k := range map[string]string{
		"configMapGenerator files": "configMapGenerator:\n- name: g\n  files: [" + u + "/files]\n",
		"configMapGenerator envs":  "configMapGenerator:\n- name: g\n  envs: [" + u + "/envs]\n",
		"configMapGenerator env":   "configMapGenerator:\n- name: g\n  env: " + u + "/env\n",
		"secretGenerator files":    "secretGenerator:\n- name: g\n  files: [k=" + u + "/secfiles]\n",
		"patches":                  "patches:\n- path: " + u + "/patch.yaml\n",
		"patchesStrategicMerge":    "patchesStrategicMerge:\n- " + u + "/psm.yaml\n",
		"patchesJson6902":          "patchesJson6902:\n- target: {kind: ConfigMap, name: cm}\n  path: " + u + "/json.yaml\n",
		"configurations":           "configurations: [" + u + "/conf]\n",
		"crds":                     "crds: [" + u + "/crds]\n",
		"replacements":             "replacements:\n- path: " + u + "/repl\n",
		"transformers":             "transformers: [" + u + "/tr]\n",
		"generators":               "generators: [" + u + "/gen]\n",
		"openapi":                  "openapi:\n  path: " + u + "/openapi.json\n",
	} {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			write(t, ws, map[string]string{
				"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
				"app/kustomization.yaml": "resources: [cm.yaml]\n" + k,
			})
			objects, err := Build(BuildOptions{Path: filepath.Join(ws, "app"), WorkDir: ws})
			if err == nil {
				t.Fatalf("built: %v", objects)
			}
			if msg := err.Error(); !strings.Contains(msg, "is a URL") || !strings.Contains(msg, "app/kustomization.yaml") || strings.Contains(msg, "INTERNAL-BODY") {
				t.Errorf("want a refusal naming the kustomization, got %v", err)
			}
		})
	}
	if n := hits.Load(); n > 0 {
		t.Errorf("the server was asked %d times", n)
	}
}

// A URL in a value that is not a path (an annotation, a literal) is no
// fetch, and builds.
func TestKustomizationURLValuesBuild(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	write(t, ws, map[string]string{
		"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
		"app/kustomization.yaml": "resources: [cm.yaml]\ncommonAnnotations: {docs: \"https://example.com/docs\"}\n" +
			"configMapGenerator:\n- name: g\n  literals: [url=https://example.com/x]\n" +
			"transformers:\n- |\n  apiVersion: builtin\n  kind: AnnotationsTransformer\n  metadata: {name: a}\n  annotations: {link: \"https://example.com\"}\n  fieldSpecs: [{path: metadata/annotations, create: true}]\n",
	})
	if _, err := Build(BuildOptions{Path: filepath.Join(ws, "app"), WorkDir: ws}); err != nil {
		t.Fatal(err)
	}
}
