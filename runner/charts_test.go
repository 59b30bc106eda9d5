package runner

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
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

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources/charts"
)

// The test binary renders charts in a process of its own, as gantry does.
func TestMain(m *testing.M) {
	if child, code := charts.ChildMain(); child {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// shopTgz packs sources/charts/testdata/shop as helm package does.
func shopTgz(t *testing.T) []byte {
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
		if err := tw.WriteHeader(&tar.Header{Name: "shop/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

type infos struct{ lines []string }

func (*infos) StageStarted(string)         {}
func (*infos) StageFinished(result.Stage)  {}
func (*infos) ObjectDone(result.Object)    {}
func (o *infos) Info(msg string)           { o.lines = append(o.lines, msg) }
func (*infos) Write(b []byte) (int, error) { return len(b), nil }

// shopRegistry is a registry holding the shop chart as
// oci://REG/charts/shop:1.2.0, and the count of the requests it answered.
func shopRegistry(t *testing.T) (*httptest.Server, string, *atomic.Int64) {
	t.Helper()
	requests := &atomic.Int64{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1); h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	reg := strings.TrimPrefix(srv.URL, "http://")
	img, err := mutate.Append(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), artifact.ChartConfigMediaType),
		mutate.Addendum{Layer: static.NewLayer(shopTgz(t), artifact.ChartContentMediaType)})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(reg + "/charts/shop:1.2.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	return srv, reg, requests
}

// A chart named oci://registry/path/name is fetched before the build,
// said on the console with its version and digest, and built as a
// chart's folder is; with a chart cache, a second run needs no registry.
func TestBuildRemoteChart(t *testing.T) {
	srv, reg, requests := shopRegistry(t)
	cache := t.TempDir()
	flags := map[string]string{"chart": "oci://" + reg + "/charts/shop", "chart-version": "1.2.0", "allow-remote-charts": reg,
		"chart-cache": cache, "chart-hooks": "leave-out", "release-name": "web"}
	run := func() ([]string, []string, *result.Result) {
		cfg, err := config.Load(config.Given{Command: "build", CommandOrigin: "the command line", Flags: flags, Env: map[string]string{}})
		if err != nil {
			t.Fatal(err)
		}
		s := &Session{}
		defer s.Close()
		out := &infos{}
		objects, res := s.Render(context.Background(), cfg, out)
		var refs []string
		for _, o := range objects {
			refs = append(refs, o.Ref())
		}
		return refs, out.lines, res
	}
	refs, lines, res := run()
	if res == nil || res.Reason != "" && res.Reason != result.ReasonSucceeded {
		t.Fatalf("build: %+v", res)
	}
	if !strings.Contains(strings.Join(refs, " "), "Deployment.apps/default/web-shop") {
		t.Errorf("objects: %v", refs)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "chart oci://"+reg+"/charts/shop version 1.2.0 (sha256:") || !strings.Contains(strings.Join(lines, "\n"), "fetched") {
		t.Errorf("console: %q", lines)
	}
	srv.Close()
	before := requests.Load()
	refs2, lines, res := run()
	if res == nil || res.Reason != "" && res.Reason != result.ReasonSucceeded || len(refs2) != len(refs) {
		t.Fatalf("second build, registry closed: %+v", res)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "taken from the chart cache") || requests.Load() != before {
		t.Errorf("second build: %q, %d requests", lines, requests.Load()-before)
	}
}

// Offline, a chart is taken from the cache or not at all: one that is not
// cached fails the run naming it, with no request sent.
func TestOfflineRemoteChartNotCached(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://")
	cfg, err := config.Load(config.Given{Command: "validate", CommandOrigin: "the command line", Env: map[string]string{}, Flags: map[string]string{
		"offline": "true", "chart": "oci://" + reg + "/charts/shop", "chart-version": "1.2.0", "allow-remote-charts": reg, "chart-cache": t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{}
	defer s.Close()
	res := s.Unit(context.Background(), &config.Unit{Name: "shop", Config: cfg}, &infos{}, false)
	if res.Reason != result.ReasonBuildFailed || !strings.Contains(res.Message, "oci://"+reg+"/charts/shop") || !strings.Contains(res.Message, "not cached") {
		t.Errorf("offline, not cached: %s %s", res.Reason, res.Message)
	}
	if requests.Load() != 0 {
		t.Errorf("%d requests sent offline", requests.Load())
	}
}

// A pull request that changes the values of a chart the workflow names
// (fetched, its version the workflow's input) shows, offline, what the
// chart renders differently with the values of the base revision and
// with its own: the same chart on both sides, from the cache, with no
// request.
func TestOfflineDiffOfAFetchedChartsValues(t *testing.T) {
	srv, reg, requests := shopRegistry(t)
	repo := t.TempDir()
	git := gitIn(t, repo)
	git("init", "-q")
	values := filepath.Join(repo, "values.yaml")
	if err := os.WriteFile(values, []byte("replicaCount: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "values.yaml")
	git("commit", "-q", "-m", "values")
	base := git("rev-parse", "HEAD")
	if err := os.WriteFile(values, []byte("replicaCount: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(repo)
	cache := t.TempDir()
	flags := map[string]string{"chart": "oci://" + reg + "/charts/shop", "chart-version": "1.2.0", "allow-remote-charts": reg,
		"chart-cache": cache, "chart-hooks": "leave-out", "release-name": "web", "values": "values.yaml"}
	load := func(command string) *config.Config {
		t.Helper()
		cfg, err := config.Load(config.Given{Command: command, CommandOrigin: "the command line", Flags: flags, Env: map[string]string{}})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	// The chart is cached by a build, as a job before the diff would.
	s := &Session{}
	if _, res := s.Render(context.Background(), load("build"), &infos{}); res == nil || res.Reason != "" && res.Reason != result.ReasonSucceeded {
		t.Fatalf("build: %+v", res)
	}
	s.Close()
	srv.Close()
	before := requests.Load()
	flags["offline"], flags["base"] = "true", base
	s = &Session{}
	defer s.Close()
	res := s.Unit(context.Background(), &config.Unit{Name: "shop", Config: load("diff")}, &infos{}, false)
	if res.Reason != result.ReasonProgressing {
		t.Fatalf("diff --offline --base: %s: %s, want changes pending", res.Reason, res.Message)
	}
	changed := map[string]result.Action{}
	for _, o := range res.Objects {
		if o.Action != result.Unchanged {
			changed[o.Ref()] = o.Action
		}
	}
	if want := map[string]result.Action{"Deployment.apps/default/web-shop": result.Configured}; fmt.Sprint(changed) != fmt.Sprint(want) {
		t.Errorf("changes %v, want %v", changed, want)
	}
	if requests.Load() != before {
		t.Errorf("%d requests sent offline", requests.Load()-before)
	}
}
