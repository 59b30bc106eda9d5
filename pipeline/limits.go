package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// What one build may read: limits that real configuration never reaches,
// so that a file in a pull request cannot exhaust the runner's memory.
const (
	// DefaultMaxFileBytes bounds one file the build reads (the largest
	// CRDs people ship are a few MB).
	DefaultMaxFileBytes = 32 << 20
	// DefaultMaxObjects bounds the objects of one set.
	DefaultMaxObjects = 100_000
)

// LimitError is input over one of the build's limits.
type LimitError struct{ msg string }

func (e *LimitError) Error() string { return e.msg }

// boundedFS refuses files over the size limit and YAML whose aliases
// expand out of proportion (a "billion laughs" bomb: a few lines that
// kustomize would expand into gigabytes), with the rule of the YAML
// library kubectl and kustomize use, before kustomize parses them.
type boundedFS struct {
	filesys.FileSystem
	maxBytes int64
}

func (f boundedFS) ReadFile(name string) ([]byte, error) {
	if info, err := os.Stat(name); err == nil && info.Mode().IsRegular() && info.Size() > f.maxBytes {
		return nil, &LimitError{fmt.Sprintf("%d bytes, over the limit of %d bytes for one file (max-file-bytes)", info.Size(), f.maxBytes)}
	}
	data, err := f.FileSystem.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > f.maxBytes {
		return nil, &LimitError{fmt.Sprintf("%d bytes, over the limit of %d bytes for one file (max-file-bytes)", len(data), f.maxBytes)}
	}
	if err := checkAliases(data); err != nil {
		return nil, err
	}
	return data, nil
}

// checkAliases decodes every YAML document of data that could hold
// aliases, which counts their expansion as it goes and stops at once when
// it is out of proportion. Only that is judged here: other YAML errors
// are kustomize's to report, in its words.
func checkAliases(data []byte) (err error) {
	if !bytes.Contains(data, []byte("&")) || !bytes.Contains(data, []byte("*")) {
		return nil // no anchor and alias, nothing to expand
	}
	defer func() {
		if r := recover(); r != nil {
			err = nil // a decoder panic is a malformed file, for kustomize to report
		}
	}()
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if strings.Contains(err.Error(), "excessive aliasing") {
				return &LimitError{"its YAML aliases expand out of proportion (excessive aliasing): refused, as kubectl refuses it"}
			}
			return nil
		}
	}
}
