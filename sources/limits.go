package sources

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/sources/reader"
	"github.com/gantry-dev/gantry/sources/yamlbound"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
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

// boundedFS is what kustomize reads files through: the workspace's
// reader (links resolved and kept in the workspace, .git and the run's
// credentials refused, sizes bounded), then YAML whose aliases expand out
// of proportion (a "billion laughs" bomb: a few lines that kustomize
// would expand into gigabytes) refused, with the rule of the YAML library
// kubectl and kustomize use, before kustomize parses it.
type boundedFS struct {
	filesys.FileSystem
	// read is the reader every file is read through: kustomize builds as
	// Flux does, with no load restrictions, so a kustomization may name
	// files anywhere, and this is the bound.
	read *reader.Reader
}

// newBoundedFS reads the workspace at root, files of at most maxBytes,
// never those of deny (the run's credential files and folders).
func newBoundedFS(root string, maxBytes int64, deny []string) *boundedFS {
	return boundedFSOf(reader.New(reader.Options{Root: root, Deny: deny, MaxFileBytes: maxBytes}))
}

// boundedFSOf is kustomize's file system over r.
func boundedFSOf(r *reader.Reader) *boundedFS {
	return &boundedFS{FileSystem: filesys.MakeFsOnDisk(), read: r}
}

func (f *boundedFS) ReadFile(name string) ([]byte, error) {
	data, err := f.read.ReadFile(name)
	if err != nil {
		var refused *reader.Error
		if errors.As(err, &refused) {
			// Named by the caller, as the build names its files.
			return nil, &LimitError{refused.Reason}
		}
		return nil, err
	}
	if err := checkAliases(data); err != nil {
		return nil, err
	}
	return data, nil
}

// inside says whether real (links resolved) lies where files may be read.
func (f *boundedFS) inside(real string) bool { return f.read.Inside(real) }

// root is the workspace, links resolved.
func (f *boundedFS) root() string { return f.read.Root() }

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
	f.read.AllowFile(real)
}

// allow adds a folder files may be read from.
func (f *boundedFS) allow(dir string) { f.read.Allow(dir) }

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

func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// checkAliases is the bounded parser's check of data the build reads
// (yamlbound.Check), its refusal a LimitError as the build's other
// limits are: other YAML errors are kustomize's to report, in its words.
func checkAliases(data []byte) error {
	return asLimit(yamlbound.Check(data))
}

// asLimit is the bounded parser's refusal as a LimitError; any other
// error as it is.
func asLimit(err error) error {
	var refused *yamlbound.Error
	if errors.As(err, &refused) {
		return &LimitError{refused.Error()}
	}
	return err
}

// refuseRemote walks the kustomizations under dir, following their local
// resources and components, and refuses an entry that is not a file or
// folder there: kustomize would fetch it (git clone or HTTP), from a
// build that must depend on nothing but the folder. Unless remote bases
// are allowed, nothing is fetched, and the build fails at once naming the
// kustomization and the entry.
func refuseRemote(dir, workDir string, read func(string) ([]byte, error), visited map[string]bool) error {
	name := FindKustomization(dir)
	if name == "" || visited[dir] {
		return nil
	}
	visited[dir] = true
	file := filepath.Join(dir, name)
	// Through the build's reader: a kustomization that is a link to a
	// device, a FIFO or a file out of the workspace is refused there,
	// named, when kustomize reads it.
	b, err := read(file)
	if err != nil {
		return nil //nolint:nilerr // the build's bounded read reports it
	}
	var k types.Kustomization
	if yamlbound.Unmarshal(b, &k) != nil {
		return nil //nolint:nilerr // kustomize reports it, or the build's bounded read refuses it
	}
	// Every other field kustomize's loader reads a path from, it fetches
	// when the path is an http(s) URL, with a client of its own: no
	// timeout, no bound on the answer, which then lands in the set (a
	// generator's data, a patch). None is fetched.
	for _, f := range loadedPaths(&k) {
		if isFetched(f.path) {
			return &BuildError{File: displayPath(file, nil, workDir), Err: &LimitError{fmt.Sprintf("%s: %q is a URL, which kustomize would fetch; gantry fetches nothing a kustomization names unless allow-remote-bases is set: keep the file in the repository", f.field, f.path)}}
		}
	}
	// Generators, transformers and validators may be folders of
	// kustomizations of their own (or inline configurations, which are
	// not paths).
	for _, e := range slices.Concat(k.Generators, k.Transformers, k.Validators) {
		p := e
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, e)
		}
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			if err := refuseRemote(p, workDir, read, visited); err != nil {
				return err
			}
		}
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
			if err := refuseRemote(p, workDir, read, visited); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadedPath is a path a kustomization names in a field that
// kustomize's loader reads it from.
type loadedPath struct{ field, path string }

// loadedPaths are the paths k names in the fields kustomize's loader
// reads (and fetches, when they are URLs) beside its resources and
// components: CRDs, configurations, generators, transformers,
// validators, patches of every form, replacements, generators' files and
// env files, and the OpenAPI schema.
func loadedPaths(k *types.Kustomization) []loadedPath {
	var out []loadedPath
	add := func(field string, paths ...string) {
		for _, p := range paths {
			if p != "" {
				out = append(out, loadedPath{field, p})
			}
		}
	}
	add("crds", k.Crds...)
	add("configurations", k.Configurations...)
	add("generators", k.Generators...)
	add("transformers", k.Transformers...)
	add("validators", k.Validators...)
	for _, p := range k.PatchesStrategicMerge { //nolint:staticcheck // deprecated, and still read by kustomize
		add("patchesStrategicMerge", string(p))
	}
	for _, p := range k.PatchesJson6902 { //nolint:staticcheck // deprecated, and still read by kustomize
		add("patchesJson6902", p.Path)
	}
	for _, p := range k.Patches {
		add("patches", p.Path)
	}
	for _, r := range k.Replacements {
		add("replacements", r.Path)
	}
	for _, g := range k.ConfigMapGenerator {
		for _, f := range g.FileSources {
			add("configMapGenerator files", fileSourcePath(f))
		}
		add("configMapGenerator envs", append(slices.Clone(g.EnvSources), g.EnvSource)...) //nolint:staticcheck // EnvSource is deprecated, and still read by kustomize
	}
	for _, g := range k.SecretGenerator {
		for _, f := range g.FileSources {
			add("secretGenerator files", fileSourcePath(f))
		}
		add("secretGenerator envs", append(slices.Clone(g.EnvSources), g.EnvSource)...) //nolint:staticcheck // EnvSource is deprecated, and still read by kustomize
	}
	add("openapi", k.OpenAPI["path"])
	return out
}

// fileSourcePath is the path of a generator's file source, [key=]path.
func fileSourcePath(f string) string {
	if _, p, ok := strings.Cut(f, "="); ok {
		return p
	}
	return f
}

// isFetched says whether kustomize's loader fetches path over HTTP
// rather than reading it: an http or https URL.
func isFetched(path string) bool {
	u, err := url.Parse(strings.TrimSpace(path))
	return err == nil && (u.Scheme == "http" || u.Scheme == "https")
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
	return reader.IsCredential(path, files)
}

// Reader is the reader a build of opts reads through: rooted at the
// workspace that holds what it builds, the credential files refused,
// each file bounded. What reads a build's files again (a report finding
// the lines its objects and patches start on) reads through it, so that
// no second door reads what the build would refuse.
func (opts BuildOptions) Reader() *reader.Reader {
	workDir := opts.WorkDir
	if workDir == "" {
		workDir, _ = os.Getwd()
	}
	path := cmp.Or(opts.Path, workDir)
	if opts.Chart != nil {
		path = opts.Chart.Dir
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	if real, err := filepath.EvalSymlinks(workDir); err == nil {
		workDir = real
	}
	maxBytes := opts.MaxFileBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFileBytes
	}
	return reader.New(reader.Options{Root: workspaceRoot(abs, workDir), Deny: opts.CredentialFiles, MaxFileBytes: maxBytes})
}
