package artifact

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// recordingTransport records the host of every request and sends none.
type recordingTransport struct {
	mu    sync.Mutex
	hosts []string
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.hosts = append(r.hosts, req.URL.Host)
	r.mu.Unlock()
	return nil, errors.New("no network in this test")
}

// A host allowed by allow-remote-charts without a dot or a port (an
// in-cluster registry named "charts", say) must be the host contacted:
// go-containerregistry reads oci://charts/shop as Docker Hub's
// repository charts/shop, so a pull request publishing charts/shop on
// Docker Hub would have its chart fetched from a host the workflow never
// allowed.
func TestAttackDotlessAllowedHostIsTheHostContacted(t *testing.T) {
	t.Parallel()
	rt := &recordingTransport{}
	c := New(Options{Transport: rt})
	_, err := c.FetchChart(context.Background(), ChartRequest{Ref: "oci://charts/shop", Version: "1.0.0", Allowed: []string{"charts"}}, t.TempDir())
	if err == nil {
		t.Fatal("fetched with no network")
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, h := range rt.hosts {
		if h != "charts" {
			t.Errorf("allow-remote-charts allows charts, yet %s was contacted (%v)", h, err)
			break
		}
	}
}

// chartRegistry is an in-process registry with one chart pushed, whose
// handler wrap may change.
func chartRegistry(t *testing.T, wrap func(inner http.Handler) http.Handler) (reg string, layerDigest string, tgz []byte) {
	t.Helper()
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var gate atomic.Bool // open while pushing
	gate.Store(true)
	outer := wrap(inner)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gate.Load() {
			inner.ServeHTTP(w, r)
			return
		}
		outer.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	reg = strings.TrimPrefix(srv.URL, "http://")
	tgz = ShopChartTgz(t, "1.2.0")
	PushChart(t, reg, "charts/shop", "1.2.0", tgz)
	gate.Store(false)
	return reg, "sha256:" + sha256Hex(tgz), tgz
}

// Registry credentials bound to the registry are not forwarded when it
// redirects a blob to another host.
func TestAttackOCIBlobRedirectKeepsCredentials(t *testing.T) {
	t.Parallel()
	var leaked atomic.Value
	leaked.Store("")
	var tgz []byte
	var reached atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Store(true)
		if a := r.Header.Get("Authorization"); a != "" {
			leaked.Store(a)
		}
		w.Write(tgz)
	}))
	t.Cleanup(other.Close)
	reg, _, data := chartRegistry(t, func(inner http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "secret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			if strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet {
				http.Redirect(w, r, other.URL+"/blob", http.StatusTemporaryRedirect)
				return
			}
			inner.ServeHTTP(w, r)
		})
	})
	tgz = data
	c := New(Options{Username: "u", Password: "secret", Hosts: []string{reg}})
	c.FetchChart(context.Background(), ChartRequest{Ref: "oci://" + reg + "/charts/shop", Version: "1.2.0", Allowed: []string{reg}}, t.TempDir())
	if !reached.Load() {
		t.Fatal("the redirect was not followed: nothing was tested")
	}
	if a := leaked.Load().(string); a != "" {
		t.Errorf("credentials forwarded on a redirect to another host: %s", a)
	}
}

// A run file's chart on an allowed registry that registry-hosts does not
// list gets neither registry-username/password nor the GitHub token.
func TestAttackRunFileChartGetsNoCredentials(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	reg, _, _ := chartRegistry(t, func(inner http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a := r.Header.Get("Authorization"); a != "" {
				mu.Lock()
				seen = append(seen, a)
				mu.Unlock()
			}
			if r.Header.Get("Authorization") == "" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, r)
		})
	})
	c := New(Options{Username: "u", Password: "secret", Hosts: []string{"ghcr.io"}, GitHubToken: "ghs_token"})
	_, err := c.FetchChart(context.Background(), ChartRequest{Ref: "oci://" + reg + "/charts/shop", Version: "^1", Allowed: []string{reg}}, t.TempDir())
	if err == nil {
		t.Error("fetched from a registry demanding credentials, with none bound to it")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range seen {
		b, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic "))
		if strings.Contains(string(b), "secret") || strings.Contains(string(b), "ghs_token") {
			t.Errorf("credentials sent to %s: %s", reg, b)
		}
	}
}

// A Helm repository's index naming a chart on another host, or climbing
// out of the allowed prefix, and a redirect off the allowed prefix, are
// refused; a YAML alias bomb in the index is refused.
func TestAttackRepositoryIndexEscapes(t *testing.T) {
	t.Parallel()
	tgz := ShopChartTgz(t, "1.2.0")
	var outside atomic.Int64
	var srvURL string
	mode := map[string]string{}
	var mu sync.Mutex
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		m := mode[r.URL.Path]
		mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/index.yaml"):
			io.WriteString(w, m)
		case strings.Contains(r.URL.Path, "/redir/"):
			http.Redirect(w, r, srvURL+"/other/shop.tgz", http.StatusTemporaryRedirect)
		case strings.HasPrefix(r.URL.Path, "/other/"):
			outside.Add(1)
			w.Write(tgz)
		default:
			w.Write(tgz)
		}
	}))
	t.Cleanup(srv.Close)
	srvURL = srv.URL
	c := New(Options{Transport: srv.Client().Transport})
	entry := func(u string) string {
		return fmt.Sprintf("entries:\n  shop:\n  - version: 1.2.0\n    urls: [%q]\n", u)
	}
	bomb := "entries:\n  a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n"
	prev := "a"
	for i := range 9 {
		n := fmt.Sprintf("l%d", i)
		bomb += fmt.Sprintf("  %s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", n, n, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = n
	}
	for what, index := range map[string]string{
		"climbing":        entry("../other/shop.tgz"),
		"encoded climb":   entry("%2e%2e/other/shop.tgz"),
		"other host":      entry("https://evil.example/shop.tgz"),
		"redirect":        entry("/stable/redir/x.tgz"),
		"alias bomb":      bomb,
		"plain http host": entry("http://127.0.0.2/other/shop.tgz"),
	} {
		p := "/stable-" + strings.ReplaceAll(what, " ", "-")
		mu.Lock()
		mode[p+"/index.yaml"] = strings.ReplaceAll(index, "/stable/", p+"/")
		mu.Unlock()
		start := time.Now()
		_, err := c.FetchChart(context.Background(), ChartRequest{Ref: "shop", Repository: srv.URL + p, Allowed: []string{srv.URL + p + "/"}}, t.TempDir())
		if err == nil {
			t.Errorf("%s: fetched", what)
		}
		t.Logf("%s: %v", what, err)
		if time.Since(start) > 10*time.Second {
			t.Errorf("%s: took %s", what, time.Since(start))
		}
	}
	if n := outside.Load(); n != 0 {
		t.Errorf("%d requests outside the allowed prefix", n)
	}
}

// Links in a chart-cache do not lead its writes out of it.
func TestAttackCacheLinksDoNotLeadOut(t *testing.T) {
	t.Parallel()
	srv, _ := countingRegistry(t)
	reg := strings.TrimPrefix(srv.URL, "http://")
	tgz := ShopChartTgz(t, "1.2.0")
	PushChart(t, reg, "charts/shop", "1.2.0", tgz)
	cache, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(cache, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(cache, "index")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(cache, "blobs", "sha256")); err != nil {
		t.Fatal(err)
	}
	New(Options{}).FetchChart(context.Background(), ChartRequest{Ref: "oci://" + reg + "/charts/shop", Version: "1.2.0", Allowed: []string{reg}, Cache: cache}, t.TempDir())
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the cache wrote outside itself: %v", entries)
	}
	// A blob's name that is a link out is replaced, not written through.
	cache2, outside2 := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(cache2, "blobs", "sha256"), 0o755)
	victim := filepath.Join(outside2, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	os.Symlink(victim, filepath.Join(cache2, "blobs", "sha256", sha256Hex(tgz)+".tgz"))
	if _, err := New(Options{}).FetchChart(context.Background(), ChartRequest{Ref: "oci://" + reg + "/charts/shop", Version: "1.2.0", Allowed: []string{reg}, Cache: cache2}, t.TempDir()); err != nil {
		t.Errorf("fetch: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("written through a link: %q", b)
	}
}

// Offline, nothing is requested, whatever the version.
func TestAttackOfflineSendsNothing(t *testing.T) {
	t.Parallel()
	rt := &recordingTransport{}
	c := New(Options{Transport: rt})
	for _, req := range []ChartRequest{
		{Ref: "oci://ghcr.io/org/shop", Version: "1.2.0", Allowed: []string{"ghcr.io"}, Offline: true},
		{Ref: "oci://ghcr.io/org/shop", Version: "^1", Allowed: []string{"ghcr.io"}, Offline: true, Cache: t.TempDir()},
		{Ref: "shop", Repository: "https://charts.example.com", Allowed: []string{"charts.example.com"}, Offline: true, Cache: t.TempDir()},
	} {
		if _, err := c.FetchChart(context.Background(), req, t.TempDir()); err == nil {
			t.Errorf("%+v: fetched offline with an empty cache", req)
		}
	}
	if len(rt.hosts) != 0 {
		t.Errorf("offline requests to %v", rt.hosts)
	}
}

// Allow-list look-alikes.
func TestAttackChartAllowedLookAlikes(t *testing.T) {
	t.Parallel()
	allowed := []string{"ghcr.io", "oci://registry.example.com/org", "https://charts.example.com/stable/"}
	for _, u := range []string{
		"oci://ghcr.io.@evil.io/x/y",
		"oci://ghcr.io@evil.io/x/y",
		"oci://ghcr.io:443/x/y",
		"oci://ghcr.io./x/y",
		"oci://xn--ghcr-9ra.io/x/y",
		"oci://registry.example.com/organisation/app",
		"oci://registry.example.com/org/%2e%2e/evil/app",
		"oci://registry.example.com/org%2F..%2Fevil/app",
		"oci://REGISTRY.example.com/org/app",
		"https://charts.example.com/stable/../evil/x.tgz",
		"https://charts.example.com/stable/%2E%2E/evil/x.tgz",
		"https://charts.example.com/stable%2f..%2fevil/x.tgz",
		"https://charts.example.com:8443/stable/x.tgz",
		"http://charts.example.com/stable/x.tgz",
		"https://charts.example.com\\@evil.io/stable/x.tgz",
	} {
		if ChartAllowed(allowed, u) {
			t.Errorf("%s: allowed", u)
		}
	}
}

// A tag that is no strict semver version (a date, a bare number) is not a
// chart's version, as Helm takes only strict versions among a
// repository's tags: with no chart-version, 20240101 must not win over
// 1.2.0.
func TestAttackLooseTagIsNoVersion(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	PushChart(t, reg, "charts/shop", "1.2.0", ShopChartTgz(t, "1.2.0"))
	PushChart(t, reg, "charts/shop", "20240101", ShopChartTgz(t, "9.9.9"))
	got, err := New(Options{}).FetchChart(context.Background(), ChartRequest{Ref: "oci://" + reg + "/charts/shop", Allowed: []string{reg}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != "1.2.0" {
		t.Errorf("the highest release is %s, not 1.2.0", got.Version)
	}
}

// A .tgz that expands far beyond max-artifact-bytes is refused before it
// is written out.
func TestAttackUnpackBomb(t *testing.T) {
	t.Parallel()
	c := New(Options{MaxBytes: 1 << 20, MaxFiles: 100})
	big := tar.Header{Name: "shop/templates/big.yaml", Typeflag: tar.TypeReg, Linkname: strings.Repeat("a", 4<<20)}
	chart := tar.Header{Name: "shop/Chart.yaml", Typeflag: tar.TypeReg, Linkname: "apiVersion: v2\nname: shop\nversion: 1.0.0\n"}
	var tooLarge *TooLargeError
	dir := t.TempDir()
	if _, err := c.unpackChart(tgzOf(t, chart, big), "shop", dir); !errors.As(err, &tooLarge) {
		t.Errorf("a bomb: %v", err)
	}
	var total int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, _ error) error {
		if info != nil && !info.IsDir() {
			total += info.Size()
		}
		return nil
	})
	if total > 1<<20 {
		t.Errorf("%d bytes written", total)
	}
	// Many folders count as files.
	var many []tar.Header
	many = append(many, chart)
	for i := range 200 {
		many = append(many, tar.Header{Name: fmt.Sprintf("shop/d%d/", i), Typeflag: tar.TypeDir})
	}
	if _, err := c.unpackChart(tgzOf(t, many...), "shop", t.TempDir()); !errors.As(err, &tooLarge) {
		t.Errorf("many folders: %v", err)
	}
}

// A cache entry verified with one key is taken as verified by a client
// that verifies with another: the entry does not say by what it was
// verified, so a workflow that changes its cosign key (or two workflows
// sharing a chart-cache with different keys or identities) take a chart
// the new key never signed.
func TestAttackCachedVerifiedChartUnderAnotherKey(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	privA, pubA := keyPair(t, "pw")
	_, pubB := keyPair(t, "pw2")
	signed := PushChart(t, reg, "charts/shop", "1.2.0", ShopChartTgz(t, "1.2.0"))
	if err := New(Options{Sign: &SignOptions{KeyRef: privA, Password: []byte("pw")}}).sign(ctx, signed); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	req := ChartRequest{Ref: "oci://" + reg + "/charts/shop", Version: "1.2.0", Allowed: []string{reg}, Cache: cache}
	if got, err := New(Options{Verify: &VerifyOptions{PublicKeyRef: pubA}}).FetchChart(ctx, req, t.TempDir()); err != nil || !got.Verified {
		t.Fatalf("signed with A, verified with A: %+v %v", got, err)
	}
	// Without the cache, key B refuses it.
	noCache := req
	noCache.Cache = ""
	if _, err := New(Options{Verify: &VerifyOptions{PublicKeyRef: pubB}}).FetchChart(ctx, noCache, t.TempDir()); !errors.Is(err, ErrUnverified) {
		t.Fatalf("verified with B, no cache: %v", err)
	}
	got, err := New(Options{Verify: &VerifyOptions{PublicKeyRef: pubB}}).FetchChart(ctx, req, t.TempDir())
	if err == nil {
		t.Errorf("a chart key B never signed was taken from the cache as verified: %+v", got)
	}
}

// A registry whose tag list never ends (every page links to another) is
// read up to maxTags, and the fetch fails saying so.
func TestAttackEndlessTagListIsBounded(t *testing.T) {
	var pages atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(r.URL.Path, "/tags/list"):
			n := pages.Add(1)
			tags := make([]string, 500)
			for i := range tags {
				tags[i] = fmt.Sprintf("%q", fmt.Sprintf("0.%d.%d", n, i))
			}
			w.Header().Set("Link", fmt.Sprintf(`<%s?n=500&last=0.%d.499>; rel="next"`, r.URL.Path, n))
			fmt.Fprintf(w, `{"name":"charts/shop","tags":[%s]}`, strings.Join(tags, ","))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://")
	_, err := New(Options{}).FetchChart(context.Background(), ChartRequest{Ref: "oci://" + reg + "/charts/shop", Version: "^1", Allowed: []string{reg}}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "more than 10000 tags") {
		t.Errorf("err = %v; want the tag list bounded", err)
	}
	if got := pages.Load(); got > 21 {
		t.Errorf("%d pages read, want at most 21", got)
	}
}

// A tag list of one document larger than the bound of a fetch is not
// read past it.
func TestAttackHugeTagListIsBounded(t *testing.T) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(r.URL.Path, "/tags/list"):
			fmt.Fprint(w, `{"name":"charts/shop","tags":["`)
			chunk := []byte(strings.Repeat("1", 64<<10))
			for range 64 { // 4 MiB of one tag
				n, err := w.Write(chunk)
				sent.Add(int64(n))
				if err != nil || r.Context().Err() != nil {
					return
				}
			}
			fmt.Fprint(w, `"]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	// The handler may still be writing what the client stopped reading.
	defer srv.Close()
	defer srv.CloseClientConnections()
	reg := strings.TrimPrefix(srv.URL, "http://")
	_, err := New(Options{MaxBytes: 1 << 20}).FetchChart(context.Background(), ChartRequest{Ref: "oci://" + reg + "/charts/shop", Version: "^1", Allowed: []string{reg}}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "answered more than the bound of one fetch") {
		t.Errorf("err = %v; want the tag list's answer bounded", err)
	}
}
