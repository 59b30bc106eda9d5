package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gantry-dev/gantry/e2e/cluster"
)

// A repository as teams publish one: charts packaged and indexed by the
// helm CLI (helm package, helm repo index --url), served over HTTPS. A
// range takes the highest version it matches, the chart is checked
// against the digest Helm's index gives, and a pinned version is taken
// from the cache with no request.
func TestFetchChartFromARepositoryHelmIndexed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the helm CLI built by make tools")
	}
	t.Parallel()
	helm, err := cluster.Tool("helm")
	if err != nil {
		t.Fatal(err)
	}
	home, repo := t.TempDir(), t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(helm, args...)
		cmd.Env = cluster.ToolEnv(home)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("helm %s: %v\n%s", args[0], err, out)
		}
	}
	src := filepath.Join("..", "sources", "charts", "testdata", "shop")
	chartYAML, err := os.ReadFile(filepath.Join(src, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1.2.0", "1.3.0", "2.0.0"} {
		dir := filepath.Join(home, "src-"+v, "shop")
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(strings.Replace(string(chartYAML), "version: 1.2.0", "version: "+v, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		run("package", dir, "--destination", repo)
	}
	var requests atomic.Int64
	files := http.FileServer(http.Dir(repo))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.StripPrefix("/charts", files).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	run("repo", "index", repo, "--url", srv.URL+"/charts")

	c := New(Options{Transport: srv.Client().Transport})
	req := ChartRequest{Ref: "shop", Repository: srv.URL + "/charts", Version: "~1.2 || ~1.3", Allowed: []string{srv.URL + "/charts/"}, Cache: t.TempDir()}
	got, err := c.FetchChart(context.Background(), req, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tgz, err := os.ReadFile(filepath.Join(repo, "shop-1.3.0.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tgz)
	if got.Version != "1.3.0" || got.Digest != "sha256:"+hex.EncodeToString(sum[:]) || got.FromCache {
		t.Errorf("fetched %+v, want 1.3.0 with the digest of Helm's package", got)
	}
	if _, err := os.Stat(filepath.Join(got.Dir, "templates")); err != nil {
		t.Errorf("the chart's templates are not unpacked: %v", err)
	}
	srv.Close()
	before := requests.Load()
	req.Version, req.Offline = "1.3.0", true
	if got, err := c.FetchChart(context.Background(), req, t.TempDir()); err != nil || !got.FromCache || got.Version != "1.3.0" {
		t.Errorf("pinned, offline: %+v %v, want it from the cache", got, err)
	}
	if requests.Load() != before {
		t.Errorf("%d requests for a cached chart", requests.Load()-before)
	}
}
