package reporters

import (
	"strings"
	"testing"
)

// parseGitHubOutputs reads a GITHUB_OUTPUT file as the runner does:
// name=value lines, and name<<DELIMITER ... DELIMITER blocks.
func parseGitHubOutputs(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if line == "" && i == len(lines)-1 {
			break
		}
		if name, delim, ok := strings.Cut(line, "<<"); ok {
			var value []string
			for i++; i < len(lines) && lines[i] != delim; i++ {
				value = append(value, lines[i])
			}
			if i == len(lines) {
				t.Fatalf("no closing delimiter %q in:\n%s", delim, s)
			}
			out[name] = strings.Join(value, "\n")
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("line %q is neither name=value nor name<<DELIMITER", line)
		}
		out[name] = value
	}
	return out
}

// No value can end its output early or set another output: whatever a
// revision, an inventory name or an error message holds.
func FuzzOutputsCannotInject(f *testing.F) {
	f.Add("main@sha1:abc")
	f.Add("x\nchanged<<EOF\nfalse\nEOF")
	f.Add("ghadelimiter_\nreason=Injected")
	f.Add("line\r\nwith\rcarriage returns\n")
	f.Fuzz(func(t *testing.T, value string) {
		var b strings.Builder
		if err := writeOutput(&b, "revision", value); err != nil {
			t.Fatal(err)
		}
		if err := writeOutput(&b, "changed", "true"); err != nil {
			t.Fatal(err)
		}
		got := parseGitHubOutputs(t, b.String())
		if len(got) != 2 || got["revision"] != value || got["changed"] != "true" {
			t.Fatalf("outputs %q from value %q", got, value)
		}
		// GitLab's dotenv takes single-line values: one value, one line.
		if line := singleLine(value); strings.ContainsAny(line, "\r\n") {
			t.Fatalf("dotenv value %q spans lines", line)
		}
	})
}
