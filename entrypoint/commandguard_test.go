package entrypoint

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/logguard"
	"github.com/gantry-dev/gantry/logguard/logguardtest"
	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// Everything the console prints on GitHub goes through the guard: no line
// of content reads as a workflow command, while gantry's own (a group, a
// warning) still do.
func TestConsoleOnGitHubPrintsNoInjectedCommand(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	guard := logguard.New(&log)
	c := newConsole(guard, redact.New(), githubActions)
	c.StageStarted("apply")
	c.ObjectDone(result.Object{Kind: "ConfigMap", Namespace: "shop", Name: logguardtest.Injected, Action: result.Failed, Error: logguardtest.Injected,
		Drift: []result.Drift{{Field: logguardtest.Injected, Change: "changed", Manager: logguardtest.Injected}}})
	c.Info(logguardtest.Injected)
	c.StageFinished(result.Stage{Name: "apply", Error: logguardtest.Injected})
	c.warn(logguardtest.Injected)
	res := &result.Result{Command: "apply", Reason: result.ReasonApplyFailed, Message: logguardtest.Injected,
		Objects: []result.Object{{Kind: "ConfigMap", Name: logguardtest.Injected, Action: result.Failed, Error: logguardtest.Injected}}}
	c.summary(res)
	_, _ = guard.Write([]byte("::error::written whole\n"))

	var own []string
	for _, cmd := range logguardtest.RunnerCommands(log.String()) {
		own = append(own, cmd[:strings.Index(cmd[2:], "::")+4])
	}
	if got := strings.Join(own, " "); got != "::group:: ::endgroup:: ::warning title=gantry::" {
		t.Errorf("workflow commands in the log: %q, want gantry's own group and warning only\n%s", got, log.String())
	}
	if !strings.Contains(log.String(), logguard.Blocker+"::error title=forged::boom") {
		t.Errorf("the logguardtest.Injected line is not printed, neutralized:\n%s", log.String())
	}
}

// ghRun runs gantry in process as a GitHub Action runs it.
func ghRun(t *testing.T, ws string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs strings.Builder
	code = Run(context.Background(), args, []string{"HOME=" + t.TempDir(), "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE=" + ws, "GANTRY_WORKSPACE=" + ws}, &out, &errs)
	return code, out.String(), errs.String()
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	ws := t.TempDir()
	for name, content := range files {
		path := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// A kustomization's entry with a bare \r: the runner ends the line there,
// so the error that names the entry must not start the next line with a
// command.
func TestGitHubLogEndsLinesAtCarriageReturn(t *testing.T) {
	t.Parallel()
	ws := writeFiles(t, map[string]string{"app/kustomization.yaml": "resources:\n- \"missing\\r::error title=Deploy approved::all good\"\n"})
	code, stdout, stderr := ghRun(t, ws, "validate", "--offline", filepath.Join(ws, "app"))
	if code != ExitInvalid {
		t.Errorf("exit %d, want %d\n%s", code, ExitInvalid, stderr)
	}
	if !strings.Contains(stderr, "Deploy approved") {
		t.Fatalf("the entry is not in the log:\n%s", stderr)
	}
	if f := append(logguardtest.ForgedCommands(stdout), logguardtest.ForgedCommands(stderr)...); len(f) > 0 {
		t.Errorf("the runner reads commands gantry did not write: %q", f)
	}
}

// A run file's reference whose name holds a line break and Unicode spaces
// (NBSP, which .NET's TrimStart trims) before :: reaches the error.
func TestGitHubLogTrimsUnicodeSpaces(t *testing.T) {
	t.Parallel()
	ws := writeFiles(t, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"gantry.yaml": "units:\n- name: a\n  path: app\n  registry-password: {env: \"X\\n \\u00a0::warning title=forged::x\"}\n"})
	code, stdout, stderr := ghRun(t, ws, "validate", "--offline", "--run-file", filepath.Join(ws, "gantry.yaml"))
	if code != ExitInvalid {
		t.Errorf("exit %d, want %d\n%s", code, ExitInvalid, stderr)
	}
	if !strings.Contains(stderr, "title=forged") {
		t.Fatalf("the reference is not in the log:\n%s", stderr)
	}
	if f := append(logguardtest.ForgedCommands(stdout), logguardtest.ForgedCommands(stderr)...); len(f) > 0 {
		t.Errorf("the runner reads commands gantry did not write: %q", f)
	}
}

// --report - on GitHub: the JSON report goes to stdout through the guard,
// so a manifest's value holding the legacy ##[set-output] sets no output,
// and the report is still JSON.
func TestGitHubReportToStdoutIsGuarded(t *testing.T) {
	t.Parallel()
	ws := writeFiles(t, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"##[set-output name=x;]v\"}\ndata: {a: \"##[set-output name=y;]v\"}\n"})
	code, stdout, stderr := ghRun(t, ws, "validate", "--offline", "--report", "-", filepath.Join(ws, "app"))
	if code != ExitFailed {
		t.Errorf("exit %d, want %d\n%s", code, ExitFailed, stderr)
	}
	if !json.Valid([]byte(stdout)) || !strings.Contains(stdout, "set-output name=x;]v") {
		t.Fatalf("stdout is not the JSON report naming the object:\n%s", stdout)
	}
	if c := logguardtest.RunnerCommands(stdout); len(c) > 0 {
		t.Errorf("the runner reads commands in the JSON report: %q", c)
	}
	if f := logguardtest.ForgedCommands(stderr); len(f) > 0 {
		t.Errorf("the runner reads commands gantry did not write: %q", f)
	}
}

// An invalid configuration with --report -: the error and the report that
// names the bad value pass the guard.
func TestGitHubInvalidConfigurationIsGuarded(t *testing.T) {
	t.Parallel()
	ws := writeFiles(t, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"})
	code, stdout, stderr := ghRun(t, ws, "validate", "--offline", "--report", "-", "--timeout", "\r##[set-output name=x;]v", filepath.Join(ws, "app"))
	if code != ExitInvalid {
		t.Errorf("exit %d, want %d\n%s", code, ExitInvalid, stderr)
	}
	if !json.Valid([]byte(stdout)) || !strings.Contains(stdout, "InvalidInput") {
		t.Fatalf("stdout is not the JSON report of the invalid input:\n%s", stdout)
	}
	if c := append(logguardtest.RunnerCommands(stdout), logguardtest.ForgedCommands(stderr)...); len(c) > 0 {
		t.Errorf("the runner reads commands gantry did not write: %q", c)
	}
}

// Build's stream is fenced and guarded: the fence is gantry's own, and
// the objects' lines read as no command inside it either.
func TestGitHubBuildIsFencedAndGuarded(t *testing.T) {
	t.Parallel()
	ws := writeFiles(t, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: \"##[set-output name=y;]v\", b: \"x\\r::error::y\"}\n"})
	code, stdout, stderr := ghRun(t, ws, "build", filepath.Join(ws, "app"))
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	cmds := logguardtest.RunnerCommands(stdout)
	if len(cmds) != 2 || !strings.HasPrefix(cmds[0], "::stop-commands::gantry-") || cmds[1] != "::"+strings.TrimPrefix(cmds[0], "::stop-commands::")+"::" {
		t.Errorf("commands on stdout: %q, want the fence's two only\n%s", cmds, stdout)
	}
}
