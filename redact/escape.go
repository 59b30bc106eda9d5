package redact

import "strings"

// MarkdownText makes a value from the configuration or the cluster plain text in
// Markdown, where it is read as Markdown (a paragraph, a quote, a table
// cell, a heading): every ASCII punctuation character that may open or
// close inline markup anywhere (\ ` * _ [ ] ( ) { } < > | ~ $ & # ! @) is
// escaped, and at a line's start, after its spaces, what may start a
// block (- + = and the . or ) after digits), so that none starts a link,
// emphasis, math, a list, a heading, a table's cell, a code span or HTML;
// an @ cannot mention, nor # or ! reference (see HTMLText). A bare URL
// stays a URL that GitHub and GitLab may link, as it shows. Line breaks
// are kept: callers put lines where they belong.
func MarkdownText(s string) string {
	var b strings.Builder
	lineStart, digits := true, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\n' || c == '\r':
			lineStart, digits = true, false
			b.WriteByte(c)
			continue
		case lineStart && (c == ' ' || c == '\t'):
			b.WriteByte(c)
			continue
		case strings.IndexByte("&<>#!@", c) >= 0:
			b.WriteString(textEscaper.Replace(string(c)))
		case strings.IndexByte("\\`*_[](){}|~$", c) >= 0,
			lineStart && strings.IndexByte("-+=", c) >= 0,
			digits && c == '.':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
		digits = (lineStart || digits) && c >= '0' && c <= '9'
		lineStart = false
	}
	return b.String()
}

// HTMLText makes text from the configuration or the cluster plain text
// inside HTML that gantry writes (a <summary>, where Markdown is not
// read): no HTML (a hidden comment, a marker), no @mention that pings a
// person or team, no #reference or !reference to an issue or merge
// request that GitLab or GitHub would link and notify.
func HTMLText(s string) string {
	return textEscaper.Replace(s)
}

var textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "@", "@\u200b", "#", "&#35;", "!", "&#33;")
