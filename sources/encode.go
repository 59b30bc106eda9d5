package sources

import "github.com/gantry-dev/gantry/sources/yamlenc"

// EncodeYAML encodes an object's fields (as Unstructured holds them) to
// the bytes sigs.k8s.io/yaml.Marshal gives, without its round trip
// through JSON (yamlenc.Marshal).
func EncodeYAML(fields any) ([]byte, error) { return yamlenc.Marshal(fields) }
