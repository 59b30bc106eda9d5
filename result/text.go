package result

import (
	"strings"
	"unicode"
)

// OneLine puts a message from the cluster on one line, as reports show
// it: line breaks, tabs and other controls become spaces, runs of spaces
// one. A secret value is masked in this form too (reporters' Redactor),
// so that a value with a tab in it is found after the message was made
// one line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)), " ")
}
