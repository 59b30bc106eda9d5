package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/static"
)

const manifests = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"

// newRegistry starts an in-process registry on loopback; with a password,
// it demands basic auth.
func newRegistry(t *testing.T, user, password string) string {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if user != "" {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestPushPullRoundTripAndReproducibleDigest(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	c := New(Options{})
	ctx := context.Background()
	meta := Meta{Source: "https://github.com/acme/shop", Revision: "main@sha1:0123abcd"}

	p1, err := c.Push(ctx, "oci://"+reg+"/acme/shop-config:v1", []byte(manifests), meta, []string{"latest", "main"})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.Push(ctx, "oci://"+reg+"/acme/shop-config:v1", []byte(manifests), meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Digest != p2.Digest {
		t.Errorf("the same build pushed twice: %s then %s", p1.Digest, p2.Digest)
	}
	if !strings.HasPrefix(p1.URL, "oci://"+reg+"/acme/shop-config@sha256:") || strings.Join(p1.Tags, ",") != "v1,latest,main" {
		t.Errorf("pushed %+v", p1)
	}
	other, err := c.Push(ctx, "oci://"+reg+"/acme/shop-config:v2", []byte(manifests), Meta{Source: meta.Source, Revision: "main@sha1:feed"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.Digest == p1.Digest {
		t.Error("a different revision gave the same digest")
	}

	dir := filepath.Join(t.TempDir(), "out")
	pulled, err := c.Pull(ctx, "oci://"+reg+"/acme/shop-config:latest", dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, ManifestsFile))
	if err != nil || string(got) != manifests {
		t.Errorf("pulled %q, %v", got, err)
	}
	if pulled.Digest != p1.Digest || pulled.Revision != meta.Revision || pulled.Source != meta.Source {
		t.Errorf("pulled %+v", pulled)
	}
}

// Flux's own OCI client (what source-controller uses) pulls what gantry
// pushed and finds the same files.
func TestFluxClientPullsGantryArtifact(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	if _, err := New(Options{}).Push(ctx, "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{Revision: "v1@sha1:abc"}, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	meta, err := oci.NewClient(oci.DefaultOptions()).Pull(ctx, reg+"/acme/app:v1", dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, ManifestsFile))
	if err != nil || string(got) != manifests || meta.Revision != "v1@sha1:abc" {
		t.Errorf("Flux pulled %q (%v), revision %q", got, err, meta.Revision)
	}
}

func TestArtifactFormatIsFlux(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	c := New(Options{})
	if _, err := c.Push(ctx, "oci://"+reg+"/acme/app:v1", []byte(manifests), Meta{Source: "https://example.com/r", Revision: "main@sha1:1"}, nil); err != nil {
		t.Fatal(err)
	}
	raw, err := crane.Manifest(reg + "/acme/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		MediaType string `json:"mediaType"`
		Config    struct {
			MediaType string `json:"mediaType"`
		} `json:"config"`
		Layers []struct {
			MediaType string `json:"mediaType"`
		} `json:"layers"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != ConfigMediaType ||
		len(m.Layers) != 1 || m.Layers[0].MediaType != ContentMediaType {
		t.Errorf("manifest %s", raw)
	}
	if m.Annotations["org.opencontainers.image.created"] != "1970-01-01T00:00:00Z" ||
		m.Annotations["org.opencontainers.image.source"] != "https://example.com/r" ||
		m.Annotations["org.opencontainers.image.revision"] != "main@sha1:1" {
		t.Errorf("annotations %v", m.Annotations)
	}
	in, err := c.Inspect(ctx, "oci://"+reg+"/acme/app:v1")
	if err != nil || len(in.Layers) != 1 || in.ConfigMediaType != ConfigMediaType {
		t.Errorf("inspect %+v, %v", in, err)
	}
	// Outside CI the revision and source are unknown: left out, not
	// written empty.
	if _, err := c.Push(ctx, "oci://"+reg+"/acme/app:local", []byte(manifests), Meta{}, nil); err != nil {
		t.Fatal(err)
	}
	raw, err = crane.Manifest(reg + "/acme/app:local")
	if err != nil {
		t.Fatal(err)
	}
	m.Annotations = nil
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"org.opencontainers.image.revision", "org.opencontainers.image.source"} {
		if v, ok := m.Annotations[k]; ok {
			t.Errorf("%s = %q, want it left out", k, v)
		}
	}
	if m.Annotations["org.opencontainers.image.created"] == "" {
		t.Errorf("annotations %v", m.Annotations)
	}
}

func TestCreatedFromSourceDateEpoch(t *testing.T) {
	// Not parallel: sets the environment.
	t.Setenv("SOURCE_DATE_EPOCH", "1795000000")
	got, err := Meta{}.created()
	if err != nil || got != time.Unix(1795000000, 0).UTC().Format(time.RFC3339) {
		t.Errorf("created %q, %v", got, err)
	}
}

func TestTagAndSemverList(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	c := New(Options{})
	for _, v := range []string{"1.0.0", "1.2.0", "2.0.0-rc.1"} {
		if _, err := c.Push(ctx, "oci://"+reg+"/acme/app:"+v, []byte(manifests+"# "+v+"\n"), Meta{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Tag(ctx, "oci://"+reg+"/acme/app:1.2.0", "stable"); err != nil {
		t.Fatal(err)
	}
	all, err := c.List(ctx, "oci://"+reg+"/acme/app", "")
	if err != nil || len(all) != 4 {
		t.Fatalf("list %+v, %v", all, err)
	}
	ones, err := c.List(ctx, "oci://"+reg+"/acme/app", "1.x")
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, l := range ones {
		tags = append(tags, l.Tag)
	}
	if strings.Join(tags, ",") != "1.2.0,1.0.0" {
		t.Errorf("1.x tags %v", tags)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	authed := newRegistry(t, "ci", "s3cret")
	ctx := context.Background()
	cases := map[string]struct {
		ref  string
		opts Options
		want string
	}{
		"no oci:// prefix":                {ref: "ghcr.io/acme/app:v1", want: "must start with oci://"},
		"malformed reference":             {ref: "oci://ghcr.io/acme/App Name:v1", want: `artifact "oci://ghcr.io/acme/App Name:v1"`},
		"no repository":                   {ref: "oci://ghcr.io", want: "needs a registry and a repository"},
		"unreachable":                     {ref: "oci://127.0.0.1:1/acme/app:v1", want: "connection refused"},
		"401 without credentials":         {ref: "oci://" + authed + "/acme/app:v1", want: "401"},
		"401 wrong password":              {ref: "oci://" + authed + "/acme/app:v1", opts: Options{Username: "ci", Password: "wrong", Hosts: []string{authed}}, want: "401"},
		"plain HTTP to a private address": {ref: "oci://10.255.255.1:5000/acme/app:v1", want: "plain HTTP to 10.255.255.1:5000 refused"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := New(tc.opts).Push(ctx, tc.ref, []byte(manifests), Meta{}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// The right credentials work.
	if _, err := New(Options{Username: "ci", Password: "s3cret", Hosts: []string{authed}}).Push(ctx, "oci://"+authed+"/acme/app:v1", []byte(manifests), Meta{}, nil); err != nil {
		t.Errorf("with credentials: %v", err)
	}
}

// On GitHub, the workflow token authenticates to ghcr.io, and only there.
// Credentials go only to the registries they were given for: another
// registry that asks for them (as one a run file or a revision names
// would) gets none, and the request fails there as anonymous.
func TestCredentialsStayWithTheirRegistry(t *testing.T) {
	t.Parallel()
	own := newRegistry(t, "ci", "s3cret")
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="other"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(other.Close)
	otherHost := strings.TrimPrefix(other.URL, "http://")
	c := New(Options{Username: "ci", Password: "s3cret", Hosts: []string{own}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Push(ctx, "oci://"+own+"/acme/app:v1", []byte(manifests), Meta{}, nil); err != nil {
		t.Fatalf("the registry the credentials are for: %v", err)
	}
	if _, err := c.Pull(ctx, "oci://"+otherHost+"/acme/app:v1", t.TempDir()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("pull from another registry: %v, want 401", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the other registry was never asked: the test proves nothing")
	}
	for _, a := range seen {
		if a != "" {
			t.Errorf("the other registry received Authorization %q", a)
		}
	}
}

func TestGHCRUsesTheWorkflowToken(t *testing.T) {
	t.Parallel()
	kc := ghcr("ghs_workflowtoken")
	for host, want := range map[string]bool{"ghcr.io": true, "registry.example.com": false} {
		reg, err := name.NewRegistry(host)
		if err != nil {
			t.Fatal(err)
		}
		auth, err := kc.Resolve(reg)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := auth.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Password == "ghs_workflowtoken"; got != want {
			t.Errorf("%s: token used %v, want %v", host, got, want)
		}
	}
}

// pushTar pushes an artifact in Flux's format whose one layer is a
// gzip-compressed tar of files, as an attacker could build one.
func pushTar(t *testing.T, c *Client, ref string, files map[string][]byte) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := ParseRef(ref, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.pushLayer(context.Background(), r, static.NewLayer(b.Bytes(), ContentMediaType), oci.Metadata{Created: "2026-01-01T00:00:00Z"}); err != nil {
		t.Fatal(err)
	}
}

// A small artifact that unpacks to much (a file of zeros compresses a
// thousandfold) or to many files is refused, naming the bound, before
// anything of it is written; within the bounds it is pulled.
func TestPullsAreBounded(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	ctx := context.Background()
	c := New(Options{MaxBytes: 1 << 20, MaxFiles: 100})
	many := map[string][]byte{}
	for i := range 101 {
		many[fmt.Sprintf("f%03d.yaml", i)] = nil
	}
	pushTar(t, c, "oci://"+reg+"/acme/bomb:size", map[string][]byte{"zeros.yaml": make([]byte, 2<<20)})
	pushTar(t, c, "oci://"+reg+"/acme/bomb:files", many)
	pushTar(t, c, "oci://"+reg+"/acme/bomb:fine", map[string][]byte{"a.yaml": []byte("a: 1\n"), "b.yaml": make([]byte, 900<<10)})
	for tag, want := range map[string]string{"size": "unpacks to more than 1048576 bytes", "files": "holds more than 100 files"} {
		dir := filepath.Join(t.TempDir(), "out")
		_, err := c.Pull(ctx, "oci://"+reg+"/acme/bomb:"+tag, dir)
		var tooLarge *TooLargeError
		if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "bomb:"+tag) {
			t.Errorf("%s: got %v, want a refusal saying %q", tag, err, want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("%s: %d files written before the refusal", tag, len(entries))
		}
	}
	if _, err := c.Pull(ctx, "oci://"+reg+"/acme/bomb:fine", filepath.Join(t.TempDir(), "out")); err != nil {
		t.Errorf("an artifact within the bounds: %v", err)
	}
	// The defaults are Flux's.
	if d := New(Options{}); d.maxBytes != 100<<20 || d.maxFiles != DefaultMaxFiles {
		t.Errorf("defaults %d bytes, %d files", d.maxBytes, d.maxFiles)
	}
}
