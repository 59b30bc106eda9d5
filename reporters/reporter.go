// Package reporters publishes the result of a run where people look: the
// JSON report and diff file everywhere; on GitHub the job summary, one
// sticky pull-request comment, step outputs and annotations; on GitLab one
// sticky merge-request note and a dotenv report; on Tekton the step results.
// Reporters see only the typed result.Result. A reporter that fails warns;
// it never turns a good deploy red.
package reporters

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/safefile"
)

// Reporter publishes one run's result in one place.
type Reporter interface {
	Name() string
	Report(ctx context.Context, res *result.Result) error
}

// Multi fans a result out to several reporters.
type Multi []Reporter

// Report runs every reporter, in order, and returns their failures as
// warnings, each naming its reporter.
func (m Multi) Report(ctx context.Context, res *result.Result) []error {
	var warnings []error
	for _, r := range m {
		if err := r.Report(ctx, res); err != nil {
			warnings = append(warnings, fmt.Errorf("%s: %w", r.Name(), err))
		}
	}
	return warnings
}

// Redactor masks known secret values (tokens, passwords, secret
// substitution values) in everything a reporter writes. Secret data of
// objects never reaches reporters in the first place; this is the net under
// everything else.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string
	// encoded are the secrets' other forms (encodings); replacer masks
	// both.
	encoded []string
	// forms holds every value and form masked, once each.
	forms map[string]bool
	// masker finds every form of every value, overlapping ones too;
	// made again, on the next use, once dirty (a value was added).
	masker *masker
	dirty  bool
}

// NewRedactor masks the given values; values shorter than 4 characters are
// ignored (masking "a" everywhere would destroy every report).
func NewRedactor(secrets ...string) *Redactor {
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
	known := make(map[string]bool, len(r.secrets))
	for _, s := range r.secrets {
		known[s] = true
	}
	var added []string
	for _, v := range secrets {
		for _, line := range strings.Split(v, "\n") {
			if line = strings.TrimSpace(line); len(line) >= 4 && !known[line] {
				known[line] = true
				added = append(added, line)
				r.forms[line] = true
				r.dirty = true
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
				r.encoded = append(r.encoded, e)
				r.dirty = true
			}
		}
	}
	r.secrets = append(r.secrets, added...)
	// Longest first, for the platforms that mask on their own.
	sort.SliceStable(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return added
}

// encodings are the forms a secret value takes in what gantry writes:
// each line escaped as JSON writes it (with and without HTML escaping),
// as a YAML single- or double-quoted string writes it, and as Markdown
// and HTML text write it; the whole value
// (and each line) base64-encoded, standard and URL-safe, with and without
// padding, as a Secret's data or a kustomize replacement carries it.
func encodings(v string) []string {
	var out []string
	whole := []string{v, strings.TrimRight(v, "\n"), strings.TrimRight(v, "\n") + "\n"}
	for _, line := range strings.Split(v, "\n") {
		line = strings.TrimSpace(line)
		if len(line) < 4 {
			continue
		}
		whole = append(whole, line)
		// As a message from the cluster is shown, on one line: a tab
		// or a run of spaces inside the value made one space. That form
		// is escaped as the value itself is, where a message goes.
		forms := []string{line}
		if one := result.OneLine(line); one != line {
			forms = append(forms, one)
			out = append(out, one)
		}
		for _, f := range forms {
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
			out = append(out, text(f), strings.TrimPrefix(text("a"+f), "a"), htmlEscape(f))
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
	return slices.Clone(r.secrets)
}

// String masks s: every byte inside an occurrence of any form of any
// value (overlapping ones too), one "***" for each run of them, in one
// pass over s whatever the number of values.
func (r *Redactor) String(s string) string {
	if m := r.current(); m != nil {
		return m.mask(s)
	}
	return s
}

// current is the masker of the values added so far: made again after an
// Add, once, on its first use.
func (r *Redactor) current() *masker {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	m, dirty := r.masker, r.dirty
	r.mu.RUnlock()
	if !dirty {
		return m
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dirty {
		r.masker = newMasker(append(slices.Clone(r.secrets), r.encoded...))
		r.dirty = false
	}
	return r.masker
}

// writeFile writes content to path through safefile: confined to the
// workspace, never through a link, owned as the folder it is in.
func writeFile(path string, content []byte) error { return safefile.Write(path, content) }

// GiveTree gives dir and everything under it to the owner of the folder
// dir is in, as writeFile does for one file: for what pull writes into a
// workspace.
func GiveTree(dir string) error { return safefile.GiveTree(dir) }
