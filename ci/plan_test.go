package ci

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/entrypoint"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// planRunFile is a platform team's run file: CRDs, two apps on it (one
// with a secret reference, which plan does not read), a suspended unit,
// and a unit after both apps.
const planRunFile = `defaults:
  inventory-namespace: platform
units:
  - {name: crds, path: infra/crds, inventory: crds}
  - {name: app-a, depends-on: [crds], path: apps/a, inventory: app-a, sops-age-key: {env: SOPS_AGE_KEY}}
  - {name: app-b, depends-on: crds, path: apps/b, inventory: app-b}
  - {name: paused, suspend: true, path: apps/b, inventory: paused}
  - {name: last, depends-on: [app-a, app-b, paused], path: apps/b, inventory: last}
`

// plan runs gantry plan in a repository holding planRunFile (a git
// repository: gitlab-ci-local reads one) and returns what it printed.
func plan(t *testing.T, repo, format string) string {
	t.Helper()
	var stdout, stderr strings.Builder
	wd, _ := os.Getwd()
	if err := os.Chdir(repo); err != nil { // the run file's paths are relative to the working directory
		t.Fatal(err)
	}
	defer os.Chdir(wd) //nolint:errcheck // back to where it was
	code := entrypoint.Run(context.Background(), []string{"plan", "--run-file", "gantry.yaml", "--format", format, "--run-file-env", "SOPS_AGE_KEY"}, []string{"HOME=" + t.TempDir()}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("gantry plan --format %s: exit %d\n%s", format, code, stderr.String())
	}
	return stdout.String()
}

func planRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	for _, d := range []string{"infra/crds", "apps/a", "apps/b"} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "gantry.yaml"), []byte(planRunFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	return repo
}

func goldenFile(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update to accept):\n%s", path, got)
	}
}

// gantry plan's three formats, as golden files, each checked by the
// engine's own validator: Tekton's Go validation of the Pipeline, and
// GitLab's CI JSON Schema (through gitlab-ci-local) of the child
// pipeline; the GitHub matrices by their levels.
func TestPlanFormats(t *testing.T) {
	// Not parallel: plan runs in the repository's folder.
	repo := planRepo(t)

	gh := plan(t, repo, "github")
	goldenFile(t, "plan-github.yml", gh)
	checkGitHubPlan(t, gh)

	tk := plan(t, repo, "tekton")
	goldenFile(t, "plan-tekton.yaml", tk)
	pipeline := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(pipeline, []byte(tk), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool(t, "tektoncheck"), pipeline).CombinedOutput(); err != nil {
		t.Errorf("Tekton's validation of the Pipeline: %v\n%s", err, out)
	}

	gl := plan(t, repo, "gitlab")
	goldenFile(t, "plan-gitlab.yml", gl)
	checkGitLab(t, gl, true)
	checkGitLabPlanRules(t, gl)
}

// checkGitHubPlan reads the workflow plan wrote: a job per unit that runs
// (three levels: crds, then app-a and app-b, then last), needs from
// depends-on with the suspended unit left out, no matrix (whose fail-fast
// would cancel siblings), each job given the secrets the run file reads.
// actionlint checks it, called from a workflow as its header says.
func checkGitHubPlan(t *testing.T, gh string) {
	t.Helper()
	var wf struct {
		On struct {
			WorkflowCall struct {
				Inputs map[string]struct{ Type, Default string }
			} `json:"workflow_call"`
		} `json:"on"`
		Jobs map[string]struct {
			Needs    []string
			Strategy any
			Steps    []struct {
				Uses string
				With map[string]string
				Env  map[string]string
			}
		}
	}
	if err := yaml.Unmarshal([]byte(gh), &wf); err != nil {
		t.Fatal(err)
	}
	if wf.On.WorkflowCall.Inputs["command"].Default != "apply" {
		t.Errorf("no command input: %+v", wf.On)
	}
	needs := map[string]string{}
	for name, j := range wf.Jobs {
		needs[name] = strings.Join(j.Needs, ",")
		if j.Strategy != nil {
			t.Errorf("%s has a strategy: %v", name, j.Strategy)
		}
		step := j.Steps[len(j.Steps)-1]
		if step.With["unit"] != name || step.With["run-file"] != "gantry.yaml" || step.With["command"] != "${{ inputs.command }}" {
			t.Errorf("%s runs %+v", name, step)
		}
	}
	if got, want := needs, map[string]string{"crds": "", "app-a": "crds", "app-b": "crds", "last": "app-a,app-b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("jobs and needs %v, want %v", got, want)
	}
	last := func(job string) struct {
		Uses string
		With map[string]string
		Env  map[string]string
	} {
		return wf.Jobs[job].Steps[len(wf.Jobs[job].Steps)-1]
	}
	a, b := last("app-a"), last("app-b")
	// Every job reads the whole run file, app-a's reference too.
	if a.With["run-file-env"] != "SOPS_AGE_KEY" || a.Env["SOPS_AGE_KEY"] != "${{ secrets.SOPS_AGE_KEY }}" || !reflect.DeepEqual(a.Env, b.Env) || b.Env["KUBECONFIG"] != "/github/home/kubeconfig" {
		t.Errorf("secrets: app-a %+v, app-b %+v", a, b)
	}

	repo := t.TempDir()
	if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	dir := filepath.Join(repo, ".github", "workflows")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	caller := "on:\n  push:\n    branches: [main]\n  pull_request:\njobs:\n  deploy:\n    uses: ./.github/workflows/gantry-units.yml\n" +
		"    with:\n      command: ${{ github.event_name == 'pull_request' && 'diff' || 'apply' }}\n    secrets: inherit\n"
	for name, content := range map[string]string{"gantry-units.yml": gh, "deploy.yml": caller} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(tool(t, "actionlint"))
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("actionlint: %v\n%s", err, out)
	}
}

// checkGitLabPlanRules lists, through gitlab-ci-local's rules, the jobs of
// the child pipeline for each source the parent passes on: every unit on
// a merge request, on the default branch and on a schedule (diff, apply,
// drift: the rules' variables, in the golden file), none on another
// branch or a tag, and none when the parent passed no source.
func checkGitLabPlanRules(t *testing.T, gl string) {
	t.Helper()
	bin := tool(t, "gitlab-ci-local")
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=ci@example.com", "-c", "user.name=ci", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, ".gitlab-ci.yml"), []byte(gl), 0o644); err != nil {
		t.Fatal(err)
	}
	const all = "gantry-crds gantry-app-a gantry-app-b gantry-last"
	for _, tc := range []struct {
		vars []string
		want string
	}{
		{[]string{"GANTRY_PIPELINE_SOURCE=push", "CI_COMMIT_REF_NAME=main"}, all},
		{[]string{"GANTRY_PIPELINE_SOURCE=push", "CI_COMMIT_REF_NAME=feature"}, ""},
		{[]string{"GANTRY_PIPELINE_SOURCE=merge_request_event", "CI_COMMIT_REF_NAME=feature"}, all},
		{[]string{"GANTRY_PIPELINE_SOURCE=schedule", "CI_COMMIT_REF_NAME=main"}, all},
		{[]string{"GANTRY_PIPELINE_SOURCE=push", "CI_COMMIT_REF_NAME=main", "CI_COMMIT_TAG=v1.2.3"}, ""},
		{[]string{"CI_COMMIT_REF_NAME=main"}, ""},
		{[]string{"GANTRY_COMMAND=validate", "CI_COMMIT_REF_NAME=feature"}, all},
	} {
		args := []string{"--list-csv", "--variable", "CI_DEFAULT_BRANCH=main"}
		for _, v := range tc.vars {
			args = append(args, "--variable", v)
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir = repo
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.vars, err, out)
		}
		var jobs []string
		for _, l := range strings.Split(string(out), "\n") {
			if name, _, ok := strings.Cut(l, ";"); ok && strings.HasPrefix(name, "gantry-") {
				jobs = append(jobs, name)
			}
		}
		if got := strings.Join(jobs, " "); got != tc.want {
			t.Errorf("%v: jobs %q, want %q", tc.vars, got, tc.want)
		}
	}
}

// The GitLab template passes GitLab's CI JSON Schema, and the check can
// fail: a misspelt key does not.
func TestGitLabFilesPassGitLabsSchema(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("gitlab/gantry.gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	checkGitLab(t, string(b), true)
	checkGitLab(t, "job:\n  script: [/gantry apply]\n  imagee: ghcr.io/gantry-dev/gantry:v0.1.0\n", false)
}

// checkGitLab runs gitlab-ci-local's check (GitLab's ci.json) on a CI file.
func checkGitLab(t *testing.T, content string, valid bool) {
	t.Helper()
	bin := tool(t, "gitlab-ci-local")
	repo := t.TempDir()
	if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(repo, ".gitlab-ci.yml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--list")
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	switch {
	case valid && (err != nil || !strings.Contains(string(out), "json schema validated")):
		t.Errorf("GitLab's CI schema refuses it: %v\n%s", err, out)
	case !valid && err == nil:
		t.Errorf("GitLab's CI schema accepted an invalid file:\n%s", out)
	}
}

// docs/units.md's workflow that calls a GitHub plan passes actionlint,
// beside the plan it calls.
func TestPlanWorkflowInDocsPassesActionlint(t *testing.T) {
	b, err := os.ReadFile("../docs/units.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "# A GitHub workflow of the plan"
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatal("docs/units.md has no GitHub workflow of a plan")
	}
	_, rest, _ = strings.Cut(rest, "\n") // past the marker's line
	body, _, _ := strings.Cut(rest, "```")
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "  "))
	}
	repo := planRepo(t)
	gh := plan(t, repo, "github")
	dir := filepath.Join(repo, ".github", "workflows")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"gantry-units.yml": gh, "deploy.yml": strings.Join(lines, "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(tool(t, "actionlint"))
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("actionlint: %v\n%s", err, out)
	}
}

// The release plan pins when gantry is no release is the one action.yml
// and the templates name.
func TestPinnedReleaseMatchesTheTemplates(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"../action.yml", "gitlab/gantry.gitlab-ci.yml", "tekton/gantry-task.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "ghcr.io/gantry-dev/gantry:"+entrypoint.PinnedRelease) {
			t.Errorf("%s does not name ghcr.io/gantry-dev/gantry:%s", f, entrypoint.PinnedRelease)
		}
	}
}

// plan's image (a mirror) and the Tekton Pipeline's name: a GitHub plan
// runs the image as docker:// with GANTRY_* variables, GitLab's names it,
// Tekton's Pipeline takes the name; an image without a tag or digest, or
// a name that is no DNS label, is bad input.
func TestPlanImageAndPipelineName(t *testing.T) {
	repo := planRepo(t)
	run := func(args ...string) (int, string, string) {
		var stdout, stderr strings.Builder
		wd, _ := os.Getwd()
		if err := os.Chdir(repo); err != nil {
			t.Fatal(err)
		}
		defer os.Chdir(wd) //nolint:errcheck // back to where it was
		code := entrypoint.Run(context.Background(), append([]string{"plan", "--run-file", "gantry.yaml", "--run-file-env", "SOPS_AGE_KEY"}, args...), []string{"HOME=" + t.TempDir()}, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	const mirror = "registry.internal.example/mirror/gantry@sha256:0123456789012345678901234567890123456789012345678901234567890123"
	code, gh, stderr := run("--image", mirror)
	if code != 0 || !strings.Contains(gh, "uses: docker://"+mirror) || !strings.Contains(gh, "GANTRY_UNIT: app-a") || !strings.Contains(gh, "GANTRY_RUN_FILE_ENV: SOPS_AGE_KEY") || strings.Contains(gh, "gantry-dev/gantry@") {
		t.Errorf("github with image: exit %d\n%s%s", code, gh, stderr)
	}
	if code, gl, _ := run("--format", "gitlab", "--image", mirror); code != 0 || !strings.Contains(gl, "name: "+mirror) {
		t.Errorf("gitlab with image: exit %d\n%s", code, gl)
	}
	if code, tk, _ := run("--format", "tekton", "--pipeline-name", "platform-deploy"); code != 0 || !strings.Contains(tk, "name: platform-deploy") {
		t.Errorf("tekton with a name: exit %d\n%s", code, tk)
	}
	for _, bad := range [][]string{{"--image", "ghcr.io/gantry-dev/gantry"}, {"--image", "ghcr.io/x/y:v1 ; rm -rf /"}, {"--format", "tekton", "--pipeline-name", "Platform_Deploy"}} {
		if code, _, stderr := run(bad...); code != entrypoint.ExitInvalid || !strings.Contains(stderr, strings.TrimPrefix(bad[len(bad)-2], "--")) {
			t.Errorf("%v: exit %d\n%s", bad, code, stderr)
		}
	}
}

// A pull request's run file cannot choose which secrets a plan hands its
// jobs: a variable the workflow's run-file-env does not allow (a deploy
// key), or CI's own credentials whatever it allows, make plan refuse the
// file, naming the reference, and no job is written that maps them.
func TestPlanPassesOnlySecretsTheWorkflowAllows(t *testing.T) {
	repo := planRepo(t)
	hostile := "units:\n" +
		"  - {name: a, path: apps/a, inventory: a, sops-age-key: {env: PROD_DEPLOY_KEY}}\n" +
		"  - {name: b, path: apps/b, inventory: b, substitute: {TOKEN: {env: GITHUB_TOKEN}}}\n"
	if err := os.WriteFile(filepath.Join(repo, "gantry.yaml"), []byte(hostile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, allowed := range []string{"", "SOPS_AGE_KEY", "GITHUB_TOKEN\nPROD_*"} {
		for _, format := range []string{"github", "gitlab", "tekton"} {
			var stdout, stderr strings.Builder
			wd, _ := os.Getwd()
			if err := os.Chdir(repo); err != nil {
				t.Fatal(err)
			}
			code := entrypoint.Run(context.Background(), []string{"plan", "--run-file", "gantry.yaml", "--format", format, "--run-file-env", allowed}, []string{"HOME=" + t.TempDir()}, &stdout, &stderr)
			_ = os.Chdir(wd)
			if code != entrypoint.ExitInvalid || !strings.Contains(stderr.String(), "{env: GITHUB_TOKEN}") {
				t.Errorf("run-file-env %q, %s: exit %d, want %d naming GITHUB_TOKEN\n%s", allowed, format, code, entrypoint.ExitInvalid, stderr.String())
			}
			if allowed != "GITHUB_TOKEN\nPROD_*" && !strings.Contains(stderr.String(), "{env: PROD_DEPLOY_KEY}") {
				t.Errorf("run-file-env %q, %s: PROD_DEPLOY_KEY not refused\n%s", allowed, format, stderr.String())
			}
			if strings.Contains(stdout.String(), "secrets.") || strings.Contains(stdout.String(), "PROD_DEPLOY_KEY") {
				t.Errorf("run-file-env %q, %s: a plan was written with the run file's secrets:\n%s", allowed, format, stdout.String())
			}
		}
	}
}
