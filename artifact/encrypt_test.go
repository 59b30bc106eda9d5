package artifact

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/google/go-containerregistry/pkg/crane"
	"golang.org/x/crypto/ssh"
)

func TestEncryptedArtifactRoundTrip(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	recipients, err := ParseRecipients("# ops team\n" + id.Recipient().String() + "\n")
	if err != nil {
		t.Fatal(err)
	}
	ref := "oci://" + reg + "/acme/secret-config:v1"
	if _, err := New(Options{Recipients: recipients}).Push(ctx, ref, []byte(manifests), Meta{Revision: "main@sha1:1"}, nil); err != nil {
		t.Fatal(err)
	}

	// The manifest says it is encrypted, and the layer is ciphertext.
	in, err := New(Options{}).Inspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Layers) != 1 || in.Layers[0].MediaType != EncryptedMediaType || in.Annotations[EncryptionAnnotation] != "age" {
		t.Fatalf("inspect %+v", in)
	}
	blob, err := crane.PullLayer(strings.TrimPrefix(ref, "oci://")[:strings.LastIndex(strings.TrimPrefix(ref, "oci://"), ":")] + "@" + in.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := blob.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 64<<10)
	n, _ := rc.Read(raw)
	rc.Close()
	if !strings.HasPrefix(string(raw[:n]), "age-encryption.org/v1") || strings.Contains(string(raw[:n]), "ConfigMap") {
		t.Errorf("the layer is not age ciphertext: %q", raw[:min(n, 80)])
	}

	ids, err := ParseIdentities(id.String())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	pulled, err := New(Options{Identities: ids}).Pull(ctx, ref, dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, ManifestsFile))
	if err != nil || string(got) != manifests || pulled.Revision != "main@sha1:1" {
		t.Errorf("decrypted %q (%v), revision %q", got, err, pulled.Revision)
	}
}

func TestSSHRecipientAndIdentity(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	recipients, err := ParseRecipients(string(ssh.MarshalAuthorizedKey(sshPub)))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := ParseIdentities(string(pem.EncodeToMemory(block)))
	if err != nil {
		t.Fatal(err)
	}
	ref := "oci://" + reg + "/acme/ssh:v1"
	if _, err := New(Options{Recipients: recipients}).Push(ctx, ref, []byte(manifests), Meta{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Identities: ids}).Pull(ctx, ref, filepath.Join(t.TempDir(), "out")); err != nil {
		t.Fatal(err)
	}
}

func TestEncryptedArtifactRefusals(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	right, _ := age.GenerateX25519Identity()
	wrong, _ := age.GenerateX25519Identity()
	ref := "oci://" + reg + "/acme/secret:v1"
	if _, err := New(Options{Recipients: []age.Recipient{right.Recipient()}}).Push(ctx, ref, []byte(manifests), Meta{}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{}).Pull(ctx, ref, filepath.Join(t.TempDir(), "a"))
	if err == nil || !strings.Contains(err.Error(), "encrypted with age and no age-identities") {
		t.Errorf("without identity: %v", err)
	}
	_, err = New(Options{Identities: []age.Identity{wrong}}).Pull(ctx, ref, filepath.Join(t.TempDir(), "b"))
	if err == nil || !strings.Contains(err.Error(), "none of the age identities given can decrypt it") {
		t.Errorf("wrong identity: %v", err)
	}
	if _, err := ParseRecipients("age1\nnot-a-key"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad recipient: %v", err)
	}
	if _, err := ParseIdentities("AGE-SECRET-KEY-1NOTVALID"); err == nil || strings.Contains(err.Error(), "NOTVALID") {
		t.Errorf("bad identity (the error must not echo key material): %v", err)
	}
}
