package entrypoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gantry-dev/gantry/reporters"
	"github.com/gantry-dev/gantry/result"
)

// runnerLines splits a stream as GitHub's runner does (StreamReader.ReadLine
// in ProcessInvoker): a line ends at \n, at \r\n and at a bare \r.
func runnerLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return append(lines, s)
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return lines
}

// dotNetWhiteSpace is char.IsWhiteSpace, what String.TrimStart trims.
func dotNetWhiteSpace(r rune) bool {
	return r >= '\t' && r <= '\r' || r == 0x85 || unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}

// skeleton is a line as the runner's culture-sensitive comparisons (ICU
// collation) see it: without the runes they may skip. Which runes ICU
// ignores depends on its version (testdata/icu-ignorable.txt is ICU 72's);
// the model skips more: every control but whitespace, format and unassigned
// code point, mark, modifier or other letter, punctuation of the Po class
// beyond ASCII, and bytes that are not UTF-8.
func skeleton(line string) string {
	var b strings.Builder
	for line != "" {
		r, size := utf8.DecodeRuneInString(line)
		skip := r == utf8.RuneError && size == 1 ||
			!dotNetWhiteSpace(r) && unicode.In(r, unicode.C, unicode.M, unicode.Lm, unicode.Lo) ||
			r >= 0x80 && unicode.Is(unicode.Po, r)
		if !skip {
			b.WriteString(line[:size])
		}
		line = line[size:]
	}
	return b.String()
}

// runnerCommands are the lines of a stream that GitHub's runner would read
// as workflow commands (actions/runner, ActionCommand.TryParseV2 and
// TryParse): :: at the start of a line once whitespace is trimmed, or ##[
// anywhere in it. The model takes every such line for a command, whatever
// follows (a registered name, a second ::).
func runnerCommands(log string) []string {
	var found []string
	for _, line := range runnerLines(log) {
		if strings.HasPrefix(skeleton(strings.TrimLeftFunc(line, dotNetWhiteSpace)), "::") || strings.Contains(skeleton(line), "##[") {
			found = append(found, line)
		}
	}
	return found
}

// ownCommands are the commands gantry writes itself, beside the guard.
var ownCommands = []string{"::group::", "::endgroup::", "::error title=gantry", "::error file=", "::warning title=gantry::",
	"::add-mask::", "::stop-commands::gantry-", "::gantry-"}

// forgedCommands are the commands of a stream that gantry did not write.
func forgedCommands(log string) []string {
	var forged []string
	for _, c := range runnerCommands(log) {
		own := false
		for _, p := range ownCommands {
			own = own || strings.HasPrefix(strings.TrimLeftFunc(c, dotNetWhiteSpace), p)
		}
		if !own {
			forged = append(forged, c)
		}
	}
	return forged
}

// injected is what a name, an error message or an artifact's annotation
// can bring into GitHub's log: workflow commands at the start of a line,
// after a bare \r, after Unicode whitespace (which the runner trims) or
// runes ICU's collation ignores, and ##[ anywhere in one, ignorable runes
// inside it too.
const injected = "x\n::error title=forged::boom\n   ::add-mask::gantry\n::stop-commands::silence\nok ##[error]forged ##[group]x" +
	"\rmissing\r::error title=Deploy approved::all good\r\n\u00a0\u2003::warning title=forged::nbsp\n\u200b::error::zwsp" +
	"\n\x1b::notice::esc\n\u2028::error::ls\nx #\u00ad#[set-output name=x;]v"

// Everything the console prints on GitHub goes through the guard: no line
// of content reads as a workflow command, while gantry's own (a group, a
// warning) still do.
func TestConsoleOnGitHubPrintsNoInjectedCommand(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	guard := newCommandGuard(&log)
	c := newConsole(guard, reporters.NewRedactor(), githubActions)
	c.StageStarted("apply")
	c.ObjectDone(result.Object{Kind: "ConfigMap", Namespace: "shop", Name: injected, Action: result.Failed, Error: injected,
		Drift: []result.Drift{{Field: injected, Change: "changed", Manager: injected}}})
	c.Info(injected)
	c.StageFinished(result.Stage{Name: "apply", Error: injected})
	c.warn(injected)
	res := &result.Result{Command: "apply", Reason: result.ReasonApplyFailed, Message: injected,
		Objects: []result.Object{{Kind: "ConfigMap", Name: injected, Action: result.Failed, Error: injected}}}
	c.summary(res)
	_, _ = guard.Write([]byte("::error::written whole\n"))

	var own []string
	for _, cmd := range runnerCommands(log.String()) {
		own = append(own, cmd[:strings.Index(cmd[2:], "::")+4])
	}
	if got := strings.Join(own, " "); got != "::group:: ::endgroup:: ::warning title=gantry::" {
		t.Errorf("workflow commands in the log: %q, want gantry's own group and warning only\n%s", got, log.String())
	}
	if !strings.Contains(log.String(), blocker+"::error title=forged::boom") {
		t.Errorf("the injected line is not printed, neutralized:\n%s", log.String())
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
	if f := append(forgedCommands(stdout), forgedCommands(stderr)...); len(f) > 0 {
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
	if f := append(forgedCommands(stdout), forgedCommands(stderr)...); len(f) > 0 {
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
	if c := runnerCommands(stdout); len(c) > 0 {
		t.Errorf("the runner reads commands in the JSON report: %q", c)
	}
	if f := forgedCommands(stderr); len(f) > 0 {
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
	if c := append(runnerCommands(stdout), forgedCommands(stderr)...); len(c) > 0 {
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
	cmds := runnerCommands(stdout)
	if len(cmds) != 2 || !strings.HasPrefix(cmds[0], "::stop-commands::gantry-") || cmds[1] != "::"+strings.TrimPrefix(cmds[0], "::stop-commands::")+"::" {
		t.Errorf("commands on stdout: %q, want the fence's two only\n%s", cmds, stdout)
	}
}

// Every code point ICU 72 ignores in collation, the guard takes for one
// it may ignore; the blocker is none of them, and no whitespace.
func TestGuardKnowsICUIgnorables(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join("testdata", "icu-ignorable.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		if strings.HasPrefix(s.Text(), "#") {
			continue
		}
		cp, err := strconv.ParseUint(s.Text(), 16, 32)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if r := rune(cp); !mayBeIgnorable(r) || skeleton(string(r)) != "" {
			t.Errorf("U+%04X: ICU ignores it, the guard (%v) or the model (%q) does not", r, mayBeIgnorable(r), skeleton(string(r)))
		}
	}
	if n < 900 {
		t.Fatalf("%d code points read", n)
	}
	b, _ := utf8.DecodeRuneInString(blocker)
	if mayBeIgnorable(b) || isDotNetSpace(b) || skeleton(blocker) != blocker || dotNetWhiteSpace(b) {
		t.Errorf("the blocker may be skipped")
	}
}

// The guard's cases, one write each and byte by byte.
func TestGuardCases(t *testing.T) {
	t.Parallel()
	for _, in := range []string{injected, "a\r::error::b", "\u00a0::warning::x", "\u3000\u205f::error::x", "\x85::error::x", "\u200b\u00a0::error::x",
		"\ufeff::error::x", "x\r\n::error::x", "##[set-output name=x;]v", "#\u200b#[error]x", "##\x1b[error]x", "{\"m\": \"##[set-output name=x;]v\"}"} {
		var whole, bytewise bytes.Buffer
		_, _ = newCommandGuard(&whole).Write([]byte(in))
		g := newCommandGuard(&bytewise)
		for i := range len(in) {
			_, _ = g.Write([]byte{in[i]})
		}
		for _, out := range []string{whole.String(), bytewise.String()} {
			if c := runnerCommands(out); len(c) > 0 {
				t.Errorf("%q: the runner reads %q in %q", in, c, out)
			}
			if strings.ReplaceAll(out, blocker, "") != in {
				t.Errorf("%q: written as %q, more than blockers added", in, out)
			}
		}
	}
}
