// Package safefile is the one way gantry writes a file it was given the
// path of: reports, the .diff, the dotenv, step outputs and results. What
// a pull request brings sits in the workspace, links included, so every
// write goes through an os.Root opened at the workspace (or, for a path
// outside it, at the nearest folder that exists), which no link or ".."
// can leave, and refuses a path whose last element is a link or anything
// but a regular file: a committed `gantry.env` that links to ~/.bashrc, or
// a dangling `.gantry/report.diff` link, is never written through.
package safefile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// workspaces are the folders whose content a pull request may shape: the
// CI's workspace when the CI names one, else the working folder; each
// both as spelled and as it really is (links resolved), so that a path
// spelled either way is confined to it. The working folder is not one
// when the CI names its workspace: it may be a folder of it that the
// pull request made a link out of.
func workspaces() []string {
	var out []string
	for _, v := range []string{"GITHUB_WORKSPACE", "CI_PROJECT_DIR"} {
		if d := os.Getenv(v); d != "" && filepath.IsAbs(d) {
			out = append(out, filepath.Clean(d))
		}
	}
	if len(out) == 0 {
		if wd, err := os.Getwd(); err == nil {
			out = append(out, wd)
		}
	}
	for _, d := range out {
		if real, err := filepath.EvalSymlinks(d); err == nil && real != d {
			out = append(out, real)
		}
	}
	return out
}

// rootOf returns the folder a write of path is confined to, and path
// relative to it: the longest workspace that holds path, else the
// nearest ancestor of path that exists.
func rootOf(path string) (root, rel string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	for _, ws := range workspaces() {
		if r, err := filepath.Rel(ws, abs); err == nil && filepath.IsLocal(r) && len(ws) > len(root) {
			root, rel = ws, r
		}
	}
	if root != "" {
		return root, rel, nil
	}
	// The nearest folder that is one, not a link to one: os.Root checks
	// every link below it.
	dir := filepath.Dir(abs)
	for {
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
			r, err := filepath.Rel(dir, abs)
			return dir, r, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", fmt.Errorf("%s: no folder of it exists", path)
		}
		dir = parent
	}
}

// LinkError refuses to write through a link, or over what is not a
// regular file.
type LinkError struct {
	Path string
	What string
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("refusing to write %s: it is %s (committed so, perhaps); gantry writes only regular files, never through a link. Remove it, or give another path", e.Path, e.What)
}

// open confines path, creates its folders and checks its last element.
func open(path string) (r *os.Root, rel string, created []string, err error) {
	dir, rel, err := rootOf(path)
	if err != nil {
		return nil, "", nil, err
	}
	r, err = os.OpenRoot(dir)
	if err != nil {
		return nil, "", nil, err
	}
	// The folders that do not exist yet, outermost first, for their owner.
	for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
		if _, err := r.Lstat(d); err == nil {
			break
		}
		created = append([]string{d}, created...)
	}
	if d := filepath.Dir(rel); d != "." {
		if err := r.MkdirAll(d, 0o755); err != nil {
			r.Close()
			return nil, "", nil, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	switch fi, err := r.Lstat(rel); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		r.Close()
		return nil, "", nil, fmt.Errorf("writing %s: %w", path, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		r.Close()
		return nil, "", nil, &LinkError{Path: path, What: "a symbolic link"}
	case !fi.Mode().IsRegular():
		r.Close()
		return nil, "", nil, &LinkError{Path: path, What: "not a regular file (" + fi.Mode().Type().String() + ")"}
	}
	return r, rel, created, nil
}

// Write writes content to path as a new regular file, replacing one that
// is there: written beside it, then renamed over it, so that a reader
// never sees half of it and a link put there meanwhile is replaced, not
// followed. What it creates belongs to the owner of the folder it is
// created in (a container runs gantry as root in a workspace the
// runner's user owns, who must be able to remove it).
func Write(path string, content []byte) error {
	r, rel, created, err := open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+"."+strings.ToLower(rand.Text()[:8]))
	f, err := r.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, werr := f.Write(content)
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = r.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := r.Rename(tmp, rel); err != nil {
		_ = r.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	matchOwner(r, append(created, rel))
	return nil
}

// Append adds content to the end of path, creating it: for the files a
// CI runner gives to append to (GITHUB_OUTPUT). A file with other names
// (hard links) is refused, as a symbolic link is.
func Append(path string, content []byte) error {
	r, rel, created, err := open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if hardLinked(f) {
		// A file that has other names is written through all of them:
		// as a symbolic link would be, refused.
		f.Close()
		return &LinkError{Path: path, What: "a file with other names (a hard link)"}
	}
	_, werr := f.Write(content)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	matchOwner(r, append(created, rel))
	return nil
}

// GiveTree gives dir and everything under it to the owner of the folder
// dir is in, as Write does for one file: for what pull writes into a
// workspace.
func GiveTree(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	r, err := os.OpenRoot(filepath.Dir(abs))
	if err != nil {
		return err
	}
	defer r.Close()
	var paths []string
	base := filepath.Base(abs)
	err = fs.WalkDir(r.FS(), base, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, filepath.FromSlash(p))
		return nil
	})
	if err != nil {
		return err
	}
	matchOwner(r, paths)
	return nil
}
