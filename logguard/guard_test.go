package logguard

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gantry-dev/gantry/logguard/logguardtest"
)

// Every code point ICU 72 ignores in collation, the guard takes for one
// it may ignore; the Blocker is none of them, and no whitespace.
func TestGuardKnowsICUIgnorables(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join("testdata", "icu-ignorable.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		if strings.HasPrefix(s.Text(), "#") {
			continue
		}
		cp, err := strconv.ParseUint(s.Text(), 16, 32)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if r := rune(cp); !mayBeIgnorable(r) || logguardtest.Skeleton(string(r)) != "" {
			t.Errorf("U+%04X: ICU ignores it, the guard (%v) or the model (%q) does not", r, mayBeIgnorable(r), logguardtest.Skeleton(string(r)))
		}
	}
	if n < 900 {
		t.Fatalf("%d code points read", n)
	}
	b, _ := utf8.DecodeRuneInString(Blocker)
	if mayBeIgnorable(b) || isDotNetSpace(b) || logguardtest.Skeleton(Blocker) != Blocker || logguardtest.DotNetWhiteSpace(b) {
		t.Errorf("the Blocker may be skipped")
	}
}

// The guard's cases, one write each and byte by byte.
func TestGuardCases(t *testing.T) {
	t.Parallel()
	for _, in := range []string{logguardtest.Injected, "a\r::error::b", "\u00a0::warning::x", "\u3000\u205f::error::x", "\x85::error::x", "\u200b\u00a0::error::x",
		"\ufeff::error::x", "x\r\n::error::x", "##[set-output name=x;]v", "#\u200b#[error]x", "##\x1b[error]x", "{\"m\": \"##[set-output name=x;]v\"}"} {
		var whole, bytewise bytes.Buffer
		_, _ = New(&whole).Write([]byte(in))
		g := New(&bytewise)
		for i := range len(in) {
			_, _ = g.Write([]byte{in[i]})
		}
		for _, out := range []string{whole.String(), bytewise.String()} {
			if c := logguardtest.RunnerCommands(out); len(c) > 0 {
				t.Errorf("%q: the runner reads %q in %q", in, c, out)
			}
			if strings.ReplaceAll(out, Blocker, "") != in {
				t.Errorf("%q: written as %q, more than Blockers added", in, out)
			}
		}
	}
}
