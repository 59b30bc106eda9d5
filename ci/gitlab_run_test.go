package ci

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/entrypoint"
)

// gantryCall is how a GitLab job started gantry: its arguments and its
// environment.
type gantryCall struct {
	Args []string
	Env  map[string]string
	// Kubeconfig is what the file KUBECONFIG names held (a File
	// variable's file is gone once the job is).
	Kubeconfig string
}

// gantryVars are the GANTRY_* variables of a call, and KUBECONFIG.
func (c gantryCall) gantryVars() map[string]string {
	out := map[string]string{}
	for k, v := range c.Env {
		if strings.HasPrefix(k, "GANTRY_") || k == "KUBECONFIG" {
			out[k] = v
		}
	}
	return out
}

// environ is the call's environment as a process gets it.
func (c gantryCall) environ() []string {
	var out []string
	for k, v := range c.Env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// gitRepo makes a git repository of files (gitlab-ci-local reads one).
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	repo := t.TempDir()
	for name, content := range files {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.email=ci@example.com", "-c", "user.name=ci", "commit", "-q", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return repo
}

// runGitLabJobs runs jobs of the pipeline in repo (all of them when none
// is named) as GitLab would, through gitlab-ci-local, with vars as the
// variables of the pipeline (the trigger's or a schedule's, which win over
// the file's). GitLab's variables, rules, extends, needs and includes are
// gitlab-ci-local's; only what runs differs: the shell of this machine
// instead of gantry's image (harness, merged over hidden, the hidden job
// the template's jobs extend, drops the image) and a recorder instead of
// /gantry. It returns how each job started gantry, and the order in which
// the jobs did.
func runGitLabJobs(t *testing.T, repo, hidden string, vars, jobs []string) (map[string]gantryCall, []string) {
	t.Helper()
	bin := tool(t, "gitlab-ci-local")
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Fatal("gitlab-ci-local runs jobs with rsync, which make tools installs")
	}
	rec := t.TempDir()
	recorder := filepath.Join(rec, "gantry")
	script := "#!/bin/sh\nout=" + rec + "/\"$CI_JOB_NAME\"\nprintf '%s\\n' \"$@\" > \"$out.args\"\nenv -0 > \"$out.env\"\nif [ -n \"$KUBECONFIG\" ]; then cat \"$KUBECONFIG\" > \"$out.kubeconfig\"; fi\necho \"$CI_JOB_NAME\" >> " + rec + "/order\n"
	if err := os.WriteFile(recorder, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	harness := "\n" + hidden + ":\n  image: null\n  before_script:\n    - 'function /gantry { " + recorder + " \"$@\"; }'\n"
	f, err := os.OpenFile(filepath.Join(repo, ".gitlab-ci.yml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(harness); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// The harness's image: null is no valid GitLab; the files themselves
	// pass GitLab's schema in TestGitLabFilesPassGitLabsSchema and
	// TestPlanFormats.
	args := []string{"--json-schema-validation=false", "--shell-executor-no-image", "--home", t.TempDir(), "--variable", "CI_DEFAULT_BRANCH=main"}
	for _, v := range vars {
		args = append(args, "--variable", v)
	}
	cmd := exec.Command(bin, append(args, jobs...)...)
	cmd.Dir = repo
	cmd.Env = withoutGantryVariables(os.Environ())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gitlab-ci-local %v: %v\n%s", args, err, out)
	}
	calls := map[string]gantryCall{}
	entries, _ := filepath.Glob(filepath.Join(rec, "*.args"))
	for _, e := range entries {
		job := strings.TrimSuffix(filepath.Base(e), ".args")
		a, _ := os.ReadFile(e)
		raw, err := os.ReadFile(filepath.Join(rec, job+".env"))
		if err != nil {
			t.Fatal(err)
		}
		c := gantryCall{Env: map[string]string{}}
		if s := strings.TrimSuffix(string(a), "\n"); s != "" {
			c.Args = strings.Split(s, "\n")
		}
		for _, kv := range bytes.Split(raw, []byte{0}) {
			if k, v, ok := strings.Cut(string(kv), "="); ok {
				c.Env[k] = v
			}
		}
		k, _ := os.ReadFile(filepath.Join(rec, job+".kubeconfig"))
		c.Kubeconfig = string(k)
		calls[job] = c
	}
	order, _ := os.ReadFile(filepath.Join(rec, "order"))
	if len(calls) == 0 {
		t.Fatalf("no job started gantry:\n%s", out)
	}
	return calls, strings.Fields(string(order))
}

// readmeGitLab is the README's .gitlab-ci.yml, including the template
// from this checkout, and the CI/CD variables its comment names.
func readmeGitLab(t *testing.T) (ci string, cicd map[string]string) {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## On GitLab\n\n```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the README has no GitLab block")
	}
	const remote = "  - remote: https://raw.githubusercontent.com/gantry-dev/gantry/v0.1.0/ci/gitlab/gantry.gitlab-ci.yml\n"
	if !strings.Contains(block, remote) {
		t.Fatalf("the README's GitLab block includes no template:\n%s", block)
	}
	cicd = map[string]string{}
	for _, name := range []string{"KUBECONFIG", "GANTRY_GITLAB_TOKEN", "GANTRY_RECORD_KEY"} {
		if !strings.Contains(block, name) {
			t.Errorf("the README's GitLab block does not name the CI/CD variable %s", name)
		}
	}
	cicd["GANTRY_GITLAB_TOKEN"] = "glpat-0123456789abcdefghij"
	cicd["GANTRY_RECORD_KEY"] = "q3K8c1T1m0Zk8J7v2YwqfT5sQe9n0R4xLw6pA2uBdHc="
	return strings.Replace(block, remote, "  - local: gantry.gitlab-ci.yml\n", 1), cicd
}

// The README's .gitlab-ci.yml sets GANTRY_PATH and GANTRY_INVENTORY at
// its top and KUBECONFIG, GANTRY_GITLAB_TOKEN and GANTRY_RECORD_KEY as
// CI/CD variables; each job of the template, run by gitlab-ci-local as
// GitLab runs it on its pipeline's source, starts gantry with exactly
// those, and gantry builds deploy/overlays/prod, not the repository's
// root. (When the template's jobs set GANTRY_PATH themselves, a job's
// variable won over the top-level one and every job built the root.)
func TestGitLabTemplateTakesTheREADMEsVariables(t *testing.T) {
	// Not parallel: gantry resolves the path in the repository's folder.
	ci, cicd := readmeGitLab(t)
	tmpl, err := os.ReadFile("gitlab/gantry.gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	const kubeconfig = "apiVersion: v1\nkind: Config\nclusters: [{name: prod, cluster: {server: 'https://prod.example:6443'}}]\n" +
		"users: [{name: ci, user: {token: abcdefgh12345678}}]\ncontexts: [{name: prod, context: {cluster: prod, user: ci}}]\ncurrent-context: prod\n"
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: shop}\ndata: {a: b}\n"
	}
	vars := "KUBECONFIG:\n  type: file\n  values:\n    '*': |\n"
	for _, l := range strings.SplitAfter(strings.TrimSuffix(kubeconfig, "\n"), "\n") {
		vars += "      " + l
	}
	vars += "\nGANTRY_GITLAB_TOKEN: " + cicd["GANTRY_GITLAB_TOKEN"] + "\nGANTRY_RECORD_KEY: " + cicd["GANTRY_RECORD_KEY"] + "\n"
	files := map[string]string{
		".gitlab-ci.yml":                          ci,
		"gantry.gitlab-ci.yml":                    string(tmpl),
		".gitlab-ci-local-variables.yml":          vars,
		"root.yaml":                               cm("root"),
		"deploy/overlays/prod/prod.yaml":          cm("prod"),
		"deploy/overlays/prod/kustomization.yaml": "resources: [prod.yaml]\n",
	}

	for _, tc := range []struct {
		job, command string
		vars         []string
	}{
		{"gantry-diff", "diff", []string{"CI_PIPELINE_SOURCE=merge_request_event", "CI_MERGE_REQUEST_IID=7"}},
		{"gantry-apply", "apply", []string{"CI_PIPELINE_SOURCE=push", "CI_COMMIT_BRANCH=main"}},
		{"gantry-drift", "drift", []string{"CI_PIPELINE_SOURCE=schedule", "CI_COMMIT_BRANCH=main"}},
	} {
		t.Run(tc.job, func(t *testing.T) {
			repo := gitRepo(t, files)
			calls, _ := runGitLabJobs(t, repo, ".gantry", tc.vars, []string{tc.job})
			c, ok := calls[tc.job]
			if !ok {
				t.Fatalf("%s did not run gantry: %v", tc.job, calls)
			}
			if !slices.Equal(c.Args, []string{tc.command}) {
				t.Errorf("gantry %v, want %s", c.Args, tc.command)
			}
			got := c.gantryVars()
			want := map[string]string{
				"GANTRY_PATH": "deploy/overlays/prod", "GANTRY_INVENTORY": "shop",
				"GANTRY_GITLAB_TOKEN": cicd["GANTRY_GITLAB_TOKEN"], "GANTRY_RECORD_KEY": cicd["GANTRY_RECORD_KEY"],
				"KUBECONFIG": got["KUBECONFIG"],
			}
			if !mapsEqual(got, want) {
				t.Errorf("gantry's variables %v, want %v", got, want)
			}
			if strings.TrimSpace(c.Kubeconfig) != strings.TrimSpace(kubeconfig) {
				t.Errorf("KUBECONFIG %q holds %q, want the File variable's content", got["KUBECONFIG"], c.Kubeconfig)
			}

			// What gantry makes of them, in the job's folder.
			wd, _ := os.Getwd()
			if err := os.Chdir(repo); err != nil {
				t.Fatal(err)
			}
			defer os.Chdir(wd) //nolint:errcheck // back to where it was
			cfg, err := config.Load(config.Given{Command: tc.command, CommandOrigin: "the argument", Flags: map[string]string{}, Env: c.Env})
			if err != nil {
				t.Fatalf("gantry %s with the job's variables: %v", tc.command, err)
			}
			if cfg.Path != "deploy/overlays/prod" || !cfg.PathGiven || cfg.Inventory != "shop" || cfg.Kubeconfig != "" ||
				cfg.GitLabToken != cicd["GANTRY_GITLAB_TOKEN"] || cfg.RecordKey == nil {
				t.Errorf("gantry %s: path %q (given %v), inventory %q, kubeconfig input %q, gitlab-token set %v, record-key set %v",
					tc.command, cfg.Path, cfg.PathGiven, cfg.Inventory, cfg.Kubeconfig, cfg.GitLabToken != "", cfg.RecordKey != nil)
			}
			// And what it builds: the overlay, not the repository's root.
			var stdout, stderr strings.Builder
			env := append(gantryCall{Env: c.gantryVars()}.environ(), "HOME="+t.TempDir())
			if code := entrypoint.Run(context.Background(), []string{"build"}, env, &stdout, &stderr); code != 0 {
				t.Fatalf("gantry build with the job's variables: exit %d\n%s", code, stderr.String())
			}
			if !strings.Contains(stdout.String(), "name: prod") || strings.Contains(stdout.String(), "name: root") {
				t.Errorf("gantry build with the job's variables built:\n%s", stdout.String())
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// withoutGantryVariables is env without the GANTRY_ variables of the
// process running the tests (make test sets some): a job's shell
// executor inherits them, and a job must see only what its pipeline
// gives it.
func withoutGantryVariables(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GANTRY_") {
			out = append(out, kv)
		}
	}
	return out
}
