package gitsource

import (
	"path/filepath"

	"github.com/go-git/go-git/v5"
)

// Head is the commit checked out in the repository holding path, in
// Flux's revision form (main@sha1:<commit>) when a branch is checked out,
// the bare commit when HEAD is detached; "" when path is in no repository
// or the repository has no commit yet. It is the revision a run records
// when the CI names none.
func Head(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	repo, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return ""
	}
	ref, err := repo.Head()
	if err != nil {
		return ""
	}
	if ref.Name().IsBranch() {
		return ref.Name().Short() + "@sha1:" + ref.Hash().String()
	}
	return ref.Hash().String()
}
