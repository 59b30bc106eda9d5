package e2e

import (
	"io"
	"log"
	"net/http/httptest"

	"context"
	"encoding/base64"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/oci"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"filippo.io/age"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/e2e/registry"
	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// realRegistry starts Debian's docker-registry for one test and returns its
// host and the flags that authenticate to it.
func realRegistry(t *testing.T) (string, []string) {
	t.Helper()
	env.Require(t)
	r, err := registry.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r.Host, []string{"--registry-username=" + r.Username, "--registry-password=" + r.Password}
}

func TestPushThenApplyFromArtifact(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	reg, creds := realRegistry(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "from-artifact"))
	ref := "oci://" + reg + "/acme/config:v1"

	pushed := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+ref, "--tags=latest", "--revision=main@sha1:0123")
	if pushed.code != 0 || pushed.res.Artifact == nil || !strings.HasPrefix(pushed.res.Artifact.Digest, "sha256:") {
		t.Fatalf("push: exit %d, artifact %+v\n%s", pushed.code, pushed.res.Artifact, pushed.stderr)
	}
	if got := strings.Join(pushed.res.Artifact.Tags, ","); got != "v1,latest" {
		t.Errorf("tags %q", got)
	}

	applied := gantryAuth(t, creds, "apply", "--artifact="+ref, "--inventory=art", "--inventory-namespace="+ns)
	if applied.code != 0 {
		t.Fatalf("apply from artifact: exit %d\n%s", applied.code, applied.stderr)
	}
	if applied.res.Artifact == nil || applied.res.Artifact.Digest != pushed.res.Artifact.Digest || applied.res.Revision != "main@sha1:0123" {
		t.Errorf("applied artifact %+v revision %q", applied.res.Artifact, applied.res.Revision)
	}
	if o := objectByRef(applied, "ConfigMap/"+ns+"/from-artifact"); o == nil || o.Action != result.Created || o.Source != "manifests.yaml" {
		t.Errorf("ConfigMap: %+v", o)
	}
	inv, err := (&inventory.Store{Client: env.Client}).Load(context.Background(), ns, "art")
	if err != nil || inv.ArtifactDigest != pushed.res.Artifact.Digest || !strings.Contains(inv.Source, "@"+pushed.res.Artifact.Digest) {
		t.Errorf("inventory %+v, %v", inv, err)
	}

	// path and artifact: build, push, apply in one run.
	writeFile(t, filepath.Join(dir, "b.yaml"), configMap(ns, "second"))
	both := gantryAuth(t, creds, "apply", "--path="+dir, "--artifact=oci://"+reg+"/acme/config:v2", "--inventory=art", "--inventory-namespace="+ns)
	if both.code != 0 || both.res.Artifact == nil || both.res.Artifact.Digest == pushed.res.Artifact.Digest {
		t.Fatalf("push and apply: exit %d, artifact %+v\n%s", both.code, both.res.Artifact, both.stderr)
	}
	var stages []string
	for _, s := range both.res.Stages {
		stages = append(stages, s.Name)
	}
	if got := strings.Join(stages, ","); got != "build,push,validate,apply,prune,wait" {
		t.Errorf("stages %s", got)
	}
}

// Every refusal exits as documented and writes nothing to the cluster.
func TestArtifactRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	open, creds := realRegistry(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "never"))
	if r := gantryAuth(t, creds, "push", "--path="+dir, "--artifact=oci://"+open+"/acme/app:v1"); r.code != 0 {
		t.Fatalf("push: exit %d\n%s", r.code, r.stderr)
	}
	// A registry that accepts connections and never answers.
	stalled, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stalled.Close() })
	go func() {
		for {
			c, err := stalled.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	cases := []struct {
		name, artifact string
		extra          []string
		code           int
		want           string
	}{
		{"stalled registry, within the timeout", "oci://" + stalled.Addr().String() + "/acme/app:v1", []string{"--timeout=2s"}, entrypoint.ExitFailed, "context deadline exceeded"},
		{"malformed reference", "oci://" + open + "/Acme App:v1", creds, entrypoint.ExitInvalid, "artifact (from --artifact)"},
		{"not oci://", open + "/acme/app:v1", creds, entrypoint.ExitInvalid, "must start with oci://"},
		{"registry unreachable", "oci://127.0.0.1:1/acme/app:v1", creds, entrypoint.ExitFailed, "connection refused"},
		{"401 from the registry (no credentials)", "oci://" + open + "/acme/app:v1", nil, entrypoint.ExitFailed, "401"},
		{"401 from the registry (wrong password)", "oci://" + open + "/acme/app:v1", []string{"--registry-username=gantry", "--registry-password=wrong"}, entrypoint.ExitFailed, "401"},
		{"no such tag", "oci://" + open + "/acme/app:v9", creds, entrypoint.ExitFailed, "MANIFEST_UNKNOWN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"apply", "--artifact=" + tc.artifact, "--inventory=refused", "--inventory-namespace=" + ns}, tc.extra...)
			r := gantry(t, args...)
			if r.took > 30*time.Second {
				t.Errorf("took %s", r.took)
			}
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, want %d with %q\n%s", r.code, tc.code, tc.want, r.stderr)
			}
			if tc.code == entrypoint.ExitFailed && r.res.Reason != result.ReasonArtifactFailed {
				t.Errorf("reason %s, want ArtifactFailed", r.res.Reason)
			}
		})
	}
	ctx := context.Background()
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "never", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap never was written: %v", err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName("refused"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an inventory was written: %v", err)
	}
}

// An encrypted artifact applies with the right identity; without one, or
// with another, it is refused and nothing is written.
func TestEncryptedArtifact(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	reg, creds := realRegistry(t)
	right, _ := age.GenerateX25519Identity()
	wrong, _ := age.GenerateX25519Identity()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "sealed"))
	ref := "oci://" + reg + "/acme/sealed:v1"
	if r := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+ref, "--age-recipients="+right.Recipient().String()); r.code != 0 {
		t.Fatalf("push: exit %d\n%s", r.code, r.stderr)
	}
	for name, id := range map[string]string{"no identity": "", "wrong identity": wrong.String()} {
		args := []string{"apply", "--artifact=" + ref, "--inventory=sealed", "--inventory-namespace=" + ns}
		if id != "" {
			args = append(args, "--age-identities="+id)
		}
		r := gantry(t, args...)
		if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonArtifactFailed {
			t.Errorf("%s: exit %d reason %s, want 1 ArtifactFailed\n%s", name, r.code, r.res.Reason, r.stderr)
		}
		if id != "" && strings.Contains(r.stderr, id) {
			t.Errorf("%s: the identity was printed", name)
		}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "sealed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: ConfigMap sealed was written: %v", name, err)
		}
	}
	r := gantryAuth(t, creds, "apply", "--artifact="+ref, "--inventory=sealed", "--inventory-namespace="+ns, "--age-identities="+right.String())
	if r.code != 0 {
		t.Fatalf("with the identity: exit %d\n%s", r.code, r.stderr)
	}
	if o := objectByRef(r, "ConfigMap/"+ns+"/sealed"); o == nil || o.Action != result.Created {
		t.Errorf("ConfigMap sealed: %+v", o)
	}
	if r := gantryAuth(t, creds, "inspect", "--artifact="+ref); r.code != 0 || !strings.Contains(r.stdout, "flux format:  false (age-encrypted: Flux cannot decrypt it)") {
		t.Errorf("inspect: exit %d\n%s", r.code, r.stdout)
	}
}

// A signed artifact applies when verified; unsigned or signed by another
// key, it is refused before anything is pulled, and nothing is written.
func TestVerifiedArtifact(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	reg, creds := realRegistry(t)
	priv, pub := cosignKeys(t, "pw")
	otherPriv, _ := cosignKeys(t, "pw")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "verified"))
	repo := "oci://" + reg + "/acme/signed"

	// Distinct revisions make distinct artifacts: the same content would be
	// the same digest, and a signature belongs to a digest, not a tag.
	if r := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+repo+":good", "--revision=good", "--sign=cosign", "--cosign-key="+priv, "--cosign-password=pw"); r.code != 0 || !r.res.Artifact.Signed {
		t.Fatalf("signed push: exit %d\n%s", r.code, r.stderr)
	}
	if r := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+repo+":unsigned", "--revision=unsigned"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+repo+":theirs", "--revision=theirs", "--sign=cosign", "--cosign-key="+otherPriv, "--cosign-password=pw"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	verify := []string{"--verify=cosign", "--cosign-public-key=" + pub, "--inventory=signed", "--inventory-namespace=" + ns}
	for tag, want := range map[string]string{"unsigned": "the artifact is not signed", "theirs": "no signature made by the given key"} {
		r := gantry(t, append(append([]string{"apply", "--artifact=" + repo + ":" + tag}, verify...), creds...)...)
		if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonArtifactFailed || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d reason %s, want 1 ArtifactFailed with %q\n%s", tag, r.code, r.res.Reason, want, r.stderr)
		}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "verified", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: ConfigMap written although verification failed: %v", tag, err)
		}
	}
	r := gantry(t, append(append([]string{"apply", "--artifact=" + repo + ":good"}, verify...), creds...)...)
	if r.code != 0 || !r.res.Artifact.Verified {
		t.Fatalf("verified apply: exit %d, artifact %+v\n%s", r.code, r.res.Artifact, r.stderr)
	}
	if strings.Contains(r.stderr, "pw") && strings.Contains(r.stderr, "cosign-password") {
		t.Errorf("the password surfaced")
	}
}

// gantryAuth runs gantry with the registry's credentials.
func gantryAuth(t *testing.T, creds []string, args ...string) gantryRun {
	t.Helper()
	return gantry(t, append(args, creds...)...)
}

// Without registry-username, credentials come from the Docker config
// (DOCKER_CONFIG), as docker login writes it. The binary runs with that
// environment, since the keychain reads the process environment.
func TestDockerConfigCredentials(t *testing.T) {
	t.Parallel()
	env.Require(t)
	r, err := registry.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	cfgDir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(r.Username + ":" + r.Password))
	writeFile(t, filepath.Join(cfgDir, "config.json"), `{"auths":{"`+r.Host+`":{"auth":"`+auth+`"}}}`)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")

	push := func(env ...string) (string, error) {
		cmd := exec.Command(gantryBinary(t), "push", "--path="+dir, "--artifact=oci://"+r.Host+"/acme/app:v1")
		cmd.Env = append([]string{"HOME=" + t.TempDir()}, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := push(); err == nil || !strings.Contains(out, "401") {
		t.Errorf("without credentials: %v\n%s", err, out)
	}
	if out, err := push("DOCKER_CONFIG=" + cfgDir); err != nil {
		t.Errorf("with DOCKER_CONFIG: %v\n%s", err, out)
	}
}

// A SOPS-encrypted Secret reaches the cluster decrypted; without the key
// the run is refused, naming the file, and nothing is written.
func TestSOPSSecretApplied(t *testing.T) {
	t.Parallel()
	env.Require(t)
	ns := env.Namespace(t)
	id, _ := age.GenerateX25519Identity()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "db.sops.yaml"), sopsSecret(t, ns, "canary-e2e-sops", id))

	r := gantry(t, "apply", "--path="+dir, "--inventory=sops", "--inventory-namespace="+ns)
	if r.code != entrypoint.ExitInvalid || !strings.Contains(r.stderr, "db.sops.yaml: encrypted with SOPS: give sops-age-key") {
		t.Fatalf("without the key: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := env.Client.CoreV1().Secrets(ns).Get(context.Background(), "db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Secret written without the key: %v", err)
	}
	r = gantry(t, "apply", "--path="+dir, "--inventory=sops", "--inventory-namespace="+ns, "--sops-age-key="+id.String())
	if r.code != 0 {
		t.Fatalf("with the key: exit %d\n%s", r.code, r.stderr)
	}
	s, err := env.Client.CoreV1().Secrets(ns).Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil || string(s.Data["password"]) != "canary-e2e-sops" {
		t.Fatalf("Secret db: %v, data %v", err, s.Data)
	}
	if strings.Contains(r.stderr+r.stdout, "canary-e2e-sops") || strings.Contains(r.stderr, id.String()) {
		t.Error("the secret value or the key was printed")
	}
}

// Tag, list and inspect against the real registry; then the refusals that
// need a tampering registry: the verified tag moved to another artifact,
// and one byte of the stored layer flipped. Nothing reaches the cluster.
func TestTamperingIsRefusedAndNothingWritten(t *testing.T) {
	t.Parallel()
	env.Require(t)
	ns := env.Namespace(t)
	r, err := registry.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	creds := []string{"--registry-username=" + r.Username, "--registry-password=" + r.Password}
	priv, pub := cosignKeys(t, "pw")
	sign := []string{"--sign=cosign", "--cosign-key=" + priv, "--cosign-password=pw"}
	verify := []string{"--verify=cosign", "--cosign-public-key=" + pub, "--inventory=tamper", "--inventory-namespace=" + ns}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "tampered"))
	repo := "oci://" + r.Host + "/acme/app"

	good := gantryAuth(t, append(creds, sign...), "push", "--path="+dir, "--artifact="+repo+":1.0.0", "--revision=good")
	if good.code != 0 {
		t.Fatalf("push: %s", good.stderr)
	}
	evil := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+repo+":evil", "--revision=evil")
	if evil.code != 0 {
		t.Fatalf("push: %s", evil.stderr)
	}
	// tag and list against the real registry.
	if r := gantryAuth(t, creds, "tag", "--artifact="+repo+":1.0.0", "--tags=stable"); r.code != 0 || !strings.Contains(r.stdout, "tagged") {
		t.Fatalf("tag: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	list := gantryAuth(t, creds, "list", "--artifact="+repo, "--semver=>=1.0.0")
	if list.code != 0 || !strings.HasPrefix(list.stdout, "1.0.0\t"+good.res.Artifact.Digest) || strings.Contains(list.stdout, "evil") {
		t.Errorf("list: exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}
	if r := gantryAuth(t, creds, "inspect", "--artifact="+repo+":stable"); r.code != 0 || !strings.Contains(r.stdout, "flux format:  true") || !strings.Contains(r.stdout, "signatures:   1") {
		t.Errorf("inspect: exit %d\n%s", r.code, r.stdout)
	}
	if r := gantryAuth(t, append(creds, "--verify=cosign", "--cosign-public-key="+pub), "inspect", "--artifact="+repo+":evil"); r.code != 0 || !strings.Contains(r.stdout, "signatures:   0") || !strings.Contains(r.stdout, "verified:     no (") {
		t.Errorf("inspect with verify: exit %d\n%s", r.code, r.stdout)
	}

	assertNothing := func(what string) {
		t.Helper()
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "tampered", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: ConfigMap written: %v", what, err)
		}
	}
	// The verified tag moved to the unsigned artifact.
	if r := gantryAuth(t, creds, "tag", "--artifact="+repo+":evil", "--tags=stable"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	moved := gantryAuth(t, append(creds, verify...), "apply", "--artifact="+repo+":stable")
	if moved.code != entrypoint.ExitFailed || !strings.Contains(moved.stderr, "the artifact is not signed") {
		t.Errorf("moved tag: exit %d\n%s", moved.code, moved.stderr)
	}
	assertNothing("moved tag")

	// One byte of the signed artifact's stored layer flipped.
	in := gantryAuth(t, creds, "inspect", "--artifact="+repo+":1.0.0")
	var layer string
	for _, l := range strings.Split(in.stdout, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "layer:" {
			layer = f[2]
		}
	}
	blob := r.BlobPath(layer)
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatalf("layer %q: %v", layer, err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	flipped := gantryAuth(t, append(creds, verify...), "apply", "--artifact="+repo+":1.0.0")
	if flipped.code != entrypoint.ExitFailed || !strings.Contains(flipped.stderr, "does not match its digest") {
		t.Errorf("flipped byte: exit %d\n%s", flipped.code, flipped.stderr)
	}
	assertNothing("flipped byte")
}

// cosignKeys writes a cosign key pair, the private key encrypted with
// password, and returns the two paths.
func cosignKeys(t *testing.T, password string) (priv, pub string) {
	t.Helper()
	kp, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(password), nil })
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv, pub = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	writeFile(t, priv, string(kp.PrivateBytes))
	writeFile(t, pub, string(kp.PublicBytes))
	return priv, pub
}

// sopsSecret is a Secret db with password, encrypted by the real sops CLI
// for id, as users keep it in git.
func sopsSecret(t *testing.T, ns, password string, id *age.X25519Identity) string {
	t.Helper()
	sopsBin, err := cluster.Tool("sops")
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "secret.yaml")
	writeFile(t, plain, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: "+ns+"\nstringData:\n  password: "+password+"\n")
	cmd := exec.Command(sopsBin, "--encrypt", "--age", id.Recipient().String(), "--encrypted-regex", "^(data|stringData)$", plain)
	cmd.Dir, cmd.Env = t.TempDir(), []string{"HOME=" + t.TempDir()}
	enc, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(enc)
}

// Artifacts carry SOPS-encrypted Secrets as they are in git, never
// decrypted: pushed without the key, or pushed and applied in one run with
// it. Applying the artifact decrypts with the key; without it nothing is
// written.
func TestSOPSSecretsStayEncryptedInArtifacts(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	reg, creds := realRegistry(t)
	id, _ := age.GenerateX25519Identity()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "db.sops.yaml"), sopsSecret(t, ns, "canary-artifact-sops", id))
	repo := "oci://" + reg + "/acme/sops"

	layerOf := func(ref string) string {
		t.Helper()
		out := filepath.Join(t.TempDir(), "pulled")
		if r := gantryAuth(t, creds, "pull", "--artifact="+ref, "--path="+out); r.code != 0 {
			t.Fatalf("pull %s: exit %d\n%s", ref, r.code, r.stderr)
		}
		b, err := os.ReadFile(filepath.Join(out, "manifests.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if r := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+repo+":nokey"); r.code != 0 {
		t.Fatalf("push without the key: exit %d\n%s", r.code, r.stderr)
	}
	both := gantryAuth(t, creds, "apply", "--path="+dir, "--artifact="+repo+":both", "--inventory=sops-art", "--inventory-namespace="+ns, "--sops-age-key="+id.String())
	if both.code != 0 {
		t.Fatalf("push and apply with the key: exit %d\n%s", both.code, both.stderr)
	}
	for _, tag := range []string{"nokey", "both"} {
		m := layerOf(repo + ":" + tag)
		if strings.Contains(m, "canary-artifact-sops") || !strings.Contains(m, "ENC[AES256_GCM") || !strings.Contains(m, "sops:") {
			t.Errorf("%s: the artifact does not hold the Secret encrypted:\n%s", tag, m)
		}
	}
	if err := env.Client.CoreV1().Secrets(ns).Delete(context.Background(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	if r := gantryAuth(t, creds, "apply", "--artifact="+repo+":nokey", "--inventory=sops-art", "--inventory-namespace="+ns); r.code != entrypoint.ExitInvalid {
		t.Fatalf("apply without the key: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := env.Client.CoreV1().Secrets(ns).Get(context.Background(), "db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Secret written without the key: %v", err)
	}
	r := gantryAuth(t, creds, "apply", "--artifact="+repo+":nokey", "--inventory=sops-art", "--inventory-namespace="+ns, "--sops-age-key="+id.String())
	if r.code != 0 {
		t.Fatalf("apply from the artifact with the key: exit %d\n%s", r.code, r.stderr)
	}
	sec, err := env.Client.CoreV1().Secrets(ns).Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil || string(sec.Data["password"]) != "canary-artifact-sops" {
		t.Fatalf("Secret db: %v", err)
	}
}

// An artifact that holds several apps, as flux push artifact packs a
// repository's folder: artifact-path builds one of them, as a Flux
// Kustomization's spec.path does.
func TestArtifactPathBuildsOneApp(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	src := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(src, "apps", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(src, "apps", "a", "cm.yaml"), configMap(ns, "app-a"))
	writeFile(t, filepath.Join(src, "apps", "b", "cm.yaml"), configMap(ns, "app-b"))
	writeFile(t, filepath.Join(src, "apps", "b", "kustomization.yaml"), "resources: [cm.yaml]\nnamePrefix: prod-\n")
	if _, err := oci.NewClient(oci.DefaultOptions()).Push(context.Background(), host+"/acme/monorepo:v1", src,
		oci.WithPushMetadata(oci.Metadata{Source: "https://example.com/monorepo", Revision: "main@sha1:1"})); err != nil {
		t.Fatal(err)
	}
	ref := "oci://" + host + "/acme/monorepo:v1"
	r := gantry(t, "apply", "--artifact="+ref, "--artifact-path=./apps/b", "--inventory=monorepo", "--inventory-namespace="+ns)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Created] != 1 || objectByRef(r, "ConfigMap/"+ns+"/prod-app-b") == nil {
		t.Errorf("counts %v, objects %+v", c, r.res.Objects)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "app-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("app-a was applied too: %v", err)
	}
	r = gantry(t, "apply", "--artifact="+ref, "--artifact-path=apps/c", "--inventory=monorepo", "--inventory-namespace="+ns)
	if r.code != entrypoint.ExitFailed || !strings.Contains(r.stderr, "artifact-path apps/c: no such folder") {
		t.Errorf("missing folder: exit %d\n%s", r.code, r.stderr)
	}
	r = gantry(t, "apply", "--artifact="+ref, "--artifact-path=../../etc", "--inventory=monorepo", "--inventory-namespace="+ns)
	if r.code != entrypoint.ExitInvalid || !strings.Contains(r.stderr, "is not a folder inside the artifact") {
		t.Errorf("escaping path: exit %d\n%s", r.code, r.stderr)
	}
}
