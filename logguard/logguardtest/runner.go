// Package logguardtest models how GitHub's runner (actions/runner) reads
// a process's output, to test what gantry prints against it.
package logguardtest

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// RunnerLines splits a stream as GitHub's runner does (StreamReader.ReadLine
// in ProcessInvoker): a line ends at \n, at \r\n and at a bare \r.
func RunnerLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return append(lines, s)
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return lines
}

// DotNetWhiteSpace is char.IsWhiteSpace, what String.TrimStart trims.
func DotNetWhiteSpace(r rune) bool {
	return r >= '\t' && r <= '\r' || r == 0x85 || unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}

// Skeleton is a line as the runner's culture-sensitive comparisons (ICU
// collation) see it: without the runes they may skip. Which runes ICU
// ignores depends on its version (logguard/testdata/icu-ignorable.txt is ICU 72's);
// the model skips more: every control but whitespace, format and unassigned
// code point, mark, modifier or other letter, punctuation of the Po class
// beyond ASCII, and bytes that are not UTF-8.
func Skeleton(line string) string {
	var b strings.Builder
	for line != "" {
		r, size := utf8.DecodeRuneInString(line)
		skip := r == utf8.RuneError && size == 1 ||
			!DotNetWhiteSpace(r) && unicode.In(r, unicode.C, unicode.M, unicode.Lm, unicode.Lo) ||
			r >= 0x80 && unicode.Is(unicode.Po, r)
		if !skip {
			b.WriteString(line[:size])
		}
		line = line[size:]
	}
	return b.String()
}

// RunnerCommands are the lines of a stream that GitHub's runner would read
// as workflow commands (actions/runner, ActionCommand.TryParseV2 and
// TryParse): :: at the start of a line once whitespace is trimmed, or ##[
// anywhere in it. The model takes every such line for a command, whatever
// follows (a registered name, a second ::).
func RunnerCommands(log string) []string {
	var found []string
	for _, line := range RunnerLines(log) {
		if strings.HasPrefix(Skeleton(strings.TrimLeftFunc(line, DotNetWhiteSpace)), "::") || strings.Contains(Skeleton(line), "##[") {
			found = append(found, line)
		}
	}
	return found
}

// OwnCommands are the commands gantry writes itself, beside the guard.
var OwnCommands = []string{"::group::", "::endgroup::", "::error title=gantry", "::error file=", "::warning title=gantry::",
	"::add-mask::", "::stop-commands::gantry-", "::gantry-"}

// ForgedCommands are the commands of a stream that gantry did not write.
func ForgedCommands(log string) []string {
	var forged []string
	for _, c := range RunnerCommands(log) {
		own := false
		for _, p := range OwnCommands {
			own = own || strings.HasPrefix(strings.TrimLeftFunc(c, DotNetWhiteSpace), p)
		}
		if !own {
			forged = append(forged, c)
		}
	}
	return forged
}

// Injected is what a name, an error message or an artifact's annotation
// can bring into GitHub's log: workflow commands at the start of a line,
// after a bare \r, after Unicode whitespace (which the runner trims) or
// runes ICU's collation ignores, and ##[ anywhere in one, ignorable runes
// inside it too.
const Injected = "x\n::error title=forged::boom\n   ::add-mask::gantry\n::stop-commands::silence\nok ##[error]forged ##[group]x" +
	"\rmissing\r::error title=Deploy approved::all good\r\n\u00a0\u2003::warning title=forged::nbsp\n\u200b::error::zwsp" +
	"\n\x1b::notice::esc\n\u2028::error::ls\nx #\u00ad#[set-output name=x;]v"
