package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/result"
)

// The job's token, as actions/checkout keeps it in .git/config.
const checkoutToken = "c2VjcmV0LXRva2Vu"

// gitcfgRepository is a repository whose pull request commits a chart at
// its root with gitcfg, a link to .git/config, and a template that prints
// it; .git/config holds the token as actions/checkout writes it. base is
// the first commit, where gitcfg is baseLink's link (a plain file when
// nil); in the working tree it is a link to headLink (a plain file when
// empty).
func gitcfgRepository(t *testing.T, baseLink func(repo string) string, headLink string) (repo, base string) {
	t.Helper()
	repo = t.TempDir()
	git := gitIn(t, repo)
	git("init", "-q")
	git("config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic "+checkoutToken)
	for name, content := range map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: leak\nversion: 0.1.0\n",
		"values.yaml":       "{}\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  cfg: {{ .Files.Get \"gitcfg\" | quote }}\n",
	} {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(repo, "gitcfg")
	if baseLink == nil {
		if err := os.WriteFile(link, []byte("plain\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if err := os.Symlink(baseLink(repo), link); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "base")
	base = git("rev-parse", "HEAD")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if headLink != "" {
		if err := os.Symlink(headLink, link); err != nil {
			t.Fatal(err)
		}
	} else if err := os.WriteFile(link, []byte("plain\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo, base
}

// gantry diff --offline --base with a chart unit at the repository's
// root: neither the head (the workspace, .git and all) nor the base (its
// tree written apart, where a link to .git/config, relative or absolute,
// leads nowhere or out of the chart) prints the checkout's token.
func TestDiffOfflineChartAtRootReadsNoGitConfig(t *testing.T) {
	rel := func(string) string { return ".git/config" }
	for name, tc := range map[string]struct {
		baseLink func(repo string) string
		headLink string
		// head says the head itself holds the link: the diff fails.
		head bool
	}{
		"head links to .git/config":          {headLink: ".git/config", head: true},
		"base links to .git/config":          {baseLink: rel},
		"base links to the workspace's .git": {baseLink: func(repo string) string { return filepath.Join(repo, ".git", "config") }},
		"base links up to the workspace's .git": {baseLink: func(repo string) string {
			return strings.Repeat("../", 16) + strings.TrimPrefix(filepath.Join(repo, ".git", "config"), "/")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			repo, base := gitcfgRepository(t, tc.baseLink, tc.headLink)
			t.Chdir(repo)
			flags := map[string]string{"chart": ".", "release-name": "x", "offline": "true", "base": base}
			cfg, err := config.Load(config.Given{Command: "diff", CommandOrigin: "the command line", Flags: flags, Env: map[string]string{"GANTRY_WORKSPACE": repo}})
			if err != nil {
				t.Fatal(err)
			}
			s := &Session{}
			defer s.Close()
			out := &infos{}
			res := s.Unit(context.Background(), &config.Unit{Name: "leak", Config: cfg}, out, false)
			t.Logf("result: %s: %s", res.Reason, res.Message)
			all := res.Message + strings.Join(out.lines, "\n")
			for _, o := range res.Objects {
				all += o.Diff
			}
			if strings.Contains(all, checkoutToken) || strings.Contains(all, "extraheader") {
				t.Errorf("the diff shows the checkout's .git/config:\n%s", all)
			}
			if res.Reason == result.ReasonSucceeded && tc.head {
				t.Errorf("the diff succeeded; the head's chart reads gitcfg, a link to .git/config")
			}
			if tc.head && !strings.Contains(res.Message, "gitcfg") {
				t.Errorf("the failure does not name gitcfg: %s", res.Message)
			}
		})
	}
}
