// Command image assembles gantry's container image without a Docker
// engine: one layer with the static binary at /gantry and the CA
// certificates, entrypoint /gantry, running as root (GitHub requires it of
// container actions). It writes a tarball that `docker load` accepts.
//
//	go run ./hack/image -binary dist/linux-amd64/gantry -out dist/gantry-image.tar -tag ghcr.io/gantry-dev/gantry:dev
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	binary := flag.String("binary", "", "the static gantry binary")
	ca := flag.String("ca", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates bundle")
	out := flag.String("out", "dist/gantry-image.tar", "the image tarball to write")
	tag := flag.String("tag", "ghcr.io/gantry-dev/gantry:dev", "the image's name")
	arch := flag.String("arch", "amd64", "the image's architecture")
	version := flag.String("version", "dev", "the org.opencontainers.image.version label")
	flag.Parse()
	if err := run(*binary, *ca, *out, *tag, *arch, *version); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(binary, ca, out, tag, arch, version string) error {
	img, err := build(binary, ca, arch, version)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return err
	}
	layers, _ := img.Layers()
	var compressed int64
	for _, l := range layers {
		s, _ := l.Size()
		compressed += s
	}
	d, _ := img.Digest()
	fmt.Printf("%s %s: %d bytes compressed\n", ref, d, compressed)
	return nil
}

// build assembles the image. File times are zeroed, so the same binary
// gives the same image.
func build(binary, ca, arch, version string) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	certs, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "gantry", mode: 0o755, data: bin},
	} {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithCompressionLevel(gzip.BestCompression))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: time.Unix(0, 0)}
	cf.Config.Entrypoint = []string{"/gantry"}
	cf.Config.User = "0:0" // GitHub runs container actions as root
	cf.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.source":  "https://github.com/gantry-dev/gantry",
		"org.opencontainers.image.version": version,
	}
	return mutate.ConfigFile(img, cf)
}
