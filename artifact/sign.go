package artifact

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	sigs "github.com/sigstore/cosign/v2/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature"
	sigopts "github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// SignOptions sign pushed artifacts with cosign.
type SignOptions struct {
	// KeyRef is a private key as cosign accepts it: a file, env://VAR, or a
	// KMS reference (awskms://, gcpkms://, azurekms://, hashivault://).
	// Empty means keyless: an ephemeral key certified by Fulcio for the
	// CI's OIDC identity, the signature recorded in Rekor.
	KeyRef string
	// Password decrypts an encrypted private key.
	Password []byte
	// FulcioURL and RekorURL, for keyless signing; default the public
	// Sigstore instances.
	FulcioURL, RekorURL string
}

// VerifyOptions verify artifacts before anything is pulled from them.
type VerifyOptions struct {
	// PublicKeyRef is a public key as cosign accepts it: a file, env://VAR
	// or a KMS reference.
	PublicKeyRef string
}

// remoteOptions are the registry options cosign's OCI code needs, the same
// credentials and transport as every other registry call of this client.
func (c *Client) remoteOptions(ctx context.Context) ociremote.Option {
	return ociremote.WithRemoteOptions(
		remote.WithAuthFromKeychain(c.keychain),
		remote.WithTransport(c.transport),
		remote.WithContext(ctx),
	)
}

// sign signs the artifact at digest, never a tag, with a cosign simple
// signing payload that names the digest, and stores the signature where
// cosign does (the sha256-<digest>.sig tag), so `cosign verify` finds it.
func (c *Client) sign(ctx context.Context, digest name.Digest) error {
	o := c.signOpts
	if o.KeyRef == "" {
		return c.signKeyless(ctx, digest)
	}
	sv, err := sigs.SignerVerifierFromKeyRef(ctx, o.KeyRef, func(bool) ([]byte, error) { return o.Password, nil }, nil)
	if err != nil {
		// cosign's key errors name the reference, never the key.
		return fmt.Errorf("loading the cosign key %s: %w", o.KeyRef, err)
	}
	pl, err := (&payload.Cosign{Image: digest}).MarshalJSON()
	if err != nil {
		return err
	}
	sig, err := sv.SignMessage(bytes.NewReader(pl), sigopts.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	ociSig, err := static.NewSignature(pl, base64.StdEncoding.EncodeToString(sig))
	if err != nil {
		return err
	}
	se, err := ociremote.SignedEntity(digest, c.remoteOptions(ctx))
	if err != nil {
		return fmt.Errorf("reading %s to sign it: %w", digest, err)
	}
	signed, err := mutate.AttachSignatureToEntity(se, ociSig)
	if err != nil {
		return err
	}
	if err := ociremote.WriteSignatures(digest.Repository, signed, c.remoteOptions(ctx)); err != nil {
		return fmt.Errorf("writing the signature of %s: %w", digest, err)
	}
	return nil
}

// ErrUnverified is wrapped by every verification failure.
var ErrUnverified = errors.New("signature verification failed")

// verify checks that digest carries a valid cosign signature by the
// configured key whose signed payload names this very digest.
func (c *Client) verify(ctx context.Context, digest name.Digest) error {
	o := c.verifyOpts
	var verifier signature.Verifier
	verifier, err := sigs.PublicKeyFromKeyRef(ctx, o.PublicKeyRef)
	if err != nil {
		return fmt.Errorf("loading the cosign public key %s: %w", o.PublicKeyRef, err)
	}
	_, _, err = cosign.VerifyImageSignatures(ctx, digest, &cosign.CheckOpts{
		SigVerifier:        verifier,
		ClaimVerifier:      cosign.SimpleClaimVerifier, // the payload must name this digest
		IgnoreTlog:         true,                       // offline: no Rekor
		IgnoreSCT:          true,
		RegistryClientOpts: []ociremote.Option{c.remoteOptions(ctx)},
	})
	if err != nil {
		return fmt.Errorf("%w for %s: %s", ErrUnverified, digest, explainVerify(err))
	}
	return nil
}

// explainVerify turns cosign's errors into what a person can act on.
func explainVerify(err error) string {
	var noSigs *cosign.ErrNoSignaturesFound
	var noMatch *cosign.ErrNoMatchingSignatures
	switch {
	case errors.As(err, &noSigs):
		return "the artifact is not signed"
	case errors.As(err, &noMatch):
		msg := err.Error()
		if strings.Contains(msg, "digest") || strings.Contains(msg, "claim") {
			return "no signature's payload names this digest (a signature of another artifact?): " + msg
		}
		return "no signature made by the given key: " + msg
	}
	return err.Error()
}
