package artifact

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// Keyless signing cannot reach Sigstore from here. These tests run it up to
// the network boundary: the OIDC token request to GitHub Actions and the
// certificate request to Fulcio, each checked as the services document
// them, Fulcio then refusing.
func TestKeylessSigningRequestsUpToFulcio(t *testing.T) {
	// Not parallel: cosign's GitHub provider reads the process environment.
	const subject = "repo:acme/shop:ref:refs/heads/main"
	claims, _ := json.Marshal(map[string]any{"iss": "https://token.actions.githubusercontent.com", "sub": subject, "aud": "sigstore", "exp": 4102444800})
	jwt := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." +
		base64.RawURLEncoding.EncodeToString(claims) + "." + base64.RawURLEncoding.EncodeToString([]byte("sig"))

	var tokenAsked, certAsked atomic.Bool
	oidc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Query().Get("audience") != "sigstore" || r.Header.Get("Authorization") != "bearer request-token" {
			t.Errorf("OIDC request %s %s, Authorization %q", r.Method, r.URL, r.Header.Get("Authorization"))
		}
		tokenAsked.Store(true)
		fmt.Fprintf(w, `{"value":%q}`, jwt)
	}))
	defer oidc.Close()
	fulcio := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"code":503,"message":"no Fulcio on this network"}`)
		}()
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/signingCert" {
			t.Errorf("Fulcio request %s %s", r.Method, r.URL.Path)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+jwt || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("Fulcio headers %v", r.Header)
		}
		var body struct {
			PublicKey struct {
				Content   []byte `json:"content"`
				Algorithm string `json:"algorithm"`
			} `json:"publicKey"`
			SignedEmailAddress []byte `json:"signedEmailAddress"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("Fulcio body %s: %v", b, err)
			return
		}
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(body.PublicKey.Content)
		if err != nil || body.PublicKey.Algorithm != "ecdsa" {
			t.Errorf("public key %q (%s): %v", body.PublicKey.Content, body.PublicKey.Algorithm, err)
			return
		}
		sum := sha256.Sum256([]byte(subject))
		if !ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), sum[:], body.SignedEmailAddress) {
			t.Error("the proof of possession is not the subject signed with the key")
		}
		certAsked.Store(true)
	}))
	defer fulcio.Close()

	reg := newRegistry(t, "", "")
	ctx := context.Background()
	keyless := &SignOptions{FulcioURL: fulcio.URL, RekorURL: "http://127.0.0.1:1"}

	// Without the CI's OIDC identity, keyless signing says what it needs.
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_URL", "")
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "")
	if KeylessAvailable(ctx) {
		t.Error("keyless available without the OIDC variables")
	}
	_, err := New(Options{Sign: keyless}).Push(ctx, "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{}, nil)
	if err == nil || !strings.Contains(err.Error(), "id-token: write") {
		t.Errorf("without OIDC: %v", err)
	}

	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_URL", oidc.URL+"/token?api-version=2.0")
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "request-token")
	if !KeylessAvailable(ctx) {
		t.Fatal("keyless not available with the OIDC variables")
	}
	_, err = New(Options{Sign: keyless}).Push(ctx, "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{}, nil)
	if err == nil || !strings.Contains(err.Error(), "requesting a signing certificate from Fulcio at "+fulcio.URL) {
		t.Errorf("got %v", err)
	}
	if !tokenAsked.Load() || !certAsked.Load() {
		t.Errorf("token asked %v, certificate asked %v", tokenAsked.Load(), certAsked.Load())
	}
}

// issueFulcioCert plays Fulcio: a CA, and a short code-signing certificate
// for key naming a GitHub workflow and the Actions OIDC issuer, as Fulcio
// issues them.
func issueFulcioCert(t *testing.T, key *ecdsa.PrivateKey, identity, issuer string) (leafPEM, caPEM []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test fulcio"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	uri, _ := url.Parse(identity)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), URIs: []*url.URL{uri},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1}, Value: []byte(issuer)}}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// Keyless verification checks the certificate chain and the identity and
// issuer it names; here against a private Fulcio's roots, offline.
func TestKeylessVerification(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	const (
		workflow = "https://github.com/acme/shop/.github/workflows/deploy.yml@refs/heads/main"
		actions  = "https://token.actions.githubusercontent.com"
	)
	pushed, err := New(Options{}).Push(ctx, "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := name.NewDigest(strings.TrimPrefix(pushed.URL, "oci://"))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf, root := issueFulcioCert(t, key, workflow, actions)
	_, otherRoot := issueFulcioCert(t, key, workflow, actions)
	pl, _ := (&payload.Cosign{Image: digest}).MarshalJSON()
	sum := sha256.Sum256(pl)
	sig, _ := ecdsa.SignASN1(rand.Reader, key, sum[:])
	c := New(Options{})
	if err := c.attachSignature(ctx, digest, pl, sig, nil, static.WithCertChain(leaf, root)); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		opts VerifyOptions
		want string // empty: verifies
	}{
		"exact identity and issuer": {VerifyOptions{Identity: workflow, Issuer: actions, RootsPEM: root}, ""},
		"identity regexp":           {VerifyOptions{IdentityRegexp: `https://github\.com/acme/shop/.*`, Issuer: actions, RootsPEM: root}, ""},
		// A pattern matches the whole identity: a prefix alone, as an
		// unanchored pattern would take it, is not enough.
		"pattern matched only in part": {VerifyOptions{IdentityRegexp: `https://github\.com/acme/`, Issuer: actions, RootsPEM: root}, "names the required identity and issuer"},
		"issuer pattern in part":       {VerifyOptions{Identity: workflow, IssuerRegexp: `token\.actions`, RootsPEM: root}, "names the required identity and issuer"},
		"exact identity and a pattern": {VerifyOptions{Identity: workflow, IdentityRegexp: `.*`, Issuer: actions, RootsPEM: root}, "not both"},
		"another workflow":             {VerifyOptions{Identity: "https://github.com/acme/other/.github/workflows/x.yml@refs/heads/main", Issuer: actions, RootsPEM: root}, "names the required identity and issuer"},
		"another issuer":               {VerifyOptions{Identity: workflow, Issuer: "https://accounts.google.com", RootsPEM: root}, "names the required identity and issuer"},
		"another CA":                   {VerifyOptions{Identity: workflow, Issuer: actions, RootsPEM: otherRoot}, "chains to the roots"},
		"identity and issuer required": {VerifyOptions{Identity: workflow, RootsPEM: root}, "needs certificate-identity (or -regexp) and certificate-oidc-issuer"},
	}
	// The same digest, copied to another repository with its signature
	// (made for acme/app): not trusted there.
	copied, err := New(Options{}).Push(ctx, "oci://"+reg+"/acme/copy:v1", []byte(manifests), Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	copyDigest, err := name.NewDigest(strings.TrimPrefix(copied.URL, "oci://"))
	if err != nil {
		t.Fatal(err)
	}
	if copyDigest.DigestStr() != digest.DigestStr() {
		t.Fatalf("the copy has another digest: %s", copyDigest)
	}
	if err := c.attachSignature(ctx, copyDigest, pl, sig, nil, static.WithCertChain(leaf, root)); err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{Verify: &VerifyOptions{Identity: workflow, Issuer: actions, RootsPEM: root}}).Pull(ctx, copied.URL, filepath.Join(t.TempDir(), "out"))
	if err == nil || !strings.Contains(err.Error(), "made for another repository") {
		t.Errorf("a signature copied from another repository: %v", err)
	}
	for name, tc := range cases {
		_, err := New(Options{Verify: &tc.opts}).Pull(ctx, pushed.URL, filepath.Join(t.TempDir(), "out"))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}
