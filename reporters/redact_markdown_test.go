package reporters

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/redact"
)

// A value is masked in the summary and the comments, which are masked
// once rendered: escaped as Markdown text writes it (at a line's start
// and after other text), and as HTML text.
func TestRedactorMasksMarkdownEscapedValues(t *testing.T) {
	for _, secret := range []string{"p@ss_w0rd!Prod#1", "tok*en[abc](def)", "-lead<b>&x", "12.5 <secret>"} {
		r := redact.New(secret)
		for _, escaped := range []string{redact.MarkdownText(secret), strings.TrimPrefix(redact.MarkdownText("a"+secret), "a"), redact.HTMLText(secret)} {
			rendered := "Readiness probe failed: " + escaped + "\n" + escaped + " at a line's start"
			got := r.String(rendered)
			if strings.Contains(got, escaped) || strings.Count(got, "***") != 2 {
				t.Errorf("%q escaped as %q: masked %q", secret, escaped, got)
			}
		}
	}
}

// Two values that overlap where they are written are both masked whole:
// a single pass masks the leftmost and goes on after it, leaving the
// other's tail.
func TestRedactorMasksOverlappingValuesWhole(t *testing.T) {
	r := redact.New("abcdXYZ0", "XYZ0-1234", "5678")
	for in, want := range map[string]string{
		"key=abcdXYZ0-1234 end":     "key=*** end",
		"abcdXYZ0-12345678":         "***",
		"x XYZ0-1234 and abcdXYZ0 ": "x *** and *** ",
		"nothing here":              "nothing here",
	} {
		if got := r.String(in); got != want {
			t.Errorf("%q masked %q, want %q", in, got, want)
		}
	}
	// Overlaps at random places: no byte of any value is left.
	secrets := []string{"S3cr3tPartOne", "PartOne-Two2", "Two2-Three33"}
	r = redact.New(secrets...)
	for _, in := range []string{"S3cr3tPartOne-Two2-Three33", "xS3cr3tPartOne-Two2y", "PartOne-Two2-Three33!", "S3cr3tPartOne-Two2-Three33S3cr3tPartOne"} {
		got := r.String(in)
		for _, s := range secrets {
			for _, tail := range []string{s[len(s)-4:], s[:4]} {
				if strings.Contains(got, tail) {
					t.Errorf("%q masked %q: %q of %q is left", in, got, tail, s)
				}
			}
		}
	}
}
