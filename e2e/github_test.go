package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/reporters/fakeapi"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// gantryBinary builds the gantry binary once per test run.
func gantryBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gantry-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gantry")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/gantry-dev/gantry").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// actionInputs reads action.yml's inputs and their defaults, as the runner
// passes them to a container action (INPUT_<NAME>, hyphens kept).
func actionInputs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Inputs map[string]struct {
			Default string `json:"default"`
		} `json:"inputs"`
	}
	if err := yaml.Unmarshal(b, &action); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, in := range action.Inputs {
		out["INPUT_"+strings.ToUpper(name)] = in.Default
	}
	return out
}

// pullRequestRun is what GitHub's runner sets for a step of a
// pull_request run (number 7 of acme/shop): home, workspace, event payload
// and file-command folder as the step sees them, and the API's address.
// Outputs go to commands/set_output_1, the summary to step_summary_1.
func pullRequestRun(home, workspace, event, commands, api string) map[string]string {
	return map[string]string{
		"HOME":                    home,
		"GITHUB_ACTIONS":          "true",
		"CI":                      "true",
		"GITHUB_WORKSPACE":        workspace,
		"GITHUB_EVENT_NAME":       "pull_request",
		"GITHUB_EVENT_PATH":       event,
		"GITHUB_REPOSITORY":       "acme/shop",
		"GITHUB_REPOSITORY_OWNER": "acme",
		"GITHUB_SERVER_URL":       "https://github.com",
		"GITHUB_API_URL":          api,
		"GITHUB_GRAPHQL_URL":      api + "/graphql",
		"GITHUB_RUN_ID":           "42",
		"GITHUB_RUN_ATTEMPT":      "1",
		"GITHUB_SHA":              "0123abcd0123abcd",
		"GITHUB_REF":              "refs/pull/7/merge",
		"GITHUB_REF_NAME":         "7/merge",
		"GITHUB_OUTPUT":           filepath.Join(commands, "set_output_1"),
		"GITHUB_STEP_SUMMARY":     filepath.Join(commands, "step_summary_1"),
		"GITHUB_ENV":              filepath.Join(commands, "set_env_1"),
		"GITHUB_PATH":             filepath.Join(commands, "add_path_1"),
		"RUNNER_OS":               "Linux",
	}
}

func canary(what string) string {
	return "canary-" + what + "-" + strings.ToLower(rand.Text()[:10])
}

// runnerRun is one run of the binary as a GitHub runner starts it.
type runnerRun struct {
	code           int
	stdout, stderr string
	// colored: the log held colour, as the runners render it; stdout
	// and stderr are without it, as a reader sees the log.
	colored bool
}

var ansiColor = regexp.MustCompile("\x1b\\[[0-9;]*m")

// runAsAction runs gantry's binary as GitHub's runner starts a container
// action: in the workspace, with nothing but vars in its environment.
func runAsAction(t *testing.T, bin, workspace string, vars map[string]string) runnerRun {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Dir = workspace
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return runCommand(t, cmd, "gantry "+vars["INPUT_COMMAND"]+" (as a container action)")
}

// runCommand runs cmd and returns its exit code and output; a command
// that cannot be started fails the test.
func runCommand(t *testing.T, cmd *exec.Cmd, what string) runnerRun {
	t.Helper()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: exit %d\n%s", what, code, stderr.String())
	return runnerRun{code, ansiColor.ReplaceAllString(stdout.String(), ""), ansiColor.ReplaceAllString(stderr.String(), ""),
		ansiColor.MatchString(stderr.String())}
}

// githubRunner starts gantry's binary as a GitHub runner starts a container
// action, in a workspace of its own, against the local control plane and a
// fake GitHub API.
type githubRunner struct {
	t                                 *testing.T
	ns, ws, deploy, outputs, summary  string
	secretData, secretString, ghToken string
	kubeToken, dbPassword             string
	gh                                *fakeapi.GitHub
	run                               func(extra map[string]string) runnerRun
}

func newGitHubRunner(t *testing.T, forbid bool) *githubRunner {
	t.Helper()
	env.Require(t)
	bin := gantryBinary(t)
	ns := env.Namespace(t)

	secretData, secretString := canary("data"), canary("string")
	ghToken, kubeToken, dbPassword := "ghs_"+canary("token"), canary("kubetoken"), canary("dbpassword")

	// The workspace, as the runner mounts it at /github/workspace and
	// makes it the working directory.
	ws := t.TempDir()
	deploy := filepath.Join(ws, "deploy")
	if err := os.MkdirAll(deploy, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(deploy, "app.yaml"), fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: %[1]s}
data:
  greeting: hello
  password: ${DB_PASSWORD}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: %[1]s}
data:
  token: %[2]s
stringData:
  password: %[3]s
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.k8s.io/pause:3.10}]
`, ns, base64.StdEncoding.EncodeToString([]byte(secretData)), secretString))

	// The kubeconfig, in the workspace, with a token that must be masked.
	kc, err := clientcmd.LoadFromFile(env.Cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.Token = kubeToken
	}
	if err := clientcmd.WriteToFile(*kc, filepath.Join(ws, "kubeconfig")); err != nil {
		t.Fatal(err)
	}

	// The runner's file commands and event payload.
	home, commands := t.TempDir(), t.TempDir()
	event := filepath.Join(t.TempDir(), "event.json")
	writeFile(t, event, `{"action":"synchronize","number":7,"pull_request":{"number":7,"head":{"sha":"0123abcd"}}}`)
	outputs, summary := filepath.Join(commands, "set_output_1"), filepath.Join(commands, "step_summary_1")

	gh := &fakeapi.GitHub{T: t, Token: ghToken, Viewer: "github-actions", Forbid: forbid}
	srv := httptest.NewServer(gh)
	t.Cleanup(srv.Close)

	run := func(extra map[string]string) runnerRun {
		t.Helper()
		vars := actionInputs(t)
		for k, v := range map[string]string{
			"INPUT_COMMAND":             "apply",
			"INPUT_PATH":                "deploy",
			"INPUT_INVENTORY":           "shop",
			"INPUT_INVENTORY-NAMESPACE": ns,
			"INPUT_KUBECONFIG":          "kubeconfig",
			"INPUT_TIMEOUT":             "60s",
			"INPUT_SUBSTITUTE":          "DB_PASSWORD=" + dbPassword,
			"INPUT_GITHUB-TOKEN":        ghToken, // ${{ github.token }}, evaluated
			"INPUT_DOTENV":              "gantry.env",
			"INPUT_TEKTON-RESULTS":      "tekton-results",
		} {
			vars[k] = v
		}
		for k, v := range pullRequestRun(home, ws, event, commands, srv.URL) {
			vars[k] = v
		}
		for k, v := range extra {
			vars[k] = v
		}
		return runAsAction(t, bin, ws, vars)
	}
	return &githubRunner{t: t, ns: ns, ws: ws, deploy: deploy, outputs: outputs, summary: summary,
		secretData: secretData, secretString: secretString, ghToken: ghToken, kubeToken: kubeToken, dbPassword: dbPassword,
		gh: gh, run: run}
}

func TestGitHubActionRunnerEnvironment(t *testing.T) {
	t.Parallel()
	r := newGitHubRunner(t, false)
	ns, ws, deploy, outputs, summary, gh, run := r.ns, r.ws, r.deploy, r.outputs, r.summary, r.gh, r.run
	secretData, secretString, ghToken, kubeToken, dbPassword := r.secretData, r.secretString, r.ghToken, r.kubeToken, r.dbPassword

	first := run(nil)
	if first.code != 0 {
		t.Fatalf("exit %d\n%s", first.code, first.stderr)
	}
	if !first.colored {
		t.Error("no colour in the runner's log, which renders it")
	}
	// Masks come first, for every secret.
	lines := strings.Split(first.stderr, "\n")
	masked := map[string]bool{}
	for i, l := range lines {
		v, ok := strings.CutPrefix(l, "::add-mask::")
		if !ok {
			for _, l := range lines[i:] {
				if strings.HasPrefix(l, "::add-mask::") {
					t.Errorf("a mask after other output: %q", l)
				}
			}
			break
		}
		masked[v] = true
	}
	for _, s := range []string{ghToken, kubeToken, dbPassword} {
		if !masked[s] {
			t.Errorf("%s was not masked first", s[:12])
		}
	}
	for _, want := range []string{"::group::validate", "::endgroup::", "Deployment.apps/" + ns + "/web created"} {
		if !strings.Contains(first.stderr, want) {
			t.Errorf("log lacks %q", want)
		}
	}

	// Outputs, with paths the next step can open from the workspace.
	outs := parseOutputs(t, outputs)
	if outs["created"] != "3" || outs["changed"] != "true" || outs["reason"] != "ReconciliationSucceeded" || outs["inventory"] != ns+"/shop" || outs["revision"] != "7/merge@sha1:0123abcd0123abcd" {
		t.Errorf("outputs %v", outs)
	}
	for _, o := range []string{"report", "diff"} {
		if filepath.IsAbs(outs[o]) {
			t.Errorf("output %s = %q, want a path relative to the workspace", o, outs[o])
		}
		if _, err := os.Stat(filepath.Join(ws, outs[o])); err != nil {
			t.Errorf("output %s: %v", o, err)
		}
	}
	sum, err := os.ReadFile(summary)
	if err != nil || !strings.Contains(string(sum), "gantry apply: ReconciliationSucceeded") || !strings.Contains(string(sum), "actions/runs/42") {
		t.Errorf("summary (%v):\n%s", err, sum)
	}
	if got := strings.Join(gh.Writes(), ", "); got != "POST 1" {
		t.Errorf("comment writes %q, want one new comment", got)
	}
	firstDiff := readAll(t, filepath.Join(ws, outs["diff"]))
	if !strings.Contains(firstDiff, "+  password: '***'") || !strings.Contains(firstDiff, "+  token: '***'") {
		t.Errorf("the diff file does not list the Secret's keys masked:\n%s", firstDiff)
	}
	firstReport := readAll(t, filepath.Join(ws, outs["report"]))

	// A diff, as on a pull request: no changes, exit 0; with
	// detailed-exitcode and a change pending, exit 3 and the comment says so.
	if d := run(map[string]string{"INPUT_COMMAND": "diff", "INPUT_DETAILED-EXITCODE": "true"}); d.code != 0 || !strings.Contains(d.stderr, "gantry diff: NoChanges") {
		t.Errorf("diff without changes: exit %d\n%s", d.code, d.stderr)
	}
	replaceInFile(t, filepath.Join(deploy, "app.yaml"), "replicas: 1", "replicas: 2")
	if d := run(map[string]string{"INPUT_COMMAND": "diff", "INPUT_DETAILED-EXITCODE": "true"}); d.code != 3 || !strings.Contains(gh.Comments()[0].Body, "change pending") {
		t.Errorf("diff with a change: exit %d\n%s", d.code, d.stderr)
	}
	replaceInFile(t, filepath.Join(deploy, "app.yaml"), "replicas: 2", "replicas: 1")

	// A change updates the same comment; a failure annotates the file.
	replaceInFile(t, filepath.Join(deploy, "app.yaml"), "greeting: hello", "greeting: hi")
	if second := run(nil); second.code != 0 {
		t.Fatalf("second run: exit %d", second.code)
	}
	writeFile(t, filepath.Join(deploy, "bad.yaml"), fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: bad, namespace: %s}\nspec:\n  ports: [{port: 99999}]\n", ns))
	third := run(nil)
	if third.code != 1 {
		t.Fatalf("third run: exit %d, want 1", third.code)
	}
	if !strings.Contains(third.stderr, "::error file=deploy/bad.yaml,line=5,title=Service/"+ns+"/bad failed::line 5: spec.ports[0].port: Invalid value: 99999") {
		t.Errorf("no annotation on deploy/bad.yaml:\n%s", third.stderr)
	}
	if got := strings.Join(gh.Writes(), ", "); got != "POST 1, PATCH 1, PATCH 1, PATCH 1, PATCH 1" {
		t.Errorf("comment writes %q, want one comment, updated by each later run", got)
	}
	comments := gh.Comments()
	if len(comments) != 1 || !strings.Contains(comments[0].Body, "ValidationFailed") || !strings.Contains(comments[0].Body, "Service/"+ns+"/bad") {
		t.Errorf("comment:\n%+v", comments)
	}

	// The canaries appear nowhere a person or a later step could read.
	scan := map[string]string{
		"stdout (runs 1-3)":                 first.stdout + third.stdout,
		"stderr (runs 1-3, masks excluded)": withoutMasks(first.stderr) + withoutMasks(third.stderr),
		"summary":                           string(sum),
		"outputs file":                      readAll(t, outputs),
		"dotenv":                            readAll(t, filepath.Join(ws, "gantry.env")),
		"JSON report (run 1)":               firstReport,
		"JSON report (run 3)":               readAll(t, filepath.Join(ws, outs["report"])),
		"diff file (run 1)":                 firstDiff,
	}
	for _, name := range []string{"created", "configured", "unchanged", "deleted", "skipped", "failed", "changed", "reason", "revision", "inventory"} {
		scan["tekton result "+name] = readAll(t, filepath.Join(ws, "tekton-results", name))
	}
	for i, body := range gh.Bodies() {
		scan[fmt.Sprintf("comment body %d", i+1)] = body
	}
	for where, text := range scan {
		for _, c := range scanForSecrets(text, secretData, secretString, ghToken, kubeToken, dbPassword,
			base64.StdEncoding.EncodeToString([]byte(secretData)), base64.StdEncoding.EncodeToString([]byte(secretString))) {
			t.Errorf("%s contains the canary %s", where, c)
		}
	}
}

// A token that may not comment (a fork's pull request) leaves a good
// deploy green, with a warning.
func TestGitHubCommentForbiddenIsAWarning(t *testing.T) {
	t.Parallel()
	r := newGitHubRunner(t, true)
	res := r.run(nil)
	if res.code != 0 {
		t.Fatalf("exit %d, want 0\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "::warning title=gantry::GitHub pull request comment: the token may not write comments") {
		t.Errorf("no warning about the comment:\n%s", res.stderr)
	}
	if outs := parseOutputs(t, r.outputs); outs["reason"] != "ReconciliationSucceeded" {
		t.Errorf("outputs %v", outs)
	}
	if len(r.gh.Comments()) != 0 {
		t.Errorf("comments %v", r.gh.Comments())
	}
}

func readAll(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("reading %s: %v", path, err)
	}
	return string(b)
}

// withoutMasks drops the lines that tell GitHub's runner what to mask.
func withoutMasks(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "::add-mask::") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// parseOutputs reads the last value of each output from a GITHUB_OUTPUT
// file (name<<DELIM ... DELIM).
func parseOutputs(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, delim, ok := strings.Cut(sc.Text(), "<<")
		if !ok {
			t.Fatalf("outputs line %q is not name<<DELIM", sc.Text())
		}
		var value []string
		for sc.Scan() && sc.Text() != delim {
			value = append(value, sc.Text())
		}
		out[name] = strings.Join(value, "\n")
	}
	return out
}
