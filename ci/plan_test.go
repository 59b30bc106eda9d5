package ci

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/entrypoint"
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
	code := entrypoint.Run(context.Background(), []string{"plan", "--run-file", "gantry.yaml", "--format", format}, []string{"HOME=" + t.TempDir()}, &stdout, &stderr)
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
	goldenFile(t, "plan-github.json", gh)
	var matrices struct {
		Levels []struct {
			Include []struct{ Unit string }
		}
	}
	if err := json.Unmarshal([]byte(gh), &matrices); err != nil {
		t.Fatal(err)
	}
	var levels []string
	for _, l := range matrices.Levels {
		var names []string
		for _, e := range l.Include {
			names = append(names, e.Unit)
		}
		levels = append(levels, strings.Join(names, ","))
	}
	if got, want := strings.Join(levels, " -> "), "crds -> app-a,app-b -> last"; got != want {
		t.Errorf("levels %s, want %s (the suspended unit left out)", got, want)
	}

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

// docs/units.md's GitHub workflow of a plan passes actionlint.
func TestPlanWorkflowInDocsPassesActionlint(t *testing.T) {
	t.Parallel()
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
	wf := filepath.Join(t.TempDir(), "deploy.yaml")
	if err := os.WriteFile(wf, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool(t, "actionlint"), wf).CombinedOutput(); err != nil {
		t.Errorf("actionlint: %v\n%s", err, out)
	}
}
