package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/config"
)

// Held checks: what the base's run file names is fetched from nowhere
// (offline), from no host the workflow did not allow, and reads nothing
// outside the base's tree.
func TestAttack4HeldBaseChartOfflineAndAllowList(t *testing.T) {
	srv, reg, requests := shopRegistry(t)
	pushShopVersion(t, reg, "1.3.0")
	repo := t.TempDir()
	if real, err := filepath.EvalSymlinks(repo); err == nil {
		repo = real
	}
	git := gitIn(t, repo)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("replicaCount: 77\n"), 0o644)
	git("init", "-q")
	cases := map[string]string{
		"uncached version":    fmt.Sprintf("units:\n- name: shop\n  inventory: shop\n  chart: oci://%s/charts/shop\n  chart-version: 1.3.0\n  release-name: web\n  chart-hooks: leave-out\n", reg),
		"host not allowed":    "units:\n- name: shop\n  inventory: shop\n  chart: oci://evil.example/charts/shop\n  chart-version: 1.2.0\n  release-name: web\n  chart-hooks: leave-out\n",
		"values outside":      fmt.Sprintf("units:\n- name: shop\n  inventory: shop\n  chart: oci://%s/charts/shop\n  chart-version: 1.2.0\n  release-name: web\n  chart-hooks: leave-out\n  values: %s/secret.yaml\n", reg, outside),
		"values link outside": fmt.Sprintf("units:\n- name: shop\n  inventory: shop\n  chart: oci://%s/charts/shop\n  chart-version: 1.2.0\n  release-name: web\n  chart-hooks: leave-out\n  values: link.yaml\n", reg),
		"values head abs":     fmt.Sprintf("units:\n- name: shop\n  inventory: shop\n  chart: oci://%s/charts/shop\n  chart-version: 1.2.0\n  release-name: web\n  chart-hooks: leave-out\n  values: %s/headonly.yaml\n", reg, repo),
		"run file link":       "LINK",
	}
	cache := cacheChart(t, reg, "1.2.0")
	t.Chdir(repo)
	head := fmt.Sprintf("units:\n- name: shop\n  inventory: shop\n  chart: oci://%s/charts/shop\n  chart-version: 1.2.0\n  release-name: web\n  chart-hooks: leave-out\n", reg)
	for name, baseRF := range cases {
		t.Run(name, func(t *testing.T) {
			os.Remove(filepath.Join(repo, "gantry.yaml"))
			os.Remove(filepath.Join(repo, "link.yaml"))
			if baseRF == "LINK" {
				os.WriteFile(filepath.Join(outside, "rf.yaml"), []byte(strings.Replace(head, "replicaCount", "x", 1)+"  set: replicaCount=55\n"), 0o644)
				os.Symlink(filepath.Join(outside, "rf.yaml"), filepath.Join(repo, "gantry.yaml"))
			} else {
				os.WriteFile(filepath.Join(repo, "gantry.yaml"), []byte(baseRF), 0o644)
			}
			os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(repo, "link.yaml"))
			git("add", "-A")
			git("commit", "-q", "--allow-empty", "-m", name)
			base := git("rev-parse", "HEAD")
			os.Remove(filepath.Join(repo, "gantry.yaml"))
			os.WriteFile(filepath.Join(repo, "gantry.yaml"), []byte(head), 0o644)
			os.WriteFile(filepath.Join(repo, "headonly.yaml"), []byte("replicaCount: 66\n"), 0o644)
			g := config.Given{Command: "diff", CommandOrigin: "the command line", Flags: map[string]string{}, Env: map[string]string{
				"GANTRY_WORKSPACE": repo, "GANTRY_OFFLINE": "true", "GANTRY_BASE": base, "GANTRY_ALLOW_REMOTE_CHARTS": reg, "GANTRY_CHART_CACHE": cache}}
			units, err := config.LoadUnits(g, filepath.Join(repo, "gantry.yaml"), false)
			if err != nil {
				t.Fatal(err)
			}
			before := requests.Load()
			s := &Session{BaseRunFile: config.RunFileAt(g, filepath.Join(repo, "gantry.yaml"))}
			defer s.Close()
			out := &infos{}
			res := s.Unit(context.Background(), units[0], out, false)
			var all strings.Builder
			for _, o := range res.Objects {
				all.WriteString(o.Diff)
			}
			t.Logf("%s: %s", res.Reason, res.Message)
			if n := requests.Load() - before; n != 0 {
				t.Errorf("%d requests offline", n)
			}
			for _, leak := range []string{"replicas: 77", "replicas: 66", "replicas: 55"} {
				if strings.Contains(all.String(), leak) {
					t.Errorf("base read a file outside its tree: %s", leak)
				}
			}
		})
	}
	srv.Close()
}
