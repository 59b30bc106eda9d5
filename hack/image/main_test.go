package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestImage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, ca, out := filepath.Join(dir, "gantry"), filepath.Join(dir, "ca.crt"), filepath.Join(dir, "image.tar")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(bin, ca, out, "ghcr.io/gantry-dev/gantry:test", "amd64", "test"); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/gantry"}, cf.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if cf.Config.User != "0:0" || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("user %q os %q arch %q", cf.Config.User, cf.OS, cf.Architecture)
	}
	layers, _ := img.Layers()
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h.Mode
		if h.ModTime.Unix() != 0 {
			t.Errorf("%s has a timestamp", h.Name)
		}
	}
	if files["gantry"] != 0o755 || files["etc/ssl/certs/ca-certificates.crt"] != 0o644 {
		t.Errorf("files %v", files)
	}

	// The same binary gives the same image.
	again, err := build(bin, ca, "amd64", "test")
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("digests %s and %s", d1, d2)
	}
}
