// Package ci holds gantry's templates for other CI systems (GitLab,
// Tekton); its tests check them, and the GitHub workflows, with the tools
// the platforms themselves use.
package ci

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/reporters"
)

func tool(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs " + name + " built by make tools")
	}
	p, err := cluster.Tool(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWorkflowsPassActionlint(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../.github/workflows/*.yaml")
	if len(files) == 0 {
		t.Fatal("no workflows")
	}
	// The workflows the README offers users.
	examples, _ := filepath.Glob("github/*.yaml")
	if len(examples) == 0 {
		t.Fatal("no example workflows")
	}
	files = append(files, examples...)
	out, err := exec.Command(tool(t, "actionlint"), files...).CombinedOutput()
	if err != nil {
		t.Errorf("actionlint: %v\n%s", err, out)
	}
}

type task struct {
	Spec struct {
		Params []struct {
			Name    string `json:"name"`
			Default string `json:"default"`
		} `json:"params"`
		Results []struct {
			Name string `json:"name"`
		} `json:"results"`
		Steps []struct {
			Env []struct {
				Name  string `json:"name"`
				Value string `json:"value"`
			} `json:"env"`
		} `json:"steps"`
	} `json:"spec"`
}

func TestTektonTask(t *testing.T) {
	t.Parallel()
	const path = "tekton/gantry-task.yaml"
	if out, err := exec.Command(tool(t, "tektoncheck"), path).CombinedOutput(); err != nil {
		t.Fatalf("tektoncheck: %v\n%s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tk task
	if err := yaml.Unmarshal(b, &tk); err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, r := range tk.Spec.Results {
		results = append(results, r.Name)
	}
	if diff := cmp.Diff(reporters.TektonResultNames, results); diff != "" {
		t.Errorf("results (-written by gantry +declared):\n%s", diff)
	}
	// Every param is an input, with its default, passed as GANTRY_<INPUT>
	// from the param and nothing else (never substituted into a script).
	defaults := map[string]string{}
	for _, in := range config.Inputs {
		defaults[in.Name] = in.Default
	}
	// The task, like the action, runs apply unless told otherwise; on the
	// command line the command is the first argument.
	defaults["command"] = "apply"
	env := map[string]string{}
	for _, e := range tk.Spec.Steps[0].Env {
		env[e.Name] = e.Value
	}
	for _, p := range tk.Spec.Params {
		if p.Name == "secret-name" {
			continue
		}
		d, ok := defaults[p.Name]
		if !ok {
			t.Errorf("param %s is not a gantry input", p.Name)
			continue
		}
		if p.Default != d {
			t.Errorf("param %s defaults to %q, the input to %q", p.Name, p.Default, d)
		}
		key := "GANTRY_" + strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))
		if env[key] != "$(params."+p.Name+")" {
			t.Errorf("param %s reaches the step as %s=%q", p.Name, key, env[key])
		}
	}
	for _, in := range config.Inputs {
		if in.Secret {
			if _, ok := env["GANTRY_"+strings.ToUpper(strings.ReplaceAll(in.Name, "-", "_"))]; ok {
				t.Errorf("secret input %s is a param; it must come from the Secret", in.Name)
			}
		}
	}
}

// GitLab's predefined variables the template uses, from GitLab's
// documentation.
var gitlabPredefined = map[string]bool{"CI_PIPELINE_SOURCE": true, "CI_COMMIT_BRANCH": true, "CI_DEFAULT_BRANCH": true}

func TestGitLabTemplate(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("gitlab/gantry.gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("not valid YAML: %v", err)
	}
	for _, job := range []string{".gantry", "gantry-diff", "gantry-apply", "gantry-drift"} {
		if _, ok := doc[job]; !ok {
			t.Errorf("no job %s", job)
		}
	}
	if !strings.Contains(string(b), "dotenv: gantry.env") {
		t.Error("the dotenv report is not wired")
	}
	inputs := map[string]bool{"KUBECONFIG": true}
	for _, in := range config.Inputs {
		inputs[in.GantryEnvName()] = true
	}
	// Variables referenced outside comments.
	var code strings.Builder
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			code.WriteString(l + "\n")
		}
	}
	var unknown []string
	for _, m := range regexp.MustCompile(`\$\{?([A-Z_][A-Z0-9_]*)`).FindAllStringSubmatch(code.String(), -1) {
		if !gitlabPredefined[m[1]] && !inputs[m[1]] {
			unknown = append(unknown, m[1])
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("undocumented variables: %v", unknown)
	}
}

// The template's jobs run only where its comments say, as GitLab's rules
// evaluate them (gitlab-ci-local): diff on a merge request, apply on a
// push to the default branch, drift on a schedule (never apply beside
// it), nothing on a tag.
func TestGitLabTemplateJobsPerPipelineSource(t *testing.T) {
	t.Parallel()
	bin := tool(t, "gitlab-ci-local")
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=ci@example.com", "-c", "user.name=ci", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	b, err := os.ReadFile("gitlab/gantry.gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, ".gitlab-ci.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		source string
		vars   []string
		want   string
	}{
		{"push", []string{"CI_COMMIT_BRANCH=main"}, "gantry-apply"},
		{"push", []string{"CI_COMMIT_BRANCH=feature"}, ""},
		{"merge_request_event", []string{"-CI_COMMIT_BRANCH", "CI_MERGE_REQUEST_IID=7"}, "gantry-diff"},
		{"schedule", []string{"CI_COMMIT_BRANCH=main"}, "gantry-drift"},
		{"push", []string{"-CI_COMMIT_BRANCH", "CI_COMMIT_TAG=v1.2.3"}, ""},
	} {
		args := []string{"--list-csv", "--variable", "CI_PIPELINE_SOURCE=" + tc.source, "--variable", "CI_DEFAULT_BRANCH=main"}
		for _, v := range tc.vars {
			if name, ok := strings.CutPrefix(v, "-"); ok {
				args = append(args, "--unset-variable", name)
			} else {
				args = append(args, "--variable", v)
			}
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir = repo
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", tc.source, tc.vars, err, out)
		}
		var jobs []string
		for _, l := range strings.Split(string(out), "\n") {
			if name, _, ok := strings.Cut(l, ";"); ok && strings.HasPrefix(name, "gantry-") {
				jobs = append(jobs, name)
			}
		}
		if got := strings.Join(jobs, " "); got != tc.want {
			t.Errorf("%s %v: jobs %q, want %q", tc.source, tc.vars, got, tc.want)
		}
	}
}
