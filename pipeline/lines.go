package pipeline

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/object"
	"go.yaml.in/yaml/v3"

	"github.com/gantry-dev/gantry/result"
)

// lines finds where objects start in their files, for reports that name
// file:line. A file is read once, when an object of it is first reported.
type lines struct {
	workDir string
	mu      sync.Mutex
	files   map[string][]docStart
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

func (l *lines) docs(source string) []docStart {
	l.mu.Lock()
	docs, ok := l.files[source]
	l.mu.Unlock()
	if ok {
		return docs
	}
	path := source
	if !filepath.IsAbs(path) && l.workDir != "" {
		path = filepath.Join(l.workDir, path)
	}
	docs = readDocStarts(path)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.files == nil {
		l.files = map[string][]docStart{}
	}
	l.files[source] = docs
	return docs
}

// readDocStarts indexes a YAML file's documents; nil when it cannot be
// read (its objects are then named by file alone).
func readDocStarts(path string) []docStart {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) > DefaultMaxFileBytes {
		return nil
	}
	return readDocStartsFrom(b)
}

// readDocStartsFrom indexes the YAML documents of b.
func readDocStartsFrom(b []byte) []docStart {
	var docs []docStart
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if !errors.Is(err, io.EOF) {
				return docs // what was read before a document it cannot read
			}
			return docs
		}
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
	var sources []string
	seen := map[string]bool{}
	for _, o := range r.res.Objects {
		switch o.Action {
		case result.Created, result.Configured, result.Recreated, result.Failed:
			if o.Line == 0 && o.Source != "" && !seen[o.Source] {
				seen[o.Source] = true
				sources = append(sources, o.Source)
			}
		}
	}
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), len(sources))
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(sources); i += workers {
				r.lines.docs(sources[i])
			}
		})
	}
	wg.Wait()

	var byID map[string]*Object
	for i := range r.res.Objects {
		o := &r.res.Objects[i]
		switch o.Action {
		case result.Created, result.Configured, result.Recreated, result.Failed:
			if o.Line == 0 {
				o.Line = r.lines.lineOf(o.Source, o.Kind, o.Name)
			}
			if o.Patches == nil && o.Source != "" {
				if byID == nil {
					byID = make(map[string]*Object, len(r.objects))
					for _, obj := range r.objects {
						byID[object.UnstructuredToObjMetadata(obj.Unstructured).String()] = obj
					}
				}
				if obj := byID[o.ID]; obj != nil {
					o.Patches = r.patchesOf(obj)
				}
			}
		}
	}
}

// patchesOf lists the patches of the build's kustomizations that target
// obj.
func (r *run) patchesOf(obj *Object) []string {
	return r.patches.of(obj.GroupVersionKind().Group, obj.GetKind(), obj.GetNamespace(), obj.GetName(), obj.GetLabels())
}

func itoa(n int) string { return strconv.Itoa(n) }
