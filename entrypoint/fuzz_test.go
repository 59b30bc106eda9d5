package entrypoint

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// Whatever the flags and INPUT_* values, Load returns a configuration or
// an error, never panics, and never returns both nothing and no error.
func FuzzLoad(f *testing.F) {
	f.Add("apply --inventory=shop --timeout=2m --concurrency=8", "INPUT_PRUNE", "false")
	f.Add("diff --prune false --health-checks=Deployment/apps/web", "INPUT_TIMEOUT", "-1")
	f.Add("push --artifact=oci://ghcr.io/acme/app:v1 --tags=a\nb", "INPUT_SIGN", "cosign")
	f.Add("--no-such-flag", "INPUT_NO-SUCH", "x")
	f.Add("apply --substitute=A=1\nB", "INPUT_MAX-OBJECTS", "0")
	f.Fuzz(func(t *testing.T, args, envName, envValue string) {
		env := map[string]string{envName: envValue}
		cfg, err := Load(strings.Fields(args), env, io.Discard)
		if err == nil && cfg == nil {
			t.Fatal("no configuration and no error")
		}
		if err == nil && (cfg.Timeout <= 0 || cfg.Concurrency < 1 || cfg.MaxFileBytes < 1 || cfg.MaxObjects < 1) {
			t.Fatalf("accepted out-of-range settings: %+v", cfg)
		}
	})
}

// Whatever gantry prints on GitHub, in whatever pieces it arrives, the
// runner reads no line of it as a workflow command (runnerCommands, a
// model of actions/runner's parser); gantry's own commands, written
// beside the guard, still read as commands; and the guard adds blockers
// and nothing else.
func FuzzLogWriter(f *testing.F) {
	f.Add(injected, uint16(3), uint16(40), false)
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
		g := newCommandGuard(&log)
		_, _ = io.WriteString(g, content[:a])
		if own {
			_, _ = io.WriteString(commandWriter(g), "::group::own\n")
		}
		_, _ = io.WriteString(g, content[a:b])
		_, _ = io.WriteString(g, content[b:])
		cmds := runnerCommands(log.String())
		switch {
		case own && (len(cmds) != 1 || cmds[0] != "::group::own"):
			t.Fatalf("commands %q, want gantry's own only, in %q", cmds, log.String())
		case !own && len(cmds) > 0:
			t.Fatalf("the runner reads %q in %q", cmds, log.String())
		case !own && strings.ReplaceAll(log.String(), blocker, "") != strings.ReplaceAll(content, blocker, ""):
			t.Fatalf("%q written as %q: more than blockers added", content, log.String())
		}
	})
}
