// Package redact is the one door masking passes: a Redactor knows the
// secret values of a run and every form a sink writes them in (escaped
// in JSON or YAML, base64-encoded, on one line, as Markdown and HTML
// text), and masks them all in one pass. The console, the wait's
// messages and every reporter mask through it; the Markdown and HTML
// escaping sinks use lives here too, so that what the mask looks for and
// what the sinks write cannot drift apart.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gantry-dev/gantry/result"
)

// Redactor masks known secret values (tokens, passwords, secret
// substitution values) in everything a reporter writes. Secret data of
// objects never reaches reporters in the first place; this is the net under
// everything else.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string
	// forms holds every value and form masked, once each.
	forms map[string]bool
	// maskers find every form of every value, overlapping ones too:
	// the forms added since the last use (pending) get one of their own
	// on the next, and two of about one size are made one, so that each
	// form is taken into a masker a number of times that grows with the
	// logarithm of their number, however values are added.
	maskers []*masker
	pending []string
}

// New masks the given values; values shorter than 4 characters are
// ignored (masking "a" everywhere would destroy every report).
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add masks more values from now on, such as values a build decrypted,
// and returns the lines it did not mask before.
func (r *Redactor) Add(secrets ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.forms == nil {
		r.forms = map[string]bool{}
	}
	var added []string
	for _, v := range secrets {
		for _, line := range strings.Split(v, "\n") {
			if line = strings.TrimSpace(line); len(line) >= 4 && !r.forms[line] {
				r.forms[line] = true
				added = append(added, line)
				r.pending = append(r.pending, line)
			}
		}
	}
	// Each value as it can appear on the way out: escaped in JSON or a
	// YAML string, base64-encoded. They are masked, not told to the
	// platform (GitHub's ::add-mask:: takes the values themselves).
	for _, v := range secrets {
		for _, e := range encodings(v) {
			if len(e) >= 4 && !r.forms[e] {
				r.forms[e] = true
				r.pending = append(r.pending, e)
			}
		}
	}
	r.secrets = append(r.secrets, added...)
	return added
}

// encodings are the forms a secret value takes in what gantry writes:
// each line, and a value of several lines whole, as it is, on one line,
// and each of those escaped as JSON writes it (with and without HTML
// escaping), as a YAML single-quoted string writes it, and as Markdown
// and HTML text write it; the whole value (and each line) base64-encoded,
// standard and URL-safe, with and without padding, as a Secret's data or
// a kustomize replacement carries it.
func encodings(v string) []string {
	var out []string
	whole := []string{v, strings.TrimRight(v, "\n"), strings.TrimRight(v, "\n") + "\n"}
	var texts []string
	for _, line := range strings.Split(v, "\n") {
		if line = strings.TrimSpace(line); len(line) >= 4 {
			texts = append(texts, line)
		}
	}
	// A value of several lines also whole: a line of it too short to be
	// masked alone (masking "ab" everywhere would destroy every report)
	// is masked where the value is written whole.
	if t := strings.TrimSpace(v); strings.Contains(t, "\n") && len(t) >= 4 {
		texts = append(texts, t)
	}
	for _, t := range texts {
		whole = append(whole, t)
		// As a message from the cluster is shown, on one line: a tab,
		// a line break or a run of spaces inside the value made one
		// space. That form is escaped as the value itself is, where a
		// message goes.
		forms := []string{t}
		if one := result.OneLine(t); one != t {
			forms = append(forms, one)
		}
		for _, f := range forms {
			out = append(out, f)
			if j, err := json.Marshal(f); err == nil {
				out = append(out, string(j[1:len(j)-1]))
			}
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if enc.Encode(f) == nil {
				j := strings.TrimSpace(b.String())
				out = append(out, j[1:len(j)-1])
			}
			out = append(out, strings.ReplaceAll(f, "'", "''"))
			// As Markdown text writes it, at a line's start and after
			// other text, and as HTML text: the summary and the
			// comments are masked once rendered, when the value is
			// escaped.
			out = append(out, MarkdownText(f), strings.TrimPrefix(MarkdownText("a"+f), "a"), HTMLText(f))
		}
	}
	for _, w := range whole {
		if len(w) < 4 {
			continue
		}
		for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			out = append(out, e.EncodeToString([]byte(w)))
		}
	}
	return out
}

// Secrets returns the values masked, for platforms that mask on their own
// (GitHub's ::add-mask::).
func (r *Redactor) Secrets() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := slices.Clone(r.secrets)
	// Longest first, for the platforms that mask on their own.
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// String masks s: every byte inside an occurrence of any form of any
// value (overlapping ones too), one "***" for each run of them, in one
// pass over s whatever the number of values.
func (r *Redactor) String(s string) string {
	var cover []int32
	for _, m := range r.current() {
		cover = m.cover(s, cover)
	}
	if cover == nil {
		return s
	}
	return maskCovered(s, cover)
}

// current are the maskers of the values added so far, the pending forms
// taken in.
func (r *Redactor) current() []*masker {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	ms, pending := r.maskers, len(r.pending)
	r.mu.RUnlock()
	if pending == 0 {
		return ms
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) > 0 {
		ms := slices.Clone(r.maskers)
		next := r.pending
		r.pending = nil
		// The last masker is merged in while it is no more than twice
		// as large as what is added: the maskers' sizes halve at least
		// from one to the next.
		for len(ms) > 0 && len(ms[len(ms)-1].forms) <= 2*len(next) {
			next = append(slices.Clone(ms[len(ms)-1].forms), next...)
			ms = ms[:len(ms)-1]
		}
		r.maskers = append(ms, newMasker(next))
	}
	return r.maskers
}
