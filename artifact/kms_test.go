package artifact

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// KMS key references reach their provider, up to the network boundary: a
// local stand-in for the KMS records the request and refuses. (Not
// parallel: the providers read the process environment. Static AWS
// credentials and disabled instance metadata keep the SDK off the network.)
func TestKMSKeyReferencesReachTheirProvider(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAGANTRYTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("VAULT_TOKEN", "vault-test-token")

	var awsHit, vaultHit atomic.Value
	kms := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		awsHit.Store(r.Header.Get("X-Amz-Target"))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer kms.Close()
	// The SDK trusts the stand-in's certificate through AWS_CA_BUNDLE.
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kms.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vaultHit.Store(r.Method + " " + r.URL.Path + " token=" + r.Header.Get("X-Vault-Token"))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer vault.Close()
	t.Setenv("VAULT_ADDR", vault.URL)

	reg := newRegistry(t, "", "")
	for name, ref := range map[string]string{
		"aws":   "awskms://" + strings.TrimPrefix(kms.URL, "https://") + "/alias/gantry",
		"vault": "hashivault://gantry",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := New(Options{Sign: &SignOptions{KeyRef: ref}}).Push(ctx, "oci://"+reg+"/acme/app:"+name, []byte(manifests), Meta{Revision: name}, nil)
		cancel()
		if err == nil || strings.Contains(err.Error(), "no kms provider") || strings.Contains(err.Error(), "unsupported") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got, _ := awsHit.Load().(string); !strings.HasPrefix(got, "TrentService.") {
		t.Errorf("the AWS KMS stand-in saw %q, want a TrentService call", got)
	}
	if got, _ := vaultHit.Load().(string); !strings.Contains(got, "/v1/transit/") || !strings.Contains(got, "token=vault-test-token") {
		t.Errorf("the Vault stand-in saw %q, want a transit request with the token", got)
	}
}
