package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/schemas"
	"github.com/gantry-dev/gantry/sources"
)

// apply and diff build without origins; a second build, with them, is
// needed only for what kustomize built: a folder of manifests names its
// files in any case.
func TestSecondBuildOnlyForKustomizations(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, map[string]string{
		"plain/cm.yaml":                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
		"app/kustomization.yaml":       "resources: [cm.yaml]\n",
		"app/cm.yaml":                  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
		"mixed/cm.yaml":                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n",
		"mixed/sub/kustomization.yaml": "resources: [cm.yaml]\n",
		"mixed/sub/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
	})
	for dir, want := range map[string]bool{"plain": false, "app": true, "mixed": true} {
		for _, command := range []string{"apply", "diff"} {
			r := newRun(command, Options{Build: sources.BuildOptions{Path: filepath.Join(root, dir), WorkDir: root}}, nil, nil)
			objects, _, err := r.build()
			if err != nil {
				t.Fatal(err)
			}
			if r.lazyOrigins != want {
				t.Errorf("%s of %s: second build needed %v, want %v", command, dir, r.lazyOrigins, want)
			}
			if !want && objects[0].Source != "plain/cm.yaml" {
				t.Errorf("%s of %s: source %q", command, dir, objects[0].Source)
			}
		}
	}
	// A build asked for without origins (build, diff-artifact) never
	// looks them up.
	r := newRun("apply", Options{Build: sources.BuildOptions{Path: filepath.Join(root, "app"), WorkDir: root, NoOrigins: true}}, nil, nil)
	if _, _, err := r.build(); err != nil || r.lazyOrigins {
		t.Errorf("NoOrigins given: lazy %v, %v", r.lazyOrigins, err)
	}
}

// What a check says of a Secret's data (the character a JSON parser
// stopped at, a piece of a decrypted value a replacement put there) is
// not shown: only that the field is invalid.
func TestProblemsOfSecretDataAreNotShown(t *testing.T) {
	t.Parallel()
	o := &sources.Object{Unstructured: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "gen", "namespace": "shop"},
		"type": "kubernetes.io/dockerconfigjson", "stringData": map[string]any{".dockerconfigjson": `{"a" 4`},
	}}}
	r := newRun("validate", Options{}, nil, &infos{})
	err := &schemas.InvalidError{Kind: "Secret", Name: "gen", Problems: []schemas.Problem{
		{Field: "data[.dockerconfigjson]", Message: "Invalid value: \"<secret contents redacted>\": invalid character '4' after object key"},
		{Field: "metadata.name", Message: "Invalid value: \"gen\": too short"},
	}}
	oe := r.objectError(o, err)
	text := oe.Error() + oe.Err.Error()
	for _, p := range oe.Problems {
		text += p.At("")
	}
	if strings.Contains(text, "'4'") || !strings.Contains(text, "too short") {
		t.Errorf("%s", text)
	}
}

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
