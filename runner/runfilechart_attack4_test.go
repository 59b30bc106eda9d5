package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// atkRepo is a git repository whose base commit holds baseFiles and
// whose working tree (the head) holds headFiles; the shop chart 1.2.0 is
// in a chart cache; the registry is closed before it returns.
type atkRepo struct {
	repo, base, cache, reg string
}

func newAtkRepo(t *testing.T, baseFiles, headFiles func(reg string) map[string]string) *atkRepo {
	t.Helper()
	srv, reg, _ := shopRegistry(t)
	repo := t.TempDir()
	if real, err := filepath.EvalSymlinks(repo); err == nil {
		repo = real
	}
	git := gitIn(t, repo)
	write := func(files map[string]string) {
		for name, body := range files {
			p := filepath.Join(repo, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(body, "symlink:") {
				os.Remove(p)
				if err := os.Symlink(strings.ReplaceAll(strings.TrimPrefix(body, "symlink:"), "REPO", repo), p); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	git("init", "-q")
	write(baseFiles(reg))
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	base := git("rev-parse", "HEAD")
	// the head: the base's files removed, the head's written
	for name := range baseFiles(reg) {
		os.Remove(filepath.Join(repo, name))
	}
	write(headFiles(reg))
	cache := cacheChart(t, reg, "1.2.0")
	srv.Close()
	t.Chdir(repo)
	return &atkRepo{repo: repo, base: base, cache: cache, reg: reg}
}

// env is the workflow's: offline diff against the base, the registry
// allowed, the cache given; more adds to it.
func (a *atkRepo) given(more map[string]string) config.Given {
	env := map[string]string{"GANTRY_WORKSPACE": a.repo, "GANTRY_OFFLINE": "true", "GANTRY_BASE": a.base,
		"GANTRY_ALLOW_REMOTE_CHARTS": a.reg, "GANTRY_CHART_CACHE": a.cache}
	for k, v := range more {
		env[k] = v
	}
	return config.Given{Command: "diff", CommandOrigin: "the command line", Flags: map[string]string{}, Env: env}
}

// run runs every unit of the head's run file as entrypoint.runFile does:
// the session masks what the head's units name as secrets.
func (a *atkRepo) run(t *testing.T, g config.Given) ([]*result.Result, []string) {
	t.Helper()
	runFile := filepath.Join(a.repo, "gantry.yaml")
	units, err := config.LoadUnits(g, runFile, false)
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, u := range units {
		secrets = append(secrets, u.Config.Secrets...)
	}
	redact := redact.New(secrets...)
	s := &Session{BaseRunFile: config.RunFileAt(g, runFile), Mask: redact.String, Secret: func(v string) bool { return redact.String(v) != v },
		Decrypted: func(v []string) { redact.Add(v...) }}
	defer s.Close()
	var out []*result.Result
	var lines []string
	for _, u := range units {
		o := &infos{}
		res := s.Unit(context.Background(), u, o, false)
		out = append(out, res)
		lines = append(lines, o.lines...)
		lines = append(lines, fmt.Sprintf("unit %s: %s: %s", u.Name, res.Reason, res.Message))
		for _, ob := range res.Objects {
			lines = append(lines, fmt.Sprintf("  %s %s\n%s", ob.Action, ob.Ref(), ob.Diff))
		}
	}
	return out, lines
}

func headShop(reg string) string {
	return fmt.Sprintf("units:\n- name: shop\n  inventory: shop\n  chart: oci://%s/charts/shop\n  chart-version: 1.2.0\n  release-name: web\n  chart-hooks: leave-out\n", reg)
}

// A secret the base's run file reads with {env: NAME} (a variable the
// workflow lets run files read) is masked as the head's are: it must not
// be printed in the diff because only the base's run file named it.
func TestAttack4BaseRunFileEnvSecretIsMasked(t *testing.T) {
	const token = "base-only-secret-value-0123456789"
	a := newAtkRepo(t, func(reg string) map[string]string {
		return map[string]string{
			"gantry.yaml":     "units:\n- name: shop\n  inventory: shop\n  path: ./app\n  substitute:\n    API_TOKEN: {env: DEPLOY_TOKEN}\n",
			"app/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\n  namespace: default\ndata:\n  token: ${API_TOKEN}\n",
		}
	}, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": headShop(reg)}
	})
	res, lines := a.run(t, a.given(map[string]string{"GANTRY_RUN_FILE_ENV": "DEPLOY_TOKEN", "DEPLOY_TOKEN": token}))
	all := strings.Join(lines, "\n")
	t.Logf("output:\n%s", all)
	if res[0].Reason != result.ReasonProgressing {
		t.Fatalf("diff: %s: %s", res[0].Reason, res[0].Message)
	}
	if strings.Contains(all, token) {
		t.Errorf("the value of DEPLOY_TOKEN, which only the base's run file read, is printed unmasked in the diff")
	}
}

// The workflow names a values file (GANTRY_VALUES, a file of the
// checkout) for every unit; the pull request changes it. The head renders
// the chart with the new file; the base must render it with the file as
// it was at the base, or the diff hides what the pull request changes.
func TestAttack4WorkflowValuesFileTakenAtBase(t *testing.T) {
	a := newAtkRepo(t, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": headShop(reg), "values.yaml": "replicaCount: 2\n"}
	}, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": headShop(reg), "values.yaml": "replicaCount: 9\n"}
	})
	res, lines := a.run(t, a.given(map[string]string{"GANTRY_VALUES": "values.yaml"}))
	t.Logf("output:\n%s", strings.Join(lines, "\n"))
	changed := map[string]result.Action{}
	for _, o := range res[0].Objects {
		if o.Action != result.Unchanged {
			changed[o.Ref()] = o.Action
		}
	}
	if changed["Deployment.apps/default/web-shop"] != result.Configured {
		t.Errorf("the pull request changes replicaCount 2 to 9 in the workflow's values file: %s: %s, changes %v; want Deployment web-shop configured", res[0].Reason, res[0].Message, changed)
	}
}

// The base's run file gives the unit another inventory: at the head the
// unit's objects go to a new inventory (nothing of the old one pruned),
// which is not "unchanged".
func TestAttack4BaseUnitOfAnotherInventoryIsNewWhole(t *testing.T) {
	a := newAtkRepo(t, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": strings.Replace(headShop(reg), "inventory: shop", "inventory: shop-old", 1)}
	}, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": headShop(reg)}
	})
	res, lines := a.run(t, a.given(nil))
	t.Logf("output:\n%s", strings.Join(lines, "\n"))
	if res[0].Reason == result.ReasonSucceeded || res[0].Reason == result.ReasonNoChanges {
		t.Errorf("the unit moves from inventory shop-old to shop, and diff --offline --base says %s: %s", res[0].Reason, res[0].Message)
	}
}

// The base's run file is read, and every one of its units configured,
// once for each unit of the head that names its chart: a pull request
// that writes 1000 units in each run file makes a million unit
// configurations. The base's run file should be read once a run.
func TestAttack4BaseRunFileReadOncePerHeadUnit(t *testing.T) {
	const nHead, nBase = 8, 1000
	units := func(reg string, n int) string {
		var b strings.Builder
		b.WriteString("units:\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "- name: u%d\n  inventory: u%d\n  chart: oci://%s/charts/shop\n  chart-version: 1.2.0\n  release-name: web\n  chart-hooks: leave-out\n", i, i, reg)
		}
		return b.String()
	}
	a := newAtkRepo(t, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": units(reg, nBase)}
	}, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": units(reg, nHead)}
	})
	g := a.given(nil)
	runFile := filepath.Join(a.repo, "gantry.yaml")
	us, err := config.LoadUnits(g, runFile, false)
	if err != nil {
		t.Fatal(err)
	}
	read := config.RunFileAt(g, runFile)
	calls := 0
	var spent time.Duration
	s := &Session{BaseRunFile: func(within func(string) string, root string) ([]*config.Unit, error) {
		calls++
		start := time.Now()
		defer func() { spent += time.Since(start) }()
		return read(within, root)
	}}
	defer s.Close()
	start := time.Now()
	for _, u := range us {
		if res := s.Unit(context.Background(), u, &infos{}, false); res.Reason != result.ReasonNoChanges {
			t.Fatalf("%s: %s: %s", u.Name, res.Reason, res.Message)
		}
	}
	t.Logf("%d head units: the base's run file (%d units) read %d times, %v of the run's %v", nHead, nBase, calls, spent, time.Since(start))
	if calls > 1 {
		t.Errorf("the base's run file of %d units was read and configured %d times for %d head units (%v)", nBase, calls, nHead, spent)
	}
}

// The same through a chart's values: the base's run file sets a value
// with set: {env: NAME}; the chart renders it into the base's objects.
func TestAttack4BaseRunFileSetSecretIsMasked(t *testing.T) {
	const token = "base-only-set-secret-0123456789"
	a := newAtkRepo(t, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": headShop(reg) + "  set: {env: DEPLOY_SET}\n"}
	}, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": headShop(reg)}
	})
	res, lines := a.run(t, a.given(map[string]string{"GANTRY_RUN_FILE_ENV": "DEPLOY_SET", "DEPLOY_SET": "image.tag=" + token}))
	all := strings.Join(lines, "\n")
	t.Logf("%s: %s", res[0].Reason, res[0].Message)
	for _, l := range lines {
		if strings.Contains(l, token) {
			for _, x := range strings.Split(l, "\n") {
				if strings.Contains(x, token) {
					t.Logf("printed: %s", x)
				}
			}
		}
	}
	if strings.Contains(all, token) {
		t.Errorf("the value of DEPLOY_SET, which only the base's run file read, is printed unmasked in the diff")
	}
}

// As with values: the workflow's patches (GANTRY_PATCHES, a file of the
// checkout the pull request changes) are taken at the base as the head
// has them.
func TestAttack4WorkflowPatchesTakenAtBase(t *testing.T) {
	patch := func(n int) string {
		return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-shop\n  namespace: default\nspec:\n  replicas: %d\n", n)
	}
	a := newAtkRepo(t, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": headShop(reg), "patch.yaml": patch(2)}
	}, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": headShop(reg), "patch.yaml": patch(40)}
	})
	res, lines := a.run(t, a.given(map[string]string{"GANTRY_PATCHES": "patch.yaml"}))
	t.Logf("%s: %s", res[0].Reason, res[0].Message)
	if !strings.Contains(strings.Join(lines, "\n"), "replicas: 40") {
		t.Errorf("the pull request patches replicas 2 to 40 in the workflow's patch file, and the diff does not show it: %s", res[0].Reason)
	}
}
