package reporters

import "strings"

// coverer finds every occurrence of a set of values in a text, those that
// overlap too, in one pass over the text whatever the number of values
// (an Aho-Corasick automaton over the values' bytes).
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

// mask writes s with every byte inside an occurrence of a value as part
// of a mask, one "***" for each run of such bytes.
func (c *coverer) mask(s string) string {
	// start[j] is where the longest value ending at j begins; a byte is
	// masked when a value that ends at or after it begins at or before
	// it, found walking back from the end.
	start := make([]int32, len(s))
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
		start[j] = int32(j) + 1 - c.longest[state] // j+1 when none ends here
	}
	var b strings.Builder
	b.Grow(len(s))
	masked := make([]bool, len(s))
	from := int32(len(s)) // the leftmost start of a value covering the bytes after j
	for j := len(s) - 1; j >= 0; j-- {
		from = min(from, start[j])
		if from <= int32(j) {
			masked[j] = true
		} else {
			from = int32(len(s))
		}
	}
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
