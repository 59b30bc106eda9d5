package pipeline

import (
	"bytes"
	"regexp"
	"runtime"
	"sync"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resource"
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
// folder's build), and gives each part its objects or its error.
func parseManifests(parts []*manifestPart) {
	type piece struct {
		part, index int
		data        []byte
	}
	var pieces []piece
	results := make([][][]*resource.Resource, len(parts))
	failed := make([]bool, len(parts))
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
				res, err := factory.SliceFromBytes(pc.data)
				mu.Lock()
				results[pc.part][pc.index] = res
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
		if failed[i] {
			// The whole file again, for the parser's own error, which
			// counts documents from the file's start.
			var err error
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
