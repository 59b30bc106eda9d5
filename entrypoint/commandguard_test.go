package entrypoint

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/reporters"
	"github.com/gantry-dev/gantry/result"
)

// injected is what a name, an error message or an artifact's annotation
// can bring into GitHub's log: workflow commands at the start of a line
// (the runner trims the spaces before them) and ##[ anywhere in one.
const injected = "x\n::error title=forged::boom\n   ::add-mask::gantry\n::stop-commands::silence\nok ##[error]forged ##[group]x"

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
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "##[") {
			t.Errorf("a line holds ##[: %q", line)
		}
		if t0 := strings.TrimLeft(line, " \t"); strings.HasPrefix(t0, "::") {
			own = append(own, t0[:strings.Index(t0[2:], "::")+4])
		}
	}
	if got := strings.Join(own, " "); got != "::group:: ::endgroup:: ::warning title=gantry::" {
		t.Errorf("workflow commands in the log: %q, want gantry's own group and warning only\n%s", got, log.String())
	}
	if !strings.Contains(log.String(), zeroWidthSpace+"::error title=forged::boom") {
		t.Errorf("the injected line is not printed, neutralized:\n%s", log.String())
	}
}
