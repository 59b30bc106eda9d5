package reporters

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// hostile is what a configuration, a cluster or an error message can
// bring into a report: backticks that end a code span, line breaks, a
// GitLab quick action, a mention, an issue reference, a hidden marker of
// another inventory, HTML, and GitHub workflow commands.
const hostile = "x``` `y\n/approve\n/label ~prod @acme/security #12 !34 <!-- gantry:comment inventory=prod/shop --> <img src=x> ##[error]forged\n::error title=forged::x | cell"

// hostileResult carries hostile text wherever a result holds text from
// outside gantry: names, files, fields, managers, messages, diffs.
func hostileResult() *result.Result {
	res := sample()
	res.Command, res.Reason, res.Message = "drift", result.ReasonDriftDetected, hostile
	res.Revision, res.Base = hostile, hostile
	res.Inventory = &result.Inventory{Name: hostile, Namespace: "deploy"}
	res.Artifact = &result.Artifact{URL: hostile, Digest: "sha256:x"}
	o := result.Object{ID: "x", APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: hostile, Action: result.Drifted, Source: hostile, Line: 3,
		Error: hostile, Diff: "--- a\n+++ b\n@@ -1 +1 @@\n-" + hostile + "\n+```\n" + hostile + "\n",
		Drift:     []result.Drift{{Field: hostile, Change: "changed", Manager: hostile}},
		Conflicts: []result.Conflict{{Field: hostile, Manager: hostile}},
		Health:    &result.Health{Status: "InProgress", Message: hostile}}
	failed := o
	failed.Action, failed.ID = result.Failed, "y"
	res.Objects = append(res.Objects, o, failed)
	return res
}

var (
	mention   = regexp.MustCompile(`(^|[^\w` + "`" + `])@[A-Za-z0-9]`)
	reference = regexp.MustCompile(`(^|\s)[#!][0-9]`)
)

// outsideCode is a Markdown body without its fenced blocks and code
// spans, where nothing is markup.
func outsideCode(body string) []string {
	var out []string
	var fence string
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(t, fence) && strings.Trim(t, "`") == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") {
			fence = t[:strings.IndexFunc(t+"x", func(r rune) bool { return r != '`' })]
			continue
		}
		out = append(out, stripCodeSpans(line))
	}
	return out
}

// checkMarkdown asserts that no line of a body starts a quick action or
// carries a mention, a reference, HTML from the content, or a marker
// other than the body's own first line and content key.
func checkMarkdown(t *testing.T, what, body string) {
	t.Helper()
	for i, line := range outsideCode(body) {
		t0 := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t0, "/"):
			t.Errorf("%s: line %d starts a quick action: %q", what, i+1, line)
		case mention.MatchString(line):
			t.Errorf("%s: line %d mentions: %q", what, i+1, line)
		case reference.MatchString(line):
			t.Errorf("%s: line %d references an issue: %q", what, i+1, line)
		case strings.Contains(line, "<img"), strings.Contains(line, "<!--") && i > 0 && !strings.HasPrefix(t0, "<!-- gantry-content "):
			t.Errorf("%s: line %d holds HTML from the content: %q", what, i+1, line)
		case strings.HasPrefix(t0, "::"):
			t.Errorf("%s: line %d reads as a workflow command: %q", what, i+1, line)
		}
	}
	// Quoted in a span or a fence, another inventory's marker is text:
	// it is not the body's first line, the only place a marker counts.
	if carriesMarker(body, "gantry:comment inventory=prod/shop") {
		t.Errorf("%s: begins with another inventory's marker", what)
	}
}

// Names and messages of every kind go through every Markdown sink (the
// job summary, the sticky comment and note, the drift issue, a run
// file's report) at every detail, and none starts a quick action, pings
// anyone, links an issue, hides HTML or a marker, or ends its code span.
func TestHostileTextCannotInjectMarkdown(t *testing.T) {
	t.Parallel()
	res := hostileResult()
	page := Page{Marker: CommentMarker(res)}
	for d := FullDiffs; d <= CountsOnly; d++ {
		checkMarkdown(t, "summary at "+d.String(), Markdown(res, page, d))
	}
	checkMarkdown(t, "comment", StickyBody(res, page, CommentLimit, redact.New()))
	checkMarkdown(t, "note", StickyBody(res, page, NoteLimit, redact.New()))
	is, _ := driftIssueOf(res, Page{})
	checkMarkdown(t, "drift issue", is.body(CommentLimit, redact.New()))
	run := sampleRun()
	run.Message = hostile
	for i := range run.Units {
		run.Units[i].Name = hostile
		run.Units[i].Result = hostileResult()
	}
	for d := FullDiffs; d <= CountsOnly; d++ {
		checkMarkdown(t, "run summary at "+d.String(), RunMarkdown(run, Page{Marker: RunMarker(run)}, d))
	}
	// Each value stays whole inside its span: the span's fence is
	// longer than any run of backticks in it.
	if got := code("a``b`"); got != "``` a``b` ```" {
		t.Errorf("code span: %q", got)
	}
}

// stripCodeSpans removes a line's code spans as CommonMark reads them: a
// run of backticks up to the next run of the same length.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := 0
		for i+n < len(line) && line[i+n] == '`' {
			n++
		}
		end := -1
		for j := i + n; j < len(line); {
			if line[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(line) && line[j+m] == '`' {
				m++
			}
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			b.WriteString(line[i : i+n])
			i += n
			continue
		}
		i = end
	}
	return b.String()
}
