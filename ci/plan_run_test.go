package ci

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/config"
)

// planSecrets are what a plan's comments say to set: the kubeconfig, the
// record-key and the variable the run file reads (SOPS_AGE_KEY, for
// app-a).
func planSecrets(t *testing.T) map[string]string {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"KUBECONFIG": "apiVersion: v1\nkind: Config\nclusters: [{name: prod, cluster: {server: 'https://prod.example:6443'}}]\n" +
			"users: [{name: ci, user: {token: abcdefgh12345678}}]\ncontexts: [{name: prod, context: {cluster: prod, user: ci}}]\ncurrent-context: prod\n",
		"GANTRY_RECORD_KEY": "q3K8c1T1m0Zk8J7v2YwqfT5sQe9n0R4xLw6pA2uBdHc=",
		"SOPS_AGE_KEY":      id.String(),
	}
}

// planFiles are planRunFile's repository.
var planFiles = map[string]string{
	"gantry.yaml":        planRunFile,
	"infra/crds/a.yaml":  "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
	"apps/a/a.yaml":      "apiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n",
	"apps/b/a.yaml":      "apiVersion: v1\nkind: Namespace\nmetadata: {name: c}\n",
	".gitignore":         "",
	"infra/crds/.gitkep": "",
}

// loadPlanUnit is what gantry makes of the run file with a job's
// environment, in the job's folder: the unit the job runs, as its
// secrets configure it.
func loadPlanUnit(t *testing.T, dir, command, unit string, env map[string]string) *config.Unit {
	t.Helper()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd) //nolint:errcheck // back to where it was
	units, err := config.LoadUnits(config.Given{Command: command, CommandOrigin: "the command input", Flags: map[string]string{}, Env: env}, "gantry.yaml", false)
	if err != nil {
		t.Fatalf("%s: gantry %s with the job's environment: %v", unit, command, err)
	}
	for _, u := range units {
		if u.Name == unit {
			return u
		}
	}
	t.Fatalf("no unit %s", unit)
	return nil
}

// checkPlanUnit: the unit has the record-key, app-a its SOPS key, and the
// kubeconfig gantry reads is the secret's.
func checkPlanUnit(t *testing.T, u *config.Unit, kubeconfig string, secrets map[string]string) {
	t.Helper()
	if u.Config.RecordKey == nil {
		t.Errorf("%s: no record-key", u.Name)
	}
	if want := map[bool]int{true: 1, false: 0}[u.Name == "app-a"]; len(u.Config.SOPSIdentities) != want {
		t.Errorf("%s: %d SOPS identities, want %d", u.Name, len(u.Config.SOPSIdentities), want)
	}
	if strings.TrimSpace(kubeconfig) != strings.TrimSpace(secrets["KUBECONFIG"]) {
		t.Errorf("%s: KUBECONFIG holds %q, want the secret", u.Name, kubeconfig)
	}
}

var expression = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// The GitHub plan's jobs, run as a runner runs them, with the secrets its
// comment names: each step's expressions evaluated (the inputs and the
// secrets, nothing else is used), run: steps run by bash in the
// workspace, and the action's step given INPUT_* variables (with
// action.yml's defaults for the inputs it does not give) and its env.
// gantry then reads the run file with that environment: each unit has
// its cluster (KUBECONFIG, the secret's content), its record-key and the
// variables it reads. Before plans gave them, a job had no kubeconfig.
func TestGitHubPlanRunsAsWritten(t *testing.T) {
	gh := plan(t, planRepo(t), "github")
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Uses, Run string
				With, Env map[string]string
			}
		}
	}
	if err := yaml.Unmarshal([]byte(gh), &wf); err != nil {
		t.Fatal(err)
	}
	var action struct {
		Inputs map[string]struct{ Default *string }
	}
	b, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &action); err != nil {
		t.Fatal(err)
	}
	secrets := planSecrets(t)
	for _, command := range []string{"apply", "diff"} {
		eval := func(s string) string {
			return expression.ReplaceAllStringFunc(s, func(e string) string {
				expr := expression.FindStringSubmatch(e)[1]
				switch {
				case expr == "inputs.command":
					return command
				case strings.HasPrefix(expr, "secrets."):
					return secrets[strings.TrimPrefix(expr, "secrets.")]
				}
				t.Fatalf("an expression the test does not evaluate: %s", e)
				return ""
			})
		}
		for name, job := range wf.Jobs {
			ws := gitRepo(t, planFiles)
			// The runner's temporary folder, whose _github_home a
			// container action sees as /github/home.
			runnerTemp := t.TempDir()
			ran := false
			for _, step := range job.Steps {
				env := map[string]string{}
				for k, v := range step.Env {
					env[k] = eval(v)
				}
				switch {
				case step.Uses == "actions/checkout@v4":
					// ws is the checkout.
				case step.Run != "":
					cmd := exec.Command("bash", "-e", "-c", eval(step.Run))
					cmd.Dir = ws
					cmd.Env = append(withoutGantryVariables(os.Environ()), append((gantryCall{Env: env}).environ(), "RUNNER_TEMP="+runnerTemp)...)
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Fatalf("%s: %s: %v\n%s", name, step.Run, err, out)
					}
				case strings.HasPrefix(step.Uses, "gantry-dev/gantry@"):
					for in, spec := range action.Inputs {
						if spec.Default != nil {
							env["INPUT_"+strings.ToUpper(in)] = *spec.Default
						}
					}
					for k, v := range step.With {
						env["INPUT_"+strings.ToUpper(k)] = eval(v)
					}
					env["GITHUB_ACTIONS"], env["GITHUB_WORKSPACE"], env["HOME"] = "true", ws, t.TempDir()
					if env["INPUT_COMMAND"] != command || env["INPUT_UNIT"] != name {
						t.Errorf("%s: command %q, unit %q", name, env["INPUT_COMMAND"], env["INPUT_UNIT"])
					}
					// The action's container sees the runner's
					// _github_home as /github/home: the kubeconfig is
					// there, not in the checkout, where a pull request's
					// kustomization could read it.
					home, ok := strings.CutPrefix(env["KUBECONFIG"], "/github/home/")
					if !ok {
						t.Fatalf("%s: KUBECONFIG=%q, want a file in /github/home", name, env["KUBECONFIG"])
					}
					k, err := os.ReadFile(filepath.Join(runnerTemp, "_github_home", home))
					if err != nil {
						t.Fatalf("%s: KUBECONFIG=%q: %v", name, env["KUBECONFIG"], err)
					}
					if entries, _ := os.ReadDir(ws); slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.Contains(e.Name(), "kubeconfig") }) {
						t.Errorf("%s: a kubeconfig was written into the checkout", name)
					}
					if info, err := os.Stat(filepath.Join(runnerTemp, "_github_home", home)); err != nil || info.Mode().Perm() != 0o600 {
						t.Errorf("%s: the kubeconfig's mode: %v %v", name, info.Mode(), err)
					}
					checkPlanUnit(t, loadPlanUnit(t, ws, command, name, env), string(k), secrets)
					ran = true
				default:
					t.Fatalf("%s: a step the test does not run: %+v", name, step)
				}
			}
			if !ran {
				t.Errorf("%s runs no gantry", name)
			}
		}
	}
}

// The GitLab plan, triggered as its comment says (the parent's source
// passed on) in a project with the CI/CD variables it names, run by
// gitlab-ci-local: every unit's job runs apply on the default branch,
// after those it needs, with the run file, its unit and run-file-env, and
// gantry reads the run file with the job's environment: app-a's
// {env: SOPS_AGE_KEY} is read (before the plan carried run-file-env, it
// was refused: exit 2), each unit has the record-key and the kubeconfig.
func TestGitLabPlanRunsAsWritten(t *testing.T) {
	gl := plan(t, planRepo(t), "gitlab")
	secrets := planSecrets(t)
	vars := "KUBECONFIG:\n  type: file\n  values:\n    '*': |\n"
	for _, l := range strings.SplitAfter(strings.TrimSuffix(secrets["KUBECONFIG"], "\n"), "\n") {
		vars += "      " + l
	}
	vars += "\nGANTRY_RECORD_KEY: " + secrets["GANTRY_RECORD_KEY"] + "\nSOPS_AGE_KEY: " + secrets["SOPS_AGE_KEY"] + "\n"
	files := map[string]string{
		".gitlab-ci.yml":                 "include:\n  - local: gantry-plan.yml\n",
		"gantry-plan.yml":                gl,
		".gitlab-ci-local-variables.yml": vars,
	}
	for k, v := range planFiles {
		files[k] = v
	}
	repo := gitRepo(t, files)
	calls, order := runGitLabJobs(t, repo, ".gantry-unit", []string{"GANTRY_PIPELINE_SOURCE=push", "CI_COMMIT_REF_NAME=main"}, nil)
	pos := func(job string) int { return slices.Index(order, job) }
	if len(order) != 4 || pos("gantry-crds") != 0 || pos("gantry-last") != 3 {
		t.Errorf("jobs ran in the order %v, want crds first, last last", order)
	}
	for _, unit := range []string{"crds", "app-a", "app-b", "last"} {
		c, ok := calls["gantry-"+unit]
		if !ok {
			t.Errorf("no job ran %s", unit)
			continue
		}
		got := c.gantryVars()
		if len(c.Args) != 0 || got["GANTRY_COMMAND"] != "apply" || got["GANTRY_UNIT"] != unit || got["GANTRY_RUN_FILE"] != "gantry.yaml" || got["GANTRY_RUN_FILE_ENV"] != "SOPS_AGE_KEY" {
			t.Errorf("gantry-%s: gantry %v with %v", unit, c.Args, got)
		}
		// The File variable's file is gone with the job: its content is
		// given again.
		k := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(k, []byte(c.Kubeconfig), 0o600); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"HOME": t.TempDir(), "KUBECONFIG": k}
		for name, v := range c.Env {
			if strings.HasPrefix(name, "GANTRY_") || name == "SOPS_AGE_KEY" || name == "GITLAB_CI" || name == "CI_PROJECT_DIR" {
				env[name] = v
			}
		}
		checkPlanUnit(t, loadPlanUnit(t, repo, "apply", unit, env), c.Kubeconfig, secrets)
	}
}

// The Tekton plan, run as a PipelineRun that binds what its description
// names (a kubeconfig workspace from a Secret, the kubeconfig param, the
// service account), passes Tekton's validation; and Tekton's rules for
// when expressions and runAfter (a task skipped by its when holds up no
// task after it) run apply in dependency order and delete in the reverse
// order, each task with the unit and run-file-env. Before, delete ran the
// CRDs first, and run-file-env was empty.
func TestTektonPlanRunsAsWritten(t *testing.T) {
	tk := plan(t, planRepo(t), "tekton")
	var p struct {
		Spec struct {
			Params []struct{ Name, Default string }
			Tasks  []struct {
				Name     string
				RunAfter []string `json:"runAfter"`
				Params   []struct{ Name, Value string }
				When     []struct {
					Input, Operator string
					Values          []string
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(tk), &p); err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(tk), &doc); err != nil {
		t.Fatal(err)
	}
	spec, _ = doc["spec"].(map[string]any)
	for _, command := range []string{"apply", "delete"} {
		params := []any{
			map[string]any{"name": "command", "value": command},
			map[string]any{"name": "kubeconfig", "value": "/workspace/kubeconfig/config"},
		}
		run := map[string]any{
			"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
			"metadata": map[string]any{"name": "gantry-units-" + command},
			"spec": map[string]any{
				"pipelineSpec":    spec,
				"params":          params,
				"taskRunTemplate": map[string]any{"serviceAccountName": "gantry-deployer"},
				"workspaces": []any{
					map[string]any{"name": "source", "persistentVolumeClaim": map[string]any{"claimName": "checkout"}},
					map[string]any{"name": "kubeconfig", "secret": map[string]any{"secretName": "prod-kubeconfig"}},
				},
			},
		}
		b, err := yaml.Marshal(run)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "pipelinerun.yaml")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(tool(t, "tektoncheck"), f).CombinedOutput(); err != nil {
			t.Errorf("Tekton's validation of the PipelineRun: %v\n%s", err, out)
		}

		// The run's params over the Pipeline's defaults.
		values := map[string]string{}
		for _, prm := range p.Spec.Params {
			values[prm.Name] = prm.Default
		}
		for _, prm := range params {
			m := prm.(map[string]any)
			if _, ok := values[m["name"].(string)]; !ok {
				t.Fatalf("the PipelineRun gives the param %s, which the Pipeline does not have", m["name"])
			}
			values[m["name"].(string)] = m["value"].(string)
		}
		subst := func(s string) string {
			return regexp.MustCompile(`\$\(params\.([a-z-]+)\)`).ReplaceAllStringFunc(s, func(e string) string {
				return values[strings.TrimSuffix(strings.TrimPrefix(e, "$(params."), ")")]
			})
		}
		// Rounds: a task runs once every task it runs after is done;
		// one its when skips is done at once.
		type task = struct {
			Name     string
			RunAfter []string `json:"runAfter"`
			Params   []struct{ Name, Value string }
			When     []struct {
				Input, Operator string
				Values          []string
			}
		}
		runs := func(tk task) bool {
			for _, w := range tk.When {
				if slices.Contains(w.Values, subst(w.Input)) != (w.Operator == "in") {
					return false
				}
			}
			return true
		}
		done := map[string]bool{}
		ready := func(tk task) bool {
			return !done[tk.Name] && !slices.ContainsFunc(tk.RunAfter, func(a string) bool { return !done[a] })
		}
		var rounds [][]string
		for len(done) < len(p.Spec.Tasks) {
			for skipped := true; skipped; {
				skipped = false
				for _, tk := range p.Spec.Tasks {
					if ready(tk) && !runs(tk) {
						done[tk.Name], skipped = true, true
					}
				}
			}
			var round, names []string
			for _, tk := range p.Spec.Tasks {
				if !ready(tk) {
					continue
				}
				args := map[string]string{}
				for _, prm := range tk.Params {
					args[prm.Name] = subst(prm.Value)
				}
				if args["command"] != command || args["run-file-env"] != "SOPS_AGE_KEY" || args["kubeconfig"] != "/workspace/kubeconfig/config" {
					t.Errorf("%s: task %s runs with %v", command, tk.Name, args)
				}
				round, names = append(round, args["unit"]), append(names, tk.Name)
			}
			if len(round) == 0 && len(done) < len(p.Spec.Tasks) {
				t.Fatalf("%s: tasks wait for each other: %v", command, done)
			}
			for _, n := range names {
				done[n] = true
			}
			if len(round) > 0 {
				slices.Sort(round)
				rounds = append(rounds, round)
			}
		}
		want := [][]string{{"crds"}, {"app-a", "app-b"}, {"last"}}
		if command == "delete" {
			slices.Reverse(want)
		}
		if !slices.EqualFunc(rounds, want, slices.Equal) {
			t.Errorf("%s runs the units %v, want %v", command, rounds, want)
		}
	}
}
