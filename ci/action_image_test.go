package ci

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type workflow struct {
	Jobs map[string]struct {
		Steps []struct {
			Name string            `json:"name"`
			Run  string            `json:"run"`
			Env  map[string]string `json:"env"`
		} `json:"steps"`
	} `json:"jobs"`
}

// step returns the run script of the named step of a workflow.
func step(t *testing.T, file, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../.github/workflows", file))
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.Unmarshal(b, &w); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			if s.Name == name {
				return s.Run
			}
		}
	}
	t.Fatalf("%s has no step %q", file, name)
	return ""
}

// runIn runs a step's script with bash in dir, which holds a copy of
// action.yml.
func runIn(t *testing.T, dir, script string, env ...string) ([]byte, error) {
	t.Helper()
	action, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "action.yml"), action, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// Users pull a released image; the version is pinned, never latest.
func TestActionRunsAPinnedReleasedImage(t *testing.T) {
	b, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Runs struct {
			Using string `json:"using"`
			Image string `json:"image"`
		} `json:"runs"`
	}
	if err := yaml.Unmarshal(b, &action); err != nil {
		t.Fatal(err)
	}
	if action.Runs.Using != "docker" || !regexp.MustCompile(`^docker://ghcr\.io/gantry-dev/gantry:v\d+\.\d+\.\d+$`).MatchString(action.Runs.Image) {
		t.Errorf("runs: using %q, image %q; want docker and docker://ghcr.io/gantry-dev/gantry:vX.Y.Z", action.Runs.Using, action.Runs.Image)
	}
}

// The release refuses a tag whose action.yml names another image.
func TestReleaseChecksTheActionImage(t *testing.T) {
	script := step(t, "release.yaml", "action.yml names this release's image")
	b, _ := os.ReadFile("../action.yml")
	version := regexp.MustCompile(`image: docker://ghcr\.io/gantry-dev/gantry:(\S+)`).FindSubmatch(b)
	if version == nil {
		t.Fatal("action.yml names no released image")
	}
	tag := string(version[1])
	if out, err := runIn(t, t.TempDir(), script, "WANT=docker://ghcr.io/gantry-dev/gantry:"+tag, "GITHUB_REF_NAME="+tag); err != nil {
		t.Errorf("release of %s refused: %v\n%s", tag, err, out)
	}
	out, err := runIn(t, t.TempDir(), script, "WANT=docker://ghcr.io/gantry-dev/gantry:v99.0.0", "GITHUB_REF_NAME=v99.0.0")
	if err == nil || !strings.Contains(string(out), "make release-prep VERSION=v99.0.0") {
		t.Errorf("release of v99.0.0 with action.yml at %s: err %v, output %q", tag, err, out)
	}
}

// The repository's own workflow runs the action from this commit's source:
// only the image line changes.
func TestE2EActionJobBuildsFromSource(t *testing.T) {
	script := step(t, "e2e.yaml", "Point the action at this checkout's Dockerfile")
	dir := t.TempDir()
	if out, err := runIn(t, dir, script); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	before, _ := os.ReadFile("../action.yml")
	after, err := os.ReadFile(filepath.Join(dir, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^  image: docker://.*$`).ReplaceAllString(string(before), "  image: Dockerfile")
	if string(after) != want || want == string(before) {
		t.Errorf("action.yml after the step:\n%s", after)
	}
}
