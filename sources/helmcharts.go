package sources

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/gantry-dev/gantry/schemas/releases"
	"github.com/gantry-dev/gantry/sources/charts"
	"github.com/gantry-dev/gantry/sources/yamlbound"
)

// helmChartsFS is what kustomize reads, except that a kustomization that
// lists helmCharts reads as charts.Kustomization rewrites it: its charts
// rendered here, in-process, and referred to as files it serves from
// memory, so that kustomize builds what kustomize build --enable-helm
// builds without running the helm binary. Values files are read as every
// file of the build is (bounded, SOPS decrypted).
type helmChartsFS struct {
	filesys.FileSystem
	read func(string) ([]byte, error)
	// secrets says the build decrypted values so far.
	secrets func() bool
	opts    BuildOptions
	root    string // the workspace

	mu    sync.Mutex
	files map[string][]byte
	dirs  map[string]bool
	// inherited is the namespace an overlay hands down to the
	// kustomizations it lists (kustomize renders a base's charts in
	// its overlay's namespace): set as each kustomization is read,
	// before kustomize reads those it lists.
	inherited map[string]string
	// rendered maps each rendered file to the chart folder it came from
	// (as displayed), for objects' sources.
	rendered map[string]string
	notices  []ChartNotice
	// err is the first chart that failed: kustomize quotes what its
	// file system says in a message of its own.
	err error
}

func newHelmChartsFS(inner filesys.FileSystem, read func(string) ([]byte, error), opts BuildOptions, root string) *helmChartsFS {
	return &helmChartsFS{FileSystem: inner, read: read, opts: opts, root: root,
		files: map[string][]byte{}, dirs: map[string]bool{}, inherited: map[string]string{}, rendered: map[string]string{}}
}

func isKustomizationFile(name string) bool {
	base := filepath.Base(name)
	for _, k := range konfig.RecognizedKustomizationFileNames() {
		if base == k {
			return true
		}
	}
	return false
}

func (f *helmChartsFS) ReadFile(name string) ([]byte, error) {
	name = filepath.Clean(name)
	f.mu.Lock()
	if b, ok := f.files[name]; ok {
		f.mu.Unlock()
		return b, nil
	}
	f.mu.Unlock()
	content, err := f.FileSystem.ReadFile(name)
	if err != nil || !isKustomizationFile(name) {
		return content, err
	}
	dir := filepath.Dir(name)
	f.mu.Lock()
	inherited := f.inherited[dir]
	f.mu.Unlock()
	f.handDown(dir, content, inherited)
	out, files, info, err := charts.Kustomization(context.Background(), name, content, f.read, charts.KustomizeOptions{
		Root:               f.root,
		InheritedNamespace: inherited,
		DefaultKubeVersion: "v" + releases.Newest + ".0",
		MaxFileBytes:       f.opts.MaxFileBytes,
		Deny:               f.opts.CredentialFiles,
		Render:             charts.RenderIsolated(charts.Limits{}),
	})
	if err != nil {
		var ke *charts.KustomizeError
		if errors.As(err, &ke) {
			// Named once, as the build names its files.
			err = errors.New(strings.TrimPrefix(ke.Error(), ke.File+": "))
		}
		if f.secrets != nil && f.secrets() {
			// A template can quote what was decrypted, changed.
			err = errors.New("a chart of its helmCharts failed to render; what it says is not shown, as the build decrypted values with SOPS that a template can quote: render it with other values to see it")
		}
		return nil, f.fail(&BuildError{File: displayPath(name, nil, f.opts.WorkDir), Err: err})
	}
	if info == nil {
		return content, nil
	}
	for _, c := range info.Charts {
		if c.GeneratedName {
			return nil, f.fail(&BuildError{File: displayPath(name, nil, f.opts.WorkDir), Err: fmt.Errorf("helmCharts entry %d (chart %q) has no releaseName: it would be named by the clock, as helm --generate-name names it, so every build would rename its objects; give it a releaseName", c.Entry, c.Name)})
		}
	}
	f.mu.Lock()
	for p, b := range files {
		f.files[p] = b
		f.dirs[filepath.Dir(p)] = true
	}
	for _, c := range info.Charts {
		shown := displayPath(c.Dir, nil, f.opts.WorkDir)
		f.rendered[c.File] = shown
		f.notices = append(f.notices, ChartNotice{Chart: c.Name, Dir: shown, Lookup: c.Lookup})
	}
	f.mu.Unlock()
	return out, nil
}

// handDown records the namespace the kustomization in dir hands down to
// the folders it lists: its own namespace, else the one it inherited.
func (f *helmChartsFS) handDown(dir string, content []byte, inherited string) {
	var k struct {
		Namespace  string   `json:"namespace"`
		Resources  []string `json:"resources"`
		Components []string `json:"components"`
		Bases      []string `json:"bases"`
	}
	if yamlbound.Unmarshal(content, &k) != nil {
		return
	}
	ns := k.Namespace
	if ns == "" {
		ns = inherited
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, list := range [][]string{k.Resources, k.Components, k.Bases} {
		for _, r := range list {
			if strings.Contains(r, "://") || filepath.IsAbs(r) {
				continue
			}
			child := filepath.Clean(filepath.Join(dir, r))
			if real, err := filepath.EvalSymlinks(child); err == nil {
				child = real
			}
			if ns == "" {
				delete(f.inherited, child)
			} else {
				f.inherited[child] = ns
			}
		}
	}
}

func (f *helmChartsFS) virtualDir(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dirs[filepath.Clean(name)]
}

func (f *helmChartsFS) virtualFile(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.files[filepath.Clean(name)]
	return ok
}

func (f *helmChartsFS) Exists(name string) bool {
	return f.virtualDir(name) || f.virtualFile(name) || f.FileSystem.Exists(name)
}

func (f *helmChartsFS) IsDir(name string) bool {
	return f.virtualDir(name) || f.FileSystem.IsDir(name)
}

func (f *helmChartsFS) CleanedAbs(name string) (filesys.ConfirmedDir, string, error) {
	if f.virtualDir(name) {
		return filesys.ConfirmedDir(filepath.Clean(name)), "", nil
	}
	if f.virtualFile(name) {
		return filesys.ConfirmedDir(filepath.Dir(filepath.Clean(name))), filepath.Base(name), nil
	}
	return f.FileSystem.CleanedAbs(name)
}

// chartOf says which chart folder a rendered file stands for ("" when
// the file is not one).
func (f *helmChartsFS) chartOf(file string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rendered[filepath.Clean(file)]
}

// report tells the build's ChartNotice of each chart rendered.
func (f *helmChartsFS) report() {
	if f.opts.ChartNotice == nil {
		return
	}
	f.mu.Lock()
	notices := f.notices
	f.notices = nil
	f.mu.Unlock()
	for _, n := range notices {
		f.opts.ChartNotice(n)
	}
}

func (f *helmChartsFS) fail(err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
	return err
}
