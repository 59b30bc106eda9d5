package sources

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/diffs"
	"github.com/gantry-dev/gantry/e2e/sopsfixture"
)

// attackTree writes files under a temp dir and encrypts the named ones.
func attackTree(t *testing.T, c *sopsfixture.CLI, files map[string]string, enc map[string][]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, s := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, args := range enc {
		c.Encrypt(t, filepath.Join(dir, p), args...)
	}
	return dir
}

func attackBuild(t *testing.T, c *sopsfixture.CLI, dir, overlay, canary string) {
	t.Helper()
	objs, err := Build(BuildOptions{Path: filepath.Join(dir, overlay), WorkDir: dir, SOPSIdentities: c.Identities(t)})
	if err != nil {
		t.Logf("REFUSED: %v", err)
		return
	}
	leaked := false
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" {
			continue
		}
		d, _ := o.Object["data"].(map[string]any)
		t.Logf("built %s %s data=%v", o.GetKind(), o.GetName(), d)
		for _, v := range d {
			if s, ok := v.(string); ok && strings.Contains(canary, s) && len(s) > 3 {
				leaked = true
			}
		}
	}
	if leaked {
		t.Errorf("LEAK: a piece of a decrypted value reached a plain ConfigMap without refusal")
	}
}

const attackSecretMeta = `apiVersion: v1
kind: Secret
metadata:
  name: db
  annotations:
    note: canary-metaWleak-77
stringData:
  password: canary-passWword-93c
`

const attackSettings = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  first: x
`

// A: SOPS (no encrypted_regex) encrypts metadata values; taint skips metadata.
func TestAttackMetadataAnnotationPiece(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/secret.yaml":        attackSecretMeta,
		"base/settings.yaml":      attackSettings,
		"base/kustomization.yaml": "resources: [secret.yaml, settings.yaml]\n",
		"o/kustomization.yaml": `resources: [../base]
replacements:
- source:
    kind: Secret
    name: db
    fieldPath: metadata.annotations.note
    options: {delimiter: "W", index: 0}
  targets:
  - select: {kind: ConfigMap, name: settings}
    fieldPaths: [data.first]
`,
	}, map[string][]string{"base/secret.yaml": nil})
	b, _ := os.ReadFile(filepath.Join(dir, "base/secret.yaml"))
	t.Logf("encrypted file:\n%s", b[:min(len(b), 400)])
	attackBuild(t, c, dir, "o", "canary-metaWleak-77")
}

// A2: the encrypted name itself.
func TestAttackMetadataNamePiece(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: canary-nameWleak-88
stringData:
  password: canary-passWword-93c
`,
		"base/settings.yaml":      attackSettings,
		"base/kustomization.yaml": "resources: [secret.yaml, settings.yaml]\n",
		"o/kustomization.yaml": `resources: [../base]
replacements:
- source:
    kind: Secret
    fieldPath: metadata.name
    options: {delimiter: "W", index: 0}
  targets:
  - select: {kind: ConfigMap, name: settings}
    fieldPaths: [data.first]
`,
	}, map[string][]string{"base/secret.yaml": nil})
	attackBuild(t, c, dir, "o", "canary-nameWleak-88")
}

// B: a dotenv key named like a top-level object field is never tainted.
func TestAttackDotenvKeyNamedKind(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/secret.env":    "kind=canary-kindWleak-55\nmetadata=canary-metadWleak-66\n",
		"base/settings.yaml": attackSettings,
		"base/kustomization.yaml": `resources: [settings.yaml]
configMapGenerator:
- name: gen
  envs: [secret.env]
`,
		"o/kustomization.yaml": `resources: [../base]
replacements:
- source:
    kind: ConfigMap
    name: gen
    fieldPath: data.kind
    options: {delimiter: "W", index: 0}
  targets:
  - select: {kind: ConfigMap, name: settings}
    fieldPaths: [data.first]
`,
	}, map[string][]string{"base/secret.env": {"--input-type", "dotenv", "--output-type", "dotenv"}})
	attackBuild(t, c, dir, "o", "canary-kindWleak-55")
}

// C: a plain object claims the encrypted file as its origin.
func TestAttackOriginSpoof(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/secret.yaml":        attackSecretMeta,
		"base/kustomization.yaml": "resources: [secret.yaml]\n",
		"o/settings.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    config.kubernetes.io/origin: |
      path: ../base/secret.yaml
data:
  first: x
`,
		"o/kustomization.yaml": `resources: [../base, settings.yaml]
replacements:
- source:
    kind: Secret
    name: db
    fieldPath: stringData.password
    options: {delimiter: "W", index: 0}
  targets:
  - select: {kind: ConfigMap, name: settings}
    fieldPaths: [data.first]
`,
	}, map[string][]string{"base/secret.yaml": {"--encrypted-regex", "^(data|stringData)$"}})
	attackBuild(t, c, dir, "o", "canary-passWword-93c")
}

// C2: a plain ConfigMap claims to be generated (configuredBy), taking a
// whole value: allowed, but is it masked? and a piece?
func TestAttackGeneratedSpoofSecretKind(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/secret.yaml":        attackSecretMeta,
		"base/kustomization.yaml": "resources: [secret.yaml]\n",
		"o/settings.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    config.kubernetes.io/origin: |
      path: settings.yaml
      configuredIn: kustomization.yaml
      configuredBy:
        apiVersion: builtin
        kind: ConfigMapGenerator
data:
  first: x
`,
		"o/kustomization.yaml": `resources: [../base, settings.yaml]
replacements:
- source:
    kind: Secret
    name: db
    fieldPath: stringData.password
    options: {delimiter: "W", index: 0}
  targets:
  - select: {kind: ConfigMap, name: settings}
    fieldPaths: [data.first]
`,
	}, map[string][]string{"base/secret.yaml": {"--encrypted-regex", "^(data|stringData)$"}})
	attackBuild(t, c, dir, "o", "canary-passWword-93c")
}

// P4: a generator-made ConfigMap mixing a literal and a piece.
func TestAttackGeneratorMixLiteralPiece(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/secret.yaml":        attackSecretMeta,
		"base/kustomization.yaml": "resources: [secret.yaml]\n",
		"o/kustomization.yaml": `resources: [../base]
configMapGenerator:
- name: gen
  literals: [first=x, plain=hello]
replacements:
- source:
    kind: Secret
    name: db
    fieldPath: stringData.password
    options: {delimiter: "W", index: 0}
  targets:
  - select: {kind: ConfigMap, name: gen}
    fieldPaths: [data.first]
`,
	}, map[string][]string{"base/secret.yaml": {"--encrypted-regex", "^(data|stringData)$"}})
	attackBuild(t, c, dir, "o", "canary-passWword-93c")
}

// P5: configMapGenerator files: an encrypted YAML file, whole.
func TestAttackGeneratorFilesEncrypted(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/conf.yaml": "password: canary-fileWleak-11\n",
		"base/kustomization.yaml": `configMapGenerator:
- name: gen
  files: [conf.yaml]
`,
	}, map[string][]string{"base/conf.yaml": nil})
	attackBuild(t, c, dir, "base", "x")
}

// P6: the generated Secret's name (hash of the decrypted content) copied
// into a plain ConfigMap.
func TestAttackNameHash(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/secret.env":    "pin=4711\n",
		"base/settings.yaml": attackSettings,
		"base/kustomization.yaml": `resources: [settings.yaml]
secretGenerator:
- name: gen
  envs: [secret.env]
replacements:
- source: {kind: Secret, name: gen, fieldPath: metadata.name}
  targets:
  - select: {kind: ConfigMap, name: settings}
    fieldPaths: [data.first]
`,
	}, map[string][]string{"base/secret.env": {"--input-type", "dotenv", "--output-type", "dotenv"}})
	attackBuild(t, c, dir, "base", "x")
}

// P7: an encrypted patch file's metadata.annotations land in a plain object.
func TestAttackEncryptedPatchAnnotations(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/patch.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    note: canary-patchWleak-22
data:
  first: y
`,
		"base/settings.yaml": attackSettings,
		"base/kustomization.yaml": `resources: [settings.yaml]
patches:
- path: patch.yaml
`,
	}, map[string][]string{"base/patch.yaml": {"--encrypted-regex", "^(annotations)$"}})
	objs, err := Build(BuildOptions{Path: filepath.Join(dir, "base"), WorkDir: dir, SOPSIdentities: c.Identities(t)})
	if err != nil {
		t.Logf("REFUSED: %v", err)
		return
	}
	for _, o := range objs {
		t.Logf("built %s %s annotations=%v", o.GetKind(), o.GetName(), o.GetAnnotations())
	}
}

func TestAttackPieceIntoOwnObjectAnnotation(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/secret.yaml":        attackSecretMeta,
		"base/kustomization.yaml": "resources: [secret.yaml]\n",
		"o/kustomization.yaml": `resources: [../base]
replacements:
- source:
    kind: Secret
    name: db
    fieldPath: stringData.password
    options: {delimiter: "W", index: 0}
  targets:
  - select: {kind: Secret, name: db}
    fieldPaths: [metadata.annotations.leak]
    options: {create: true}
`,
	}, map[string][]string{"base/secret.yaml": {"--encrypted-regex", "^(data|stringData)$"}})
	objs, err := Build(BuildOptions{Path: filepath.Join(dir, "o"), WorkDir: dir, SOPSIdentities: c.Identities(t)})
	if err != nil {
		t.Logf("REFUSED: %v", err)
		return
	}
	for _, o := range objs {
		t.Logf("built %s %s annotations=%v", o.GetKind(), o.GetName(), o.GetAnnotations())
		whole := func(v string) string {
			if v == "canary-passWword-93c" || v == "canary-metaWleak-77" {
				return "***"
			}
			return v
		}
		d, derr := diffs.ObjectMasked("Secret db", nil, o.Unstructured, whole)
		t.Logf("diff (whole-value mask):\n%s %v", d, derr)
		if o.GetAnnotations()["leak"] == "canary-pass" {
			t.Errorf("LEAK: a piece in the Secret's annotations")
		}
	}
}

func TestAttackPieceIntoGeneratedSecretLabel(t *testing.T) {
	c := sopsfixture.New(t)
	dir := attackTree(t, c, map[string]string{
		"base/secret.yaml":        attackSecretMeta,
		"base/kustomization.yaml": "resources: [secret.yaml]\n",
		"o/kustomization.yaml": `resources: [../base]
secretGenerator:
- name: carrier
  literals: [a=b]
replacements:
- source:
    kind: Secret
    name: db
    fieldPath: stringData.password
    options: {delimiter: "W", index: 0}
  targets:
  - select: {kind: Secret, name: carrier}
    fieldPaths: [metadata.labels.leak]
    options: {create: true}
`,
	}, map[string][]string{"base/secret.yaml": {"--encrypted-regex", "^(data|stringData)$"}})
	objs, err := Build(BuildOptions{Path: filepath.Join(dir, "o"), WorkDir: dir, SOPSIdentities: c.Identities(t)})
	if err != nil {
		t.Logf("REFUSED: %v", err)
		return
	}
	for _, o := range objs {
		t.Logf("built %s %s labels=%v", o.GetKind(), o.GetName(), o.GetLabels())
		if o.GetLabels()["leak"] == "canary-pass" {
			t.Errorf("LEAK: a piece in a generated Secret's labels")
		}
	}
}
