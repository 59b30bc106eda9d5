package reporters

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	gtext "github.com/yuin/goldmark/text"

	"github.com/gantry-dev/gantry/result"
)

// gfm parses Markdown as GitHub and GitLab render it (CommonMark with
// GitHub's tables, strikethrough, task lists and autolinks).
var gfm = goldmark.New(goldmark.WithExtensions(extension.GFM))

// htmlTag is a tag or a comment in HTML.
var htmlTag = regexp.MustCompile(`<[^<>]*>`)

// shape is the structure of a Markdown document: every node's kind at its
// depth, each run of text (and the entities in it) as one text node, what
// code spans and fenced blocks hold left out. Two renderings of one
// result whose values differ have one shape when no value became markup.
func shape(md string) string {
	src := []byte(md)
	var b strings.Builder
	inText := false
	_ = ast.Walk(gfm.Parser().Parse(gtext.NewReader(src)), func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		kind := n.Kind().String()
		isBreak := false
		if h, ok := n.(*ast.RawHTML); ok && h.Segments.Len() == 1 {
			seg := h.Segments.At(0)
			isBreak = string(seg.Value(src)) == "<br>" // a cell's line break: a value's own
		}
		// A value's blank line parts a quote's paragraphs: one text still.
		quoted := n.Kind() == ast.KindParagraph && n.Parent() != nil && n.Parent().Kind() == ast.KindBlockquote &&
			n.PreviousSibling() != nil && n.PreviousSibling().Kind() == ast.KindParagraph
		// A URL GitHub or GitLab links as it shows is text.
		autolink := n.Kind() == ast.KindAutoLink
		switch {
		case quoted:
			return ast.WalkContinue, nil
		case autolink && inText:
			return ast.WalkSkipChildren, nil
		case autolink:
			inText = true
			fmt.Fprintf(&b, "%sText\n", strings.Repeat(" ", depthOf(n)))
			return ast.WalkSkipChildren, nil
		case n.Kind() == ast.KindText, n.Kind() == ast.KindString, isBreak:
			if inText {
				return ast.WalkContinue, nil
			}
			inText, kind = true, "Text"
		default:
			inText = false
		}
		fmt.Fprintf(&b, "%s%s", strings.Repeat(" ", depthOf(n)), kind)
		switch v := n.(type) {
		case *ast.RawHTML:
			// gantry's own tags and comments are part of the shape, with
			// what they say; the text between them is not.
			var raw []byte
			for i := 0; i < v.Segments.Len(); i++ {
				seg := v.Segments.At(i)
				raw = append(raw, seg.Value(src)...)
			}
			b.WriteString(strings.Join(htmlTag.FindAllString(string(raw), -1), ""))
		case *ast.HTMLBlock:
			var raw []byte
			for i := 0; i < v.Lines().Len(); i++ {
				seg := v.Lines().At(i)
				raw = append(raw, seg.Value(src)...)
			}
			b.WriteString(strings.Join(htmlTag.FindAllString(string(raw), -1), ""))
		case *ast.CodeSpan, *ast.FencedCodeBlock:
			b.WriteString("\n")
			return ast.WalkSkipChildren, nil
		}
		b.WriteString("\n")
		return ast.WalkContinue, nil
	})
	return b.String()
}

// everyValue is sample() with every value a manifest, a pull request
// or the cluster chooses set to v: names, files, messages, diffs, the
// managers and fields of conflicts and drift, the revision.
func everyValue(command string, v string) *result.Result {
	res := sample()
	res.Command = command
	res.Message, res.Revision = v, v
	res.Inventory = &result.Inventory{Name: v, Namespace: v}
	for i := range res.Objects {
		o := &res.Objects[i]
		o.Name, o.Namespace, o.Source = v, v, v
		o.Patches = []string{v}
		o.Error = v
		if o.Diff != "" {
			o.Diff = "--- live\n+++ desired\n@@ -1 +1 @@\n-" + v + "\n+" + v + "\n"
		}
		if o.Health != nil {
			o.Health = &result.Health{Status: "InProgress", Message: v}
		}
		o.Conflicts = []result.Conflict{{Field: v, Manager: v}}
		if command == "drift" {
			o.Action = result.Drifted
			o.Drift = []result.Drift{{Field: v, Change: v, Manager: v}}
		}
	}
	res.Objects[0].Action = result.Failed
	return res
}

// Whatever a manifest, a pull request or the cluster puts in a value, the
// summary and the comment hold it as text: the document's structure
// (headings, tables and their rows and cells, quotes, lists, links,
// emphasis, HTML, code blocks) is the one it has with a plain value, so no
// value adds a link, a mention's markup, a hidden comment, a row or a
// heading, or ends a table, a quote, a code span or a fence.
func FuzzMarkdownIsText(f *testing.F) {
	for _, s := range []string{
		"[Deploy approved](https://evil.example)", "**bold** _it_ ~~gone~~", "# heading", "- item\n- item", "1. one",
		"---", "x\n===", "    indented", "> quote", "a | b | c", "`x`", "```\nfence", "<!-- gantry-content 0 -->",
		"<details><summary>x</summary>", "@acme/admins #12 !3", "![img](https://t.example/p.png)", "https://evil.example",
		"www.evil.example", "line\r\n|---|\n| x | y |", "\\", "&amp; &#35;", "<https://evil.example>", "x\u2028y", "[x]: https://e.example",
		"*", "_a_b_", "~~~\nx", "- [ ] task", "x  \ny", "| a |\n|---|",
	} {
		f.Add(s)
	}
	// What a plain value renders to, once: each input then costs its own
	// renderings only.
	page := Page{Marker: "gantry:comment inventory=deploy/shop", RunURL: "https://github.com/acme/shop/actions/runs/42"}
	plain := map[string]string{"run": shape(RunMarkdown(unitsWith("plain"), page, FullDiffs))}
	for _, command := range []string{"apply", "drift"} {
		plain[command] = shape(Markdown(everyValue(command, "plain"), page, FullDiffs))
	}
	f.Fuzz(func(t *testing.T, v string) {
		if strings.TrimSpace(oneLine(v)) == "" || strings.TrimSpace(v) != v {
			t.Skip("a blank value renders as nothing; values are trimmed where they are read")
		}
		for _, command := range []string{"apply", "drift"} {
			got := Markdown(everyValue(command, v), page, FullDiffs)
			if s := shape(got); s != plain[command] {
				t.Fatalf("%s: %q changes the Markdown's structure:\n%s\nwant:\n%s\nin:\n%s", command, v, s, plain[command], got)
			}
		}
		// A run of units: its units' names, clusters, messages and results.
		got := RunMarkdown(unitsWith(v), page, FullDiffs)
		if s := shape(got); s != plain["run"] {
			t.Fatalf("run: %q changes the Markdown's structure:\n%s\nwant:\n%s\nin:\n%s", v, s, plain["run"], got)
		}
	})
}

// unitsWith is sampleRun() with every value a run file, a pull request or
// the cluster chooses set to v.
func unitsWith(v string) *result.Run {
	run := sampleRun()
	run.Message = v
	for i := range run.Units {
		u := &run.Units[i]
		u.Name = v
		u.Cluster = result.Cluster{Context: v, Server: v}
		switch u.Result.Reason {
		case result.ReasonSuspended, result.ReasonDependencyNotReady:
			u.Result.Message = v
		default:
			u.Result = everyValue("apply", v)
		}
	}
	return run
}

func depthOf(n ast.Node) int {
	depth := 0
	for p := n.Parent(); p != nil; p = p.Parent() {
		depth++
	}
	return depth
}
