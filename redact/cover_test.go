package redact

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// naiveMask marks every byte of every occurrence of every value, each
// found by strings.Index from every position.
func naiveMask(s string, values []string) string {
	masked := make([]bool, len(s))
	for _, v := range values {
		for i := 0; i+len(v) <= len(s); i++ {
			if s[i:i+len(v)] == v {
				for j := i; j < i+len(v); j++ {
					masked[j] = true
				}
			}
		}
	}
	var b strings.Builder
	for j := 0; j < len(s); j++ {
		if !masked[j] {
			b.WriteByte(s[j])
			continue
		}
		b.WriteString("***")
		for j+1 < len(s) && masked[j+1] {
			j++
		}
	}
	return b.String()
}

// The automaton masks what looking for every value at every position
// masks, on texts and values over a small alphabet, where values overlap,
// nest and repeat.
func TestCovererMasksEveryOccurrence(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc"[rng.IntN(3)]
		}
		return string(b)
	}
	for round := range 3000 {
		var values []string
		for range 1 + rng.IntN(6) {
			values = append(values, word(1+rng.IntN(6)))
		}
		s := word(rng.IntN(40))
		if got, want := newMasker(values).mask(s), naiveMask(s, values); got != want {
			t.Fatalf("round %d: values %q in %q: masked %q, want %q", round, values, s, got, want)
		}
	}
}

// A value longer than the automaton holds is found by its pieces: every
// byte of every occurrence of any value is masked, long values and short
// ones overlapping each other. (The pieces may also mask a piece of a
// long value written without the rest, which is a piece of a secret.)
func TestMaskerMasksEveryByteOfLongValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "ab"[rng.IntN(2)]
		}
		return string(b)
	}
	for round := range 300 {
		var values []string
		for range 1 + rng.IntN(4) {
			n := 4 + rng.IntN(8)
			if rng.IntN(2) == 0 {
				n = chunkLen + 1 + rng.IntN(3*chunkLen)
			}
			values = append(values, word(n))
		}
		// A text of values, their pieces and other bytes, end to end
		// and overlapping.
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			v := values[rng.IntN(len(values))]
			switch rng.IntN(3) {
			case 0:
				b.WriteString(v)
			case 1:
				b.WriteString(v[rng.IntN(len(v)):])
			default:
				b.WriteString(word(rng.IntN(20)))
			}
		}
		s := b.String()
		m := newMasker(values)
		cover := m.cover(s, nil)
		depth, masked := int32(0), make([]bool, len(s))
		for i := range s {
			if cover != nil {
				depth += cover[i]
			}
			masked[i] = depth > 0
		}
		for _, v := range values {
			for i := 0; i+len(v) <= len(s); i++ {
				if s[i:i+len(v)] != v {
					continue
				}
				for j := i; j < i+len(v); j++ {
					if !masked[j] {
						t.Fatalf("round %d: byte %d of %q at %d in %q is not masked", round, j-i, v, i, s)
					}
				}
			}
		}
		// Short values alone: exactly what looking for each masks.
		var short []string
		for _, v := range values {
			if len(v) <= chunkLen {
				short = append(short, v)
			}
		}
		if got, want := newMasker(short).mask(s), naiveMask(s, short); got != want {
			t.Fatalf("round %d: short values %q in %q: masked %q, want %q", round, short, s, got, want)
		}
	}
}
