package entrypoint

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/result"
)

// Every example works as shipped: it builds and validates offline with
// no input at all, and nothing in it waits for a substitution.
func TestExamplesWorkAsShipped(t *testing.T) {
	t.Parallel()
	dirs, err := os.ReadDir(filepath.Join("..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		path := filepath.Join("..", "examples", d.Name())
		for _, cmd := range [][]string{{"build", path}, {"validate", "--offline", path}} {
			var stdout, stderr strings.Builder
			if code := Run(t.Context(), cmd, []string{"HOME=" + t.TempDir()}, &stdout, &stderr); code != ExitOK {
				t.Errorf("gantry %s: exit %d\n%s", strings.Join(cmd, " "), code, stderr.String())
			}
			if strings.Contains(stderr.String(), "warning") {
				t.Errorf("gantry %s warns:\n%s", strings.Join(cmd, " "), stderr.String())
			}
		}
	}
}

// A build without substitution says which objects still hold ${...}
// references: as in Flux, substitution runs only when asked for.
func TestBuildWarnsOfReferencesLeftUnsubstituted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {replicas: '${REPLICAS:=2}', url: '${URL}'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if code := Run(t.Context(), []string{"build", dir}, []string{"HOME=" + t.TempDir()}, &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if s := stderr.String(); !strings.Contains(s, "1 object holds ${...} references left as they are") || !strings.Contains(s, "${REPLICAS:=2}") || !strings.Contains(s, "${URL}") {
		t.Errorf("stderr:\n%s", s)
	}
	stderr.Reset()
	if code := Run(t.Context(), []string{"build", dir, "--substitute", "URL=https://example.com"}, []string{"HOME=" + t.TempDir()}, &stdout, &stderr); code != ExitOK || strings.Contains(stderr.String(), "left as they are") {
		t.Errorf("with substitution: exit %d\n%s", code, stderr.String())
	}
}

// A context the kubeconfig does not have is the input's fault: exit 2,
// naming the contexts it has, before anything is sent.
func TestMissingContextIsBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: prod, context: {cluster: c, user: u}}, {name: staging, context: {cluster: c, user: u}}]
current-context: prod
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"diff", filepath.Join("..", "examples", "hello"), "--inventory", "hello", "--kubeconfig", kc, "--context", "prd"},
		[]string{"HOME=" + t.TempDir()}, &stdout, &stderr)
	if code != ExitInvalid || !strings.Contains(stderr.String(), `no context "prd" in the kubeconfig; it has prod, staging`) {
		t.Errorf("exit %d\n%s", code, stderr.String())
	}
}

// Every command that reports prints its result as JSON with --output
// json, as the report holds it; --report - writes the report to stdout,
// and no file named -.
func TestResultOnStdout(t *testing.T) {
	t.Parallel()
	example := filepath.Join("..", "examples", "hello")
	for _, args := range [][]string{
		{"validate", "--offline", example, "--output", "json"},
		{"validate", "--offline", example, "--report", "-"},
	} {
		var stdout, stderr strings.Builder
		code := Run(t.Context(), args, []string{"HOME=" + t.TempDir()}, &stdout, &stderr)
		if code != ExitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr.String())
		}
		var res struct {
			Command, Reason string
			Objects         []map[string]any
		}
		if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil || res.Command != "validate" || len(res.Objects) != 4 {
			t.Errorf("%v: stdout is not the result (%v): %+v\n%s", args, err, res, stdout.String())
		}
		for _, f := range []string{"-", "-.diff"} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%v wrote a file named %s", args, f)
			}
		}
	}
}

// --color always colours what is not a terminal; --no-color and
// --color never do not.
func TestColorFlags(t *testing.T) {
	t.Parallel()
	example := filepath.Join("..", "examples", "hello")
	for _, tc := range []struct {
		args  []string
		color bool
	}{
		{[]string{"validate", "--offline", example, "--color", "always"}, true},
		{[]string{"validate", "--offline", example, "--color", "never"}, false},
		{[]string{"validate", "--offline", example, "--no-color"}, false},
		{[]string{"validate", "--offline", example, "--color", "always", "--no-color"}, false},
		{[]string{"validate", "--offline", example}, false}, // not a terminal
	} {
		var stdout, stderr strings.Builder
		if code := Run(t.Context(), tc.args, []string{"HOME=" + t.TempDir()}, &stdout, &stderr); code != ExitOK {
			t.Fatalf("%v: exit %d\n%s", tc.args, code, stderr.String())
		}
		if got := strings.Contains(stderr.String(), "\x1b["); got != tc.color {
			t.Errorf("%v: coloured %v, want %v\n%q", tc.args, got, tc.color, stderr.String())
		}
	}
}

// A misspelt kind is named with the kind meant, offline as on a cluster
// (the e2e corpus's misspelt-kind).
func TestMisspeltKindGetsASuggestion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte("# the web front end\napiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: web, namespace: shop}\nspec: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"validate", "--offline", dir}, []string{"HOME=" + t.TempDir()}, &stdout, &stderr)
	if code != ExitFailed || !strings.Contains(stderr.String(), "web.yaml:3: kind: apps/v1 has no kind Deploymnet") || !strings.Contains(stderr.String(), "did you mean Deployment?") {
		t.Errorf("exit %d\n%s", code, stderr.String())
	}
}

// --quiet prints no progress, only the closing summary (and warnings).
func TestQuiet(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	if code := Run(t.Context(), []string{"validate", "--offline", filepath.Join("..", "examples", "hello"), "--quiet"}, []string{"HOME=" + t.TempDir()}, &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if got := stderr.String(); got != "gantry validate: ValidationSucceeded: 4 valid, 0 failed\n" {
		t.Errorf("stderr:\n%q", got)
	}
}

// Errors point at the field: each problem of an object has its path and
// its own line, they come in one entry per object, and a GitHub
// annotation stands on the first field's line and lists them all.
func TestErrorsPointAtTheField(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	doc := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
        resources:
          limits:
            cpu: lots
---
apiVersion: app/v1
kind: Deployment
metadata: {name: api, namespace: shop}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPortt: 8080
`
	doc = strings.Replace(doc, "replicas: 2", "replicas: -3", 1)
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"validate", "--offline", dir, "--output", "json"}, []string{"HOME=" + t.TempDir()}, &stdout, &stderr)
	if code != ExitFailed {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var res result.Result
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	type want struct {
		field, message string
		line           int
	}
	wants := map[string][]want{
		"Deployment.apps/shop/web": {
			{"spec.replicas", "must be greater than or equal to 0", 7},
			{"spec.template.spec.containers[0].resources.limits[cpu]", `Invalid value: "lots"`, 19},
		},
		"Deployment.app/shop/api": {{"apiVersion", "did you mean apiVersion: apps/v1?", 21}},
		"Service/shop/web":        {{"spec.ports[port=80,protocol=\"TCP\"].targetPortt", "field not declared in schema", 32}},
	}
	for _, o := range res.Objects {
		w, ok := wants[o.Ref()]
		if !ok {
			continue
		}
		delete(wants, o.Ref())
		if len(o.Problems) != len(w) {
			t.Errorf("%s: %+v, want %d problems", o.Ref(), o.Problems, len(w))
			continue
		}
		for i, p := range o.Problems {
			if p.Field != w[i].field || !strings.Contains(p.Message, w[i].message) || p.Line != w[i].line {
				t.Errorf("%s: problem %d is %+v, want %+v", o.Ref(), i, p, w[i])
			}
		}
	}
	if len(wants) > 0 {
		t.Errorf("not reported: %v", wants)
	}

	stdout.Reset()
	stderr.Reset()
	Run(t.Context(), []string{"validate", "--offline", dir}, []string{"HOME=" + t.TempDir(), "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE=" + dir}, &stdout, &stderr)
	all := stdout.String() + stderr.String()
	if !strings.Contains(all, "::error file=app.yaml,line=7,title=Deployment.apps/shop/web failed::line 7: spec.replicas: Invalid value: -3: must be greater than or equal to 0%0Aline 19: spec.template.spec.containers[0].resources.limits[cpu]") {
		t.Errorf("no annotation on the first field's line listing both:\n%s", all)
	}
}

// validate and diff print JUnit and SARIF; other commands refuse them as
// bad input, naming what they print.
func TestJUnitAndSARIFOutputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec:\n  ports:\n  - port: 70000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + t.TempDir(), "GITHUB_WORKSPACE=" + filepath.Dir(dir)}
	var stdout, stderr strings.Builder
	if code := Run(t.Context(), []string{"validate", "--offline", dir, "-o", "sarif"}, env, &stdout, &stderr); code != ExitFailed {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var log struct {
		Runs []struct {
			Results []struct {
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }
						Region           struct{ StartLine int }
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout.String()), &log); err != nil || len(log.Runs) != 1 || len(log.Runs[0].Results) == 0 {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	loc := log.Runs[0].Results[0].Locations[0].PhysicalLocation
	if loc.ArtifactLocation.URI != filepath.Base(dir)+"/web.yaml" || loc.Region.StartLine != 6 {
		t.Errorf("at %+v, want %s/web.yaml:6", loc, filepath.Base(dir))
	}

	stdout.Reset()
	if code := Run(t.Context(), []string{"validate", "--offline", dir, "-o", "junit"}, env, &stdout, &stderr); code != ExitFailed || !strings.Contains(stdout.String(), `<testcase name="Service/shop/web"`) || !strings.Contains(stdout.String(), "web.yaml:6: spec.ports[0].port") {
		t.Errorf("exit %d\n%s", code, stdout.String())
	}

	stderr.Reset()
	if code := Run(t.Context(), []string{"apply", dir, "--inventory", "x", "-o", "sarif"}, env, &stdout, &stderr); code != ExitInvalid || !strings.Contains(stderr.String(), "sarif is for validate and diff") {
		t.Errorf("apply -o sarif: exit %d\n%s", code, stderr.String())
	}
}

// In the logs of GitHub Actions and GitLab CI, which render colour, auto
// colours; not into a file the output was sent to, nor under NO_COLOR.
func TestColorInCILogs(t *testing.T) {
	t.Parallel()
	example := filepath.Join("..", "examples", "hello")
	run := func(env []string, toFile bool) string {
		t.Helper()
		var w *os.File
		var read func() string
		if toFile {
			f, err := os.Create(filepath.Join(t.TempDir(), "log"))
			if err != nil {
				t.Fatal(err)
			}
			w, read = f, func() string { b, _ := os.ReadFile(f.Name()); return string(b) }
		} else {
			r, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan string)
			go func() { b, _ := io.ReadAll(r); done <- string(b) }()
			w, read = pw, func() string { return <-done }
		}
		// What CI's defaults would write in the working directory (the
		// dotenv, the report) goes to the test's own folder.
		out := t.TempDir()
		env = append(env, "HOME="+t.TempDir(), "GANTRY_DOTENV="+filepath.Join(out, "gantry.env"), "GANTRY_REPORT="+filepath.Join(out, "report.json"))
		if code := Run(t.Context(), []string{"validate", "--offline", example}, env, io.Discard, w); code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		w.Close()
		return read()
	}
	for _, tc := range []struct {
		env    []string
		toFile bool
		color  bool
	}{
		{[]string{"GITLAB_CI=true"}, false, true},
		{[]string{"GITHUB_ACTIONS=true"}, false, true},
		{[]string{"GITLAB_CI=true"}, true, false},
		{[]string{"GITLAB_CI=true", "NO_COLOR=1"}, false, false},
		{nil, false, false},
	} {
		out := run(tc.env, tc.toFile)
		if got := strings.Contains(out, "\x1b[32m"); got != tc.color {
			t.Errorf("%v, to a file %v: coloured %v, want %v\n%q", tc.env, tc.toFile, got, tc.color, out)
		}
	}
}

// With no cluster to talk to (KUBECONFIG naming a file that is not there,
// or nothing named and no ~/.kube/config), a command that needs one is
// refused as bad input, exit 2, saying what to give.
func TestNoClusterIsBadInput(t *testing.T) {
	// Not parallel: client-go reads KUBECONFIG and HOME from the process.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	example := filepath.Join("..", "examples", "hello")
	for _, tc := range []struct {
		kubeconfig, want string
	}{
		{"/nonexistent/kubeconfig", "KUBECONFIG names /nonexistent/kubeconfig, which holds no kubeconfig"},
		{"", "no cluster to talk to: no kubeconfig given"},
	} {
		home := t.TempDir()
		t.Setenv("KUBECONFIG", tc.kubeconfig)
		t.Setenv("HOME", home)
		var stdout, stderr strings.Builder
		code := Run(t.Context(), []string{"diff", example}, []string{"HOME=" + home, "KUBECONFIG=" + tc.kubeconfig}, &stdout, &stderr)
		if code != ExitInvalid || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), "InvalidInput") {
			t.Errorf("KUBECONFIG=%q: exit %d\n%s", tc.kubeconfig, code, stderr.String())
		}
	}
}
