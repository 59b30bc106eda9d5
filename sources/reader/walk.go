package reader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// Within is a reader of dir alone (links resolved), with r's refusals
// (the run's credentials, the workspace's .git): what a walk of dir, or a
// chart whose folder dir is, may read.
func (r *Reader) Within(dir string) *Reader {
	in := *r
	// The workspace's git folder stays refused (gitDirs), wherever dir
	// lies.
	in.roots = []string{realPath(dir)}
	return &in
}

// WalkOptions bound a walk and say what it leaves out.
type WalkOptions struct {
	// MaxFiles bounds the files read, MaxTotalBytes all their bytes;
	// zero is no bound.
	MaxFiles      int
	MaxTotalBytes int64
	// Skip, when set, leaves out a file or a folder (and all it holds),
	// named by its slash-separated path in the walk's folder, with what
	// it is as listed (a link as a link): a chart's .helmignore.
	Skip func(name string, info fs.FileInfo) bool
}

// Walk reads every file below dir, in lexical order, and gives each to fn
// by its slash-separated path in dir. dir is the walk's root: a link is
// followed only where it resolves inside dir (a link to a folder is not
// walked), and every file is judged as ReadFile judges it (.git, the
// run's credentials, a regular file, its size), so that a file that
// cannot be read fails the walk, named, rather than being left out. A
// folder of git's own (.git, below dir) is not walked: nothing in it is a
// file of the folder.
func (r *Reader) Walk(dir string, opts WalkOptions, fn func(name string, data []byte) error) error {
	in := r.Within(dir)
	realDir := in.roots[0]
	root, err := os.OpenRoot(realDir)
	if err != nil {
		return err
	}
	defer root.Close()
	files, total := 0, int64(0)
	return fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if d.Name() == ".git" && (d.IsDir() || d.Type().IsRegular()) {
			// git's own folder, or the file that names it (a worktree,
			// a submodule): not the folder's files.
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if opts.Skip != nil {
			info, err := d.Info()
			if err != nil {
				return err
			}
			if opts.Skip(name, info) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return &Error{Path: name, Kind: NotRegular, Reason: "not a regular file: refused"}
		}
		full := filepath.Join(realDir, filepath.FromSlash(name))
		real, info, err := in.check(full)
		var refused *Error
		if errors.As(err, &refused) {
			refused.Path = name
			switch refused.Kind {
			case Outside:
				refused.Reason = "a link that leads out of the folder (" + filepath.Base(realDir) + "): refused"
			case Unresolved:
				refused.Reason = "a link that leads nowhere, or in a loop: refused"
			}
			return refused
		}
		if err != nil {
			if d.Type()&fs.ModeSymlink != 0 {
				return &Error{Path: name, Kind: Unresolved, Reason: "a link that leads nowhere: refused"}
			}
			return err
		}
		if info.IsDir() {
			return nil // a link to a folder of dir: not walked
		}
		if files++; opts.MaxFiles > 0 && files > opts.MaxFiles {
			return &Error{Kind: TooMany, Reason: fmt.Sprintf("more than %d files", opts.MaxFiles)}
		}
		if total += info.Size(); opts.MaxTotalBytes > 0 && total > opts.MaxTotalBytes {
			return &Error{Kind: TooMany, Reason: fmt.Sprintf("over %d bytes in all", opts.MaxTotalBytes)}
		}
		b, err := in.read(name, real, info)
		if err != nil {
			return err
		}
		return fn(path.Clean(name), b)
	})
}
