package artifact

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"log"
)

// keyPair writes a cosign key pair (the private key encrypted with
// password) and returns the two paths.
func keyPair(t *testing.T, password string) (priv, pub string) {
	t.Helper()
	kp, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(password), nil })
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv, pub = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	if err := os.WriteFile(priv, kp.PrivateBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, kp.PublicBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	priv, pub := keyPair(t, "pw")
	signer := New(Options{Sign: &SignOptions{KeyRef: priv, Password: []byte("pw")}})
	pushed, err := signer.Push(ctx, "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !pushed.Signed {
		t.Error("not reported signed")
	}
	// The signature sits where cosign looks for it: sha256-<digest>.sig.
	sigTag := reg + "/acme/app:" + strings.Replace(pushed.Digest, ":", "-", 1) + ".sig"
	if _, err := crane.Manifest(sigTag); err != nil {
		t.Errorf("no signature at %s: %v", sigTag, err)
	}
	verifier := New(Options{Verify: &VerifyOptions{PublicKeyRef: pub}})
	if _, err := verifier.Pull(ctx, "oci://"+reg+"/acme/app:v1", filepath.Join(t.TempDir(), "out")); err != nil {
		t.Fatalf("verified pull: %v", err)
	}
	// Pushing the same artifact again (same digest) with the same key
	// leaves one signature, as the cosign CLI does.
	for range 2 {
		again, err := signer.Push(ctx, "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{}, nil)
		if err != nil || again.Digest != pushed.Digest {
			t.Fatalf("push again: %v, digest %s, was %s", err, again.Digest, pushed.Digest)
		}
	}
	in, err := signer.Inspect(ctx, "oci://"+reg+"/acme/app:v1")
	if err != nil || in.Signatures != 1 {
		t.Errorf("signatures after three pushes: %d (%v), want 1", in.Signatures, err)
	}
	// Another key's signature is added beside it.
	priv2, _ := keyPair(t, "pw2")
	other := New(Options{Sign: &SignOptions{KeyRef: priv2, Password: []byte("pw2")}})
	if _, err := other.Push(ctx, "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{}, nil); err != nil {
		t.Fatal(err)
	}
	if in, err := signer.Inspect(ctx, "oci://"+reg+"/acme/app:v1"); err != nil || in.Signatures != 2 {
		t.Errorf("signatures with a second key: %d (%v), want 2", in.Signatures, err)
	}
}

func TestSignWithKeyFromEnvironment(t *testing.T) {
	// Not parallel: sets the environment.
	reg := newRegistry(t, "", "")
	priv, pub := keyPair(t, "pw")
	key, _ := os.ReadFile(priv)
	t.Setenv("GANTRY_TEST_COSIGN_KEY", string(key))
	ctx := context.Background()
	if _, err := New(Options{Sign: &SignOptions{KeyRef: "env://GANTRY_TEST_COSIGN_KEY", Password: []byte("pw")}}).Push(ctx, "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Verify: &VerifyOptions{PublicKeyRef: pub}}).Pull(ctx, "oci://"+reg+"/acme/app:v1", filepath.Join(t.TempDir(), "out")); err != nil {
		t.Fatal(err)
	}
}

func TestVerificationRefusals(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	priv, pub := keyPair(t, "pw")
	otherPriv, _ := keyPair(t, "pw")
	signer := New(Options{Sign: &SignOptions{KeyRef: priv, Password: []byte("pw")}})
	verifier := New(Options{Verify: &VerifyOptions{PublicKeyRef: pub}})
	repo := reg + "/acme/app"

	// Unsigned.
	if _, err := New(Options{}).Push(ctx, "oci://"+repo+":unsigned", []byte(manifests), Meta{Revision: "u"}, nil); err != nil {
		t.Fatal(err)
	}
	// Signed by another key.
	if _, err := New(Options{Sign: &SignOptions{KeyRef: otherPriv, Password: []byte("pw")}}).Push(ctx, "oci://"+repo+":other", []byte(manifests), Meta{Revision: "o"}, nil); err != nil {
		t.Fatal(err)
	}
	// Signed, then its tag moved to a different (unsigned) digest.
	if _, err := signer.Push(ctx, "oci://"+repo+":moved", []byte(manifests), Meta{Revision: "m1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{}).Push(ctx, "oci://"+repo+":moved", []byte(manifests), Meta{Revision: "m2"}, nil); err != nil {
		t.Fatal(err)
	}
	// A genuine signature of one artifact copied onto another's digest:
	// valid cryptographically, but its payload names the first digest.
	a, err := signer.Push(ctx, "oci://"+repo+":a", []byte(manifests), Meta{Revision: "a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{}).Push(ctx, "oci://"+repo+":b", []byte(manifests), Meta{Revision: "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sigOf := func(d string) string { return repo + ":" + strings.Replace(d, ":", "-", 1) + ".sig" }
	if err := crane.Copy(sigOf(a.Digest), sigOf(b.Digest)); err != nil {
		t.Fatal(err)
	}

	for tag, want := range map[string]string{
		"unsigned": "the artifact is not signed",
		"other":    "no signature made by the given key",
		"moved":    "the artifact is not signed",
		"b":        "no signature's payload names this digest",
	} {
		dir := filepath.Join(t.TempDir(), "out")
		_, err := verifier.Pull(ctx, "oci://"+repo+":"+tag, dir)
		if !errors.Is(err, ErrUnverified) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want ErrUnverified: %q", tag, err, want)
		}
		if _, statErr := os.Stat(filepath.Join(dir, ManifestsFile)); statErr == nil {
			t.Errorf("%s: content was pulled although verification failed", tag)
		}
	}
}

// A registry that serves one flipped byte in a layer: the pull fails on
// the digest check, whatever the signature says.
func TestTamperedLayerIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	priv, pub := keyPair(t, "pw")
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var layerDigest string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if layerDigest == "" || r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+layerDigest) {
			inner.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		body[len(body)/2] ^= 0xff
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = io.Copy(w, bytes.NewReader(body))
	}))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://")
	if _, err := New(Options{Sign: &SignOptions{KeyRef: priv, Password: []byte("pw")}}).Push(ctx, "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{}, nil); err != nil {
		t.Fatal(err)
	}
	in, err := New(Options{}).Inspect(ctx, "oci://"+reg+"/acme/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	layerDigest = in.Layers[0].Digest
	_, err = New(Options{Verify: &VerifyOptions{PublicKeyRef: pub}}).Pull(ctx, "oci://"+reg+"/acme/app:v1", filepath.Join(t.TempDir(), "out"))
	if err == nil || !strings.Contains(err.Error(), "does not match its digest (tampered or corrupted in the registry)") {
		t.Errorf("tampered layer: %v", err)
	}
}
