package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/result"
)

// The base revision of diff --offline --base is git history a pull request
// shapes. At the base, the folder of the workflow's values file
// (sub/values.yaml) is a symbolic link to a folder outside the workspace.
// The base build of a fetched chart maps the values file into the base
// tree (Within) and then allows the real folder of each values file
// (boundedFS.allow resolves the link), so the base reads
// OUTSIDE/values.yaml, a file outside the workspace and outside the base
// tree, and the diff prints what it held. It should be refused as a head's
// link out of the workspace is.
func TestAttack3OfflineBaseValuesFolderLinkedOutside(t *testing.T) {
	srv, reg, _ := shopRegistry(t)
	repo := t.TempDir()
	outside := t.TempDir()
	// A file outside the workspace the run must never read.
	if err := os.WriteFile(filepath.Join(outside, "values.yaml"), []byte("replicaCount: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git := gitIn(t, repo)
	git("init", "-q")
	if err := os.Symlink(outside, filepath.Join(repo, "sub")); err != nil {
		t.Fatal(err)
	}
	git("add", "sub")
	git("commit", "-q", "-m", "base: sub is a link out")
	base := git("rev-parse", "HEAD")
	// The head: sub is a folder with the values file in it.
	if err := os.Remove(filepath.Join(repo, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(repo, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "sub", "values.yaml"), []byte("replicaCount: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(repo)
	cache := t.TempDir()
	flags := map[string]string{"chart": "oci://" + reg + "/charts/shop", "chart-version": "1.2.0", "allow-remote-charts": reg,
		"chart-cache": cache, "chart-hooks": "leave-out", "release-name": "web", "values": "sub/values.yaml"}
	load := func(command string) *config.Config {
		t.Helper()
		cfg, err := config.Load(config.Given{Command: command, CommandOrigin: "the command line", Flags: flags, Env: map[string]string{}})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	s := &Session{}
	if _, res := s.Render(context.Background(), load("build"), &infos{}); res == nil || res.Reason != "" && res.Reason != result.ReasonSucceeded {
		t.Fatalf("build: %+v", res)
	}
	s.Close()
	srv.Close()
	flags["offline"], flags["base"] = "true", base
	s = &Session{}
	defer s.Close()
	res := s.Unit(context.Background(), &config.Unit{Name: "shop", Config: load("diff")}, &infos{}, false)
	t.Logf("result: %s: %s", res.Reason, res.Message)
	for _, o := range res.Objects {
		if strings.Contains(o.Diff, "replicas: 7") {
			t.Errorf("the base read %s, outside the workspace, through a link its history put in place of the values file's folder; the diff shows it:\n%s", filepath.Join(outside, "values.yaml"), o.Diff)
		}
	}
}

// As TestAttack3OfflineBaseValuesFolderLinkedOutside, with the values
// file named by the pull request's own run file (a unit under the
// workflow's chart): the pull request picks the name of the file read
// outside the workspace, not only the folder. The head's path is confined
// to the workspace when the run file is read; the base's is not.
func TestAttack3OfflineBaseRunFileValuesReadOutside(t *testing.T) {
	srv, reg, _ := shopRegistry(t)
	repo := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "any-name.yml"), []byte("replicaCount: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git := gitIn(t, repo)
	git("init", "-q")
	if err := os.Symlink(outside, filepath.Join(repo, "sub")); err != nil {
		t.Fatal(err)
	}
	git("add", "sub")
	git("commit", "-q", "-m", "base: sub is a link out")
	base := git("rev-parse", "HEAD")
	os.Remove(filepath.Join(repo, "sub"))
	if err := os.Mkdir(filepath.Join(repo, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "sub", "any-name.yml"), []byte("replicaCount: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runFile := filepath.Join(repo, "gantry.yaml")
	if err := os.WriteFile(runFile, []byte("units:\n- name: shop\n  inventory: shop\n  release-name: web\n  values: sub/any-name.yml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(repo)
	cache := cacheChart(t, reg, "1.2.0")
	srv.Close()
	env := map[string]string{"GANTRY_WORKSPACE": repo, "GANTRY_CHART": "oci://" + reg + "/charts/shop", "GANTRY_CHART_VERSION": "1.2.0",
		"GANTRY_ALLOW_REMOTE_CHARTS": reg, "GANTRY_CHART_CACHE": cache, "GANTRY_CHART_HOOKS": "leave-out",
		"GANTRY_OFFLINE": "true", "GANTRY_BASE": base}
	units, err := config.LoadUnits(config.Given{Command: "diff", CommandOrigin: "the command line", Flags: map[string]string{}, Env: env}, runFile, false)
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{}
	defer s.Close()
	res := s.Unit(context.Background(), units[0], &infos{}, false)
	t.Logf("result: %s: %s", res.Reason, res.Message)
	for _, o := range res.Objects {
		if strings.Contains(o.Diff, "replicas: 7") {
			t.Errorf("the base read %s, a file outside the workspace the run file named, through a link in the base's history:\n%s", filepath.Join(outside, "any-name.yml"), o.Diff)
		}
	}
}

// The same link, with a chart in the workspace (chart: shop, its folder
// committed at both revisions): the base's values file is allowed by its
// real folder there too, so the flaw is in how the base's values files
// are bounded, not only in the fetched-chart path.
func TestAttack3OfflineBaseWorkspaceChartValuesFolderLinkedOutside(t *testing.T) {
	repo := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "values.yaml"), []byte("replicaCount: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git := gitIn(t, repo)
	git("init", "-q")
	if out, err := exec.Command("cp", "-r", filepath.Join("..", "sources", "charts", "testdata", "shop"), filepath.Join(repo, "shop")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if err := os.Symlink(outside, filepath.Join(repo, "sub")); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "base: sub is a link out")
	base := git("rev-parse", "HEAD")
	os.Remove(filepath.Join(repo, "sub"))
	if err := os.Mkdir(filepath.Join(repo, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "sub", "values.yaml"), []byte("replicaCount: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(repo)
	flags := map[string]string{"chart": "shop", "chart-hooks": "leave-out", "release-name": "web", "values": "sub/values.yaml",
		"offline": "true", "base": base}
	cfg, err := config.Load(config.Given{Command: "diff", CommandOrigin: "the command line", Flags: flags, Env: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{}
	defer s.Close()
	res := s.Unit(context.Background(), &config.Unit{Name: "shop", Config: cfg}, &infos{}, false)
	t.Logf("result: %s: %s", res.Reason, res.Message)
	for _, o := range res.Objects {
		if strings.Contains(o.Diff, "replicas: 7") {
			t.Errorf("the base read %s, outside the workspace:\n%s", filepath.Join(outside, "values.yaml"), o.Diff)
		}
	}
}

// Without any base: the workflow names values: sub/values.yaml, and the
// pull request makes sub (a folder of the workspace it writes) a link to
// a folder outside. build.Build allows each values file's folder by its
// real path, so the head's build reads the file outside the workspace and
// renders it; the workflow named a path in the workspace, not the place
// the pull request's link leads to.
func TestAttack3HeadValuesFolderLinkedOutside(t *testing.T) {
	repo := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "values.yaml"), []byte("replicaCount: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-r", filepath.Join("..", "sources", "charts", "testdata", "shop"), filepath.Join(repo, "shop")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if err := os.Symlink(outside, filepath.Join(repo, "sub")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(repo)
	flags := map[string]string{"chart": "shop", "chart-hooks": "leave-out", "release-name": "web", "values": "sub/values.yaml"}
	cfg, err := config.Load(config.Given{Command: "build", CommandOrigin: "the command line", Flags: flags, Env: map[string]string{"GANTRY_WORKSPACE": repo}})
	if err != nil {
		t.Logf("refused at load: %v", err)
		return
	}
	s := &Session{}
	defer s.Close()
	objects, res := s.Render(context.Background(), cfg, &infos{})
	t.Logf("result: %+v", res)
	for _, o := range objects {
		if o.GetKind() == "Deployment" {
			if r, _, _ := unstructuredInt(o.Object, "spec", "replicas"); r == 7 {
				t.Errorf("the build read %s, outside the workspace, through the pull request's link sub", filepath.Join(outside, "values.yaml"))
			}
		}
	}
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[f]
	}
	switch v := cur.(type) {
	case int64:
		return v, true, nil
	case float64:
		return int64(v), true, nil
	case int:
		return int64(v), true, nil
	}
	return 0, false, nil
}
