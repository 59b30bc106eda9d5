package pipeline

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gantry-dev/gantry/sources"
	"github.com/gantry-dev/gantry/sources/yamlbound"
)

// patch is one patch of a kustomization (patches, patchesStrategicMerge,
// patchesJson6902) and what it targets, so that a report can name, beside
// the file an object comes from, the patches that changed it.
type patch struct {
	// where is the patch's file, or the kustomization's entry for an
	// inline patch, as file:line.
	where                  string
	group, kind, namespace string
	name                   *regexp.Regexp // kustomize takes target names as regular expressions
	selector               labels.Selector
}

// patches finds the patches of the kustomization tree under a build's
// path, once.
type patches struct {
	once    sync.Once
	path    string
	workDir string
	// read reads a file as the build read it (sourceReader).
	read  func(string) ([]byte, error)
	found []patch
}

// of lists where the patches are that target the object.
func (p *patches) of(group, kind, namespace, name string, lbls map[string]string) []string {
	p.once.Do(func() {
		seen := map[string]bool{}
		p.found = p.walk(p.path, seen, 0)
	})
	var out []string
	for _, pt := range p.found {
		if pt.kind != "" && pt.kind != kind || pt.group != "" && pt.group != group ||
			pt.namespace != "" && pt.namespace != namespace {
			continue
		}
		// The target names the object as the kustomization saw it; a
		// prefix or suffix an overlay adds later is around it.
		if pt.name != nil && !pt.name.MatchString(name) && !containsMatch(pt.name, name) {
			continue
		}
		if pt.selector != nil && !pt.selector.Matches(labels.Set(lbls)) {
			continue
		}
		if pt.kind == "" && pt.name == nil && pt.selector == nil {
			continue // targets nothing gantry can tell
		}
		out = append(out, pt.where)
	}
	return out
}

// containsMatch reports whether a name that kustomize renamed holds a
// match of the target's whole expression.
func containsMatch(re *regexp.Regexp, name string) bool {
	expr := strings.TrimSuffix(strings.TrimPrefix(re.String(), "^(?:"), ")$")
	inner, err := regexp.Compile(expr)
	return err == nil && inner.MatchString(name)
}

// walk reads the kustomization in dir and those it builds on.
func (p *patches) walk(dir string, seen map[string]bool, depth int) []patch {
	abs, err := filepath.Abs(dir)
	if err != nil || seen[abs] || depth > 32 {
		return nil
	}
	seen[abs] = true
	name := sources.FindKustomization(abs)
	if name == "" {
		return nil
	}
	file := filepath.Join(abs, name)
	b, err := p.readFile(file)
	if err != nil {
		return nil
	}
	doc, err := yamlbound.Node(b)
	if err != nil || len(doc.Content) == 0 {
		return nil
	}
	k := doc.Content[0]
	var found []patch
	for _, list := range []string{"resources", "components", "bases"} {
		if seq := child(k, list); seq != nil && seq.Kind == yaml.SequenceNode {
			for _, e := range seq.Content {
				sub := filepath.Join(abs, e.Value)
				if info, err := os.Stat(sub); err == nil && info.IsDir() {
					found = append(found, p.walk(sub, seen, depth+1)...)
				}
			}
		}
	}
	for _, list := range []string{"patches", "patchesJson6902", "patchesStrategicMerge"} {
		seq := child(k, list)
		if seq == nil || seq.Kind != yaml.SequenceNode {
			continue
		}
		for _, e := range seq.Content {
			found = append(found, p.entry(abs, file, e)...)
		}
	}
	return found
}

// entry reads one patch entry of the kustomization file in dir.
func (p *patches) entry(dir, file string, e *yaml.Node) []patch {
	where := p.display(file) + ":" + itoa(e.Line)
	var path, inline string
	var target *yaml.Node
	switch e.Kind {
	case yaml.ScalarNode: // patchesStrategicMerge: a file, or the patch itself
		if strings.Contains(e.Value, "\n") {
			inline = e.Value
		} else {
			path = e.Value
		}
	case yaml.MappingNode:
		path, inline, target = scalar(e, "path"), scalar(e, "patch"), child(e, "target")
	}
	if path != "" {
		where = p.display(filepath.Join(dir, path)) + ":1"
	}
	if target != nil {
		pt := patch{where: where, group: scalar(target, "group"), kind: scalar(target, "kind"), namespace: scalar(target, "namespace")}
		if n := scalar(target, "name"); n != "" {
			re, err := regexp.Compile("^(?:" + n + ")$")
			if err != nil {
				return nil
			}
			pt.name = re
		}
		if s := scalar(target, "labelSelector"); s != "" {
			sel, err := labels.Parse(s)
			if err != nil {
				return nil
			}
			pt.selector = sel
		}
		return []patch{pt}
	}
	// A strategic merge patch without a target names its object itself.
	content := []byte(inline)
	if path != "" {
		b, err := p.readFile(filepath.Join(dir, path))
		if err != nil {
			return nil
		}
		content = b
	}
	var out []patch
	for _, d := range readDocStartsFrom(content) {
		if d.kind == "" || d.name == "" || d.generator {
			continue
		}
		out = append(out, patch{where: where, kind: d.kind, name: regexp.MustCompile("^(?:" + regexp.QuoteMeta(d.name) + ")$")})
	}
	return out
}

func (p *patches) display(path string) string {
	if p.workDir != "" {
		if rel, err := filepath.Rel(p.workDir, path); err == nil && filepath.IsLocal(rel) {
			return rel
		}
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, path); err == nil && filepath.IsLocal(rel) {
			return rel
		}
	}
	return path
}

// readFile reads a file of the build again, as the build read it.
func (p *patches) readFile(path string) ([]byte, error) {
	if p.read == nil {
		return (&lines{workDir: p.workDir}).readFile(path)
	}
	return p.read(path)
}
