package pipeline

import (
	"errors"
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
		"whole file, its name as a prefix": {prefix: "db-"},
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
