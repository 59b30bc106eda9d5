package artifact

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
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
