package runner

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/result"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// pushShopVersion pushes the shop chart as version, with one template
// more (a ConfigMap named after the version), to oci://reg/charts/shop.
func pushShopVersion(t *testing.T, reg, version string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(shopTgz(t)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	write := func(name string, b []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "shop/Chart.yaml" {
			b = bytes.Replace(b, []byte("version: 1.2.0"), []byte("version: "+version), 1)
		}
		write(h.Name, b)
	}
	write("shop/templates/added.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: added-in-"+strings.ReplaceAll(version, ".", "-")+"\ndata: {}\n"))
	tw.Close()
	zw.Close()
	img, err := mutate.Append(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), artifact.ChartConfigMediaType),
		mutate.Addendum{Layer: static.NewLayer(buf.Bytes(), artifact.ChartContentMediaType)})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(reg + "/charts/shop:" + version)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}

// A pull request that bumps the chart version a run file names gets the
// rendered diff offline: the base renders the chart its own run file
// names (1.2.0), the head the one the pull request names (1.3.0), and the
// diff is exactly what the new version changes: the template it adds,
// and the Deployment its helm.sh/chart label names. A unit the base's run file
// does not have is new whole.
func TestOfflineDiffOfARunFilesChartVersionBump(t *testing.T) {
	srv, reg, requests := shopRegistry(t)
	pushShopVersion(t, reg, "1.3.0")
	repo := t.TempDir()
	if real, err := filepath.EvalSymlinks(repo); err == nil {
		repo = real
	}
	git := gitIn(t, repo)
	runFile := filepath.Join(repo, "gantry.yaml")
	unitsAt := func(version string, more string) string {
		return fmt.Sprintf("units:\n- name: shop\n  inventory: shop\n  chart: oci://%s/charts/shop\n  chart-version: %s\n  release-name: web\n  chart-hooks: leave-out\n%s", reg, version, more)
	}
	git("init", "-q")
	if err := os.WriteFile(runFile, []byte(unitsAt("1.2.0", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "gantry.yaml")
	git("commit", "-q", "-m", "shop 1.2.0")
	base := git("rev-parse", "HEAD")
	if err := os.WriteFile(runFile, []byte(unitsAt("1.3.0", "- name: other\n  inventory: other\n  chart: oci://"+reg+"/charts/shop\n  chart-version: 1.2.0\n  release-name: other\n  chart-hooks: leave-out\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(repo)
	// Both versions are cached by builds, as jobs before the diff would:
	// offline, nothing is fetched.
	cache := cacheChart(t, reg, "1.2.0", "1.3.0")
	srv.Close()
	fetched := requests.Load()
	g := config.Given{Command: "diff", CommandOrigin: "the command line", Flags: map[string]string{}, Env: map[string]string{
		"GANTRY_WORKSPACE": repo, "GANTRY_OFFLINE": "true", "GANTRY_BASE": base, "GANTRY_ALLOW_REMOTE_CHARTS": reg, "GANTRY_CHART_CACHE": cache}}
	units, err := config.LoadUnits(g, runFile, false)
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{BaseRunFile: config.RunFileAt(g, runFile)}
	defer s.Close()
	changes := func(u *config.Unit) map[string]result.Action {
		t.Helper()
		out := &infos{}
		res := s.Unit(context.Background(), u, out, false)
		if res.Reason != result.ReasonProgressing {
			t.Fatalf("unit %s: diff --offline --base: %s: %s\n%s", u.Name, res.Reason, res.Message, strings.Join(out.lines, "\n"))
		}
		changed := map[string]result.Action{}
		for _, o := range res.Objects {
			if o.Action != result.Unchanged {
				changed[o.Ref()] = o.Action
			}
		}
		return changed
	}
	if got, want := changes(units[0]), map[string]result.Action{"ConfigMap/added-in-1-3-0": result.Created, "Deployment.apps/default/web-shop": result.Configured}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("shop 1.2.0 to 1.3.0: changes %v, want %v", got, want)
	}
	other := changes(units[1])
	if len(other) < 3 || other["ConfigMap/added-in-1-3-0"] != "" {
		t.Errorf("a unit new at the head: changes %v, want every object of shop 1.2.0 created", other)
	}
	for ref, a := range other {
		if a != result.Created {
			t.Errorf("a unit new at the head: %s %s, want created", ref, a)
		}
	}
	if n := requests.Load(); n != fetched {
		t.Errorf("%d requests sent offline", n-fetched)
	}
}

// gitIn runs git in repo as a test's author, failing the test when it
// fails; it returns what git printed, trimmed.
func gitIn(t *testing.T, repo string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
}

// cacheChart builds oci://reg/charts/shop at each version into a new
// chart cache, as jobs before an offline diff would, and returns it.
func cacheChart(t *testing.T, reg string, versions ...string) string {
	t.Helper()
	cache := t.TempDir()
	for _, v := range versions {
		cfg, err := config.Load(config.Given{Command: "build", CommandOrigin: "the command line", Env: map[string]string{}, Flags: map[string]string{
			"chart": "oci://" + reg + "/charts/shop", "chart-version": v, "allow-remote-charts": reg, "chart-cache": cache, "chart-hooks": "leave-out"}})
		if err != nil {
			t.Fatal(err)
		}
		s := &Session{}
		if _, res := s.Render(context.Background(), cfg, &infos{}); res == nil || res.Reason != "" && res.Reason != result.ReasonSucceeded {
			t.Fatalf("build of %s: %+v", v, res)
		}
		s.Close()
	}
	return cache
}
