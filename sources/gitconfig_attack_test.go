package sources

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The token actions/checkout keeps in .git/config, as the job's
// credential for git fetch and push: a build never reads it.
const (
	checkoutToken     = "c2VjcmV0LXRva2Vu"
	checkoutTokenText = "secret-token"
)

// checkoutRepository is a git repository as actions/checkout leaves it:
// one commit, and the job's token in .git/config (an extraheader for
// github.com); files are written before the commit.
func checkoutRepository(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root := t.TempDir()
	write(t, root, files)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", root, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic "+checkoutToken)
	git("add", ".")
	git("commit", "-q", "-m", "a pull request")
	b, err := os.ReadFile(filepath.Join(root, ".git", "config"))
	if err != nil || !strings.Contains(string(b), `[http "https://github.com/"]`) || !strings.Contains(string(b), "extraheader = AUTHORIZATION: basic "+checkoutToken) {
		t.Fatalf(".git/config is not as actions/checkout writes it: %v\n%s", err, b)
	}
	return root
}

// leakChart is a chart whose template prints the file gitcfg of the chart.
var leakChart = map[string]string{
	"Chart.yaml":        "apiVersion: v2\nname: leak\nversion: 0.1.0\n",
	"values.yaml":       "{}\n",
	"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  cfg: {{ .Files.Get \"gitcfg\" | quote }}\n",
}

func prefixed(prefix string, files map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[prefix+k] = v
	}
	return out
}

// noToken fails the test when what the build gave (its error, its
// objects) holds the checkout's token.
func noToken(t *testing.T, objects []*Object, err error) {
	t.Helper()
	if err != nil && (strings.Contains(err.Error(), checkoutToken) || strings.Contains(err.Error(), checkoutTokenText)) {
		t.Errorf("the error shows the checkout's token: %v", err)
	}
	for _, o := range objects {
		b, _ := o.MarshalJSON()
		if s := string(b); strings.Contains(s, checkoutToken) || strings.Contains(s, "extraheader") {
			t.Errorf("an object holds the checkout's .git/config:\n%s", s)
		}
	}
}

// A pull request commits a chart at the repository's root, with gitcfg a
// link to .git/config and a template that prints it: a chart unit at .
// (gantry build --chart ., validate --offline --chart ., a run file's
// chart: .) fails naming gitcfg, and prints no token. The same through a
// chart folder that is a link to the root, and through a kustomization's
// helmCharts whose chart folder is one.
func TestChartReadsNoGitConfig(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		files map[string]string
		links map[string]string // link -> target
		opts  func(root string) BuildOptions
		want  string
	}{
		"chart at the root": {
			files: leakChart,
			links: map[string]string{"gitcfg": ".git/config"},
			opts: func(root string) BuildOptions {
				return BuildOptions{WorkDir: root, Chart: &Chart{Dir: root, ReleaseName: "x"}}
			},
			want: "gitcfg",
		},
		"chart folder linked to the root": {
			files: leakChart,
			links: map[string]string{"gitcfg": ".git/config", "sub/app": ".."},
			opts: func(root string) BuildOptions {
				return BuildOptions{WorkDir: root, Chart: &Chart{Dir: filepath.Join(root, "sub", "app"), ReleaseName: "x"}}
			},
			want: "gitcfg",
		},
		"helmCharts chart folder linked to the root": {
			files: mergeFiles(leakChart, map[string]string{
				"deploy/kustomization.yaml": "helmCharts:\n- name: app\n  releaseName: x\n",
			}),
			links: map[string]string{"gitcfg": ".git/config", "deploy/charts/app": "../.."},
			opts: func(root string) BuildOptions {
				return BuildOptions{WorkDir: root, Path: filepath.Join(root, "deploy")}
			},
			want: "gitcfg",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := checkoutRepository(t, tc.files)
			for link, target := range tc.links {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, link)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
					t.Fatal(err)
				}
			}
			objects, err := Build(tc.opts(root))
			t.Logf("error: %v", err)
			noToken(t, objects, err)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a failure naming %s", err, tc.want)
			}
		})
	}
}

// A chart that holds a hard link to the repository's .git/config fails
// naming it: a hard link is the file itself, whatever its name and
// folder.
func TestChartReadsNoGitConfigHardLink(t *testing.T) {
	t.Parallel()
	root := checkoutRepository(t, prefixed("chart/", leakChart))
	if err := os.Link(filepath.Join(root, ".git", "config"), filepath.Join(root, "chart", "gitcfg")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	objects, err := Build(BuildOptions{WorkDir: root, Chart: &Chart{Dir: filepath.Join(root, "chart"), ReleaseName: "x"}})
	t.Logf("error: %v", err)
	noToken(t, objects, err)
	if err == nil || !strings.Contains(err.Error(), "gitcfg") {
		t.Errorf("got %v, want a failure naming gitcfg", err)
	}
	// Kustomize's reads too: a resource that is a hard link to it.
	root = checkoutRepository(t, map[string]string{"kustomization.yaml": "configMapGenerator:\n- name: c\n  files: [cfg]\n"})
	if err := os.Link(filepath.Join(root, ".git", "config"), filepath.Join(root, "cfg")); err != nil {
		t.Fatal(err)
	}
	objects, err = Build(BuildOptions{WorkDir: root, Path: root})
	t.Logf("error: %v", err)
	noToken(t, objects, err)
	if err == nil || !strings.Contains(err.Error(), "cfg") {
		t.Errorf("got %v, want a failure naming cfg", err)
	}
}

// A chart at the repository's root builds: git's own folder is not the
// chart's, and is left out.
func TestChartAtRepositoryRootBuilds(t *testing.T) {
	t.Parallel()
	files := mergeFiles(leakChart, map[string]string{"gitcfg": "plain: file\n"})
	root := checkoutRepository(t, files)
	objects, err := Build(BuildOptions{WorkDir: root, Chart: &Chart{Dir: root, ReleaseName: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	noToken(t, objects, nil)
	if len(objects) != 1 || !strings.Contains(fmt.Sprint(objects[0].Object), "plain: file") {
		t.Errorf("got %d objects", len(objects))
	}
}

func mergeFiles(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
