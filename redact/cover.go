package redact

import (
	"math/rand/v2"
	"strings"
)

// chunkLen is the longest form the automaton holds: its states cost
// tens of bytes a byte. A longer one is found by its pieces of chunkLen
// bytes, the last ending where it ends, each looked up by a rolling hash:
// memory grows with the number of pieces, and every occurrence of the
// form is all its pieces. Of a part of a long value, as a cut leaves it,
// what is masked is every piece the part holds whole: at most chunkLen-1
// bytes of it at its cut end are not.
const chunkLen = 16

// masker finds, in one pass over a text whatever the number of values,
// every byte inside an occurrence of any form of any value, where they
// overlap too.
type masker struct {
	short *coverer
	// forms are the forms it finds, kept to make it again with more.
	forms []string
	// pieces of the long forms, by their hash; each piece once.
	pieces map[uint64][]string
	// base of the rolling hash, chosen at random so that a text cannot
	// be made to collide; pow is base^chunkLen.
	base, pow uint64
}

func newMasker(forms []string) *masker {
	m := &masker{forms: forms, pieces: map[uint64][]string{}, base: rand.Uint64() | 1}
	m.pow = 1
	for range chunkLen {
		m.pow *= m.base
	}
	var short []string
	seen := map[string]bool{}
	for _, f := range forms {
		if len(f) <= chunkLen {
			if !seen[f] {
				seen[f] = true
				short = append(short, f)
			}
			continue
		}
		for off := 0; ; off += chunkLen {
			if off+chunkLen > len(f) {
				off = len(f) - chunkLen
			}
			if p := f[off : off+chunkLen]; !seen[p] {
				seen[p] = true
				h := m.hash(p)
				m.pieces[h] = append(m.pieces[h], p)
			}
			if off+chunkLen == len(f) {
				break
			}
		}
	}
	m.short = newCoverer(short)
	return m
}

func (m *masker) hash(s string) uint64 {
	var h uint64
	for i := 0; i < len(s); i++ {
		h = h*m.base + uint64(s[i])
	}
	return h
}

// mask writes s with every byte inside an occurrence of a value as part
// of a mask, one "***" for each run of such bytes; s itself when it holds
// none.
func (m *masker) mask(s string) string {
	return maskCovered(s, m.cover(s, nil))
}

// maskCovered writes s with each run of bytes cover marks as one "***".
func maskCovered(s string, cover []int32) string {
	if cover == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	depth := int32(0)
	for i := 0; i < len(s); i++ {
		was := depth
		depth += cover[i]
		switch {
		case depth == 0:
			b.WriteByte(s[i])
		case was == 0:
			b.WriteString("***")
		}
	}
	return b.String()
}

// cover adds to cover (made when nil and s holds a value) the
// occurrences in s: cover[i] counts those that begin at byte i, less those
// that end there, so that a byte is inside one where the sum up to it is
// above zero. It stays nil when s holds none.
func (m *masker) cover(s string, cover []int32) []int32 {
	mark := func(from, to int) {
		if cover == nil {
			cover = make([]int32, len(s)+1)
		}
		cover[from]++
		cover[to]--
	}
	m.short.find(s, mark)
	if len(m.pieces) > 0 && len(s) >= chunkLen {
		h := m.hash(s[:chunkLen])
		for i := 0; ; i++ {
			for _, p := range m.pieces[h] {
				if s[i:i+chunkLen] == p {
					mark(i, i+chunkLen)
					break
				}
			}
			if i+chunkLen == len(s) {
				break
			}
			h = h*m.base + uint64(s[i+chunkLen]) - uint64(s[i])*m.pow
		}
	}
	return cover
}

// coverer finds every occurrence of a set of short values in a text,
// those that overlap too, in one pass over the text whatever the number of
// values (an Aho-Corasick automaton over the values' bytes).
type coverer struct {
	next map[uint64]int32 // state<<8 | byte: the state after reading byte
	root [256]int32       // the same from the first state, where a text mostly is
	fail []int32          // the state of the longest proper suffix that is a state
	// longest is the length of the longest value that ends the state's
	// text (0: none does).
	longest []int32
}

func newCoverer(values []string) *coverer {
	c := &coverer{next: map[uint64]int32{}, fail: []int32{0}, longest: []int32{0}}
	depth := []int32{0}
	in := []byte{0} // the byte that leads into each state
	var children [][]int32
	children = append(children, nil)
	for _, v := range values {
		s := int32(0)
		for i := 0; i < len(v); i++ {
			k := uint64(s)<<8 | uint64(v[i])
			n, ok := c.next[k]
			if !ok {
				n = int32(len(c.fail))
				c.next[k] = n
				c.fail = append(c.fail, 0)
				c.longest = append(c.longest, 0)
				depth = append(depth, depth[s]+1)
				in = append(in, v[i])
				children = append(children, nil)
				children[s] = append(children[s], n)
			}
			s = n
		}
		c.longest[s] = depth[s]
	}
	for _, n := range children[0] {
		c.root[in[n]] = n
	}
	// Breadth first: a state's failure is known before its children's.
	queue := append([]int32(nil), children[0]...)
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if c.longest[s] == 0 {
			c.longest[s] = c.longest[c.fail[s]]
		}
		for _, n := range children[s] {
			b := in[n]
			f := c.fail[s]
			for {
				if t, ok := c.next[uint64(f)<<8|uint64(b)]; ok && t != n {
					c.fail[n] = t
					break
				}
				if f == 0 {
					break
				}
				f = c.fail[f]
			}
			queue = append(queue, n)
		}
	}
	return c
}

// find calls mark with the bounds of the longest value that ends at each
// byte of s where one does: the shorter ones that end there lie inside it.
func (c *coverer) find(s string, mark func(from, to int)) {
	state := int32(0)
	for j := 0; j < len(s); j++ {
		for {
			if state == 0 {
				state = c.root[s[j]]
				break
			}
			if t, ok := c.next[uint64(state)<<8|uint64(s[j])]; ok {
				state = t
				break
			}
			state = c.fail[state]
		}
		if l := int(c.longest[state]); l > 0 {
			mark(j+1-l, j+1)
		}
	}
}
