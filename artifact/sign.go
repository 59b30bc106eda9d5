package artifact

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	cosignremote "github.com/sigstore/cosign/v2/pkg/cosign/remote"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	sigs "github.com/sigstore/cosign/v2/pkg/signature"
	"github.com/sigstore/sigstore/pkg/fulcioroots"
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
	// or a KMS reference. Empty means keyless: the signature's certificate
	// must chain to Fulcio's roots and name the required identity.
	PublicKeyRef string
	// Identity (or IdentityRegexp) and Issuer (or IssuerRegexp) are what
	// a keyless signature's certificate must name: the signer (for GitHub,
	// the workflow's URL) and the OIDC issuer.
	Identity, IdentityRegexp, Issuer, IssuerRegexp string
	// RootsPEM, when set, are the certificate roots of a private Fulcio;
	// the transparency log is then not consulted. Otherwise the public
	// Sigstore roots and Rekor keys are fetched from Sigstore's TUF
	// repository.
	RootsPEM []byte
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
	return c.attachSignature(ctx, digest, pl, sig, sv)
}

// attachSignature stores a signature of digest (with, for keyless, its
// certificate chain and Rekor bundle) where cosign looks for it. With the
// key's verifier, a signature that key already made of the same digest is
// not attached again, as the cosign CLI does: pushing an unchanged
// artifact (its digest is reproducible) leaves one signature, not one
// more per push.
func (c *Client) attachSignature(ctx context.Context, digest name.Digest, pl, sig []byte, verifier signature.Verifier, opts ...static.Option) error {
	ociSig, err := static.NewSignature(pl, base64.StdEncoding.EncodeToString(sig), opts...)
	if err != nil {
		return err
	}
	se, err := ociremote.SignedEntity(digest, c.remoteOptions(ctx))
	if err != nil {
		return fmt.Errorf("reading %s to sign it: %w", digest, err)
	}
	var attach []mutate.SignOption
	if verifier != nil {
		attach = append(attach, mutate.WithDupeDetector(cosignremote.NewDupeDetector(verifier)))
	}
	signed, err := mutate.AttachSignatureToEntity(se, ociSig, attach...)
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
	co := &cosign.CheckOpts{
		ClaimVerifier:      cosign.SimpleClaimVerifier, // the payload must name this digest
		RegistryClientOpts: []ociremote.Option{c.remoteOptions(ctx)},
	}
	if o.PublicKeyRef != "" {
		var verifier signature.Verifier
		verifier, err := sigs.PublicKeyFromKeyRef(ctx, o.PublicKeyRef)
		if err != nil {
			return fmt.Errorf("loading the cosign public key %s: %w", o.PublicKeyRef, err)
		}
		co.SigVerifier = verifier
		co.IgnoreTlog, co.IgnoreSCT = true, true // a key needs no transparency log
	} else if err := o.keyless(ctx, co); err != nil {
		return err
	}
	sigs, _, err := cosign.VerifyImageSignatures(ctx, digest, co)
	if err != nil {
		return fmt.Errorf("%w for %s: %s", ErrUnverified, digest, explainVerify(err, o.PublicKeyRef == ""))
	}
	return boundToRepository(digest, sigs)
}

// anchored makes a pattern match a whole value.
func anchored(re string) string {
	if re == "" {
		return ""
	}
	return "^(?:" + re + ")$"
}

// boundToRepository requires a verified signature that was made for the
// artifact's own repository: cosign signs the repository's name
// (docker-reference) with the digest, and a digest signed for another
// repository, copied here with its signature, proves nothing about this
// one.
func boundToRepository(digest name.Digest, sigs []oci.Signature) error {
	want := digest.Context().Name()
	var seen []string
	for _, sig := range sigs {
		raw, err := sig.Payload()
		if err != nil {
			continue
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(raw, &p); err != nil {
			continue
		}
		ref := p.Critical.Identity.DockerReference
		r, err := name.ParseReference(ref, name.WeakValidation)
		if err == nil && r.Context().Name() == want {
			return nil
		}
		seen = append(seen, ref)
	}
	return fmt.Errorf("%w for %s: its signature was made for another repository (%s), not %s: a signed artifact copied to this repository, or re-tagged here, is not trusted", ErrUnverified, digest, strings.Join(seen, ", "), want)
}

// keyless sets the certificate checks: roots, and the identity and issuer
// the certificate must name.
func (o *VerifyOptions) keyless(ctx context.Context, co *cosign.CheckOpts) error {
	if (o.Identity == "" && o.IdentityRegexp == "") || (o.Issuer == "" && o.IssuerRegexp == "") {
		return errors.New("keyless verification needs certificate-identity (or -regexp) and certificate-oidc-issuer (or -regexp)")
	}
	if o.Identity != "" && o.IdentityRegexp != "" || o.Issuer != "" && o.IssuerRegexp != "" {
		return errors.New("keyless verification takes an exact identity (or issuer) or a pattern, not both: which one must match would be ambiguous")
	}
	// A pattern matches the whole value, as people read one: an
	// unanchored https://github.com/acme/ would match a certificate of
	// https://github.com/acme/evil too, or of https://evil/?https://github.com/acme/.
	co.Identities = []cosign.Identity{{Subject: o.Identity, SubjectRegExp: anchored(o.IdentityRegexp), Issuer: o.Issuer, IssuerRegExp: anchored(o.IssuerRegexp)}}
	if len(o.RootsPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(o.RootsPEM) {
			return errors.New("certificate-roots holds no PEM certificate")
		}
		co.RootCerts = pool
		co.IgnoreTlog, co.IgnoreSCT = true, true
		return nil
	}
	var err error
	if co.RootCerts, err = fulcioroots.Get(); err != nil {
		return fmt.Errorf("fetching Sigstore's certificate roots (TUF): %w", err)
	}
	if co.IntermediateCerts, err = fulcioroots.GetIntermediates(); err != nil {
		return fmt.Errorf("fetching Sigstore's intermediate certificates (TUF): %w", err)
	}
	if co.RekorPubKeys, err = cosign.GetRekorPubs(ctx); err != nil {
		return fmt.Errorf("fetching Rekor's keys (TUF): %w", err)
	}
	if co.CTLogPubKeys, err = cosign.GetCTLogPubs(ctx); err != nil {
		return fmt.Errorf("fetching the CT log's keys (TUF): %w", err)
	}
	return nil
}

// explainVerify turns cosign's errors into what a person can act on.
func explainVerify(err error, keyless bool) string {
	var noSigs *cosign.ErrNoSignaturesFound
	var noMatch *cosign.ErrNoMatchingSignatures
	switch {
	case errors.As(err, &noSigs):
		return "the artifact is not signed"
	case errors.As(err, &noMatch):
		msg := err.Error()
		switch {
		case strings.Contains(msg, "digest") || strings.Contains(msg, "claim"):
			return "no signature's payload names this digest (a signature of another artifact?): " + msg
		case keyless:
			return "no signature whose certificate chains to the roots and names the required identity and issuer: " + msg
		}
		return "no signature made by the given key: " + msg
	}
	return err.Error()
}
