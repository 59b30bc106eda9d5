// Package logguard is the one way to a CI log that reads workflow
// commands from what a process prints (GitHub's runner): a Guard passes
// everything through, neutralizing every line the runner would take for a
// command, and Commands writes the tool's own commands beside it.
package logguard

import (
	"io"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Guard is the one way to GitHub's log: on GitHub, everything
// gantry prints, to stdout and to stderr, passes through one (one per
// stream, as the runner reads each stream on its own). Gantry's own
// commands (groups, masks, annotations, warnings, the stop-commands
// fence) are written beside it, through Commands, never through it.
//
// It neutralizes workflow commands as the runner (actions/runner) finds
// them, whatever the content (object names, error messages, values of
// manifests, a JSON report):
//
//   - Lines end at \n, \r\n and at a bare \r (the runner splits the
//     process's output with .NET's StreamReader.ReadLine), so each of
//     them starts a new line for the guard as well.
//   - A line is a command (ActionCommand.TryParseV2) when, after .NET's
//     TrimStart (every rune for which char.IsWhiteSpace holds: Unicode's
//     space separators, line and paragraph separators, \t to \r, U+0085),
//     it starts with ::. The comparison is .NET's culture-sensitive
//     StartsWith, which on Linux is ICU collation and skips every rune
//     that collates as ignorable (controls such as ESC, format characters
//     such as U+200B, many combining marks). The guard skips whitespace
//     and every rune that may be ignorable (mayBeIgnorable) at the start
//     of a line, and when the first rune past them is a colon it writes
//     Blocker before it: a rune that is neither whitespace nor ignorable.
//   - ##[ anywhere in a line is a command (ActionCommand.TryParse), found
//     with the culture-sensitive IndexOf: ignorable runes inside it do not
//     break it. The guard writes blocker before every [ that follows two #
//     with nothing but ignorable runes between them.
//
// Nothing else is changed: what the guard writes is what it was given
// with blockers inserted. Bytes that are not UTF-8 (or a rune split
// between two writes) count as ignorable, which can only add blockers.
type Guard struct {
	mu sync.Mutex
	w  io.Writer
	// lineStart says the last byte written to w ended a line (\n): where
	// gantry's own commands may be written as they are.
	lineStart bool
	// inPrefix: the line so far holds only whitespace and runes that may
	// be ignorable, so a colon now would start a command.
	inPrefix bool
	// hashes counts the # (0 to 2) that end the line so far, ignorable
	// runes aside.
	hashes int
}

// New guards w; a guard is returned as it is, never guarded twice
// (gantry's own commands would not pass the outer one).
func New(w io.Writer) *Guard {
	if g, ok := w.(*Guard); ok {
		return g
	}
	return &Guard{w: w, lineStart: true, inPrefix: true}
}

// Behind is the writer a guard writes to, or w itself when it is no
// guard: to ask what the log is (a terminal, a file), never to write.
func Behind(w io.Writer) io.Writer {
	if g, ok := w.(*Guard); ok {
		return g.w
	}
	return w
}

// Blocker is what the guard writes before a colon that would start a
// command and before the [ of ##[: BRAILLE PATTERN BLANK, a symbol that
// prints blank, is not whitespace for .NET (category So), and has a
// primary weight in ICU's collation, so the runner's StartsWith and
// IndexOf stop at it.
const Blocker = "\u2800"

func (g *Guard) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.neutralize(p)
	if len(p) > 0 {
		g.lineStart = p[len(p)-1] == '\n'
	}
	if _, err := g.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// neutralize returns p with a blocker wherever the runner would otherwise
// read a command, carrying the state of the line across writes.
func (g *Guard) neutralize(p []byte) []byte {
	out := make([]byte, 0, len(p)+8)
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		ignorable := (r == utf8.RuneError && size <= 1) || mayBeIgnorable(r)
		switch {
		case r == '\n' || r == '\r':
			g.inPrefix, g.hashes = true, 0
		case ignorable:
			// Invisible to the runner's comparisons: no change.
		default:
			if g.inPrefix && !isDotNetSpace(r) {
				g.inPrefix = false
				if r == ':' {
					out = append(out, Blocker...)
				}
			}
			switch {
			case r == '#':
				g.hashes = min(g.hashes+1, 2)
			case r == '[' && g.hashes == 2:
				out = append(out, Blocker...)
				g.hashes = 0
			default:
				g.hashes = 0
			}
		}
		out = append(out, p[:size]...)
		p = p[size:]
	}
	return out
}

// isDotNetSpace is .NET's char.IsWhiteSpace, which String.TrimStart
// trims: the space, line and paragraph separators of Unicode, \t to \r,
// and U+0085.
func isDotNetSpace(r rune) bool {
	switch {
	case r >= '\t' && r <= '\r', r == ' ', r == 0x85, r == 0xa0:
		return true
	case r < 0x80:
		return false
	}
	return unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}

// mayBeIgnorable says whether ICU's collation may give r no weight at all,
// so that the runner's culture-sensitive comparisons skip it. ICU's own
// list depends on its version; this is wider: every control that is not
// whitespace, every format, private-use, surrogate or unassigned code
// point, every mark, modifier and other letter, and other punctuation
// beyond ASCII (ICU 72 ignores some of each, testdata/icu-ignorable.txt).
// Printable ASCII, the other letters, digits, symbols and punctuation are
// never ignorable.
func mayBeIgnorable(r rune) bool {
	if r < 0x80 {
		return r < 0x20 && (r < '\t' || r > '\r') || r == 0x7f
	}
	if isDotNetSpace(r) {
		return false
	}
	return !unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.N,
		unicode.Pc, unicode.Pd, unicode.Ps, unicode.Pe, unicode.Pi, unicode.Pf, unicode.S)
}

// Commands is where gantry writes its own workflow commands: beside the
// guard that keeps everything else from reading as one. On a writer that
// is no guard, it is the writer itself.
func Commands(w io.Writer) io.Writer {
	if g, ok := w.(*Guard); ok {
		return &rawLines{g: g}
	}
	return w
}

// rawLines writes gantry's own commands to the guarded log, in order
// with what goes through the guard, each on a line of its own.
type rawLines struct{ g *Guard }

func (r *rawLines) Write(p []byte) (int, error) {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	if !r.g.lineStart {
		if _, err := r.g.w.Write([]byte("\n")); err != nil {
			return 0, err
		}
	}
	if _, err := r.g.w.Write(p); err != nil {
		return 0, err
	}
	if len(p) > 0 {
		r.g.lineStart = p[len(p)-1] == '\n'
		// What follows continues the command's line, or starts a new one.
		r.g.inPrefix, r.g.hashes = r.g.lineStart, 0
	}
	return len(p), nil
}
