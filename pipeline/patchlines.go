package pipeline

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-dev/gantry/sources"
	"github.com/gantry-dev/gantry/sources/yamlbound"
)

// patchedField finds, among the patch files that target obj (patches, as
// file:line), the one that sets the field at path (as the API server
// writes it), and the field's line there: a mistake a patch made is
// reported in the patch, not in the base the patch changed. A strategic
// merge patch sets it when its document for obj holds the field (a
// list's elements matched by name, as the merge matches them); a JSON
// patch when one of its operations adds or replaces that path. The last
// patch that sets it wins, as kustomize applies them in order. Inline
// patches, inside a kustomization, are not read.
func (l *lines) patchedField(obj *sources.Object, patches []string, path string) (string, int) {
	if path == "" {
		return "", 0
	}
	steps := pathSteps(path)
	pointer := fieldPointer(obj.Object, steps)
	var file string
	var line int
	for _, p := range patches {
		f, at, ok := strings.Cut(p, ":")
		if !ok || at != "1" || !strings.HasSuffix(f, ".yaml") && !strings.HasSuffix(f, ".yml") && !strings.HasSuffix(f, ".json") {
			continue // an inline patch: its entry's line, not its own
		}
		full := f
		if !filepath.IsAbs(full) && l.workDir != "" {
			full = filepath.Join(l.workDir, f)
		}
		b, err := l.readFile(full)
		if err != nil {
			continue
		}
		docs, _ := yamlbound.Documents(b) // those before one it cannot read
		for _, doc := range docs {
			if len(doc.Content) == 0 {
				continue
			}
			n := doc.Content[0]
			switch n.Kind {
			case yaml.SequenceNode: // a JSON patch
				for _, op := range n.Content {
					kind, p := scalar(op, "op"), scalar(op, "path")
					if (kind == "add" || kind == "replace") && pointer != "" && p == pointer {
						file, line = f, op.Line
						if v := child(op, "value"); v != nil {
							line = v.Line
						}
					}
				}
			case yaml.MappingNode: // a strategic merge patch
				if k, name := scalar(n, "kind"), scalar(child(n, "metadata"), "name"); k != "" && k != obj.GetKind() || name != "" && !strings.Contains(obj.GetName(), name) {
					continue
				}
				if at := smpFieldLine(n, obj.Object, steps); at > 0 {
					file, line = f, at
				}
			}
		}
	}
	return file, line
}

// smpFieldLine is the line of the field at steps in a strategic merge
// patch's document n, walked beside the built object, or 0 when the patch
// does not hold it.
func smpFieldLine(n *yaml.Node, built any, steps []fieldStep) int {
	line := 0
	for _, st := range steps {
		if n == nil {
			return 0
		}
		switch b := built.(type) {
		case map[string]any:
			key := st.key
			if st.index >= 0 && key == "" {
				key = strconv.Itoa(st.index)
			}
			next, at := fieldStep{key: key, index: -1}.find(n)
			if next == nil {
				return 0
			}
			n, line, built = next, at, b[key]
		case []any:
			i := st.index
			if st.selector != nil || st.value != nil {
				i = -1
				for j, e := range b {
					if m, ok := e.(map[string]any); ok && st.selector != nil {
						match := true
						for k, v := range st.selector {
							if s, ok := m[k]; ok && toString(s) != v {
								match = false
							}
						}
						if match {
							i = j
							break
						}
					}
				}
			}
			if i < 0 || i >= len(b) || n.Kind != yaml.SequenceNode {
				return 0
			}
			// The merge matches a list's elements by name: the patch's
			// element of the same name, or the same index without one.
			var next *yaml.Node
			if m, ok := b[i].(map[string]any); ok && m["name"] != nil {
				for _, e := range n.Content {
					if scalar(e, "name") == toString(m["name"]) {
						next = e
					}
				}
			} else if i < len(n.Content) {
				next = n.Content[i]
			}
			if next == nil {
				return 0
			}
			n, line, built = next, next.Line, b[i]
		default:
			return 0
		}
	}
	return line
}

// fieldPointer is the JSON pointer of the field at steps in obj, its
// list elements by index; "" when obj does not hold it.
func fieldPointer(obj any, steps []fieldStep) string {
	var b strings.Builder
	for _, st := range steps {
		switch t := obj.(type) {
		case map[string]any:
			key := st.key
			if st.index >= 0 && key == "" {
				key = strconv.Itoa(st.index)
			}
			b.WriteString("/" + sources.EscapePointer(key))
			obj = t[key]
		case []any:
			i := st.index
			if i < 0 || i >= len(t) {
				return ""
			}
			b.WriteString("/" + strconv.Itoa(i))
			obj = t[i]
		default:
			return ""
		}
	}
	return b.String()
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}
