// Package suggest finds what a misspelt name most likely meant: a flag,
// a run file's input, a kind.
package suggest

import "strings"

// Closest is the candidate nearest to name within two edits (case
// ignored), "" when none is. Ties go to the first candidate.
func Closest(name string, candidates []string) string {
	best, bestDistance := "", 3
	for _, c := range candidates {
		if d := distance(strings.ToLower(name), strings.ToLower(c)); d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Nearest is the candidate nearest to name however far (case ignored),
// for when every candidate is known to be right in another way (each
// serves the kind a misspelt apiVersion names). Ties go to the smallest.
func Nearest(name string, candidates []string) string {
	best, bestDistance := "", -1
	for _, c := range candidates {
		d := distance(strings.ToLower(name), strings.ToLower(c))
		if bestDistance < 0 || d < bestDistance || (d == bestDistance && c < best) {
			best, bestDistance = c, d
		}
	}
	return best
}
