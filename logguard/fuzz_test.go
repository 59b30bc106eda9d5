package logguard

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/logguard/logguardtest"
)

// Whatever gantry prints on GitHub, in whatever pieces it arrives, the
// runner reads no line of it as a workflow command (logguardtest.RunnerCommands, a
// model of actions/runner's parser); gantry's own commands, written
// beside the guard, still read as commands; and the guard adds Blockers
// and nothing else.
func FuzzLogWriter(f *testing.F) {
	f.Add(logguardtest.Injected, uint16(3), uint16(40), false)
	f.Add("missing\r::error title=Deploy approved::all good", uint16(8), uint16(9), true)
	f.Add("X\n \u00a0::warning title=forged::x", uint16(2), uint16(4), false)
	f.Add("{\n  \"message\": \"##[set-output name=x;]v\"\n}\n", uint16(16), uint16(17), true)
	f.Add("\u200b::error::x\n\x1b::notice::y\r\n#\u00ad#[error]z", uint16(1), uint16(2), false)
	f.Add("\u2028\u3000::error::x\x85::error::y", uint16(3), uint16(5), true)
	f.Add("##\xe2\x80[x", uint16(3), uint16(3), false)
	f.Fuzz(func(t *testing.T, content string, cut1, cut2 uint16, own bool) {
		a, b := int(cut1)%(len(content)+1), int(cut2)%(len(content)+1)
		if a > b {
			a, b = b, a
		}
		var log bytes.Buffer
		g := New(&log)
		_, _ = io.WriteString(g, content[:a])
		if own {
			_, _ = io.WriteString(Commands(g), "::group::own\n")
		}
		_, _ = io.WriteString(g, content[a:b])
		_, _ = io.WriteString(g, content[b:])
		cmds := logguardtest.RunnerCommands(log.String())
		switch {
		case own && (len(cmds) != 1 || cmds[0] != "::group::own"):
			t.Fatalf("commands %q, want gantry's own only, in %q", cmds, log.String())
		case !own && len(cmds) > 0:
			t.Fatalf("the runner reads %q in %q", cmds, log.String())
		case !own && strings.ReplaceAll(log.String(), Blocker, "") != strings.ReplaceAll(content, Blocker, ""):
			t.Fatalf("%q written as %q: more than Blockers added", content, log.String())
		}
	})
}
