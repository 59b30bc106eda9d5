package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/e2e/sopsfixture"
	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
)

// The overlay of every SOPS case Flux decrypts (encrypted objects in any
// key order, generator sources in dotenv, binary, JSON and INI, encrypted
// patches, a Secret holding an encrypted file, a component), encrypted by
// the real sops CLI, applies decrypted; nothing decrypted is printed or
// reported. Every still-encrypted case is refused before anything is
// written.
func TestSOPSFluxShapedOverlayApplies(t *testing.T) {
	t.Parallel()
	env.Require(t)
	ns := env.Namespace(t)
	c := sopsfixture.New(t)
	dir := c.Tree(t, "../sources/testdata/sops")
	args := []string{"apply", "--path=" + dir, "--target-namespace=" + ns, "--inventory=sops-flux", "--inventory-namespace=" + ns, "--wait=false"}

	// Refused, naming the file, with nothing written: no key, another
	// key, a value pasted without its metadata.
	other := sopsfixture.New(t)
	pasted := t.TempDir()
	enc, err := os.ReadFile(filepath.Join(dir, "algorithms", "age.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	value := regexp.MustCompile(`ENC\[[^\]]*\]`).Find(enc)
	writeFile(t, filepath.Join(pasted, "secret.yaml"), "apiVersion: v1\nkind: Secret\nmetadata:\n  name: pasted\nstringData:\n  key: "+string(value)+"\n")
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no key":      {args, ": encrypted with SOPS: give sops-age-key"},
		"another key": {append(args, "--sops-age-key="+other.Key), ": none of the sops-age-key identities can decrypt it"},
		"pasted":      {[]string{"apply", "--path=" + pasted, "--target-namespace=" + ns, "--inventory=sops-flux", "--inventory-namespace=" + ns, "--sops-age-key=" + c.Key}, "Secret/" + ns + "/pasted still holds SOPS-encrypted content at stringData.key"},
	} {
		r := gantry(t, tc.args...)
		if r.code != entrypoint.ExitInvalid || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, want 2 and %q\n%s", name, r.code, tc.want, r.stderr)
		}
		if strings.Contains(r.stderr, "canary") {
			t.Errorf("%s: a value is printed:\n%s", name, r.stderr)
		}
	}
	ctx := context.Background()
	if list, err := env.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Fatalf("Secrets written by refused runs: %v %d", err, len(list.Items))
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName("sops-flux"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("inventory written by refused runs: %v", err)
	}

	r := gantry(t, append(args, "--sops-age-key="+c.Key)...)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	for name, want := range map[string]map[string]string{
		"sops-algo-age":       {"key": "canary-age-7f3"},
		"sops-envs-secret":    {"DB_PASSWORD": "canary-env-5b1"},
		"sops-files-secret":   {"key": "canary-binary-9c4\nsecond line\n"},
		"sops-patches-secret": {"key": "canary-patch-3d7", "merge2": "canary-patch-8e2"},
		"sops-inside-secret":  {"key": "canary-inside-4f0"},
		"sops-json":           {"key": "canary-jsonobj-0b5"},
		"sops-multi-two":      {"key": "canary-multi-2b2"},
		"sops-component":      {"API_TOKEN": "canary-component-77d"},
	} {
		s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("Secret %s: %v", name, err)
			continue
		}
		for k, v := range want {
			if string(s.Data[k]) != v {
				t.Errorf("Secret %s: %s = %q, want %q", name, k, s.Data[k], v)
			}
		}
		if _, ok := s.Data["sops_mac"]; ok {
			t.Errorf("Secret %s holds SOPS metadata", name)
		}
	}
	// The ConfigMap generated from the encrypted dotenv file is reported
	// with its diff, the decrypted values masked.
	if o := objectByRef(r, "ConfigMap/"+ns+"/sops-envs-configmap"); o == nil || !strings.Contains(o.Diff, "DB_PASSWORD: '***'") {
		t.Errorf("ConfigMap sops-envs-configmap in the report: %+v", o)
	}
	report, err := json.Marshal(r.res)
	if err != nil {
		t.Fatal(err)
	}
	if out := r.stdout + r.stderr + string(report); strings.Contains(out, "canary") {
		t.Errorf("a decrypted value is printed or reported:\n%s", out)
	}
}

// Values a SOPS file decrypts into a ConfigMap stay masked in every form
// the output gives them: one YAML quotes (a quote, a colon), one it would
// fold (longer than a line), one JSON escapes (&, <, >), and a Secret's
// value that a kustomize replacement copies, base64-encoded, into a
// ConfigMap. build, diff (text and JSON), the JSON report and the .diff
// file hold none of them.
func TestDecryptedValuesMaskedInEveryForm(t *testing.T) {
	t.Parallel()
	env.Require(t)
	ns := env.Namespace(t)
	c := sopsfixture.New(t)
	quoted := "it's: a " + canary("quoted")
	folded := canary("folded") + strings.Repeat(" and a long line", 8)
	escaped := "a&b<" + canary("escaped") + ">"
	copied := canary("copied-from-a-secret")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "app.env"), "QUOTED="+quoted+"\nFOLDED="+folded+"\nESCAPED="+escaped+"\n")
	c.Encrypt(t, filepath.Join(dir, "app.env"))
	writeFile(t, filepath.Join(dir, "secret.yaml"), "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: "+copied+"}\n")
	c.Encrypt(t, filepath.Join(dir, "secret.yaml"), "--encrypted-regex", "^(data|stringData)$")
	writeFile(t, filepath.Join(dir, "target.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: target}\ndata: {copy: placeholder}\n")
	writeFile(t, filepath.Join(dir, "kustomization.yaml"), `resources: [secret.yaml, target.yaml]
generatorOptions: {disableNameSuffixHash: true}
configMapGenerator:
  - name: decrypted
    envs: [app.env]
secretGenerator:
  - name: generated
    literals: [token=`+copied+`]
replacements:
  - source: {kind: Secret, name: generated, fieldPath: data.token}
    targets:
      - select: {kind: ConfigMap, name: target}
        fieldPaths: [data.copy]
`)
	secrets := []string{quoted, folded, escaped, copied}
	report := filepath.Join(t.TempDir(), "report.json")
	args := []string{"--path=" + dir, "--target-namespace=" + ns, "--sops-age-key=" + c.Key}
	runs := map[string]gantryRun{
		"build": gantry(t, append([]string{"build"}, args...)...),
		"diff":  gantry(t, append([]string{"diff", "--inventory=masks", "--inventory-namespace=" + ns, "--report=" + report}, args...)...),
		"json":  gantry(t, append([]string{"diff", "--output=json", "--inventory=masks", "--inventory-namespace=" + ns}, args...)...),
	}
	for name, r := range runs {
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", name, r.code, r.stderr)
		}
		res, _ := json.Marshal(r.res)
		for _, leak := range scanForSecrets(r.stdout+r.stderr+string(res), secrets...) {
			t.Errorf("%s prints %q", name, leak)
		}
	}
	for _, f := range []string{report, strings.TrimSuffix(report, ".json") + ".diff"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, leak := range scanForSecrets(string(b), secrets...) {
			t.Errorf("%s holds %q", filepath.Base(f), leak)
		}
	}
	if !strings.Contains(runs["build"].stdout, "name: target") || !strings.Contains(runs["build"].stdout, "QUOTED:") {
		t.Errorf("build printed:\n%s", runs["build"].stdout)
	}
}
