package reporters

import (
	"fmt"
	"strings"
)

// A marker names the one inventory, run file or offline preview a
// comment, note or drift issue belongs to. It counts only as the first
// line of a body written by gantry's own identity: anywhere else (quoted
// in a diff, injected through an object's name) it is content, and no
// content can make one run edit another's comment.

// markerLine is a marker as a body's first line.
func markerLine(marker string) string { return "<!-- " + marker + " -->" }

// carriesMarker reports whether body begins with marker's line.
func carriesMarker(body, marker string) bool {
	first, _, _ := strings.Cut(body, "\n")
	return strings.TrimSuffix(first, "\r") == markerLine(marker)
}

// markerValue is a name as a marker carries it: every byte but letters,
// digits and ./_:- percent-encoded, so that no name ends the comment
// (-->), breaks the line, or reads as another marker's name.
func markerValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("./_:", c) >= 0,
			c == '-' && !strings.HasPrefix(s[i:], "--"):
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
