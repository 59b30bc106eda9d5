package sources

import (
	"bytes"
	"fmt"
)

// ManifestsYAML serialises objects as the YAML stream an artifact holds.
// Objects that were SOPS-encrypted go in encrypted, as they were in git
// (a build that keeps encryption made them): decrypted secrets never
// reach a registry.
func ManifestsYAML(objects []*Object) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objects {
		y, err := EncodeYAML(o.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Ref(), err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}
