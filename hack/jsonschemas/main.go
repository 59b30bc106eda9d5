// Command jsonschemas writes standalone JSON schemas, one per kind, in the
// layout kubeconform reads (<kind>-<group>-<version>.json, every $ref
// inlined, additionalProperties false where a schema lists its
// properties, as openapi2jsonschema --strict writes them): from a release's
// OpenAPI documents embedded in gantry, and from the CRDs of a folder. It
// lets hack/compare-offline.sh run kubeconform on the same schemas as
// gantry, with no network:
//
//	go run ./hack/jsonschemas -release 1.36 -crds e2e/testdata/offline/crds -out DIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/schemas/releases"
)

func main() {
	release := flag.String("release", releases.Newest, "Kubernetes release")
	crds := flag.String("crds", "", "folder of CRD manifests")
	out := flag.String("out", "", "folder to write to")
	flag.Parse()
	if err := run(*release, *crds, *out); err != nil {
		fmt.Fprintln(os.Stderr, "jsonschemas:", err)
		os.Exit(1)
	}
}

func run(version, crds, out string) error {
	r, err := releases.Get(version)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, gv := range r.GroupVersions() {
		raw, err := r.OpenAPIV3(gv)
		if err != nil {
			return err
		}
		var doc struct {
			Components struct {
				Schemas map[string]map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return err
		}
		defs := doc.Components.Schemas
		for _, s := range defs {
			gvks, _ := s["x-kubernetes-group-version-kind"].([]any)
			if len(gvks) != 1 {
				continue
			}
			k, _ := gvks[0].(map[string]any)
			if k["group"] != gv.Group || k["version"] != gv.Version {
				continue
			}
			if err := write(out, gv.String(), k["kind"].(string), inline(s, defs, map[string]bool{})); err != nil {
				return err
			}
		}
	}
	if crds == "" {
		return nil
	}
	files, err := filepath.Glob(filepath.Join(crds, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, d := range strings.Split(string(b), "\n---\n") {
			var crd struct {
				Spec struct {
					Group    string
					Names    struct{ Kind string }
					Versions []struct {
						Name   string
						Schema struct {
							OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
						}
					}
				}
			}
			if err := yaml.Unmarshal([]byte(d), &crd); err != nil || crd.Spec.Group == "" {
				continue
			}
			for _, v := range crd.Spec.Versions {
				// The API server gives every custom resource these,
				// whatever its schema lists.
				s := v.Schema.OpenAPIV3Schema
				if props, ok := s["properties"].(map[string]any); ok {
					for name, typ := range map[string]string{"apiVersion": "string", "kind": "string", "metadata": "object"} {
						if _, ok := props[name]; !ok {
							props[name] = map[string]any{"type": typ}
						}
					}
				}
				if err := write(out, crd.Spec.Group+"/"+v.Name, crd.Spec.Names.Kind, inline(s, nil, map[string]bool{})); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// write writes a kind's schema where kubeconform looks for it:
// <kind>-<first label of the group>-<version>.json, <kind>-<version>.json
// for the core group.
func write(out, apiVersion, kind string, s any) error {
	group, version, found := strings.Cut(apiVersion, "/")
	suffix := "-" + group
	if found {
		suffix = "-" + strings.Split(group, ".")[0] + "-" + version
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, strings.ToLower(kind)+suffix+".json"), b, 0o644)
}

// inline replaces every $ref by the schema it names and makes object
// schemas strict, as openapi2jsonschema --strict does; int-or-string and
// quantity formats become a choice of string and number. A reference to a
// schema it is already inside (a recursive type) accepts anything.
func inline(v any, defs map[string]map[string]any, open map[string]bool) any {
	switch t := v.(type) {
	case map[string]any:
		ref, _ := t["$ref"].(string)
		if all, ok := t["allOf"].([]any); ok && len(all) == 1 {
			if m, ok := all[0].(map[string]any); ok {
				if r, ok := m["$ref"].(string); ok {
					ref = r
				}
			}
		}
		if ref != "" {
			name := strings.TrimPrefix(ref, "#/components/schemas/")
			if open[name] {
				return map[string]any{}
			}
			open[name] = true
			defer delete(open, name)
			return inline(defs[name], defs, open)
		}
		out := map[string]any{}
		for k, e := range t {
			switch {
			case strings.HasPrefix(k, "x-kubernetes-"):
			case k == "properties" || k == "patternProperties":
				props := map[string]any{}
				for name, p := range e.(map[string]any) {
					props[name] = inline(p, defs, open)
				}
				out[k] = props
			default:
				out[k] = inline(e, defs, open)
			}
		}
		if t["x-kubernetes-int-or-string"] == true || t["format"] == "int-or-string" {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
		}
		if t["format"] == "quantity" {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
		}
		if t["x-kubernetes-preserve-unknown-fields"] == true {
			delete(out, "additionalProperties")
			return out
		}
		if _, ok := out["properties"]; ok {
			if _, ok := out["additionalProperties"]; !ok {
				out["additionalProperties"] = false
			}
		}
		if nullable, _ := t["nullable"].(bool); nullable {
			if typ, ok := out["type"].(string); ok {
				out["type"] = []any{typ, "null"}
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = inline(e, defs, open)
		}
		return out
	}
	return v
}
