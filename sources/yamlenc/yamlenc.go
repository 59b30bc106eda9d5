// Package yamlenc writes YAML as sigs.k8s.io/yaml.Marshal writes it,
// faster: both a build's printed objects and a chart's toYaml use it.
package yamlenc

import (
	"math"
	"strconv"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

// Marshal encodes an object's fields (as Unstructured holds them) to
// the bytes sigs.k8s.io/yaml.Marshal gives, without the round trip that
// makes them: Marshal writes JSON text, parses it again as YAML to find
// each number's type, and only then encodes the YAML. Here each value
// takes the type that round trip would give it (a whole float64 is an
// integer, as its JSON text reads), and the same YAML encoder writes it:
// a third of the work for a large set. Anything the round trip would
// change otherwise (a string that is not UTF-8, a type Unstructured does
// not hold) goes through yaml.Marshal itself.
func Marshal(fields any) ([]byte, error) {
	v, ok := asJSONRoundTrip(fields, 0)
	if !ok {
		return yaml.Marshal(fields)
	}
	return yamlv2.Marshal(v)
}

// maxDepth is the nesting past which a value goes through yaml.Marshal:
// encoding/json looks for cycles (a map a template made to hold itself)
// past 1000 levels and fails, which toYaml writes as nothing.
const maxDepth = 1000

// asJSONRoundTrip returns v with each number as JSON text parsed as YAML
// gives it back, and false when the round trip would change anything else.
func asJSONRoundTrip(v any, depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	switch v := v.(type) {
	case nil, bool, int64, int:
		return v, true
	case string:
		return v, utf8.ValidString(v)
	case float64:
		// encoding/json writes a float64 under 1e21 with no exponent,
		// and YAML reads one with no fraction as an integer.
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, false // JSON has none: Marshal says so
		}
		if v != math.Trunc(v) || math.Abs(v) >= 1e21 {
			return v, true
		}
		// The integer YAML reads is the one of encoding/json's digits
		// (the shortest that give v back), not v's exact value.
		text := strconv.FormatFloat(v, 'f', -1, 64)
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, true
		}
		if u, err := strconv.ParseUint(text, 10, 64); err == nil {
			return u, true
		}
		return v, true
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if !utf8.ValidString(k) {
				return nil, false
			}
			c, ok := asJSONRoundTrip(e, depth+1)
			if !ok {
				return nil, false
			}
			out[k] = c
		}
		return out, true
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, ok := asJSONRoundTrip(e, depth+1)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	}
	return nil, false
}
