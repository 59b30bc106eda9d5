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
	"strings"

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

// Remove deletes the temporary folder.
func (t *Tree) Remove() { _ = os.RemoveAll(t.Root) }

// Checkout writes the tree of revision (a branch, tag, commit or
// expression such as HEAD~1 or origin/main) of the repository holding path
// into a new temporary folder.
func Checkout(path, revision string) (*Tree, error) {
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
	t := &Tree{Root: tmp, Repository: root, Path: filepath.Join(tmp, rel)}
	if err := write(tree, tmp); err != nil {
		t.Remove()
		return nil, fmt.Errorf("base %q: %w", revision, err)
	}
	return t, nil
}

// write writes every file of tree below dir, links as links.
func write(tree *object.Tree, dir string) error {
	return tree.Files().ForEach(func(f *object.File) error {
		target := filepath.Join(dir, filepath.FromSlash(f.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			return fmt.Errorf("%s: a path outside the tree", f.Name)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		switch f.Mode {
		case filemode.Symlink:
			to, err := f.Contents()
			if err != nil {
				return err
			}
			return os.Symlink(to, target)
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
		out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, r)
		return errors.Join(err, out.Close())
	})
}
