package reporters

import (
	"errors"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/redact"
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

// A dotenv value is data wherever it is read: it decodes back to what was
// given, holds no byte a shell or GitLab gives a meaning to (no $, quote,
// backtick, space, ;, &, |, <, >, (, ), \, # at a word start, ~, newline),
// and a line of it is one assignment.
func FuzzDotenvValue(f *testing.F) {
	f.Add("fix$(touch${IFS}/x/PWNED)@sha1:0123abcd")
	f.Add("`id`;rm -rf ~ && echo $HOME|cat>x<y\n\r'\"\\#!*?[]{}")
	f.Add("main@sha1:0123456789abcdef")
	f.Add("100%25 done")
	f.Fuzz(func(t *testing.T, value string) {
		got := dotenvValue(value)
		for i := 0; i < len(got); i++ {
			c := got[i]
			ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_./:@+,=-*%", c) >= 0
			if !ok {
				t.Fatalf("dotenv value %q holds %q", got, c)
			}
		}
		back, err := percentDecode(got)
		if err != nil || back != value {
			t.Fatalf("dotenv value %q decodes to %q (%v), want %q", got, back, err, value)
		}
	})
}

func percentDecode(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errShortEscape
		}
		var c byte
		for _, h := range []byte(s[i+1 : i+3]) {
			c <<= 4
			switch {
			case '0' <= h && h <= '9':
				c |= h - '0'
			case 'A' <= h && h <= 'F':
				c |= h - 'A' + 10
			default:
				return "", errShortEscape
			}
		}
		b.WriteByte(c)
		i += 2
	}
	return b.String(), nil
}

var errShortEscape = errors.New("bad escape")

// Whatever a comment's content holds (another run's key, marker lines,
// line breaks of every kind), the body begins with its own marker and
// Unchanged reads only the key gantry wrote: a body is unchanged against
// itself, and never against one whose content differs.
func FuzzStickyContentKey(f *testing.F) {
	f.Add("plain", "other")
	f.Add("<!-- gantry-content 000000000000000000000000 -->", "x")
	f.Add("a\r\n<!-- gantry:comment inventory=prod/shop -->\n", "b\r")
	f.Fuzz(func(t *testing.T, a, b string) {
		page := Page{Marker: "gantry:comment inventory=prod/shop"}
		render := func(s string) string {
			res := sample()
			res.Objects[1].Diff = "--- live\n+++ desired\n@@ -1 +1 @@\n-x\n+" + s + "\n"
			return StickyBody(res, page, CommentLimit, redact.New())
		}
		ba, bb := render(a), render(b)
		if !carriesMarker(ba, page.Marker) {
			t.Fatalf("the body does not begin with its marker:\n%s", ba)
		}
		if !Unchanged(ba, render(a)) {
			t.Fatalf("a body is not unchanged against itself")
		}
		// Content that renders alike is alike; otherwise the key differs.
		if Unchanged(ba, bb) != (ba == bb) {
			t.Fatalf("Unchanged(%q, %q) = %v", a, b, Unchanged(ba, bb))
		}
	})
}
