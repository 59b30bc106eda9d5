package reporters

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
		if got, want := newCoverer(values).mask(s), naiveMask(s, values); got != want {
			t.Fatalf("round %d: values %q in %q: masked %q, want %q", round, values, s, got, want)
		}
	}
}
