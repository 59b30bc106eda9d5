package artifact

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/tar"
	"github.com/google/go-containerregistry/pkg/crane"

	"github.com/gantry-dev/gantry/e2e/cluster"
)

// The reference age CLI decrypts a layer gantry encrypted, with a key that
// age-keygen made.
func TestAgeCLIDecryptsGantryLayer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the age CLI built by make tools")
	}
	t.Parallel()
	ageBin, err := cluster.Tool("age")
	if err != nil {
		t.Fatal(err)
	}
	keygen, err := cluster.Tool("age-keygen")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.txt")
	if out, err := exec.Command(keygen, "-o", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("age-keygen: %v\n%s", err, out)
	}
	pub, err := exec.Command(keygen, "-y", keyFile).Output()
	if err != nil {
		t.Fatal(err)
	}
	recipients, err := ParseRecipients(string(pub))
	if err != nil {
		t.Fatal(err)
	}

	reg := newRegistry(t, "", "")
	repo := reg + "/acme/sealed"
	if _, err := New(Options{Recipients: recipients}).Push(context.Background(), "oci://"+repo+":v1", []byte(manifests), Meta{}, nil); err != nil {
		t.Fatal(err)
	}
	in, err := New(Options{}).Inspect(context.Background(), "oci://"+repo+":v1")
	if err != nil {
		t.Fatal(err)
	}
	layer, err := crane.PullLayer(repo + "@" + in.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	enc := filepath.Join(dir, "layer.age")
	f, err := os.Create(enc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	f.Close()

	tgz := filepath.Join(dir, "layer.tgz")
	if out, err := exec.Command(ageBin, "--decrypt", "-i", keyFile, "-o", tgz, enc).CombinedOutput(); err != nil {
		t.Fatalf("age --decrypt: %v\n%s", err, out)
	}
	tf, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	out := filepath.Join(dir, "out")
	if err := tar.Untar(tf, out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, ManifestsFile))
	if err != nil || string(got) != manifests {
		t.Errorf("age decrypted %q (%v)", got, err)
	}

	// And gantry decrypts with the key file age-keygen wrote.
	key, _ := os.ReadFile(keyFile)
	ids, err := ParseIdentities(string(key))
	if err != nil || !strings.Contains(string(key), "AGE-SECRET-KEY-1") {
		t.Fatalf("identities from age-keygen: %v", err)
	}
	if _, err := New(Options{Identities: ids}).Pull(context.Background(), "oci://"+repo+":v1", filepath.Join(dir, "pulled")); err != nil {
		t.Error(err)
	}
}

// The cosign CLI verifies a signature gantry made, and rejects it with
// another key.
func TestCosignCLIVerifiesGantrySignature(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the cosign CLI built by make tools")
	}
	t.Parallel()
	cosignBin, err := cluster.Tool("cosign")
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, "", "")
	priv, pub := keyPair(t, "pw")
	_, otherPub := keyPair(t, "pw")
	pushed, err := New(Options{Sign: &SignOptions{KeyRef: priv, Password: []byte("pw")}}).Push(context.Background(), "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	image := strings.TrimPrefix(pushed.URL, "oci://")
	run := func(key string) (string, error) {
		cmd := exec.Command(cosignBin, "verify", "--key", key, "--insecure-ignore-tlog=true", "--allow-http-registry=true", image)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(pub)
	if err != nil {
		t.Fatalf("cosign verify: %v\n%s", err, out)
	}
	if !strings.Contains(out, pushed.Digest) || !strings.Contains(out, "The signatures were verified against the specified public key") {
		t.Errorf("cosign verify output:\n%s", out)
	}
	if out, err := run(otherPub); err == nil {
		t.Errorf("cosign verified with the wrong key:\n%s", out)
	}
}
