package sources

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Whatever a manifest file holds, the build returns objects with a kind
// and an apiVersion, or an error naming a file, and never panics, hangs
// on aliases or grows without bound (the file limit is small here).
func FuzzManifestDecoding(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n"))
	f.Add([]byte("---\n- a\n- b\n---\njust text\n"))
	f.Add([]byte(billionLaughs))
	f.Add([]byte("{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"metadata\": {\"name\": \"s\"}, \"sops\": {\"mac\": \"ENC[AES256_GCM,x]\"}}"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "m.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		objects, err := Build(BuildOptions{Path: dir, WorkDir: dir, MaxFileBytes: 64 << 10, MaxObjects: 1000})
		if err != nil {
			var be *BuildError
			if !errors.As(err, &be) || be.File == "" {
				t.Fatalf("an error that names no file: %v", err)
			}
			return
		}
		for _, o := range objects {
			if o.GetKind() == "" || o.GetAPIVersion() == "" {
				t.Fatalf("an object without kind or apiVersion: %v", o.Object)
			}
		}
	})
}
