package sources

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/e2e/sopsfixture"
)

const pinSecret = `apiVersion: v1
kind: Secret
metadata: {name: db, namespace: default}
stringData:
  pin: "482913"
`

// A replacement that copies a decrypted PIN into its own Secret's name is
// refused, and the refusal names the Secret by its kind and file, never
// by the name that would show the PIN; whether the file encrypted only
// its data or everything (its name too). Before, the Secret built as
// Secret/default/482913, and names are printed everywhere.
func TestDecryptedValueIntoItsOwnName(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	for name, tc := range map[string]struct {
		enc    []string
		prefix string
	}{
		"data only":  {enc: []string{"--encrypted-regex", "^(data|stringData)$"}},
		"whole file": {},
		// The name it had, around the PIN: still not its own name.
		"whole file, its name as a prefix":      {prefix: "db-"},
		"whole file, its namespace as a prefix": {prefix: "default-"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := attackTree(t, c, map[string]string{
				"base/secret.yaml":        pinSecret,
				"base/kustomization.yaml": "resources: [secret.yaml]\n",
				"pr/kustomization.yaml": "namePrefix: " + tc.prefix + "\n" + `resources: [../base]
replacements:
- source: {kind: Secret, fieldPath: stringData.pin}
  targets:
  - select: {kind: Secret}
    fieldPaths: [metadata.name]
`,
			}, map[string][]string{"base/secret.yaml": tc.enc})
			objs, err := Build(BuildOptions{Path: filepath.Join(dir, "pr"), WorkDir: dir, SOPSIdentities: c.Identities(t)})
			var pe *ProvenanceError
			if !errors.As(err, &pe) {
				t.Errorf("built %d objects, error %v; want a provenance refusal", len(objs), err)
			}
			if strings.Contains(err.Error(), "482913") {
				t.Errorf("the refusal shows the PIN: %v", err)
			}
		})
	}
	// A file that encrypts its own name keeps it: the name is shown, as
	// every object's is.
	dir := attackTree(t, c, map[string]string{"base/secret.yaml": pinSecret, "base/kustomization.yaml": "resources: [secret.yaml]\nnamePrefix: app-\n"},
		map[string][]string{"base/secret.yaml": nil})
	objs, err := Build(BuildOptions{Path: filepath.Join(dir, "base"), WorkDir: dir, SOPSIdentities: c.Identities(t)})
	if err != nil || len(objs) != 1 || objs[0].GetName() != "app-db" {
		t.Fatalf("%v", err)
	}
}

// What kustomize and the provenance check say when a build that
// decrypted a PIN fails holds neither the PIN nor the value it was
// changed to in the build with other values (which undoes to it): an
// index out of bounds for the value, the tainted object's kind or name,
// the tainted build's own error, an id conflict, a panic of kustomize.
func TestBuildErrorsHideDecryptedValues(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	const source = "- source: {kind: Secret, name: db, fieldPath: stringData.pin"
	cms := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a-x, namespace: %s}\ndata: {x: y}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b-x, namespace: %s}\ndata: {x: y}\n"
	for name, tc := range map[string]struct{ kustomization, cms string }{
		"index out of bounds":        {"resources: [secret.yaml, cms.yaml]\nreplacements:\n" + source + ", options: {delimiter: \"-\", index: 3}}\n  targets: [{select: {kind: ConfigMap, name: a-x}, fieldPaths: [data.x]}]\n", fmt.Sprintf(cms, "default", "default")},
		"into a kind":                {"resources: [secret.yaml, cms.yaml]\nreplacements:\n" + source + "}\n  targets: [{select: {kind: ConfigMap, name: a-x}, fieldPaths: [kind]}]\n", fmt.Sprintf(cms, "default", "default")},
		"into a name piece":          {"resources: [secret.yaml, cms.yaml]\nreplacements:\n" + source + "}\n  targets: [{select: {kind: ConfigMap, name: a-x}, fieldPaths: [metadata.name], options: {delimiter: \"-\", index: 1}}]\n", fmt.Sprintf(cms, "default", "default")},
		"tainted build fails":        {"resources: [secret.yaml, cms.yaml]\nreplacements:\n" + source + ", options: {delimiter: \"8\", index: 1}}\n  targets: [{select: {kind: ConfigMap, name: a-x}, fieldPaths: [data.x]}]\n", fmt.Sprintf(cms, "default", "default")},
		"one id twice":               {"resources: [secret.yaml, cms.yaml]\nreplacements:\n" + source + "}\n  targets: [{select: {kind: ConfigMap}, fieldPaths: [metadata.name]}]\n", fmt.Sprintf(cms, "default", "default")},
		"one id twice, by namespace": {"resources: [base]\nnamespace: default\n", ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{"secret.yaml": pinSecret, "kustomization.yaml": tc.kustomization, "cms.yaml": tc.cms}
			enc := map[string][]string{"secret.yaml": {"--encrypted-regex", "^(data|stringData)$"}}
			if tc.cms == "" {
				files = map[string]string{"base/secret.yaml": pinSecret, "kustomization.yaml": tc.kustomization, "base/cms.yaml": fmt.Sprintf(cms, "x", "y"),
					"base/kustomization.yaml": "resources: [secret.yaml, cms.yaml]\nreplacements:\n" + source + "}\n  targets: [{select: {kind: ConfigMap}, fieldPaths: [metadata.name]}]\n"}
				enc = map[string][]string{"base/secret.yaml": enc["secret.yaml"]}
			}
			dir := attackTree(t, c, files, enc)
			_, err := Build(BuildOptions{Path: dir, WorkDir: dir, SOPSIdentities: c.Identities(t)})
			if err == nil {
				t.Fatal("built")
			}
			if msg := err.Error(); strings.Contains(msg, "482913") || strings.Contains(msg, "593024") {
				t.Errorf("%s", msg)
			}
		})
	}
}
