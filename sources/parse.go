package sources

import (
	"bytes"
	"errors"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/gantry-dev/gantry/sources/yamlbound"
)

// manifestPart is one entry of a plain folder, in the folder's order: a
// manifest file to parse, or what a subfolder's kustomization built.
type manifestPart struct {
	source string
	data   []byte
	parse  bool
	items  []sourced
	err    error
}

// parseManifests parses the parts' files with kustomize's parser, files
// and large files' pieces on every core (parsing YAML is most of a plain
// folder's build), and gives each part its objects or its error. Every
// document passes the bounded parser (yamlbound) before kustomize's
// expands its aliases: a part refused names its file.
func parseManifests(parts []*manifestPart) {
	type piece struct {
		part, index int
		data        []byte
	}
	var pieces []piece
	results := make([][][]*resource.Resource, len(parts))
	failed := make([]bool, len(parts))
	// refusals are the bounded parser's, by part: a document whose
	// aliases expand out of proportion is refused before any parser
	// expands it, whatever made the part (a file of a folder, a chart's
	// CRD, template or hook).
	refusals := make([]error, len(parts))
	for i, part := range parts {
		if !part.parse {
			continue
		}
		split := splitManifest(part.data, 2*runtime.GOMAXPROCS(0))
		results[i] = make([][]*resource.Resource, len(split))
		for j, data := range split {
			pieces = append(pieces, piece{part: i, index: j, data: data})
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan piece)
	for range min(runtime.GOMAXPROCS(0), len(pieces)) {
		wg.Go(func() {
			factory := provider.NewDefaultDepProvider().GetResourceFactory()
			for pc := range next {
				res, err := parseDocuments(factory, pc.data)
				mu.Lock()
				results[pc.part][pc.index] = res
				var refused *yamlbound.Error
				if errors.As(err, &refused) && refusals[pc.part] == nil {
					refusals[pc.part] = err
				}
				if err != nil {
					failed[pc.part] = true
				}
				mu.Unlock()
			}
		})
	}
	for _, pc := range pieces {
		next <- pc
	}
	close(next)
	wg.Wait()

	factory := provider.NewDefaultDepProvider().GetResourceFactory()
	for i, part := range parts {
		if !part.parse {
			continue
		}
		var resources []*resource.Resource
		if refusals[i] != nil {
			part.err = &BuildError{File: part.source, Err: asLimit(refusals[i])}
			continue
		}
		if failed[i] {
			// The whole file again, for the parser's own error, which
			// counts documents from the file's start; judged whole
			// first, as a piece that does not parse was judged only up
			// to its first bad document.
			var err error
			if err = checkAliases(part.data); err != nil {
				part.err = &BuildError{File: part.source, Err: err}
				continue
			}
			if resources, err = factory.SliceFromBytes(part.data); err != nil {
				part.err = &BuildError{File: part.source, Err: err}
				continue
			}
		} else {
			for _, res := range results[i] {
				resources = append(resources, res...)
			}
		}
		part.items = make([]sourced, 0, len(resources))
		for _, res := range resources {
			if v, ok := res.GetAnnotations()[konfig.IgnoredByKustomizeAnnotation]; ok && v != "false" {
				continue // local configuration, as kustomize drops it
			}
			part.items = append(part.items, sourced{res: res, source: part.source})
		}
	}
}

// separator is how kustomize's reader finds YAML document separators (kio
// splitDocuments): a line that starts with ---, matched left to right.
var separator = regexp.MustCompile(`\n---.*\n`)

// minPiece is the smallest piece of a file worth parsing on its own.
const minPiece = 32 << 10

// splitManifest cuts a large YAML stream into up to n pieces that
// kustomize's reader parses to the same documents as the whole: it cuts
// only at separators kio would find that are a bare "---" line, keeps the
// newline before the cut with the first piece (kio appends it to every
// document but the last), and leaves at least one separator inside every
// piece, since kio unwraps a List only from a stream of one document.
// A stream that may hold a List at all is left whole: kustomize moves a
// List's items to the end of the file's objects, which pieces would
// change. So is one with line endings other than \n, or with escapes,
// through which a kind could spell List.
func splitManifest(data []byte, n int) [][]byte {
	if len(data) < 2*minPiece || n < 2 || bytes.ContainsAny(data, "\r\\") || bytes.Contains(data, []byte("List")) {
		return [][]byte{data}
	}
	seps := separator.FindAllIndex(data, -1)
	size := max(len(data)/n, minPiece)
	var pieces [][]byte
	start, inside := 0, 0 // where the piece starts; separators in it
	for k, loc := range seps {
		last := len(seps) - 1 - k // separators after this one
		if loc[1]-loc[0] == len("\n---\n") && inside > 0 && last > 0 && loc[0]-start >= size && len(data)-loc[1] >= minPiece {
			pieces = append(pieces, data[start:loc[0]+1])
			start, inside = loc[1], 0
			continue
		}
		inside++
	}
	return append(pieces, data[start:])
}

// parseDocuments is factory.SliceFromBytes(data) without the cost of
// kyaml's de-anchoring where it changes nothing. kio.FromBytes de-anchors
// every document, and that copies every mapping at every depth: for a CRD
// of a megabyte, nested twenty deep, it is most of the parse. A document
// with no anchor, alias or merge key, nor a "<<" key (which de-anchoring
// deletes), comes out of it unchanged, so only the other documents are
// de-anchored. Whatever else SliceFromBytes does (a List to inline, a
// document it refuses) is left to SliceFromBytes itself, so that the
// objects and errors are kustomize's own.
//
// Both de-anchor: every document is first judged by the bounded parser
// (the tree read here, or the bytes before SliceFromBytes reads them), and
// a refusal is a *yamlbound.Error.
func parseDocuments(factory *resource.Factory, data []byte) ([]*resource.Resource, error) {
	sliceFromBytes := func() ([]*resource.Resource, error) {
		if err := yamlbound.Check(data); err != nil {
			return nil, err
		}
		return factory.SliceFromBytes(data)
	}
	nodes, err := (&kio.ByteReader{OmitReaderAnnotations: true, Reader: bytes.NewReader(data)}).Read()
	if err != nil {
		return sliceFromBytes()
	}
	for _, n := range nodes {
		// kyaml reads fields of mappings only, and panics on anything
		// else: a document that is not one (a list at the top) gets
		// kustomize's own answer.
		if y := n.YNode(); y == nil || y.Kind != yaml.MappingNode || len(y.Content)%2 != 0 {
			return sliceFromBytes()
		}
		if !anchorFree(n.YNode()) {
			if err := yamlbound.CheckNode(n.YNode()); err != nil {
				return nil, err
			}
			if err := n.DeAnchor(); err != nil {
				return sliceFromBytes()
			}
		}
		if strings.HasSuffix(n.GetKind(), "List") {
			return sliceFromBytes()
		}
	}
	// ResourcesFromRNodes drops empty documents and refuses one without
	// kind or name, as SliceFromBytes does. Local configuration is kept,
	// as SliceFromBytes keeps it (the caller drops it): by a copy of the
	// factory that includes it.
	keeping := *factory
	keeping.IncludeLocalConfigs = true
	return keeping.ResourcesFromRNodes(nodes)
}

// anchorFree reports whether de-anchoring would leave n as it is: no node
// defines an anchor, is an alias or a merge key, and no mapping has a "<<"
// key (de-anchoring deletes it, merge tag or not).
func anchorFree(n *yaml.Node) bool {
	if n == nil {
		return true
	}
	if n.Anchor != "" || n.Tag == yaml.MergeTag {
		return false
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return true
	case yaml.MappingNode:
		for i := 0; i < len(n.Content); i += 2 {
			if n.Content[i].Value == "<<" {
				return false
			}
		}
	case yaml.DocumentNode, yaml.SequenceNode:
	default: // an alias, or a kind de-anchoring refuses
		return false
	}
	for _, c := range n.Content {
		if !anchorFree(c) {
			return false
		}
	}
	return true
}
