package pipeline

import (
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/object"
	"go.yaml.in/yaml/v3"

	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources"
	"github.com/gantry-dev/gantry/sources/reader"
	"github.com/gantry-dev/gantry/sources/yamlbound"
)

// lines finds where objects start in their files, for reports that name
// file:line. A file is read once, when an object of it is first reported.
type lines struct {
	workDir string
	// read reads a file as the build read it (sourceReader).
	read  func(string) ([]byte, error)
	mu    sync.Mutex
	files map[string]*indexed
}

// indexed is one file's documents, read once however many objects ask
// at the same moment (a thousand failing together once made a thousand
// reads of one large file, minutes of CPU).
type indexed struct {
	once sync.Once
	docs []docStart
	// nodes are its documents parsed whole, read once too, only for
	// objects that failed.
	nodesOnce sync.Once
	nodes     []*yaml.Node
}

// file is source's entry, made on first use.
func (l *lines) file(source string) *indexed {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.files == nil {
		l.files = map[string]*indexed{}
	}
	f := l.files[source]
	if f == nil {
		f = &indexed{}
		l.files[source] = f
	}
	return f
}

// docStart is a document of a manifest file, or a generator entry of a
// kustomization, and the line it starts on.
type docStart struct {
	kind, name string
	generator  bool
	line       int
}

// lineOf is the line where the object kind/name starts in source, or 0.
// kustomize may have renamed it (namePrefix, nameSuffix, a generator's
// hash): the document whose name the built name holds, the longest such,
// is the one.
func (l *lines) lineOf(source, kind, name string) int {
	if source == "" {
		return 0
	}
	docs := l.docs(source)
	best, bestLen := 0, -1
	for _, d := range docs {
		if d.generator {
			if (kind == "ConfigMap" || kind == "Secret") && strings.Contains(name, d.name) && len(d.name) > bestLen {
				best, bestLen = d.line, len(d.name)
			}
			continue
		}
		if d.kind != kind {
			continue
		}
		switch {
		case d.name == name:
			return d.line
		case d.name != "" && strings.Contains(name, d.name) && len(d.name) > bestLen:
			best, bestLen = d.line, len(d.name)
		}
	}
	if best == 0 {
		// One document of the kind: it is the one, whatever its name
		// became.
		for _, d := range docs {
			if d.kind == kind && !d.generator {
				if best != 0 {
					return 0
				}
				best = d.line
			}
		}
	}
	return best
}

// fieldLine is the line in source of the field at path (as the API
// server, structured-merge-diff or the OpenAPI validator write it) of the
// document that starts on line start; the line of the nearest field above
// it that the file holds when the field itself was added by the build (a
// patch, a transformer), or start.
func (l *lines) fieldLine(source string, start int, path string) int {
	doc := l.document(source, start)
	if doc == nil {
		return start
	}
	line := start
	n := doc
	for _, step := range pathSteps(path) {
		next, at := step.find(n)
		if next == nil {
			break
		}
		n, line = next, at
	}
	return line
}

// document is the mapping node of the document of source that starts on
// line start. Files are parsed again, once each, only for objects that
// failed.
func (l *lines) document(source string, start int) *yaml.Node {
	f := l.file(source)
	f.nodesOnce.Do(func() {
		if !result.FileSource(source) {
			return
		}
		path := source
		if !filepath.IsAbs(path) && l.workDir != "" {
			path = filepath.Join(l.workDir, path)
		}
		if b, err := l.readFile(path); err == nil {
			docs, _ := yamlbound.Documents(b) // those before one it cannot read
			for _, n := range docs {
				if n.Kind == yaml.DocumentNode && len(n.Content) > 0 && n.Content[0].Kind == yaml.MappingNode {
					f.nodes = append(f.nodes, n.Content[0])
				}
			}
		}
	})
	nodes := f.nodes
	for _, m := range nodes {
		if len(m.Content) > 0 && m.Content[0].Line == start {
			return m
		}
	}
	return nil
}

// fieldStep is one step of a field path: a key of a mapping, an index of
// a sequence, or the element of a sequence whose keys have the values
// given (structured-merge-diff's [name="web"], [=value] for a set).
type fieldStep struct {
	key      string
	index    int // -1 when not an index
	selector map[string]string
	value    *string
}

// find is the node the step leads to from n, and the line of its key (or
// element).
func (s fieldStep) find(n *yaml.Node) (*yaml.Node, int) {
	switch n.Kind {
	case yaml.MappingNode:
		if s.selector != nil || s.value != nil {
			return nil, 0
		}
		key := s.key
		if s.index >= 0 && key == "" {
			key = itoa(s.index)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1], n.Content[i].Line
			}
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			switch {
			case s.index >= 0:
				if i == s.index {
					return e, e.Line
				}
			case s.value != nil:
				if e.Kind == yaml.ScalarNode && e.Value == *s.value {
					return e, e.Line
				}
			case s.selector != nil:
				// A key the file leaves out (a defaulted protocol)
				// does not rule the element out; one it holds must
				// match.
				matched, match := 0, true
				for k, v := range s.selector {
					switch got := child(e, k); {
					case got == nil:
					case got.Value == v:
						matched++
					default:
						match = false
					}
				}
				if match && matched > 0 {
					return e, e.Line
				}
			}
		}
	}
	return nil, 0
}

// pathSteps splits a field path, in any of the forms the API server, its
// server-side apply and the OpenAPI validator write: dots between keys,
// brackets around an index, a map key (which may hold dots) or a
// selector. Lines and values are both found by it.
func pathSteps(path string) []fieldStep {
	var steps []fieldStep
	path = strings.TrimPrefix(path, ".")
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
			continue
		case '[':
			end := strings.IndexByte(path, ']')
			// A quoted value may hold a "]".
			if q := strings.IndexByte(path, '"'); q > 0 && q < end {
				if close := strings.Index(path[q+1:], "\"]"); close >= 0 {
					end = q + 1 + close + 1
				}
			}
			if end < 0 {
				return steps
			}
			steps = append(steps, bracketStep(path[1:end]))
			path = path[end+1:]
			continue
		}
		end := strings.IndexAny(path, ".[")
		if end < 0 {
			end = len(path)
		}
		seg := path[:end]
		step := fieldStep{key: seg, index: -1}
		if n, err := strconv.Atoi(seg); err == nil && n >= 0 {
			step.index = n // the OpenAPI validator's containers.0
		}
		steps = append(steps, step)
		path = path[end:]
	}
	return steps
}

func bracketStep(inner string) fieldStep {
	if n, err := strconv.Atoi(inner); err == nil && n >= 0 {
		return fieldStep{index: n}
	}
	if v, ok := strings.CutPrefix(inner, "="); ok {
		v = unquote(v)
		return fieldStep{index: -1, value: &v}
	}
	if strings.Contains(inner, "=\"") {
		sel := map[string]string{}
		for _, pair := range strings.Split(inner, ",") {
			k, v, _ := strings.Cut(pair, "=")
			sel[k] = unquote(v)
		}
		return fieldStep{index: -1, selector: sel}
	}
	return fieldStep{key: inner, index: -1}
}

func unquote(v string) string {
	if u, err := strconv.Unquote(v); err == nil {
		return u
	}
	return v
}

func (l *lines) docs(source string) []docStart {
	f := l.file(source)
	f.once.Do(func() {
		if !result.FileSource(source) {
			return
		}
		path := source
		if !filepath.IsAbs(path) && l.workDir != "" {
			path = filepath.Join(l.workDir, path)
		}
		f.docs = readDocs(l.readFile, path)
	})
	return f.docs
}

// readDocs is readDocStarts, counted by a test.
var readDocs = readDocStarts

// readDocStarts indexes a YAML file's documents; nil when it cannot be
// read (its objects are then named by file alone).
func readDocStarts(read func(string) ([]byte, error), path string) []docStart {
	b, err := read(path)
	if err != nil {
		return nil
	}
	return readDocStartsFrom(b)
}

// readFile reads a file of the build again, through the reader the build
// read it with: what the build would refuse (a link into .git, a file out
// of the workspace, a device) is not read here either.
func (l *lines) readFile(path string) ([]byte, error) {
	if l.read == nil {
		return reader.New(reader.Options{Root: l.workDir, MaxFileBytes: sources.DefaultMaxFileBytes}).ReadFile(path)
	}
	return l.read(path)
}

// sourceReader reads as the build of opts reads (sources.BuildOptions.Reader).
func sourceReader(opts sources.BuildOptions) func(string) ([]byte, error) {
	var once sync.Once
	var r *reader.Reader
	return func(path string) ([]byte, error) {
		once.Do(func() { r = opts.Reader() })
		return r.ReadFile(path)
	}
}

// readDocStartsFrom indexes the YAML documents of b.
func readDocStartsFrom(b []byte) []docStart {
	var docs []docStart
	nodes, _ := yamlbound.Documents(b) // what was read before a document it cannot read
	for _, n := range nodes {
		if n.Kind != yaml.DocumentNode || len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
			continue
		}
		m := n.Content[0]
		d := docStart{line: m.Line}
		if c := m; c.Line > 0 && len(c.Content) > 0 {
			d.line = c.Content[0].Line
		}
		d.kind = scalar(m, "kind")
		if md := child(m, "metadata"); md != nil {
			d.name = scalar(md, "name")
		}
		docs = append(docs, d)
		// A kustomization's generators: each entry starts where it is
		// listed.
		for _, list := range []string{"configMapGenerator", "secretGenerator"} {
			if g := child(m, list); g != nil && g.Kind == yaml.SequenceNode {
				for _, e := range g.Content {
					if name := scalar(e, "name"); name != "" {
						docs = append(docs, docStart{name: name, generator: true, line: e.Line})
					}
				}
			}
		}
	}
	return docs
}

func child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(m *yaml.Node, key string) string {
	if c := child(m, key); c != nil && c.Kind == yaml.ScalarNode {
		return c.Value
	}
	return ""
}

// addLines gives the reported objects (those written, to be written,
// deleted from the set or failed) the line they start on in their files.
func (r *run) addLines() {
	// The files are read on every core first: a first apply reports
	// every object, and reading thousands of files one by one would add
	// to its time.
	var files []string
	seen := map[string]bool{}
	for _, o := range r.res.Objects {
		switch o.Action {
		case result.Created, result.Configured, result.Recreated, result.Failed:
			if o.Line == 0 && o.Source != "" && !seen[o.Source] {
				seen[o.Source] = true
				files = append(files, o.Source)
			}
		}
	}
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), len(files))
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(files); i += workers {
				r.lines.docs(files[i])
			}
		})
	}
	wg.Wait()

	var byID map[string]*sources.Object
	for i := range r.res.Objects {
		o := &r.res.Objects[i]
		switch o.Action {
		case result.Created, result.Configured, result.Recreated, result.Failed:
			if o.Line == 0 {
				o.Line = r.lines.lineOf(o.Source, o.Kind, o.Name)
			}
			if o.Action == result.Failed && o.Line > 0 {
				for j := range o.Problems {
					if p := &o.Problems[j]; p.Line == 0 {
						p.Line = r.lines.fieldLine(o.Source, o.Line, p.Field)
					}
				}
			}
			if o.Patches == nil && o.Source != "" {
				if byID == nil {
					byID = make(map[string]*sources.Object, len(r.objects))
					for _, obj := range r.objects {
						byID[object.UnstructuredToObjMetadata(obj.Unstructured).String()] = obj
					}
				}
				if obj := byID[o.ID]; obj != nil {
					o.Patches = r.patchesOf(obj)
					// A field a patch set is at fault in the patch.
					for j := range o.Problems {
						if p := &o.Problems[j]; p.Source == "" {
							if file, line := r.lines.patchedField(obj, o.Patches, p.Field); line > 0 {
								p.Source, p.Line = file, line
							}
						}
					}
				}
			}
		}
	}
}

// patchesOf lists the patches of the build's kustomizations that target
// obj.
func (r *run) patchesOf(obj *sources.Object) []string {
	return r.patches.of(obj.GroupVersionKind().Group, obj.GetKind(), obj.GetNamespace(), obj.GetName(), obj.GetLabels())
}

func itoa(n int) string { return strconv.Itoa(n) }
