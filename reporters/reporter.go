// Package reporters publishes the result of a run where people look: the
// JSON report and diff file everywhere; on GitHub the job summary, one
// sticky pull-request comment, step outputs and annotations; on GitLab one
// sticky merge-request note and a dotenv report; on Tekton the step results.
// Reporters see only the typed result.Result. A reporter that fails warns;
// it never turns a good deploy red.
package reporters

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gantry-dev/gantry/result"
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
			}
		}
	}
	r.secrets = append(r.secrets, added...)
	// Longest first, so a secret containing another is masked whole.
	sort.SliceStable(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return added
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

// String masks s.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, v := range r.secrets {
		s = strings.ReplaceAll(s, v, "***")
	}
	return s
}

// writeFile writes content to path, creating its directory. What it
// creates belongs to the owner of the folder it is created in (see
// matchOwner), so that a runner can remove a workspace that gantry, run
// as root in a container, wrote into.
func writeFile(path string, content []byte) error {
	var created []string
	existing := filepath.Dir(path)
	for {
		if _, err := os.Stat(existing); err == nil {
			break
		}
		created = append(created, existing)
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		existing = parent
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return err
	}
	matchOwner(existing, append(created, path))
	return nil
}

// GiveTree gives dir and everything under it to the owner of the folder
// dir is in, as writeFile does for one file: for what pull writes into a
// workspace.
func GiveTree(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var paths []string
	err = filepath.WalkDir(abs, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	matchOwner(filepath.Dir(abs), paths)
	return nil
}
