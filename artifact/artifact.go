// Package artifact owns gantry's OCI artifacts: the built manifests packed
// in Flux's format (so a Flux OCIRepository can consume what gantry pushes),
// pushed to and pulled from container registries next to the application's
// images.
package artifact

import (
	archivetar "archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/fluxcd/pkg/oci"
	"github.com/fluxcd/pkg/tar"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
)

// ManifestsFile is the one file in an artifact's layer: the built objects
// as a YAML stream. A Flux Kustomization pointed at the artifact builds a
// folder with this one file.
const ManifestsFile = "manifests.yaml"

// Media types of Flux's artifact format.
const (
	ConfigMediaType  = "application/vnd.cncf.flux.config.v1+json"
	ContentMediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// FixedCreated is the created time of artifacts when none is given, so
// that the same manifests and revision always give the same digest.
// SOURCE_DATE_EPOCH overrides it, as reproducible builds expect.
var FixedCreated = time.Unix(0, 0).UTC()

// ParseRef parses an oci://registry/repository[:tag|@digest] reference.
func ParseRef(s string, insecure bool) (name.Reference, error) {
	rest, ok := strings.CutPrefix(s, oci.OCIRepositoryPrefix)
	if !ok {
		return nil, fmt.Errorf("artifact %q: must start with oci://", s)
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(rest, append(opts, name.StrictValidation)...)
	if err != nil {
		// StrictValidation refuses a missing tag; default to latest
		// only if the rest is valid.
		ref, err = name.ParseReference(rest, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("artifact %q: %w", s, err)
	}
	if !strings.Contains(rest, "/") {
		return nil, fmt.Errorf("artifact %q: needs a registry and a repository (oci://registry/repository:tag)", s)
	}
	return ref, nil
}

// ValidRepository checks an oci://registry/repository reference (no tag).
func ValidRepository(s string) error {
	rest, ok := strings.CutPrefix(s, oci.OCIRepositoryPrefix)
	if !ok {
		return fmt.Errorf("repository %q: must start with oci://", s)
	}
	if _, err := name.NewRepository(rest); err != nil || !strings.Contains(rest, "/") {
		return fmt.Errorf("repository %q: not registry/repository", s)
	}
	return nil
}

// Options say how to reach registries.
type Options struct {
	// Username and Password, when set, authenticate to the registries
	// of Hosts and to no other; elsewhere the Docker config's credentials
	// (~/.docker/config.json, DOCKER_CONFIG, kept per host) are used,
	// and on GitHub ghcr.io gets the workflow token.
	Username, Password string
	// Hosts are the registries (host or host:port, as a reference names
	// them) that Username and Password are for.
	Hosts []string
	// GitHubToken authenticates to ghcr.io when nothing else does.
	GitHubToken string
	// Anonymous sends no credentials at all, whatever Username,
	// GitHubToken or the Docker config hold: for what a run file names
	// on a registry the workflow gave no credentials for.
	Anonymous bool
	// Insecure allows plain HTTP to any registry. Without it, plain HTTP
	// is used only for loopback registries.
	Insecure bool
	// Transport is the HTTP transport (tests); default http.DefaultTransport.
	Transport http.RoundTripper
	// Recipients, when set, encrypt pushed artifacts with age.
	Recipients []age.Recipient
	// Identities decrypt pulled artifacts that are encrypted.
	Identities []age.Identity
	// Sign, when set, signs every pushed artifact's digest with cosign.
	Sign *SignOptions
	// Verify, when set, refuses to pull an artifact without a valid
	// cosign signature for its digest.
	Verify *VerifyOptions
	// MaxBytes and MaxFiles bound what a pull downloads and unpacks
	// (default DefaultMaxBytes, as Flux bounds an artifact, and
	// DefaultMaxFiles).
	MaxBytes int64
	MaxFiles int
}

// The bounds of a pull unless told otherwise: Flux's source-controller
// refuses an artifact that unpacks to more than 100 MiB; a count of files
// keeps a small artifact of many empty files from filling the disk's
// inodes.
const (
	DefaultMaxBytes = 100 << 20
	DefaultMaxFiles = 10000
)

// TooLargeError refuses an artifact over the pull's bounds, before more
// of it is written.
type TooLargeError struct {
	Ref  string
	What string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("artifact %s %s; nothing of it is used (max-artifact-bytes and max-artifact-files set the bounds)", e.Ref, e.What)
}

// Client pushes and pulls artifacts.
type Client struct {
	oci        *oci.Client
	opts       []crane.Option
	insecure   bool
	recipients []age.Recipient
	identities []age.Identity
	keychain   authn.Keychain
	transport  http.RoundTripper
	signOpts   *SignOptions
	verifyOpts *VerifyOptions
	maxBytes   int64
	maxFiles   int
}

// New returns a client.
func New(o Options) *Client {
	t := o.Transport
	if t == nil {
		t = remote.DefaultTransport
	}
	var keychain authn.Keychain = authn.NewMultiKeychain(explicit(o), authn.DefaultKeychain, ghcr(o.GitHubToken))
	if o.Anonymous {
		keychain = emptyKeychain{}
	}
	maxBytes := o.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	// Every answer of a registry is read bounded, whatever reads it (a
	// tag list is one JSON document, which the registry library decodes
	// as it comes).
	transport := &loopbackOnlyHTTP{next: boundedBodies{next: t, max: maxBytes}, insecure: o.Insecure}
	opts := []crane.Option{
		crane.WithAuthFromKeychain(keychain),
		crane.WithTransport(transport),
		crane.WithUserAgent("gantry"),
	}
	if o.Insecure {
		opts = append(opts, crane.Insecure)
	}
	c := &Client{oci: oci.NewClient(opts), opts: opts, insecure: o.Insecure, recipients: o.Recipients, identities: o.Identities,
		keychain: keychain, transport: transport, signOpts: o.Sign, verifyOpts: o.Verify, maxBytes: maxBytes, maxFiles: o.MaxFiles}
	if c.maxFiles <= 0 {
		c.maxFiles = DefaultMaxFiles
	}
	return c
}

// explicit is a keychain with the given username and password for the
// registries they were given for, or none: credentials belong to a host,
// and a reference read from configuration or a revision never makes them
// go elsewhere.
func explicit(o Options) authn.Keychain {
	if o.Username == "" && o.Password == "" {
		return emptyKeychain{}
	}
	auth := authn.FromConfig(authn.AuthConfig{Username: o.Username, Password: o.Password})
	var chain []authn.Keychain
	for _, h := range o.Hosts {
		chain = append(chain, hostKeychain{host: RegistryHost(h), auth: auth})
	}
	return authn.NewMultiKeychain(chain...)
}

// RegistryHost is a registry's name as references resolve it (Docker
// Hub's docker.io is index.docker.io), as credentials are bound to it.
func RegistryHost(h string) string {
	if r, err := name.NewRegistry(h); err == nil {
		return r.RegistryStr()
	}
	return h
}

// ghcr authenticates to ghcr.io with the workflow's token.
func ghcr(token string) authn.Keychain {
	if token == "" {
		return emptyKeychain{}
	}
	return hostKeychain{host: "ghcr.io", auth: authn.FromConfig(authn.AuthConfig{Username: "gantry", Password: token})}
}

type emptyKeychain struct{}

func (emptyKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return authn.Anonymous, nil
}

type hostKeychain struct {
	host string
	auth authn.Authenticator
}

func (k hostKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if r.RegistryStr() == k.host {
		return k.auth, nil
	}
	return authn.Anonymous, nil
}

// loopbackOnlyHTTP refuses plain HTTP to anything but loopback unless
// insecure: go-containerregistry would also fall back to HTTP for private
// (RFC 1918) addresses and .local names.
type loopbackOnlyHTTP struct {
	next     http.RoundTripper
	insecure bool
}

func (l *loopbackOnlyHTTP) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" && !l.insecure && !isLoopback(r.URL.Hostname()) {
		return nil, fmt.Errorf("plain HTTP to %s refused: only loopback registries are reached over HTTP unless insecure-registry is set", r.URL.Host)
	}
	return l.next.RoundTrip(r)
}

// boundedBodies fails the reading of an answer's body past max bytes.
type boundedBodies struct {
	next http.RoundTripper
	max  int64
}

func (b boundedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: b.max, host: r.URL.Host}
	return resp, nil
}

type boundedBody struct {
	io.ReadCloser
	left int64
	host string
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the bound: the end, or one byte too many.
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 && err != nil {
			return 0, err
		}
		// Closed here: a reader that stops at the error (the registry
		// library's tag list) may never close it.
		_ = b.ReadCloser.Close()
		return 0, fmt.Errorf("%s answered more than the bound of one fetch (max-artifact-bytes)", b.host)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// describe adds what a person can do about a registry's refusal.
func describe(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized:
			return fmt.Errorf("the registry refused the credentials (401 Unauthorized; check registry-username and registry-password, which go only to the registries of the workflow's artifact, compare-to and crds and to registry-hosts, or the Docker config): %w", err)
		case http.StatusForbidden:
			return fmt.Errorf("the registry denied access (403 Forbidden; the credentials lack permission for this repository): %w", err)
		}
	}
	return err
}

// Meta describes what an artifact holds, for its annotations.
type Meta struct {
	// Source is the repository URL; Revision is Flux's form
	// <branch>@sha1:<commit>.
	Source, Revision string
	// Created defaults to SOURCE_DATE_EPOCH, else FixedCreated.
	Created time.Time
}

func (m Meta) created() (string, error) {
	if !m.Created.IsZero() {
		return m.Created.UTC().Format(time.RFC3339), nil
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		var sec int64
		if _, err := fmt.Sscan(s, &sec); err != nil {
			return "", fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds", s)
		}
		return time.Unix(sec, 0).UTC().Format(time.RFC3339), nil
	}
	return FixedCreated.Format(time.RFC3339), nil
}

// Pushed is where an artifact went.
type Pushed struct {
	// URL is oci://registry/repository@sha256:...
	URL    string
	Digest string
	Tags   []string
	// Signed says the digest was signed with cosign.
	Signed bool
}

// Push packs manifests (a YAML stream) into an artifact, pushes it to ref,
// and tags it with the extra tags. The same manifests and meta always give
// the same digest.
func (c *Client) Push(ctx context.Context, ref string, manifests []byte, meta Meta, tags []string) (*Pushed, error) {
	r, err := ParseRef(ref, c.insecure)
	if err != nil {
		return nil, err
	}
	for _, t := range tags {
		if _, err := name.NewTag(r.Context().String()+":"+t, name.StrictValidation); err != nil {
			return nil, fmt.Errorf("tag %q: %w", t, err)
		}
	}
	created, err := meta.created()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gantry-artifact-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, ManifestsFile), manifests, 0o644); err != nil {
		return nil, err
	}
	md := oci.Metadata{Created: created, Source: meta.Source, Revision: meta.Revision}
	var digestRef string
	if len(c.recipients) > 0 {
		digestRef, err = c.pushEncrypted(ctx, r, dir, md)
	} else {
		digestRef, err = c.pushTarball(ctx, r, dir, md)
	}
	if err != nil {
		return nil, fmt.Errorf("pushing %s: %w", ref, describe(err))
	}
	d, err := name.NewDigest(digestRef)
	if err != nil {
		return nil, err
	}
	if c.signOpts != nil {
		if err := c.sign(ctx, d); err != nil {
			return nil, fmt.Errorf("signing %s: %w", d, err)
		}
	}
	pushed := &Pushed{URL: oci.OCIRepositoryPrefix + d.String(), Digest: d.DigestStr(), Signed: c.signOpts != nil}
	if t, ok := r.(name.Tag); ok {
		pushed.Tags = append(pushed.Tags, t.TagStr())
	}
	for _, t := range tags {
		if _, err := c.oci.Tag(ctx, d.String(), t); err != nil {
			return pushed, fmt.Errorf("tagging %s as %s: %w", d, t, err)
		}
		pushed.Tags = append(pushed.Tags, t)
	}
	return pushed, nil
}

// pushEncrypted pushes dir as an age-encrypted tar.gz layer. age's file
// key is random, so an encrypted artifact's digest differs on every push.
func (c *Client) pushEncrypted(ctx context.Context, r name.Reference, dir string, md oci.Metadata) (string, error) {
	tmp, err := os.MkdirTemp("", "gantry-encrypt-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	tgz, enc := filepath.Join(tmp, "layer.tgz"), filepath.Join(tmp, "layer.tgz.age")
	if err := c.oci.Build(tgz, dir, nil); err != nil {
		return "", err
	}
	if err := encryptFile(enc, tgz, c.recipients); err != nil {
		return "", err
	}
	md.Annotations = map[string]string{EncryptionAnnotation: "age"}
	content, err := os.ReadFile(enc)
	if err != nil {
		return "", err
	}
	return c.pushLayer(ctx, r, static.NewLayer(content, EncryptedMediaType), md)
}

// pushTarball pushes dir as Flux's tar+gzip layer.
func (c *Client) pushTarball(ctx context.Context, r name.Reference, dir string, md oci.Metadata) (string, error) {
	tmp, err := os.MkdirTemp("", "gantry-layer-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	tgz := filepath.Join(tmp, "layer.tgz")
	if err := c.oci.Build(tgz, dir, nil); err != nil {
		return "", err
	}
	layer, err := tarball.LayerFromFile(tgz, tarball.WithMediaType(ContentMediaType), tarball.WithCompressedCaching)
	if err != nil {
		return "", err
	}
	return c.pushLayer(ctx, r, layer, md)
}

// pushLayer pushes one layer as an artifact in Flux's format and returns
// its digest reference. It builds the manifest as fluxcd/pkg/oci's Push
// does, except that an annotation without a value (the revision or source
// outside CI) is left out rather than written empty.
func (c *Client) pushLayer(ctx context.Context, r name.Reference, layer v1.Layer, md oci.Metadata) (string, error) {
	created, err := time.Parse(time.RFC3339, md.Created)
	if err != nil {
		return "", fmt.Errorf("created %q: %w", md.Created, err)
	}
	annotations := map[string]string{}
	for k, v := range md.ToAnnotations() {
		if v != "" {
			annotations[k] = v
		}
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ConfigMediaType)
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf.Created = v1.Time{Time: created}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	img = mutate.Annotations(img, annotations).(v1.Image)
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer}); err != nil {
		return "", err
	}
	if err := crane.Push(img, r.String(), append(c.opts, crane.WithContext(ctx))...); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return r.Context().Digest(d.String()).String(), nil
}

// Pulled is what was pulled.
type Pulled struct {
	URL, Digest      string
	Source, Revision string
	Created          string
	// Verified says its cosign signature was checked.
	Verified bool
}

// Pull downloads the artifact at ref into dir (which must be empty or
// absent) and returns its identity.
func (c *Client) Pull(ctx context.Context, ref, dir string) (*Pulled, error) {
	r, err := ParseRef(ref, c.insecure)
	if err != nil {
		return nil, err
	}
	// Resolve the reference to a digest once and pull by it, so that what
	// is checked (encryption here, signatures) is what is pulled, even if
	// the tag moves meanwhile.
	desc, err := crane.Get(r.String(), append(c.opts, crane.WithContext(ctx))...)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, describe(err))
	}
	byDigest := r.Context().Digest(desc.Digest.String())
	if c.verifyOpts != nil {
		// Before a single byte of content is fetched.
		if err := c.verify(ctx, byDigest); err != nil {
			return nil, fmt.Errorf("pulling %s: %w", ref, describe(err))
		}
	}
	m, err := v1.ParseManifest(strings.NewReader(string(desc.Manifest)))
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI manifest: %w", ref, err)
	}
	if err := c.fetchAndUnpack(ctx, byDigest, m, dir); err != nil {
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			tooLarge.Ref = ref
			return nil, tooLarge
		}
		return nil, fmt.Errorf("pulling %s: %w", ref, describe(err))
	}
	meta := oci.MetadataFromAnnotations(m.Annotations)
	return &Pulled{URL: oci.OCIRepositoryPrefix + byDigest.String(), Digest: desc.Digest.String(),
		Source: meta.Source, Revision: meta.Revision, Created: meta.Created, Verified: c.verifyOpts != nil}, nil
}

// fetchAndUnpack downloads the artifact's one layer completely, checks it
// against its digest, and only then decrypts (if encrypted) and unpacks it
// into dir: a tampered layer never reaches the disk as content.
func (c *Client) fetchAndUnpack(ctx context.Context, ref name.Digest, m *v1.Manifest, dir string) error {
	if len(m.Layers) != 1 {
		return fmt.Errorf("not a Flux artifact: %d layers, want 1", len(m.Layers))
	}
	layer := m.Layers[0]
	encrypted := string(layer.MediaType) == EncryptedMediaType
	if !encrypted && string(layer.MediaType) != ContentMediaType {
		return fmt.Errorf("not a Flux artifact: layer media type %s", layer.MediaType)
	}
	if encrypted && len(c.identities) == 0 {
		return errors.New("the artifact is encrypted with age and no age-identities were given")
	}
	if layer.Size > c.maxBytes {
		return &TooLargeError{What: fmt.Sprintf("has a layer of %d bytes, over the %d a pull takes", layer.Size, c.maxBytes)}
	}
	blob, err := remote.Layer(ref.Context().Digest(layer.Digest.String()), remote.WithAuthFromKeychain(c.keychain), remote.WithTransport(c.transport), remote.WithContext(ctx))
	if err != nil {
		return err
	}
	rc, err := blob.Compressed()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "gantry-layer-")
	if err != nil {
		rc.Close()
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(rc, c.maxBytes+1))
	rc.Close()
	tmp.Close()
	if err == nil && n > c.maxBytes {
		return &TooLargeError{What: fmt.Sprintf("has a layer of more than %d bytes", c.maxBytes)}
	}
	if err != nil {
		if strings.Contains(err.Error(), "checksum") || strings.Contains(err.Error(), "digest") {
			return fmt.Errorf("layer %s does not match its digest (tampered or corrupted in the registry): %w", layer.Digest, err)
		}
		return fmt.Errorf("downloading layer %s: %w", layer.Digest, err)
	}
	var content io.ReadCloser
	if encrypted {
		content, err = decryptFile(tmp.Name(), c.identities)
	} else {
		content, err = os.Open(tmp.Name())
	}
	if err != nil {
		return err
	}
	defer content.Close()
	// Its size and files are counted before anything is unpacked; the
	// unpacking itself is bounded too.
	if encrypted {
		// Decrypted as a stream: read once into a bounded file.
		plain, err := os.CreateTemp("", "gantry-layer-plain-")
		if err != nil {
			return err
		}
		defer os.Remove(plain.Name())
		n, err := io.Copy(plain, io.LimitReader(content, c.maxBytes+1))
		plain.Close()
		if err != nil {
			return err
		}
		if n > c.maxBytes {
			return &TooLargeError{What: fmt.Sprintf("decrypts to more than %d bytes", c.maxBytes)}
		}
		if content, err = os.Open(plain.Name()); err != nil {
			return err
		}
		defer content.Close()
	}
	if err := c.measure(content.(*os.File)); err != nil {
		return err
	}
	if err := tar.Untar(content, dir, tar.WithMaxUntarSize(int(c.maxBytes)), tar.WithSkipSymlinks()); err != nil {
		return fmt.Errorf("unpacking layer %s: %w", layer.Digest, err)
	}
	return nil
}

// measure reads a gzip-compressed tar once, without writing any of it,
// and refuses one that unpacks to more files or bytes than the pull
// takes; it leaves f at its start.
func (c *Client) measure(f *os.File) error {
	defer f.Seek(0, io.SeekStart)
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("unpacking the layer: %w", err)
	}
	tr := archivetar.NewReader(zr)
	var files int
	var size int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unpacking the layer: %w", err)
		}
		files++
		size += max(h.Size, 0)
		switch {
		case files > c.maxFiles:
			return &TooLargeError{What: fmt.Sprintf("holds more than %d files", c.maxFiles)}
		case size > c.maxBytes:
			return &TooLargeError{What: fmt.Sprintf("unpacks to more than %d bytes", c.maxBytes)}
		}
	}
}

// Tag adds a tag to the artifact at ref.
func (c *Client) Tag(ctx context.Context, ref, tag string) (string, error) {
	r, err := ParseRef(ref, c.insecure)
	if err != nil {
		return "", err
	}
	out, err := c.oci.Tag(ctx, r.String(), tag)
	if err != nil {
		return "", fmt.Errorf("tagging %s: %w", ref, describe(err))
	}
	return oci.OCIRepositoryPrefix + out, nil
}

// Listing is one tag of a repository.
type Listing struct {
	Tag, Digest, Revision, Source string
}

// List returns a repository's tags (newest semver first), optionally only
// those matching a semver constraint such as ">=1.0.0".
func (c *Client) List(ctx context.Context, repo, semver string) ([]Listing, error) {
	rest, ok := strings.CutPrefix(repo, oci.OCIRepositoryPrefix)
	if !ok {
		return nil, fmt.Errorf("repository %q: must start with oci://", repo)
	}
	if _, err := name.NewRepository(rest); err != nil {
		return nil, fmt.Errorf("repository %q: %w", repo, err)
	}
	metas, err := c.oci.List(ctx, rest, oci.ListOptions{SemverFilter: semver})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", repo, describe(err))
	}
	out := make([]Listing, 0, len(metas))
	for _, m := range metas {
		tag := m.URL[strings.LastIndex(m.URL, ":")+1:]
		out = append(out, Listing{Tag: tag, Digest: m.Digest, Revision: m.Revision, Source: m.Source})
	}
	return out, nil
}

// Layer is one layer of an artifact.
type Layer struct {
	MediaType, Digest string
	Size              int64
}

// Inspection is what inspect shows.
type Inspection struct {
	URL, Digest, MediaType, ConfigMediaType string
	Annotations                             map[string]string
	Layers                                  []Layer
	// Signatures counts the cosign signatures stored for the digest.
	Signatures int
	// Verification is set when the client verifies: nil error means the
	// signature verified.
	Verification *error
}

// Inspect reads an artifact's manifest.
func (c *Client) Inspect(ctx context.Context, ref string) (*Inspection, error) {
	r, err := ParseRef(ref, c.insecure)
	if err != nil {
		return nil, err
	}
	desc, err := crane.Get(r.String(), append(c.opts, crane.WithContext(ctx))...)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, describe(err))
	}
	m, err := v1.ParseManifest(strings.NewReader(string(desc.Manifest)))
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI manifest: %w", ref, err)
	}
	in := &Inspection{
		URL:             oci.OCIRepositoryPrefix + r.Context().Digest(desc.Digest.String()).String(),
		Digest:          desc.Digest.String(),
		MediaType:       string(m.MediaType),
		ConfigMediaType: string(m.Config.MediaType),
		Annotations:     m.Annotations,
	}
	for _, l := range m.Layers {
		in.Layers = append(in.Layers, Layer{MediaType: string(l.MediaType), Digest: l.Digest.String(), Size: l.Size})
	}
	digest := r.Context().Digest(desc.Digest.String())
	if se, err := ociremote.SignedEntity(digest, c.remoteOptions(ctx)); err == nil {
		if sigs, err := se.Signatures(); err == nil {
			if list, err := sigs.Get(); err == nil {
				in.Signatures = len(list)
			}
		}
	}
	if c.verifyOpts != nil {
		err := c.verify(ctx, digest)
		in.Verification = &err
	}
	return in, nil
}
