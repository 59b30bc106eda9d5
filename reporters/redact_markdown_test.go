package reporters

import (
	"strings"
	"testing"
)

// A value is masked in the summary and the comments, which are masked
// once rendered: escaped as Markdown text writes it (at a line's start
// and after other text), and as HTML text.
func TestRedactorMasksMarkdownEscapedValues(t *testing.T) {
	for _, secret := range []string{"p@ss_w0rd!Prod#1", "tok*en[abc](def)", "-lead<b>&x", "12.5 <secret>"} {
		r := NewRedactor(secret)
		for _, escaped := range []string{text(secret), strings.TrimPrefix(text("a"+secret), "a"), htmlEscape(secret)} {
			rendered := "Readiness probe failed: " + escaped + "\n" + escaped + " at a line's start"
			got := r.String(rendered)
			if strings.Contains(got, escaped) || strings.Count(got, "***") != 2 {
				t.Errorf("%q escaped as %q: masked %q", secret, escaped, got)
			}
		}
	}
}
