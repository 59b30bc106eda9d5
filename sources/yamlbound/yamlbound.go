// Package yamlbound is the one parser of YAML that gantry reads from
// sources it does not control: a pull request's files, a chart's
// rendered output, a git tree, an artifact, a repository's index. Every
// document is judged on its node tree, before anything expands its
// aliases: one whose aliases would expand out of proportion (a "billion
// laughs" bomb, a few hundred bytes that a parser which expands aliases
// turns into gigabytes) or whose anchor contains an alias of itself is
// refused. The decoders here check first and then decode with the
// library a caller would use itself, so that what they give, and their
// errors, are that library's.
//
// Sizes are not judged here: what a parser allocates for a document
// without aliases is proportional to its bytes, and every read of a
// source is bounded (max-file-bytes) before it is parsed.
package yamlbound

import (
	"bytes"
	"errors"
	"io"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// Error is a document refused for its aliases.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

var (
	errExpansion = &Error{"its YAML aliases expand out of proportion (excessive aliasing): refused, as kubectl refuses it"}
	errCycle     = &Error{"a YAML anchor contains an alias of itself: refused"}
)

// maxExpansion bounds how many nodes one document may expand to through
// its aliases, beyond what it holds itself: far more than any real set
// uses, far less than a bomb needs.
const maxExpansion = 1 << 20

// Check reads every YAML document of data that could hold aliases as a
// node tree, without expanding anything, and refuses (with an *Error) a
// document whose aliases would expand out of proportion or whose anchor
// contains an alias of itself. Only that is judged: data that is not
// YAML passes, for the parser that reads it next to report in its own
// words (no parser expands what it cannot read).
func Check(data []byte) (err error) {
	if !bytes.Contains(data, []byte("&")) || !bytes.Contains(data, []byte("*")) {
		return nil // no anchor and alias, nothing to expand
	}
	defer func() {
		if r := recover(); r != nil {
			err = nil // a parser panic is a malformed file, for its reader to report
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
			return nil //nolint:nilerr // malformed: its reader reports it
		}
		if err := CheckNode(&doc); err != nil {
			return err
		}
	}
}

// CheckNode judges one document already read as a node tree (by kyaml,
// whose nodes are yaml.v3's), before anything expands its aliases: a
// reader that has the tree need not parse the bytes again.
func CheckNode(doc *yaml3.Node) error {
	c := &aliasCheck{size: map[*yaml3.Node]int{}, open: map[*yaml3.Node]bool{}}
	n, err := c.expand(doc)
	if err != nil {
		return err
	}
	if n > maxExpansion && n > 100*c.nodes {
		return errExpansion
	}
	return nil
}

type aliasCheck struct {
	size  map[*yaml3.Node]int  // expanded size of each node seen
	open  map[*yaml3.Node]bool // the nodes being sized: an alias of one is a cycle
	nodes int                  // nodes the document holds
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
		return 0, errCycle
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
				return 0, errExpansion
			}
		}
	}
	c.size[n] = total
	return total, nil
}

// Unmarshal is Check, then sigs.k8s.io/yaml.Unmarshal: the first
// document of data into v, through JSON, as Kubernetes reads YAML.
func Unmarshal(data []byte, v any, opts ...yaml.JSONOpt) error {
	if err := Check(data); err != nil {
		return err
	}
	return yaml.Unmarshal(data, v, opts...)
}

// YAMLToJSON is Check, then sigs.k8s.io/yaml.YAMLToJSON.
func YAMLToJSON(data []byte) ([]byte, error) {
	if err := Check(data); err != nil {
		return nil, err
	}
	return yaml.YAMLToJSON(data)
}

// Node is the first document of data as a yaml.v3 node tree (a document
// node; empty for empty data), checked: what yaml.v3's Unmarshal into a
// Node gives, its errors unchanged. A caller that follows an alias of the
// tree may do so: no document that expands out of proportion is given.
func Node(data []byte) (*yaml3.Node, error) {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if err := CheckNode(&doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// Documents are the documents of a YAML stream as yaml.v3 node trees,
// each checked. At the first document that does not parse, or is
// refused, it returns those before it and the error.
func Documents(data []byte) ([]*yaml3.Node, error) {
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	var docs []*yaml3.Node
	for {
		var doc yaml3.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, err
		}
		if err := CheckNode(&doc); err != nil {
			return docs, err
		}
		docs = append(docs, &doc)
	}
}
