// Package gitsource writes the files of a configuration as they were at a
// git revision, read with go-git from the repository's own object store:
// no git binary is needed (gantry's image has none), and a shallow clone
// works as long as it holds the revision.
package gitsource

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Tree is a revision's files, written to a temporary folder.
type Tree struct {
	// Root is the folder that stands for the repository's root.
	Root string
	// Repository is the repository's root on disk.
	Repository string
	// Path is the folder that stands for the path given to Checkout.
	Path string
}

// Within returns the folder of the tree that stands for dir, a folder of
// the repository on disk; Root for a folder outside the repository.
func (t *Tree) Within(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return t.Root
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	rel, err := filepath.Rel(t.Repository, abs)
	if err != nil || !filepath.IsLocal(rel) {
		return t.Root
	}
	return filepath.Join(t.Root, rel)
}

// Limits bound what one revision's tree may write: a tree can name one
// blob any number of times, so a small push could otherwise fill the
// runner's disk. They are a build's own: a file a build could not read
// is not written either.
type Limits struct {
	// MaxFiles bounds the files written, MaxFileBytes one file,
	// MaxBytes all of them.
	MaxFiles               int
	MaxFileBytes, MaxBytes int64
}

// LimitError is a tree over one of the Limits.
type LimitError struct{ msg string }

func (e *LimitError) Error() string { return e.msg }

// Trees writes each revision of a repository once, however many units of
// a run ask for it, and removes them all at the end of the run.
type Trees struct {
	Limits Limits
	mu     sync.Mutex
	// written are the revisions written, by repository root and commit.
	written map[string]string
}

// Checkout is the tree of revision (a branch, tag, commit or expression
// such as HEAD~1 or origin/main) of the repository holding path, written
// into a temporary folder the first time it is asked for.
func (c *Trees) Checkout(path, revision string) (*Tree, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	repo, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, fmt.Errorf("%s is not in a git repository: %w", path, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, err
	}
	root := wt.Filesystem.Root()
	if resolved, err := filepath.EvalSymlinks(root); err == nil {
		root = resolved
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return nil, fmt.Errorf("%s is outside the repository at %s", path, root)
	}
	hash, err := repo.ResolveRevision(plumbing.Revision(revision))
	if err != nil {
		return nil, fmt.Errorf("base %q: %w (a shallow clone needs the base fetched too, such as with fetch-depth: 0)", revision, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := root + "@" + hash.String()
	if tmp, ok := c.written[key]; ok {
		return &Tree{Root: tmp, Repository: root, Path: filepath.Join(tmp, rel)}, nil
	}
	commit, err := repo.CommitObject(*hash)
	if err != nil {
		return nil, fmt.Errorf("base %q: %w", revision, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("base %q: %w", revision, err)
	}
	tmp, err := os.MkdirTemp("", "gantry-base-")
	if err != nil {
		return nil, err
	}
	if err := write(tree, tmp, c.Limits); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("base %q: %w", revision, err)
	}
	if c.written == nil {
		c.written = map[string]string{}
	}
	c.written[key] = tmp
	return &Tree{Root: tmp, Repository: root, Path: filepath.Join(tmp, rel)}, nil
}

// Remove deletes every tree written.
func (c *Trees) Remove() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, dir := range c.written {
		_ = os.RemoveAll(dir)
		delete(c.written, key)
	}
}

// write writes every file of tree below dir, links as links, within lim:
// the sizes are the blobs' own, known before anything is read. Every
// write goes through an os.Root at dir: a tree (which git history from a
// pull request shapes) that holds a link and a file below it, or a name
// that climbs, cannot make a write land outside dir.
func write(tree *object.Tree, dir string, lim Limits) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	files, total := 0, int64(0)
	return tree.Files().ForEach(func(f *object.File) error {
		files++
		total += f.Size
		switch {
		case lim.MaxFiles > 0 && files > lim.MaxFiles:
			return &LimitError{fmt.Sprintf("more than %d files: over the limit of a build (max-objects); refused", lim.MaxFiles)}
		case lim.MaxFileBytes > 0 && f.Size > lim.MaxFileBytes:
			return &LimitError{fmt.Sprintf("%s is %d bytes, over the limit of %d bytes for one file (max-file-bytes); refused", f.Name, f.Size, lim.MaxFileBytes)}
		case lim.MaxBytes > 0 && total > lim.MaxBytes:
			return &LimitError{fmt.Sprintf("more than %d bytes in all (8 times max-file-bytes); refused", lim.MaxBytes)}
		}
		target := filepath.FromSlash(f.Name)
		if !filepath.IsLocal(target) {
			return fmt.Errorf("%s: a path outside the tree", f.Name)
		}
		if d := filepath.Dir(target); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("%s: %w", f.Name, err)
			}
		}
		switch f.Mode {
		case filemode.Symlink:
			to, err := f.Contents()
			if err != nil {
				return err
			}
			return root.Symlink(to, target)
		case filemode.Submodule:
			return nil // not in this repository's objects
		}
		r, err := f.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		perm := os.FileMode(0o644)
		if f.Mode == filemode.Executable {
			perm = 0o755
		}
		out, err := root.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, r)
		return errors.Join(err, out.Close())
	})
}
