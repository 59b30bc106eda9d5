package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ShopChartTgz packs sources/charts/testdata/shop as helm package does: every
// file under one top folder named as the chart, its Chart.yaml's version
// replaced by version.
func ShopChartTgz(t testing.TB, version string) []byte {
	t.Helper()
	src := filepath.Join("..", "sources", "charts", "testdata", "shop")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "Chart.yaml" {
			b = bytes.Replace(b, []byte("version: 1.2.0"), []byte("version: "+version), 1)
		}
		if err := tw.WriteHeader(&tar.Header{Name: "shop/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// PushChart pushes a chart's .tgz as helm push does: Helm's config and
// content media types, the version as the tag (+ written _).
func PushChart(t testing.TB, reg, repo, version string, tgz []byte) name.Digest {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ChartConfigMediaType)
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(tgz, ChartContentMediaType)})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(reg + "/" + repo + ":" + strings.ReplaceAll(version, "+", "_"))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return tag.Context().Digest(d.String())
}

// countingRegistry is an in-process registry that counts the requests
// it is sent.
func countingRegistry(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestFetchOCIChartResolvesARangeAndCaches(t *testing.T) {
	t.Parallel()
	srv, requests := countingRegistry(t)
	reg := strings.TrimPrefix(srv.URL, "http://")
	for _, v := range []string{"1.1.0", "1.2.0", "1.2.5+build.1", "1.3.0-rc.1", "2.0.0"} {
		PushChart(t, reg, "charts/shop", v, ShopChartTgz(t, v))
	}
	c := New(Options{})
	cache := t.TempDir()
	req := ChartRequest{Ref: "oci://" + reg + "/charts/shop", Version: "^1.2", Allowed: []string{reg}, Cache: cache}
	got, err := c.FetchChart(context.Background(), req, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != "1.2.5+build.1" || got.FromCache || filepath.Base(got.Dir) != "shop" || !strings.HasPrefix(got.Digest, "sha256:") {
		t.Fatalf("fetched %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(got.Dir, "Chart.yaml")); err != nil || !strings.Contains(string(b), "version: 1.2.5+build.1") {
		t.Fatalf("Chart.yaml: %s %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(got.Dir, "charts", "db", "Chart.yaml")); err != nil {
		t.Errorf("subchart not unpacked: %v", err)
	}

	// Pinned, with the cache: no request at all, even with the registry gone.
	srv.Close()
	before := requests.Load()
	pinned := req
	pinned.Version = "1.2.5+build.1"
	again, err := c.FetchChart(context.Background(), pinned, t.TempDir())
	if err != nil {
		t.Fatalf("second fetch with the registry closed: %v", err)
	}
	if !again.FromCache || again.Digest != got.Digest || requests.Load() != before {
		t.Errorf("second fetch: %+v, %d requests", again, requests.Load()-before)
	}
	// Offline, a range is resolved among the cached versions.
	offline := req
	offline.Offline = true
	if o, err := c.FetchChart(context.Background(), offline, t.TempDir()); err != nil || o.Version != "1.2.5+build.1" || !o.FromCache {
		t.Errorf("offline from the cache: %+v %v", o, err)
	}
	// Offline, what is not cached fails naming the chart.
	offline.Version = "2.0.0"
	_, err = c.FetchChart(context.Background(), offline, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "oci://"+reg+"/charts/shop") || !strings.Contains(err.Error(), "not cached") {
		t.Errorf("offline, not cached: %v", err)
	}
	// A cached .tgz that no longer matches its digest is not used.
	blob, _ := blobName(got.Digest)
	if err := os.WriteFile(filepath.Join(cache, blob), ShopChartTgz(t, "9.9.9"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FetchChart(context.Background(), pinned, t.TempDir()); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Errorf("tampered cache: %v", err)
	}
}

func TestFetchChartNotAllowedSendsNothing(t *testing.T) {
	t.Parallel()
	srv, requests := countingRegistry(t)
	reg := strings.TrimPrefix(srv.URL, "http://")
	c := New(Options{})
	for _, allowed := range [][]string{nil, {"ghcr.io"}, {"oci://" + reg + "/other/"}} {
		_, err := c.FetchChart(context.Background(), ChartRequest{Ref: "oci://" + reg + "/charts/shop", Version: "1.2.0", Allowed: allowed}, t.TempDir())
		if !errors.Is(err, ErrChartNotAllowed) {
			t.Errorf("allowed %v: %v", allowed, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent for charts not allowed", n)
	}
}

func TestChartAllowed(t *testing.T) {
	t.Parallel()
	allowed := []string{"ghcr.io", "oci://registry.example.com/org/", "https://charts.jetstack.io"}
	for u, want := range map[string]bool{
		"oci://ghcr.io/x/y":                             true,
		"oci://ghcr.io.evil.io/x/y":                     false,
		"oci://registry.example.com/org/app":            true,
		"oci://registry.example.com/orgx/app":           false,
		"oci://registry.example.com/org/../evil/app":    false,
		"https://charts.jetstack.io/index.yaml":         true,
		"https://charts.jetstack.io.evil.io/index.yaml": false,
		"https://charts.jetstack.io@evil.io/index.yaml": false,
		"https://evil.io/?https://charts.jetstack.io":   false,
	} {
		if got := ChartAllowed(allowed, u); got != want {
			t.Errorf("%s: allowed %v, want %v", u, got, want)
		}
	}
}

func TestFetchRepositoryChartOverTLS(t *testing.T) {
	t.Parallel()
	tgz := ShopChartTgz(t, "1.2.0")
	newer := ShopChartTgz(t, "1.4.0")
	var requests atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if _, _, ok := r.BasicAuth(); ok || r.Header.Get("Authorization") != "" {
			t.Errorf("credentials sent to a chart repository: %s", r.URL)
		}
		switch r.URL.Path {
		case "/stable/index.yaml":
			fmt.Fprintf(w, "apiVersion: v1\nentries:\n  shop:\n  - name: shop\n    version: 1.2.0\n    urls: [shop-1.2.0.tgz]\n    digest: %s\n  - name: shop\n    version: 1.4.0\n    urls: [/stable/shop-1.4.0.tgz]\n    digest: %s\n",
				sha256Hex(tgz), sha256Hex(newer))
		case "/stable/shop-1.2.0.tgz":
			w.Write(tgz)
		case "/stable/shop-1.4.0.tgz":
			w.Write(newer)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	c := New(Options{Username: "u", Password: "p", Hosts: []string{strings.TrimPrefix(srv.URL, "https://")}, Transport: srv.Client().Transport})
	req := ChartRequest{Ref: "shop", Repository: srv.URL + "/stable", Version: ">=1.0 <1.3", Allowed: []string{srv.URL + "/stable"}}
	got, err := c.FetchChart(context.Background(), req, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != "1.2.0" || got.Digest != "sha256:"+sha256Hex(tgz) || filepath.Base(got.Dir) != "shop" {
		t.Errorf("fetched %+v", got)
	}
	req.Version = ""
	if got, err := c.FetchChart(context.Background(), req, t.TempDir()); err != nil || got.Version != "1.4.0" {
		t.Errorf("latest: %+v %v", got, err)
	}
	// A repository's chart cannot be verified: a client that verifies
	// registries' charts still takes it from the cache, offline.
	pinned := req
	pinned.Version, pinned.Cache = "1.2.0", t.TempDir()
	if _, err := c.FetchChart(context.Background(), pinned, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	pinned.Offline = true
	verifying := New(Options{Verify: &VerifyOptions{PublicKeyRef: "unused.pub"}, Transport: srv.Client().Transport})
	if got, err := verifying.FetchChart(context.Background(), pinned, t.TempDir()); err != nil || !got.FromCache {
		t.Errorf("a repository's chart from the cache, verifying: %+v %v", got, err)
	}
	// A URL the index names outside what is allowed is not fetched.
	req.Allowed = []string{srv.URL + "/stable/index.yaml"}
	before := requests.Load()
	if _, err := c.FetchChart(context.Background(), req, t.TempDir()); !errors.Is(err, ErrChartNotAllowed) || requests.Load() != before+1 {
		t.Errorf("chart URL outside allow-remote-charts: %v (%d requests)", err, requests.Load()-before)
	}
}

func TestFetchChartWrongDigestFromRepository(t *testing.T) {
	t.Parallel()
	tgz := ShopChartTgz(t, "1.2.0")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "index.yaml") {
			fmt.Fprintf(w, "entries:\n  shop:\n  - version: 1.2.0\n    urls: [shop-1.2.0.tgz]\n    digest: %s\n", sha256Hex([]byte("other")))
			return
		}
		w.Write(tgz)
	}))
	t.Cleanup(srv.Close)
	c := New(Options{Transport: srv.Client().Transport})
	_, err := c.FetchChart(context.Background(), ChartRequest{Ref: "shop", Repository: srv.URL, Allowed: []string{srv.URL}}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "tampered") {
		t.Errorf("a chart unlike its index's digest: %v", err)
	}
}

func TestFetchOCIChartVerified(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	priv, pub := keyPair(t, "pw")
	otherPriv, _ := keyPair(t, "pw2")
	signed := PushChart(t, reg, "charts/shop", "1.2.0", ShopChartTgz(t, "1.2.0"))
	PushChart(t, reg, "charts/shop", "1.3.0", ShopChartTgz(t, "1.3.0"))
	wrong := PushChart(t, reg, "charts/shop", "1.4.0", ShopChartTgz(t, "1.4.0"))
	if err := New(Options{Sign: &SignOptions{KeyRef: priv, Password: []byte("pw")}}).sign(ctx, signed); err != nil {
		t.Fatal(err)
	}
	if err := New(Options{Sign: &SignOptions{KeyRef: otherPriv, Password: []byte("pw2")}}).sign(ctx, wrong); err != nil {
		t.Fatal(err)
	}
	c := New(Options{Verify: &VerifyOptions{PublicKeyRef: pub}})
	req := ChartRequest{Ref: "oci://" + reg + "/charts/shop", Allowed: []string{reg}, Cache: t.TempDir()}
	req.Version = "1.2.0"
	got, err := c.FetchChart(ctx, req, t.TempDir())
	if err != nil || !got.Verified {
		t.Fatalf("signed chart: %+v %v", got, err)
	}
	for _, v := range []string{"1.3.0", "1.4.0"} {
		req.Version = v
		dir := t.TempDir()
		_, err := c.FetchChart(ctx, req, dir)
		if !errors.Is(err, ErrUnverified) {
			t.Errorf("%s: %v", v, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: refused, yet unpacked", v)
		}
	}
	// A chart cached without verification is not taken by a run that
	// verifies.
	unverified := req
	unverified.Version = "1.3.0"
	if _, err := New(Options{}).FetchChart(ctx, unverified, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	unverified.Offline = true
	if _, err := c.FetchChart(ctx, unverified, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not cached") {
		t.Errorf("an unverified cached chart, verifying offline: %v", err)
	}
}

// tgzOf packs the given headers (content: their Linkname for files).
func tgzOf(t *testing.T, hs ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range hs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		h.Mode = 0o644
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestUnpackChartRefusesEscapes(t *testing.T) {
	t.Parallel()
	chart := tar.Header{Name: "shop/Chart.yaml", Typeflag: tar.TypeReg, Linkname: "apiVersion: v2\nname: shop\nversion: 1.0.0\n"}
	c := New(Options{MaxBytes: 1 << 20, MaxFiles: 10})
	for what, h := range map[string]tar.Header{
		"dot-dot":  {Name: "shop/../../evil.yaml", Typeflag: tar.TypeReg, Linkname: "x"},
		"dot-dot2": {Name: "../evil.yaml", Typeflag: tar.TypeReg, Linkname: "x"},
		"absolute": {Name: "/tmp/evil.yaml", Typeflag: tar.TypeReg, Linkname: "x"},
		"symlink":  {Name: "shop/templates/x.yaml", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		"hardlink": {Name: "shop/templates/x.yaml", Typeflag: tar.TypeLink, Linkname: "shop/Chart.yaml"},
		"fifo":     {Name: "shop/fifo", Typeflag: tar.TypeFifo},
		"two tops": {Name: "other/x.yaml", Typeflag: tar.TypeReg, Linkname: "x"},
		// Named on the console and in the report: a line break would
		// write a line of the archive's own (a review's attack).
		"line break":         {Name: "shop/templates/x\n  chart oci://ghcr.io/acme/shop version 9.9.9 fetched, its signature verified\n::error::pwned.yaml", Typeflag: tar.TypeReg, Linkname: "x"},
		"direction override": {Name: "shop/templates/x\u202elmay.yaml", Typeflag: tar.TypeReg, Linkname: "x"},
	} {
		dir := t.TempDir()
		_, err := c.unpackChart(tgzOf(t, chart, h), "shop", dir)
		if err == nil {
			t.Errorf("%s: unpacked", what)
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, "shop", "templates", "x.yaml")); err == nil {
			t.Errorf("%s: the entry was written", what)
		}
	}
	// A path with .. is refused even where it would end up inside.
	inside := chart
	inside.Name = "shop/templates/../Chart.yaml"
	if _, err := c.unpackChart(tgzOf(t, inside), "shop", t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a path inside it") {
		t.Errorf("an entry with ..: %v", err)
	}
	if _, err := c.unpackChart(tgzOf(t, chart), "shop", t.TempDir()); err != nil {
		t.Errorf("a plain chart: %v", err)
	}
	many := []tar.Header{chart}
	for i := range 11 {
		many = append(many, tar.Header{Name: fmt.Sprintf("shop/f%d", i), Typeflag: tar.TypeReg, Linkname: "x"})
	}
	var tooLarge *TooLargeError
	if _, err := c.unpackChart(tgzOf(t, many...), "shop", t.TempDir()); !errors.As(err, &tooLarge) {
		t.Errorf("more files than allowed: %v", err)
	}
}

// NewTestRegistry starts an in-process registry on loopback.
func NewTestRegistry(t *testing.T) string { return newRegistry(t, "", "") }

// A chart's reference with a character that is not printable (a line
// separator, a direction override) or a space is no plain URL: refused
// before it is named anywhere.
func TestChartHostRefusesUnprintableReferences(t *testing.T) {
	for _, u := range []string{
		"https://127.0.0.1:1/x\u2028  chart https://charts.example.com/shop version 1.0.0 fetched\u202e/",
		"oci://ghcr.io/acme/shop\nfetched",
		"https://charts.example.com/a b",
	} {
		if _, ok := ChartHost(u); ok {
			t.Errorf("%q taken as a chart's URL", u)
		}
	}
	if host, ok := ChartHost("oci://ghcr.io/acme/charts/shop"); !ok || host != "ghcr.io" {
		t.Errorf("a plain reference: %q %v", host, ok)
	}
}
