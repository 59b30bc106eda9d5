// Package reader is the one door through which a build reads the files of
// a workspace (a checkout of a pull request: untrusted), whatever reads
// them: kustomize, a plain folder's walk, a chart's loader, a values file.
//
// A path is judged by where it resolves, links resolved, never by its
// name: it is refused when it resolves outside the allowed roots, into a
// .git folder of the workspace (where a checkout keeps its token), or to
// one of the run's credential files (by identity, so that a hard link to
// one is refused too), or when it is no regular file; a file is bounded in
// size, a walk in count and total size. The bytes are then read through an
// os.Root of the root the file lies in.
//
// The package depends on nothing but the standard library, so that its
// fuzzer builds in seconds.
package reader

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultMaxFileBytes bounds one file when Options give no bound.
const DefaultMaxFileBytes = 32 << 20

// Options say what a Reader may read.
type Options struct {
	// Root is the workspace: the first folder reads may resolve into,
	// and the repository whose .git folder is refused.
	Root string
	// Deny are the files and folders the run holds credentials in: never
	// read, whatever path or link names them.
	Deny []string
	// MaxFileBytes bounds one file; zero is DefaultMaxFileBytes.
	MaxFileBytes int64
}

// Reader reads files of a workspace, refusing what a build may not read.
// Its methods may be called from several goroutines once it is set up
// (Allow and AllowFile are for setting up).
type Reader struct {
	// roots are the folders (or, allowed alone, files) reads may resolve
	// into, links resolved; roots[0] is the workspace.
	roots    []string
	maxBytes int64
	// credentials are the run's credential files, and credentialDirs
	// its credential folders (links resolved).
	credentials    []os.FileInfo
	credentialDirs []string
	// gitFiles are the files directly inside the workspace repository's
	// git folder (.git/config, which holds a checkout's token): refused
	// by identity, so that a hard link to one is refused too.
	gitFiles []os.FileInfo
	// gitDirs are the git folders of the workspace found outside it (a
	// worktree's or a submodule's .git file names one): refused.
	gitDirs []string
}

// New is a reader of the workspace opts.Root.
func New(opts Options) *Reader {
	r := &Reader{maxBytes: opts.MaxFileBytes}
	if r.maxBytes <= 0 {
		r.maxBytes = DefaultMaxFileBytes
	}
	root := realPath(opts.Root)
	r.roots = []string{root}
	r.deny(opts.Deny)
	r.denyGit(root)
	return r
}

// Root is the workspace, links resolved.
func (r *Reader) Root() string { return r.roots[0] }

// MaxFileBytes is the bound on one file.
func (r *Reader) MaxFileBytes() int64 { return r.maxBytes }

// Allow adds a folder reads may resolve into (a build's own temporary
// folder), by its real path.
func (r *Reader) Allow(dir string) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		if abs, err := filepath.Abs(real); err == nil {
			r.roots = append(r.roots, abs)
		}
	}
}

// AllowFile adds one file reads may resolve to, by its real path (a
// values file the workflow names outside the workspace).
func (r *Reader) AllowFile(real string) { r.roots = append(r.roots, real) }

// Inside says whether real (a path, links resolved) lies in one of the
// roots.
func (r *Reader) Inside(real string) bool {
	for _, root := range r.roots {
		if within(real, root) {
			return true
		}
	}
	return false
}

// Kind is why a read was refused.
type Kind int

// The kinds of refusal.
const (
	// Unresolved: the path is there, yet does not resolve (a loop, a
	// link into /proc to a deleted file).
	Unresolved Kind = iota + 1
	// Outside: it resolves outside the roots.
	Outside
	// Git: it resolves into a .git folder of the workspace, or to a
	// file of it.
	Git
	// Credential: it is one of the run's credential files, or lies in
	// one of its credential folders.
	Credential
	// NotRegular: a device, a FIFO, a socket (a folder, in a walk's
	// file list).
	NotRegular
	// TooLarge: a file over MaxFileBytes.
	TooLarge
	// TooMany: a walk over its count or total size.
	TooMany
)

// Error is a read refused: the file, as it was named, and why. Its
// message names the file and never holds any of its content.
type Error struct {
	// Path is the file as named (relative to a walk's folder in a walk).
	Path string
	Kind Kind
	// Reason says why, without the file's name.
	Reason string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// ReadFile reads the file at name, or refuses it with an *Error; a file
// that is not there, or a folder, fails as os.ReadFile fails.
func (r *Reader) ReadFile(name string) ([]byte, error) {
	real, info, err := r.check(name)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	return r.read(name, real, info)
}

// Check is what ReadFile decides about name, without reading it: its real
// path and what it is, or the refusal. A folder is not refused.
func (r *Reader) Check(name string) (real string, info fs.FileInfo, err error) {
	return r.check(name)
}

func (r *Reader) check(name string) (string, fs.FileInfo, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return "", nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if _, lerr := os.Lstat(abs); lerr == nil {
			return "", nil, &Error{Path: name, Kind: Unresolved, Reason: "its path cannot be resolved (" + err.Error() + "): refused"}
		}
		return "", nil, err
	}
	if !r.Inside(real) {
		what := "is outside"
		if real != abs {
			what = "resolves to " + real + ", outside"
		}
		return "", nil, &Error{Path: name, Kind: Outside, Reason: fmt.Sprintf("%s the workspace (%s): refused", what, r.roots[0])}
	}
	if r.inGit(real) {
		// A checkout keeps its credentials there (actions/checkout's
		// extraheader): nothing a build reads is in it.
		return "", nil, &Error{Path: name, Kind: Git, Reason: "is inside a .git folder, where a checkout keeps its credentials: refused"}
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", nil, err
	}
	if r.credential(real, info) {
		return "", nil, &Error{Path: name, Kind: Credential, Reason: "holds credentials this run uses (a kubeconfig, a key file, registry or cloud credentials): refused"}
	}
	if r.gitFile(info) {
		return "", nil, &Error{Path: name, Kind: Git, Reason: "is a file of the repository's .git folder, where a checkout keeps its credentials: refused"}
	}
	if !info.Mode().IsRegular() && !info.IsDir() {
		// A device or a FIFO would be read without end, or block.
		return "", nil, &Error{Path: name, Kind: NotRegular, Reason: "not a regular file: refused"}
	}
	if info.Mode().IsRegular() && info.Size() > r.maxBytes {
		return "", nil, r.tooLarge(name, info.Size())
	}
	return real, info, nil
}

func (r *Reader) tooLarge(name string, size int64) error {
	return &Error{Path: name, Kind: TooLarge, Reason: fmt.Sprintf("%d bytes, over the limit of %d bytes for one file (max-file-bytes)", size, r.maxBytes)}
}

// read reads the file checked at real through an os.Root of the root it
// lies in: the file opened must be the one checked.
func (r *Reader) read(name, real string, info fs.FileInfo) ([]byte, error) {
	dir, rel := r.rootOf(real)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !os.SameFile(opened, info) {
		return nil, &Error{Path: name, Kind: Unresolved, Reason: "changed while it was read: refused"}
	}
	data, err := io.ReadAll(io.LimitReader(f, r.maxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > r.maxBytes {
		return nil, r.tooLarge(name, int64(len(data)))
	}
	return data, nil
}

// rootOf is the folder to open real's root at and real's path in it.
func (r *Reader) rootOf(real string) (dir, rel string) {
	for _, root := range r.roots {
		if within(real, root) && real != root {
			rel, err := filepath.Rel(root, real)
			if err == nil && filepath.IsLocal(rel) {
				return root, rel
			}
		}
	}
	// A file allowed alone is its own root.
	return filepath.Dir(real), filepath.Base(real)
}

// inGit says real lies in a .git folder (or is a .git file) below one of
// the roots that hold it, or below the workspace, or in a git folder of
// the workspace found elsewhere.
func (r *Reader) inGit(real string) bool {
	for _, root := range r.roots {
		if !within(real, root) {
			continue
		}
		rel, err := filepath.Rel(root, real)
		if err != nil {
			return true
		}
		for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
			if part == ".git" {
				return true
			}
		}
	}
	for _, d := range r.gitDirs {
		if within(real, d) {
			return true
		}
	}
	return false
}

// deny refuses the given files to every read, by identity (device and
// inode); a folder given refuses every file in it, by its real path.
func (r *Reader) deny(files []string) {
	for _, p := range files {
		info, err := os.Stat(p)
		switch {
		case err != nil:
		case info.Mode().IsRegular():
			r.credentials = append(r.credentials, info)
		case info.IsDir():
			if real, err := filepath.EvalSymlinks(p); err == nil {
				if abs, err := filepath.Abs(real); err == nil {
					r.credentialDirs = append(r.credentialDirs, abs)
					r.denyFilesIn(abs)
				}
			}
		}
	}
}

// maxDeniedInFolder bounds the files of a credential folder refused by
// identity (a folder of credentials holds a few).
const maxDeniedInFolder = 10000

// denyFilesIn refuses by identity the files below a credential folder,
// so that a hard link to one, elsewhere, is refused too.
func (r *Reader) denyFilesIn(dir string) {
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if n++; n > maxDeniedInFolder {
			return filepath.SkipAll
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				r.credentials = append(r.credentials, info)
			}
		}
		return nil
	})
}

// denyGit refuses by identity the files directly inside the git folder
// of the repository at root: .git, or, where .git is a file (a worktree,
// a submodule), the folder it names and that folder's common one.
func (r *Reader) denyGit(root string) {
	dir := filepath.Join(root, ".git")
	info, err := os.Lstat(dir)
	if err != nil {
		return
	}
	if info.Mode().IsRegular() {
		named := gitdirOf(dir)
		if named == "" {
			return
		}
		if !filepath.IsAbs(named) {
			named = filepath.Join(root, named)
		}
		r.denyGitDir(named)
		if common := readLine(filepath.Join(named, "commondir")); common != "" {
			if !filepath.IsAbs(common) {
				common = filepath.Join(named, common)
			}
			r.denyGitDir(common)
		}
		return
	}
	r.denyGitDir(dir)
}

func (r *Reader) denyGitDir(dir string) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return
	}
	r.gitDirs = append(r.gitDirs, real)
	entries, err := os.ReadDir(real)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if info, err := os.Stat(filepath.Join(real, e.Name())); err == nil {
			r.gitFiles = append(r.gitFiles, info)
		}
	}
}

// gitdirOf is the folder a .git file names (gitdir: path).
func gitdirOf(file string) string {
	line := readLine(file)
	if rest, ok := strings.CutPrefix(line, "gitdir:"); ok {
		return strings.TrimSpace(rest)
	}
	return ""
}

// readLine is the first line of a small file git wrote, "" if none.
func readLine(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(io.LimitReader(f, 4096))
	if s.Scan() {
		return strings.TrimSpace(s.Text())
	}
	return ""
}

// credential says whether the file at real (links resolved) is one the
// run holds credentials in, or lies in such a folder.
func (r *Reader) credential(real string, info fs.FileInfo) bool {
	for _, c := range r.credentials {
		if os.SameFile(info, c) {
			return true
		}
	}
	for _, d := range r.credentialDirs {
		if within(real, d) {
			return true
		}
	}
	return false
}

func (r *Reader) gitFile(info fs.FileInfo) bool {
	for _, g := range r.gitFiles {
		if os.SameFile(info, g) {
			return true
		}
	}
	return false
}

// IsCredential says whether the file at path, links resolved, is one of
// deny's files or lies in one of its folders: the rule a Reader reads by,
// for what is read beside it.
func IsCredential(path string, deny []string) bool {
	var r Reader
	r.deny(deny)
	return r.isCredential(path)
}

func (r *Reader) isCredential(path string) bool {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	if abs, err := filepath.Abs(real); err == nil {
		real = abs
	}
	info, err := os.Stat(real)
	if err != nil {
		return false
	}
	return r.credential(real, info)
}

// realPath is p absolute, links resolved where they resolve.
func realPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return p
}

func within(p, dir string) bool {
	return p == dir || dir == string(filepath.Separator) || strings.HasPrefix(p, dir+string(filepath.Separator))
}
