package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"unicode"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gantry-dev/gantry/sources/yamlbound"
)

// Media types of a Helm chart in an OCI registry, as helm push writes it.
const (
	ChartConfigMediaType  = "application/vnd.cncf.helm.config.v1+json"
	ChartContentMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// ChartRequest names a chart to fetch: from an OCI registry
// (oci://registry/path/name) or, by its name, from a Helm repository.
type ChartRequest struct {
	// Ref is oci://registry/path/name, or the chart's name in Repository.
	Ref string
	// Repository is the URL of a Helm repository (the folder of its
	// index.yaml); empty for a chart in an OCI registry.
	Repository string
	// Version is an exact version or a semver range (^1.2, >=1.0 <2);
	// empty: the highest version that is not a pre-release. Of the
	// versions a range matches, the highest is taken, as Helm takes it.
	Version string
	// Allowed are the hosts and URL prefixes the workflow allows charts
	// from (allow-remote-charts): every URL fetched must match one.
	Allowed []string
	// Cache is the folder charts are kept in, by digest; empty: none.
	Cache string
	// Offline fetches nothing: the chart is taken from the cache or the
	// fetch fails.
	Offline bool
}

// Where names the chart as messages name it.
func (r ChartRequest) Where() string {
	if r.Repository != "" {
		return strings.TrimSuffix(r.Repository, "/") + "/" + r.Ref
	}
	return r.Ref
}

// FetchedChart is a chart fetched, or taken from the cache, and unpacked.
type FetchedChart struct {
	// Ref is the chart as the request named it (Where), Version the
	// version resolved, Digest the sha256 of the chart's .tgz.
	Ref, Version, Digest string
	// Manifest is an OCI chart's manifest digest: what helm push and
	// helm pull print, a registry lists and cosign signs.
	Manifest string
	// Name is the chart's name; Dir its folder, named as the chart.
	Name, Dir string
	// FromCache says nothing was downloaded.
	FromCache bool
	// Verified says its cosign signature was checked (OCI charts, with
	// verify).
	Verified bool
}

// ErrChartNotAllowed is wrapped by the refusal of a URL the workflow
// does not allow charts from.
var ErrChartNotAllowed = errors.New("not allowed by allow-remote-charts")

// ChartAllowed says whether allowed (allow-remote-charts' entries: hosts
// such as ghcr.io or 127.0.0.1:5000, or URL prefixes such as
// oci://ghcr.io/org/ or https://charts.jetstack.io) allows the URL u, an
// oci:// or http(s):// URL. A prefix ends at a path's slash:
// https://charts.example.com allows https://charts.example.com/x, not
// https://charts.example.com.evil.io.
func ChartAllowed(allowed []string, u string) bool {
	host, ok := ChartHost(u)
	if !ok {
		return false
	}
	for _, a := range allowed {
		a = strings.TrimSpace(a)
		if !strings.Contains(a, "://") {
			if a != "" && strings.EqualFold(a, host) {
				return true
			}
			continue
		}
		if strings.HasPrefix(u, a) && (strings.HasSuffix(a, "/") || len(u) == len(a) || u[len(a)] == '/') {
			return true
		}
	}
	return false
}

// ChartHost is the host (host:port) of an oci:// or http(s):// URL of
// a chart, or false for one that is not plain: user information, a
// query, a fragment, a backslash or a .. segment, which would make a
// prefix mean something else than it says.
func ChartHost(u string) (string, bool) {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" || p.User != nil || p.RawQuery != "" || p.Fragment != "" || strings.Contains(u, "\\") ||
		strings.ContainsFunc(u, func(r rune) bool { return !unicode.IsPrint(r) || r == ' ' }) {
		return "", false
	}
	switch p.Scheme {
	case "oci", "https", "http":
	default:
		return "", false
	}
	for _, seg := range strings.Split(p.Path, "/") {
		if seg == ".." || seg == "." {
			return "", false
		}
	}
	if p.Scheme == "oci" {
		// The host allowed must be the one contacted: a reference
		// reads a first part with no dot or port (oci://charts/shop)
		// as an account on Docker Hub, not as a host.
		repo, err := name.NewRepository(strings.TrimPrefix(u, "oci://"))
		if err != nil || repo.RegistryStr() != p.Host {
			return "", false
		}
	}
	return p.Host, true
}

// ValidChartName says name is a chart's name in a repository, as a
// folder may be named after it: letters, digits, '.', '_' and '-', not
// starting with a punctuation mark.
func ValidChartName(name string) bool {
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '.' || r == '_' || r == '-'):
		default:
			return false
		}
	}
	return name != ""
}

// FetchChart fetches the chart req names (or takes it from the cache)
// and unpacks it into a folder of dir named as the chart. An OCI chart is
// verified with cosign, when the client verifies, before its content is
// downloaded; a chart that fails is refused. Every URL fetched must be
// one req.Allowed allows; registry credentials go only where the client
// binds them, and a Helm repository gets none.
func (c *Client) FetchChart(ctx context.Context, req ChartRequest, dir string) (*FetchedChart, error) {
	where := req.Where()
	out, err := c.fetchChart(ctx, req, dir)
	if err != nil {
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			tooLarge.Ref = "chart " + where
			return nil, tooLarge
		}
		return nil, fmt.Errorf("chart %s: %w", where, err)
	}
	out.Ref = where
	return out, nil
}

func (c *Client) fetchChart(ctx context.Context, req ChartRequest, dir string) (*FetchedChart, error) {
	name := req.Ref
	if req.Repository == "" {
		name = path.Base(req.Ref)
	}
	if !ValidChartName(name) {
		return nil, fmt.Errorf("%q is not a chart's name", name)
	}
	var constraint *semver.Constraints
	if req.Version != "" {
		var err error
		if constraint, err = semver.NewConstraint(req.Version); err != nil {
			return nil, fmt.Errorf("version %q: %w", req.Version, err)
		}
	}
	cache, err := openChartCache(req.Cache)
	if err != nil {
		return nil, err
	}
	if cache != nil {
		defer cache.close()
	}
	key := req.Where()
	// A chart of a registry is verified when the client verifies; one of
	// a Helm repository cannot be, and is checked against the digest its
	// index gives.
	verifying := c.verifyOpts != nil && req.Repository == ""
	policy := ""
	if verifying {
		policy = verifyPolicy(c.verifyOpts)
	}
	// Pinned to one version, the cache answers with no request.
	if exact, err := semver.StrictNewVersion(strings.TrimPrefix(req.Version, "v")); err == nil && cache != nil {
		if e := cache.lookup(key, func(v string) bool { return v == req.Version || v == exact.String() }, policy); e != nil {
			return c.fromCache(cache, e, name, dir)
		}
	}
	if req.Offline {
		if cache != nil {
			if e := cache.lookup(key, func(v string) bool { return matches(constraint, v) }, policy); e != nil {
				return c.fromCache(cache, e, name, dir)
			}
		}
		what := "no version"
		if req.Version != "" {
			what = "no version " + req.Version
		}
		if req.Cache == "" {
			return nil, fmt.Errorf("not cached (%s in a chart-cache; none was given), and an offline run fetches nothing", what)
		}
		return nil, fmt.Errorf("not cached (%s%s in chart-cache %s), and an offline run fetches nothing", what, map[bool]string{true: " verified", false: ""}[verifying], req.Cache)
	}
	var got *remoteChart
	if req.Repository != "" {
		got, err = c.resolveRepoChart(ctx, req, constraint)
	} else {
		got, err = c.resolveOCIChart(ctx, req, constraint)
	}
	if err != nil {
		return nil, err
	}
	if cache != nil {
		same := func(v string) bool { return v == got.version }
		verifiedBy := ""
		if got.verified {
			verifiedBy = policy
		}
		if e := cache.lookup(key, same, verifiedBy); e != nil && (got.want == "" || e.Digest == got.want) && (got.manifest == "" || e.Manifest == got.manifest) {
			return c.fromCache(cache, e, name, dir)
		}
	}
	data, err := got.download()
	if err != nil {
		return nil, err
	}
	digest := "sha256:" + sha256Hex(data)
	if got.want != "" && digest != got.want {
		return nil, fmt.Errorf("version %s: the chart's digest is %s, not the %s it was published with (tampered or corrupted)", got.version, digest, got.want)
	}
	e := &cacheEntry{Ref: key, Version: got.version, Digest: digest, Manifest: got.manifest}
	if got.verified {
		e.VerifiedBy = policy
	}
	if cache != nil {
		if err := cache.store(e, data); err != nil {
			return nil, fmt.Errorf("writing chart-cache %s: %w", req.Cache, err)
		}
	}
	chartDir, err := c.unpackChart(data, name, dir)
	if err != nil {
		return nil, fmt.Errorf("version %s: %w", got.version, err)
	}
	return &FetchedChart{Version: got.version, Digest: digest, Manifest: got.manifest, Name: name, Dir: chartDir, Verified: got.verified}, nil
}

func (c *Client) fromCache(cache *chartCache, e *cacheEntry, name, dir string) (*FetchedChart, error) {
	data, err := cache.blob(e.Digest, c.maxBytes)
	if err != nil {
		return nil, fmt.Errorf("chart-cache: %w", err)
	}
	chartDir, err := c.unpackChart(data, name, dir)
	if err != nil {
		return nil, fmt.Errorf("version %s (cached): %w", e.Version, err)
	}
	return &FetchedChart{Version: e.Version, Digest: e.Digest, Manifest: e.Manifest, Name: name, Dir: chartDir, FromCache: true, Verified: e.VerifiedBy != ""}, nil
}

// matches says v is a version the constraint takes (none: the highest
// that is no pre-release).
func matches(c *semver.Constraints, v string) bool {
	sv, err := semver.StrictNewVersion(v)
	if err != nil {
		return false
	}
	if c == nil {
		return sv.Prerelease() == ""
	}
	return c.Check(sv)
}

// highest is the highest of versions the constraint takes, as written.
func highest(c *semver.Constraints, versions []string) (string, bool) {
	var best *semver.Version
	var raw string
	for _, v := range versions {
		sv, err := semver.StrictNewVersion(v)
		if err != nil || !matches(c, v) {
			continue
		}
		if best == nil || sv.GreaterThan(best) {
			best, raw = sv, v
		}
	}
	return raw, best != nil
}

// remoteChart is a chart version resolved, before its content is
// downloaded.
type remoteChart struct {
	version string
	// want is the digest the chart was published with, when known;
	// manifest the OCI manifest's digest.
	want, manifest string
	verified       bool
	download       func() ([]byte, error)
}

// resolveOCIChart resolves the version among the repository's tags (in
// which Helm writes a version's + as _), verifies the manifest's digest
// when the client verifies, and checks that it holds a Helm chart.
func (c *Client) resolveOCIChart(ctx context.Context, req ChartRequest, constraint *semver.Constraints) (*remoteChart, error) {
	if !ChartAllowed(req.Allowed, req.Ref) {
		return nil, fmt.Errorf("%w", ErrChartNotAllowed)
	}
	var opts []name.Option
	if c.insecure {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(strings.TrimPrefix(req.Ref, "oci://"), opts...)
	if err != nil {
		return nil, err
	}
	ropts := []remote.Option{remote.WithAuthFromKeychain(c.keychain), remote.WithTransport(c.transport), remote.WithContext(ctx), remote.WithUserAgent("gantry")}
	version := req.Version
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(version, "v")); err != nil {
		tags, err := listTags(ctx, repo, ropts)
		if err != nil {
			return nil, fmt.Errorf("listing its versions: %w", describe(err))
		}
		for i, t := range tags {
			tags[i] = strings.ReplaceAll(t, "_", "+")
		}
		v, ok := highest(constraint, tags)
		if !ok {
			return nil, fmt.Errorf("no version matches %q among the repository's %d tags", orAny(req.Version), len(tags))
		}
		version = v
	}
	desc, err := remote.Get(repo.Tag(strings.ReplaceAll(version, "+", "_")), ropts...)
	if err != nil {
		return nil, fmt.Errorf("version %s: %w", version, describe(err))
	}
	byDigest := repo.Digest(desc.Digest.String())
	if c.verifyOpts != nil {
		// Before a byte of the chart is downloaded.
		if err := c.verify(ctx, byDigest); err != nil {
			return nil, fmt.Errorf("version %s: %w", version, describe(err))
		}
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, fmt.Errorf("version %s: not an OCI manifest: %w", version, err)
	}
	if string(m.Config.MediaType) != ChartConfigMediaType {
		return nil, fmt.Errorf("version %s: not a Helm chart (config media type %s, want %s)", version, m.Config.MediaType, ChartConfigMediaType)
	}
	var layer *v1.Descriptor
	for i, l := range m.Layers {
		if string(l.MediaType) == ChartContentMediaType {
			if layer != nil {
				return nil, fmt.Errorf("version %s: more than one chart layer", version)
			}
			layer = &m.Layers[i]
		}
	}
	if layer == nil {
		return nil, fmt.Errorf("version %s: no layer of media type %s", version, ChartContentMediaType)
	}
	if layer.Size > c.maxBytes {
		return nil, &TooLargeError{What: fmt.Sprintf("has a chart of %d bytes, over the %d a fetch takes", layer.Size, c.maxBytes)}
	}
	return &remoteChart{version: version, want: layer.Digest.String(), manifest: desc.Digest.String(), verified: c.verifyOpts != nil,
		download: func() ([]byte, error) {
			blob, err := remote.Layer(repo.Digest(layer.Digest.String()), ropts...)
			if err != nil {
				return nil, err
			}
			rc, err := blob.Compressed()
			if err != nil {
				return nil, describe(err)
			}
			defer rc.Close()
			return c.readBounded(rc)
		}}, nil
}

// maxTags bounds the tags read of a chart's repository, page after
// page: a registry that answers without end stops there.
const maxTags = 10_000

// listTags reads repo's tags, at most maxTags of them.
func listTags(ctx context.Context, repo name.Repository, ropts []remote.Option) ([]string, error) {
	puller, err := remote.NewPuller(ropts...)
	if err != nil {
		return nil, err
	}
	lister, err := puller.Lister(ctx, repo)
	if err != nil {
		return nil, err
	}
	var tags []string
	for lister.HasNext() {
		page, err := lister.Next(ctx)
		if err != nil {
			return nil, err
		}
		tags = append(tags, page.Tags...)
		if len(tags) > maxTags {
			return nil, fmt.Errorf("the repository has more than %d tags: name an exact version", maxTags)
		}
	}
	return tags, nil
}

func orAny(v string) string {
	if v == "" {
		return "any release"
	}
	return v
}

// repoIndex is what a Helm repository's index.yaml says of its charts.
type repoIndex struct {
	Entries map[string][]struct {
		Version string   `json:"version"`
		URLs    []string `json:"urls"`
		Digest  string   `json:"digest"`
	} `json:"entries"`
}

// resolveRepoChart reads the repository's index.yaml and resolves the
// version in it. No credentials are sent.
func (c *Client) resolveRepoChart(ctx context.Context, req ChartRequest, constraint *semver.Constraints) (*remoteChart, error) {
	base := strings.TrimSuffix(req.Repository, "/") + "/"
	data, err := c.httpGet(ctx, base+"index.yaml", req.Allowed)
	if err != nil {
		return nil, err
	}
	var idx repoIndex
	if err := yamlbound.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("the repository's index.yaml: %w", err)
	}
	entries := idx.Entries[req.Ref]
	if len(entries) == 0 {
		return nil, fmt.Errorf("the repository's index.yaml has no chart %s", req.Ref)
	}
	var versions []string
	for _, e := range entries {
		versions = append(versions, e.Version)
	}
	version, ok := highest(constraint, versions)
	if !ok {
		return nil, fmt.Errorf("no version matches %q among the repository's %d versions of it", orAny(req.Version), len(versions))
	}
	for _, e := range entries {
		if e.Version != version {
			continue
		}
		if len(e.URLs) == 0 {
			return nil, fmt.Errorf("version %s: the index gives no URL", version)
		}
		b, _ := url.Parse(base)
		rel, err := url.Parse(e.URLs[0])
		if err != nil {
			return nil, fmt.Errorf("version %s: URL %q: %w", version, e.URLs[0], err)
		}
		target := b.ResolveReference(rel).String()
		rc := &remoteChart{version: version, download: func() ([]byte, error) { return c.httpGet(ctx, target, req.Allowed) }}
		if e.Digest != "" {
			rc.want = "sha256:" + strings.TrimPrefix(e.Digest, "sha256:")
		}
		return rc, nil
	}
	return nil, fmt.Errorf("version %s: not in the index", version)
}

// httpGet reads a URL of a Helm repository, bounded, with no
// credentials, refusing any URL (redirects included) allowed does not
// allow, and plain HTTP but to loopback.
func (c *Client) httpGet(ctx context.Context, u string, allowed []string) ([]byte, error) {
	check := func(u *url.URL) error {
		if u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname())) {
			return fmt.Errorf("%s: a chart repository is reached over https (plain HTTP only on loopback)", u.Redacted())
		}
		if !ChartAllowed(allowed, u.String()) {
			return fmt.Errorf("%s: %w", u.Redacted(), ErrChartNotAllowed)
		}
		return nil
	}
	p, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	if err := check(p); err != nil {
		return nil, err
	}
	client := &http.Client{Transport: c.transport, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		return check(r.URL)
	}}
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	r.Header.Set("User-Agent", "gantry")
	resp, err := client.Do(r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", p.Redacted(), resp.Status)
	}
	return c.readBounded(resp.Body)
}

// readBounded reads at most the client's bytes.
func (c *Client) readBounded(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, c.maxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > c.maxBytes {
		return nil, &TooLargeError{What: fmt.Sprintf("is more than %d bytes", c.maxBytes)}
	}
	return data, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// unpackChart unpacks a chart's .tgz into dir/name. Every entry lies in
// the archive's one top folder; an absolute path, a .. or a link (hard
// or symbolic), or anything but files and folders, refuses the whole
// chart, as does more than the client's bytes or files. Files are written
// through an os.Root at dir, which nothing written can leave.
func (c *Client) unpackChart(data []byte, name, dir string) (string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("not a chart archive: %w", err)
	}
	defer zr.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if err := root.Mkdir(name, 0o755); err != nil {
		return "", err
	}
	tr := tar.NewReader(zr)
	top := ""
	files, budget := 0, c.maxBytes
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading the chart archive: %w", err)
		}
		clean := path.Clean(h.Name)
		if strings.ContainsFunc(h.Name, func(r rune) bool { return !unicode.IsPrint(r) }) {
			return "", fmt.Errorf("the chart archive's entry %q has a character that is not printable (a line break, a control or direction character): refused", h.Name)
		}
		if strings.HasPrefix(h.Name, "/") || strings.Contains(h.Name, "\\") || !fs.ValidPath(clean) || strings.Contains("/"+h.Name+"/", "/../") {
			return "", fmt.Errorf("the chart archive's entry %q is not a path inside it (absolute, or with ..): refused", h.Name)
		}
		first, rest, _ := strings.Cut(clean, "/")
		if top == "" {
			top = first
		} else if first != top {
			return "", fmt.Errorf("the chart archive holds %s and %s: a chart's archive has one top folder", top, first)
		}
		if files++; files > c.maxFiles {
			return "", &TooLargeError{What: fmt.Sprintf("holds more than %d files", c.maxFiles)}
		}
		target := name
		if rest != "" {
			target = name + "/" + rest
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(target, 0o755); err != nil {
				return "", err
			}
		case tar.TypeReg:
			if rest == "" {
				return "", fmt.Errorf("the chart archive's entry %q is a file where its top folder should be", h.Name)
			}
			if budget -= max(h.Size, 0); budget < 0 {
				return "", &TooLargeError{What: fmt.Sprintf("unpacks to more than %d bytes", c.maxBytes)}
			}
			if err := root.MkdirAll(path.Dir(target), 0o755); err != nil {
				return "", err
			}
			f, err := root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return "", fmt.Errorf("the chart archive's entry %q: %w", h.Name, err)
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return "", err
			}
		case tar.TypeSymlink, tar.TypeLink:
			return "", fmt.Errorf("the chart archive's entry %q is a link (to %s): a chart's archive holds files and folders only: refused", h.Name, h.Linkname)
		default:
			return "", fmt.Errorf("the chart archive's entry %q is neither a file nor a folder (type %q): refused", h.Name, h.Typeflag)
		}
	}
	if _, err := root.Stat(name + "/Chart.yaml"); err != nil {
		return "", errors.New("the chart archive has no Chart.yaml in its top folder")
	}
	return dir + string(os.PathSeparator) + name, nil
}

// verifyPolicy names what a run verifies charts against (the public key,
// by its reference and, for a file, its content; the keyless identity and
// issuer; the roots), so that a cached chart counts as verified only for
// a run that verifies as the one that fetched it did.
func verifyPolicy(v *VerifyOptions) string {
	h := sha256.New()
	for _, part := range []string{v.PublicKeyRef, v.Identity, v.IdentityRegexp, v.Issuer, v.IssuerRegexp, string(v.RootsPEM)} {
		fmt.Fprintf(h, "%d:%s\n", len(part), part)
	}
	if v.PublicKeyRef != "" && !strings.Contains(v.PublicKeyRef, "://") {
		if key, err := os.ReadFile(v.PublicKeyRef); err == nil {
			h.Write(key)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
