package sources

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gantry-dev/gantry/e2e/sopsfixture"
)

// secretValues is an object's data (base64-decoded) and stringData.
func secretValues(t *testing.T, o *Object) map[string]string {
	t.Helper()
	out := map[string]string{}
	if m, ok := o.Object["data"].(map[string]any); ok {
		for k, v := range m {
			b, err := base64.StdEncoding.DecodeString(v.(string))
			if err != nil {
				if o.GetKind() == "ConfigMap" {
					out[k] = v.(string)
					continue
				}
				t.Fatalf("%s: data.%s: %v", o.Ref(), k, err)
			}
			out[k] = string(b)
		}
	}
	if m, ok := o.Object["stringData"].(map[string]any); ok {
		for k, v := range m {
			out[k] = v.(string)
		}
	}
	return out
}

// Every case Flux's kustomize-controller decrypts, in one overlay of our
// own: objects (also transformed by labels and name prefixes), dotenv,
// binary, JSON and INI generator sources, encrypted patches, a Secret
// holding an encrypted file, a JSON manifest, a multi-document file and a
// component.
func TestSOPSFluxCases(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	dir := c.Tree(t, "testdata/sops")
	var mu sync.Mutex
	var revealed []string
	objects, err := Build(BuildOptions{Path: dir, WorkDir: dir, SOPSIdentities: c.Identities(t), Decrypted: func(v []string) {
		mu.Lock()
		defer mu.Unlock()
		revealed = append(revealed, v...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, o := range objects {
		if where := sopsRemnant(o); where != "" {
			t.Errorf("%s still encrypted at %s", o.Ref(), where)
		}
		got[o.GetKind()+"/"+o.GetName()] = secretValues(t, o)
	}
	want := map[string]map[string]string{
		"Secret/sops-algo-age":          {"key": "canary-age-7f3"},
		"Secret/sops-algo-full":         {"token": "canary-full-2d9"},
		"Secret/sops-envs-secret":       {"DB_USER": "canary-env-user", "DB_PASSWORD": "canary-env-5b1"},
		"ConfigMap/sops-envs-configmap": {"DB_USER": "canary-env-user", "DB_PASSWORD": "canary-env-5b1"},
		"Secret/sops-files-secret": {
			"key": "canary-binary-9c4\nsecond line\n",
			// As the sops library's JSON and INI stores emit them.
			"config.json": "{\n\"user\": \"app\",\n\"password\": \"canary-json-1e8\"\n}\n",
			"app.ini":     "[database]\nuser     = app\npassword = canary-ini-6a2\n",
		},
		"ConfigMap/sops-files-configmap": {"key": "canary-binary-9c4\nsecond line\n"},
		"Secret/sops-patches-secret":     {"key": "canary-patch-3d7", "merge2": "canary-patch-8e2"},
		"Secret/sops-inside-secret":      {"key": "canary-inside-4f0"},
		"Secret/sops-json":               {"key": "canary-jsonobj-0b5"},
		"Secret/sops-multi-one":          {"key": "canary-multi-1a1"},
		"Secret/sops-multi-two":          {"key": "canary-multi-2b2"},
		"Secret/sops-component":          {"API_TOKEN": "canary-component-77d"},
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s not built; got %v", name, slices.Sorted(func(yield func(string) bool) {
				for k := range got {
					if !yield(k) {
						return
					}
				}
			}))
			continue
		}
		for k, v := range w {
			// The patch target's generated value is overridden by
			// stringData; data keeps the literal.
			if g[k] != v {
				t.Errorf("%s %s = %q, want %q", name, k, g[k], v)
			}
		}
	}
	for _, o := range objects {
		if o.GetName() == "sops-algo-age" && o.GetLabels()["team"] != "payments" {
			t.Errorf("labels transformer lost on an encrypted object: %v", o.GetLabels())
		}
	}
	for _, canary := range []string{"canary-age-7f3", "canary-env-5b1", "canary-json-1e8", "canary-patch-8e2", "canary-inside-4f0", "canary-component-77d"} {
		if !slices.ContainsFunc(revealed, func(s string) bool { return strings.Contains(s, canary) }) {
			t.Errorf("%s was decrypted but not reported for masking", canary)
		}
	}
	for _, s := range revealed {
		if s == "v1" || s == "Secret" {
			t.Errorf("a value SOPS left in clear was reported for masking: %q", s)
		}
	}
}

// The order people write a Secret in by hand (apiVersion, kind, metadata,
// data, type), in a plain folder with no kustomization: the MAC covers
// values in document order, and the file is decrypted as sops wrote it.
func TestSOPSHandwrittenOrderPlainFolder(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	dir := c.Tree(t, "testdata/sops")
	objects, err := Build(BuildOptions{Path: filepath.Join(dir, "ordered"), WorkDir: dir, SOPSIdentities: c.Identities(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1 || secretValues(t, objects[0])["password"] != "canary-ordered-5c9" || objects[0].Source != "ordered/secret.yaml" {
		t.Fatalf("got %+v", objects)
	}
	// The same through the wrapper a target namespace needs.
	objects, err = Build(BuildOptions{Path: filepath.Join(dir, "ordered"), WorkDir: dir, SOPSIdentities: c.Identities(t), TargetNamespace: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if objects[0].GetNamespace() != "other" || secretValues(t, objects[0])["password"] != "canary-ordered-5c9" {
		t.Fatalf("with target-namespace: %v", objects[0].Object)
	}
}

// Every way an encrypted file can fail is refused at the build, naming the
// file, and never quoting a value.
func TestSOPSRefusals(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	other := sopsfixture.New(t)
	noCanary := func(t *testing.T, err error) {
		t.Helper()
		if err != nil && strings.Contains(err.Error(), "canary") {
			t.Errorf("the error quotes a value: %v", err)
		}
	}
	t.Run("no key", func(t *testing.T) {
		dir := c.Tree(t, "testdata/sops")
		_, err := Build(BuildOptions{Path: dir, WorkDir: dir})
		if err == nil || !strings.Contains(err.Error(), ".yaml: encrypted with SOPS: give sops-age-key") {
			t.Errorf("got %v", err)
		}
		noCanary(t, err)
	})
	t.Run("no key for a generator source", func(t *testing.T) {
		dir := c.Tree(t, "testdata/sops")
		_, err := Build(BuildOptions{Path: filepath.Join(dir, "envs"), WorkDir: dir})
		if err == nil || !strings.HasPrefix(err.Error(), "envs/env.env: encrypted with SOPS") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("another key", func(t *testing.T) {
		dir := c.Tree(t, "testdata/sops")
		_, err := Build(BuildOptions{Path: filepath.Join(dir, "patches"), WorkDir: dir, SOPSIdentities: other.Identities(t)})
		if err == nil || !strings.Contains(err.Error(), "patches/merge1.yaml: none of the sops-age-key identities can decrypt it") {
			t.Errorf("got %v", err)
		}
		noCanary(t, err)
	})
	t.Run("a value edited by hand", func(t *testing.T) {
		dir := c.Tree(t, "testdata/sops")
		f := filepath.Join(dir, "ordered", "secret.yaml")
		b, _ := os.ReadFile(f)
		// A value sops left in clear, changed by hand: the MAC covers it.
		b = []byte(strings.Replace(string(b), "namespace: shop", "namespace: prod", 1))
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Build(BuildOptions{Path: filepath.Join(dir, "ordered"), WorkDir: dir, SOPSIdentities: c.Identities(t)})
		if err == nil || !strings.Contains(err.Error(), "ordered/secret.yaml: SOPS integrity check (MAC) failed") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("values pasted without metadata", func(t *testing.T) {
		dir := c.Tree(t, "testdata/sops")
		enc, _ := os.ReadFile(filepath.Join(dir, "algorithms", "age.yaml"))
		value := regexp.MustCompile(`ENC\[[^\]]*\]`).Find(enc)
		plain := t.TempDir()
		manifest := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: pasted\nstringData:\n  key: " + string(value) + "\n"
		if err := os.WriteFile(filepath.Join(plain, "secret.yaml"), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Build(BuildOptions{Path: plain, WorkDir: plain, SOPSIdentities: c.Identities(t)})
		if err == nil || !strings.Contains(err.Error(), "secret.yaml: Secret/pasted still holds SOPS-encrypted content at stringData.key") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("dotenv sops keys in a generated ConfigMap", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("configMapGenerator:\n- name: x\n  literals: [sops_mac=ENC-not-really]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Build(BuildOptions{Path: dir, WorkDir: dir})
		if err == nil || !strings.Contains(err.Error(), "still holds SOPS-encrypted content at data.sops_mac") {
			t.Errorf("got %v", err)
		}
	})
}

// A push packs encrypted objects as they are, decrypts nothing, and
// refuses encrypted files it could only pack decrypted.
func TestSOPSKeptForPush(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	dir := c.Tree(t, "testdata/sops")
	objects, err := Build(BuildOptions{Path: filepath.Join(dir, "algorithms"), WorkDir: dir, KeepSOPSEncrypted: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 2 || !objects[0].Encrypted || !objects[1].Encrypted {
		t.Fatalf("not kept encrypted: %+v", objects)
	}
	// Built without recording files (as a diff builds), the check that
	// every kept file built to an object needs them: the set is built
	// again with them, never lost.
	quick, err := Build(BuildOptions{Path: filepath.Join(dir, "algorithms"), WorkDir: dir, KeepSOPSEncrypted: true, NoOrigins: true})
	if err != nil || len(quick) != 2 {
		t.Fatalf("built without files: %d objects, %v", len(quick), err)
	}
	packed, err := ManifestsYAML(objects)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(packed), "canary") || !strings.Contains(string(packed), "sops:") {
		t.Fatalf("packed:\n%s", packed)
	}
	// What was packed decrypts again, as gantry and Flux read an
	// artifact: the objects are joined into one stream and were
	// relabelled and renamed, so each is decrypted on its own.
	pulled := t.TempDir()
	if err := os.WriteFile(filepath.Join(pulled, "manifests.yaml"), packed, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := Build(BuildOptions{Path: pulled, WorkDir: pulled, SOPSIdentities: c.Identities(t), Packed: true})
	if err != nil {
		t.Fatal(err)
	}
	if v := secretValues(t, back[0])["key"]; v != "canary-age-7f3" || back[0].GetName() != "algo-age" {
		t.Errorf("round trip: %s %q", back[0].GetName(), v)
	}

	for _, sub := range []string{"envs", "patches", "files"} {
		_, err := Build(BuildOptions{Path: filepath.Join(dir, sub), WorkDir: dir, KeepSOPSEncrypted: true})
		if err == nil || !strings.Contains(err.Error(), "this SOPS-encrypted file is a patch or a generator source") || !strings.HasPrefix(err.Error(), sub+"/") {
			t.Errorf("%s: got %v", sub, err)
		}
	}
	// A Secret that holds an encrypted file is packed as it is.
	objects, err = Build(BuildOptions{Path: filepath.Join(dir, "inside"), WorkDir: dir, KeepSOPSEncrypted: true})
	if err != nil || !objects[0].Encrypted {
		t.Fatalf("inside: %v", err)
	}
}

func TestSOPSFormatOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, data string
		want       string
	}{
		{"a.yaml", "kind: Secret\nsops:\n    mac: ENC[AES256_GCM,data:x]\n", "yaml"},
		{"a.yaml", "kind: ConfigMap\ndata:\n  doc: 'sops:'\n", ""},
		{"a.yaml", "kind: ConfigMap\ndata:\n  sops: |\n    mac: ENC[x]\n", ""},
		{"a.json", `{"kind": "Secret", "sops": {"mac": "ENC[AES256_GCM,x]"}}`, "json"},
		{"file.txt", `{"data": "ENC[x]", "sops": {"mac": "ENC[AES256_GCM,x]"}}`, "binary"},
		{"other.txt", `{"user": "ENC[x]", "sops": {"mac": "ENC[AES256_GCM,x]"}}`, "json"},
		{"a.env", "A=ENC[x]\nsops_mac=ENC[AES256_GCM,x]\n", "dotenv"},
		{"secrets", "A=ENC[x]\nsops_mac=ENC[AES256_GCM,x]\n", "dotenv"},
		{"a.ini", "[a]\nb = ENC[x]\n[sops]\nmac = ENC[AES256_GCM,x]\n", "ini"},
		{"a.env", "A=b\n", ""},
	} {
		f, ok := sopsFormatOf(tc.name, []byte(tc.data))
		got := ""
		if ok {
			got = map[int]string{0: "binary", 1: "dotenv", 2: "ini", 3: "json", 4: "yaml"}[int(f)]
		}
		if got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.name, tc.data, got, tc.want)
		}
	}
}

// A plain document appended to a file SOPS wrote would take the file out
// of its MAC's reach (each object decrypted on its own, unchecked): the
// Secret's namespace, changed by hand, would pass. Such a file is refused,
// naming it, with or without the key; an artifact's packed stream, which
// joins objects of several files, is decrypted object by object.
func TestSOPSFileWithAnAppendedDocumentIsRefused(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "secret.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: shop\nstringData:\n  password: canary-mac-5e1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Encrypt(t, file, "--encrypted-regex", "^(data|stringData)$")
	enc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// As it is, the file decrypts.
	if _, err := Build(BuildOptions{Path: dir, WorkDir: dir, SOPSIdentities: c.Identities(t)}); err != nil {
		t.Fatalf("the file as sops wrote it: %v", err)
	}
	// Its namespace changed by hand: the MAC refuses it.
	tampered := strings.Replace(string(enc), "namespace: shop", "namespace: kube-system", 1)
	if err := os.WriteFile(file, []byte(tampered), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(BuildOptions{Path: dir, WorkDir: dir, SOPSIdentities: c.Identities(t)}); err == nil || !strings.Contains(err.Error(), "MAC") {
		t.Errorf("a changed namespace: %v, want the MAC to refuse it", err)
	}
	// And with a plain document appended, too.
	appended := tampered + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  namespace: shop\n"
	if err := os.WriteFile(file, []byte(appended), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []BuildOptions{
		{Path: dir, WorkDir: dir, SOPSIdentities: c.Identities(t)},
		{Path: dir, WorkDir: dir, KeepSOPSEncrypted: true},
	} {
		objs, err := Build(opts)
		if err == nil || !strings.Contains(err.Error(), "secret.yaml") || !strings.Contains(err.Error(), "MAC") {
			t.Errorf("a plain document appended (key given: %v): %d objects, %v", opts.SOPSIdentities != nil, len(objs), err)
		}
	}
}

// A decrypted value goes nowhere kustomize could carry it but the object
// its encrypted file defines. A replacement that copies a SOPS Secret's
// password into a ConfigMap in two pieces (delimiter "w", index 0 and 1),
// whole, or into a plain Secret is refused at build, naming the object
// and the fields, never the value; the encrypted object itself, renamed
// and relabelled by kustomize, builds.
func TestDecryptedValuesGoOnlyWhereTheirFileSays(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	dir := c.Tree(t, "testdata/sopsflows")
	for _, tc := range []struct{ overlay, object, field string }{
		{"split", "ConfigMap settings", "/data/first"},
		{"whole", "ConfigMap settings", "/data/first"},
		{"intosecret", "Secret copy", "/stringData/password"},
	} {
		for _, noOrigins := range []bool{false, true} {
			_, err := Build(BuildOptions{Path: filepath.Join(dir, tc.overlay), WorkDir: dir, SOPSIdentities: c.Identities(t), NoOrigins: noOrigins})
			var pe *ProvenanceError
			if !errors.As(err, &pe) {
				t.Errorf("%s: %v, want the flow refused", tc.overlay, err)
				continue
			}
			if pe.Object != tc.object || !slices.Contains(pe.Fields, tc.field) {
				t.Errorf("%s: refused %s at %v, want %s at %s", tc.overlay, pe.Object, pe.Fields, tc.object, tc.field)
			}
			if msg := err.Error(); strings.Contains(msg, "canary") || strings.Contains(msg, "password-93c") {
				t.Errorf("%s: the refusal shows the value: %s", tc.overlay, msg)
			}
			if !strings.Contains(err.Error(), "base/secret.yaml") {
				t.Errorf("%s: the refusal does not name the encrypted file: %v", tc.overlay, err)
			}
		}
	}
	objects, err := Build(BuildOptions{Path: filepath.Join(dir, "ownobject"), WorkDir: dir, SOPSIdentities: c.Identities(t)})
	if err != nil {
		t.Fatalf("the encrypted object, renamed and relabelled: %v", err)
	}
	for _, o := range objects {
		if o.GetName() == "app-db" && secretValues(t, o)["password"] != "canary-splitwpassword-93c" {
			t.Errorf("app-db holds %v", secretValues(t, o))
		}
	}
}
