package sources

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// What one build may read: limits that real configuration never reaches,
// so that a file in a pull request cannot exhaust the runner's memory.
const (
	// DefaultMaxFileBytes bounds one file the build reads (the largest
	// CRDs people ship are a few MB).
	DefaultMaxFileBytes = 32 << 20
	// DefaultMaxObjects bounds the objects of one set.
	DefaultMaxObjects = 100_000
)

// LimitError is input over one of the build's limits.
type LimitError struct{ msg string }

func (e *LimitError) Error() string { return e.msg }

// boundedFS refuses files over the size limit and YAML whose aliases
// expand out of proportion (a "billion laughs" bomb: a few lines that
// kustomize would expand into gigabytes), with the rule of the YAML
// library kubectl and kustomize use, before kustomize parses them.
type boundedFS struct {
	filesys.FileSystem
	maxBytes int64
	// roots are the folders files may be read from, symbolic links
	// resolved: the workspace, and the build's own temporary folders.
	roots []string
	// credentials are the files the run holds credentials in, and
	// credentialDirs the folders: never read, whatever path or link
	// names them.
	credentials    []os.FileInfo
	credentialDirs []string
}

// deny refuses the given files to every read, by identity (device and
// inode), so that no path or link reaches them; a folder given refuses
// every file in it, by its real path.
func (f *boundedFS) deny(files []string) {
	for _, p := range files {
		info, err := os.Stat(p)
		switch {
		case err != nil:
		case info.Mode().IsRegular():
			f.credentials = append(f.credentials, info)
		case info.IsDir():
			if real, err := filepath.EvalSymlinks(p); err == nil {
				f.credentialDirs = append(f.credentialDirs, real)
			}
		}
	}
}

// credential says whether the file at real (its path, links resolved)
// is one the run holds credentials in, or lies in such a folder.
func (f *boundedFS) credential(real string, info os.FileInfo) bool {
	for _, c := range f.credentials {
		if os.SameFile(info, c) {
			return true
		}
	}
	for _, d := range f.credentialDirs {
		if within(real, d) {
			return true
		}
	}
	return false
}

func (f *boundedFS) ReadFile(name string) ([]byte, error) {
	// kustomize builds as Flux does, with no load restrictions: a
	// kustomization may name files anywhere, and this is the bound, the
	// workspace (the repository), links resolved.
	real, err := filepath.EvalSymlinks(name)
	if err == nil && !filepath.IsAbs(real) {
		// A path named relative to the working directory (an extra
		// patch): the roots are absolute.
		real, err = filepath.Abs(real)
	}
	if err != nil {
		if _, lerr := os.Lstat(name); lerr == nil {
			// It is there, yet its path does not resolve: a link into
			// /proc to a deleted file still open, a loop. Not read.
			return nil, &LimitError{"its path cannot be resolved (" + err.Error() + "): refused"}
		}
	}
	if err == nil && !f.inside(real) {
		what := "is outside"
		if real != filepath.Clean(name) {
			what = "resolves to " + real + ", outside"
		}
		return nil, &LimitError{fmt.Sprintf("%s the workspace (%s): refused", what, f.roots[0])}
	} else if err == nil && inGitFolder(real) {
		// A checkout keeps its credentials there (actions/checkout's
		// extraheader): no generator or resource reads them.
		return nil, &LimitError{"is inside a .git folder, where a checkout keeps its credentials: refused"}
	}
	resolved := err == nil
	info, err := os.Stat(name)
	if resolved && err == nil && f.credential(real, info) {
		// The workflow's kubeconfig written into the checkout, a key
		// file a link points to: a generator would print it in a diff.
		return nil, &LimitError{"holds credentials this run uses (a kubeconfig, a key file, registry or cloud credentials): refused"}
	}
	if err == nil && !info.Mode().IsRegular() && !info.IsDir() {
		// A device or a FIFO would be read without end, or block; a
		// folder is kustomize's to try as a kustomization.
		return nil, &LimitError{"not a regular file: refused"}
	}
	if err == nil && info.Mode().IsRegular() && info.Size() > f.maxBytes {
		return nil, &LimitError{fmt.Sprintf("%d bytes, over the limit of %d bytes for one file (max-file-bytes)", info.Size(), f.maxBytes)}
	}
	data, err := f.FileSystem.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > f.maxBytes {
		return nil, &LimitError{fmt.Sprintf("%d bytes, over the limit of %d bytes for one file (max-file-bytes)", len(data), f.maxBytes)}
	}
	if err := checkAliases(data); err != nil {
		return nil, err
	}
	return data, nil
}

func (f *boundedFS) inside(real string) bool {
	for _, r := range f.roots {
		if within(real, r) {
			return true
		}
	}
	return false
}

// allowNamed lets the file at path, named by the run's inputs, be read
// where it really is: outside the workspace, where the workflow named it;
// inside (named as a path in workdir, as given or with its links
// resolved), only where its links lead inside too, since what lies in the
// workspace, links included, is the pull request's. A folder is never
// allowed whole: a file's folder may be a link a pull request made.
func (f *boundedFS) allowNamed(path, workdir, realWorkdir string) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return
	}
	inWorkspace := within(abs, workdir) || within(abs, realWorkdir) || f.inside(abs)
	if inWorkspace && !within(real, realWorkdir) && !f.inside(real) {
		return // read as any file of the workspace: refused, named
	}
	f.roots = append(f.roots, real)
}

// allow adds a folder files may be read from.
func (f *boundedFS) allow(dir string) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		f.roots = append(f.roots, real)
	}
}

// workspaceRoot is the folder a build may read from: the outermost of the
// git repository that holds the path (overlays read their bases from
// sibling folders) and the working directory when the path lies below it
// (a CI workspace with several checkouts side by side), else the path.
func workspaceRoot(path, workDir string) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return path
	}
	root := real
	for d := real; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			root = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if wd, err := filepath.EvalSymlinks(workDir); err == nil && within(real, wd) && within(root, wd) {
		root = wd
	}
	return root
}

// inGitFolder says a path lies in a .git folder.
func inGitFolder(p string) bool {
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".git" {
			return true
		}
	}
	return false
}

func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// checkAliases reads every YAML document of data that could hold aliases
// as a node tree, without expanding anything, and refuses a document
// whose aliases would expand out of proportion (a "billion laughs" bomb)
// or whose anchor contains an alias of itself (kustomize would expand it
// without end). Only that is judged here: other YAML errors are
// kustomize's to report, in its words.
func checkAliases(data []byte) (err error) {
	if !bytes.Contains(data, []byte("&")) || !bytes.Contains(data, []byte("*")) {
		return nil // no anchor and alias, nothing to expand
	}
	defer func() {
		if r := recover(); r != nil {
			err = nil // a parser panic is a malformed file, for kustomize to report
		}
	}()
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml3.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil //nolint:nilerr // malformed: kustomize reports it
		}
		if err := (&aliasCheck{size: map[*yaml3.Node]int{}, open: map[*yaml3.Node]bool{}}).document(&doc); err != nil {
			return err
		}
	}
}

// maxExpansion bounds how many nodes one document may expand to through
// its aliases, beyond what it holds itself: far more than any real set
// uses, far less than a bomb needs.
const maxExpansion = 1 << 20

type aliasCheck struct {
	size  map[*yaml3.Node]int  // expanded size of each node seen
	open  map[*yaml3.Node]bool // the nodes being sized: an alias of one is a cycle
	nodes int                  // nodes the document holds
}

func (c *aliasCheck) document(doc *yaml3.Node) error {
	n, err := c.expand(doc)
	if err != nil {
		return err
	}
	if n > maxExpansion && n > 100*c.nodes {
		return &LimitError{"its YAML aliases expand out of proportion (excessive aliasing): refused, as kubectl refuses it"}
	}
	return nil
}

// expand returns how many nodes n stands for once every alias is
// replaced by what it names, stopping as soon as that is too many.
func (c *aliasCheck) expand(n *yaml3.Node) (int, error) {
	if n == nil {
		return 0, nil
	}
	if s, ok := c.size[n]; ok {
		return s, nil
	}
	if c.open[n] {
		return 0, &LimitError{"a YAML anchor contains an alias of itself: refused"}
	}
	c.open[n] = true
	defer delete(c.open, n)
	total := 1
	if n.Kind == yaml3.AliasNode {
		s, err := c.expand(n.Alias)
		if err != nil {
			return 0, err
		}
		total += s
	} else {
		c.nodes++
		for _, child := range n.Content {
			s, err := c.expand(child)
			if err != nil {
				return 0, err
			}
			total += s
			if total > 100*maxExpansion {
				return 0, &LimitError{"its YAML aliases expand out of proportion (excessive aliasing): refused, as kubectl refuses it"}
			}
		}
	}
	c.size[n] = total
	return total, nil
}

// refuseRemote walks the kustomizations under dir, following their local
// resources and components, and refuses an entry that is not a file or
// folder there: kustomize would fetch it (git clone or HTTP), from a
// build that must depend on nothing but the folder. Unless remote bases
// are allowed, nothing is fetched, and the build fails at once naming the
// kustomization and the entry.
func refuseRemote(dir, workDir string, visited map[string]bool) error {
	name := FindKustomization(dir)
	if name == "" || visited[dir] {
		return nil
	}
	visited[dir] = true
	file := filepath.Join(dir, name)
	if info, err := os.Stat(file); err != nil || info.Size() > DefaultMaxFileBytes {
		return nil //nolint:nilerr // the build's bounded read reports it
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil //nolint:nilerr // kustomize reports it
	}
	var k types.Kustomization
	if yaml.Unmarshal(b, &k) != nil {
		return nil //nolint:nilerr // kustomize reports it
	}
	entries := append(append(append([]string{}, k.Resources...), k.Components...), k.Bases...) //nolint:staticcheck // Bases is deprecated, and still read by kustomize
	for _, e := range entries {
		p := e
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, e)
		}
		info, err := os.Stat(p)
		if err != nil && looksRemote(e) {
			return &BuildError{File: displayPath(file, nil, workDir), Err: &LimitError{fmt.Sprintf("%q is remote; gantry fetches no remote bases unless allow-remote-bases is set", e)}}
		}
		if err == nil && info.IsDir() {
			if err := refuseRemote(p, workDir, visited); err != nil {
				return err
			}
		}
	}
	return nil
}

// looksRemote reports whether a kustomization entry that is not on disk is
// one kustomize would fetch: a URL, a git address, or a host and path
// (github.com/org/repo//dir?ref=v1). A missing local file is kustomize's
// to report.
func looksRemote(e string) bool {
	if strings.Contains(e, "://") || strings.HasPrefix(e, "git@") || strings.Contains(e, "?ref=") || strings.Contains(e, "//") {
		return true
	}
	first, rest, ok := strings.Cut(e, "/")
	return ok && rest != "" && strings.Contains(first, ".") && !strings.HasPrefix(first, ".")
}

// IsCredentialFile says whether the file at path is one of files (the
// run's credential files) or lies in one of their folders, links
// resolved: the rule the build reads by, for what is read beside it.
func IsCredentialFile(path string, files []string) bool {
	var f boundedFS
	f.deny(files)
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	info, err := os.Stat(real)
	if err != nil {
		return false
	}
	return f.credential(real, info)
}
