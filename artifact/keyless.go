package artifact

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	cbundle "github.com/sigstore/cosign/v2/pkg/cosign/bundle"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/cosign/v2/pkg/providers"
	_ "github.com/sigstore/cosign/v2/pkg/providers/github" // GitHub Actions OIDC tokens
	fulcioapi "github.com/sigstore/fulcio/pkg/api"
	rekorclient "github.com/sigstore/rekor/pkg/client"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/oauthflow"
	"github.com/sigstore/sigstore/pkg/signature"
	sigopts "github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// Public Sigstore instances, the default for keyless signing.
const (
	DefaultFulcioURL = "https://fulcio.sigstore.dev"
	DefaultRekorURL  = "https://rekor.sigstore.dev"
)

// KeylessAvailable reports whether the CI gives an OIDC identity for keyless
// signing: on GitHub Actions, the job needs permissions: id-token: write,
// which sets ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN.
func KeylessAvailable(ctx context.Context) bool {
	p, err := providers.ProvideFrom(ctx, "github-actions")
	return err == nil && p.Enabled(ctx)
}

// signKeyless signs digest with an ephemeral key whose certificate Fulcio
// issues for the CI's OIDC identity, records the signature in Rekor, and
// attaches signature, certificate and Rekor bundle where cosign looks.
func (c *Client) signKeyless(ctx context.Context, digest name.Digest) error {
	o := c.signOpts
	fulcioURL, rekorURL := o.FulcioURL, o.RekorURL
	if fulcioURL == "" {
		fulcioURL = DefaultFulcioURL
	}
	if rekorURL == "" {
		rekorURL = DefaultRekorURL
	}
	p, err := providers.ProvideFrom(ctx, "github-actions")
	if err != nil || !p.Enabled(ctx) {
		return errors.New("keyless signing needs the CI's OIDC identity (on GitHub: permissions: id-token: write); give cosign-key otherwise")
	}
	token, err := p.Provide(ctx, "sigstore")
	if err != nil {
		return fmt.Errorf("getting an OIDC token from GitHub Actions: %w", err)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		return err
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		return err
	}
	// Fulcio wants proof that the requester holds the key: the token's
	// subject, signed with it.
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("the OIDC token is not a JWT")
	}
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return fmt.Errorf("reading the OIDC token: %w", err)
	}
	subject, err := oauthflow.SubjectFromUnverifiedToken(claims)
	if err != nil {
		return fmt.Errorf("reading the OIDC token: %w", err)
	}
	proof, err := sv.SignMessage(strings.NewReader(subject), sigopts.WithContext(ctx))
	if err != nil {
		return err
	}
	fu, err := url.Parse(fulcioURL)
	if err != nil {
		return fmt.Errorf("the Fulcio URL %q: %w", fulcioURL, err)
	}
	cert, err := fulcioapi.NewClient(fu, fulcioapi.WithUserAgent("gantry")).SigningCert(fulcioapi.CertificateRequest{
		PublicKey:          fulcioapi.Key{Content: pubPEM, Algorithm: "ecdsa"},
		SignedEmailAddress: proof,
	}, token)
	if err != nil {
		return fmt.Errorf("requesting a signing certificate from Fulcio at %s: %w", fulcioURL, err)
	}

	pl, err := (&payload.Cosign{Image: digest}).MarshalJSON()
	if err != nil {
		return err
	}
	sig, err := sv.SignMessage(bytes.NewReader(pl), sigopts.WithContext(ctx))
	if err != nil {
		return err
	}
	rc, err := rekorclient.GetRekorClient(rekorURL, rekorclient.WithUserAgent("gantry"))
	if err != nil {
		return fmt.Errorf("the Rekor log at %s: %w", rekorURL, err)
	}
	h := sha256.New()
	h.Write(pl)
	entry, err := cosign.TLogUpload(ctx, rc, sig, h, cert.CertPEM)
	if err != nil {
		return fmt.Errorf("recording the signature in Rekor at %s: %w", rekorURL, err)
	}
	return c.attachSignature(ctx, digest, pl, sig, nil,
		static.WithCertChain(cert.CertPEM, cert.ChainPEM), static.WithBundle(cbundle.EntryToBundle(entry)))
}
