// Command image assembles gantry's container image without a Docker
// engine: one layer with the static binary at /gantry, the CA certificates
// and a statically linked busybox as /bin/sh and the usual tools (GitLab's
// Docker executor runs a job's script through a shell), entrypoint
// /gantry, running as root (GitHub requires it of container actions). It
// writes a tarball that `docker load` accepts.
//
//	go run ./hack/image -binary dist/linux-amd64/gantry -busybox bin/busybox -out dist/gantry-image.tar -tag ghcr.io/gantry-dev/gantry:dev
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
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
	busybox := flag.String("busybox", "", "a statically linked busybox, the image's shell and tools; empty for none")
	out := flag.String("out", "dist/gantry-image.tar", "the image tarball to write")
	tag := flag.String("tag", "ghcr.io/gantry-dev/gantry:dev", "the image's name")
	arch := flag.String("arch", "amd64", "the image's architecture")
	version := flag.String("version", "dev", "the org.opencontainers.image.version label")
	flag.Parse()
	if err := run(*binary, *ca, *busybox, *out, *tag, *arch, *version); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(binary, ca, busybox, out, tag, arch, version string) error {
	img, err := build(binary, ca, busybox, arch, version)
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
func build(binary, ca, busybox, arch, version string) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	certs, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	files := []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "gantry", mode: 0o755, data: bin},
	}
	if busybox != "" {
		shell, err := shellFiles(busybox)
		if err != nil {
			return nil, err
		}
		files = append(files, shell...)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		switch {
		case f.dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case f.link != "":
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, f.link
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

// file is one entry of the image's layer: a directory, a file or a
// symbolic link.
type file struct {
	name string
	mode int64
	data []byte
	dir  bool
	link string
}

// shellFiles are busybox at /bin/busybox and a link to it for each of its
// applets (/bin/sh, /bin/mkdir, /usr/bin/env...), as busybox --install -s
// lays them out. busybox must be linked statically: the image has no C
// library.
func shellFiles(busybox string) ([]file, error) {
	data, err := os.ReadFile(busybox)
	if err != nil {
		return nil, err
	}
	exe, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", busybox, err)
	}
	for _, p := range exe.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is linked dynamically; the image needs a static busybox (Debian's busybox-static)", busybox)
		}
	}
	list, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", busybox, err)
	}
	dirs := map[string]bool{"bin/": true}
	files := []file{{name: "bin/", mode: 0o755, dir: true}, {name: "bin/busybox", mode: 0o755, data: data}}
	var links []file
	for _, applet := range strings.Fields(string(list)) {
		applet = strings.TrimPrefix(applet, "/")
		if applet == "bin/busybox" || strings.Contains(applet, "..") || !strings.Contains(applet, "bin/") {
			continue // busybox itself, and /linuxrc
		}
		for d := path.Dir(applet); d != "."; d = path.Dir(d) {
			if !dirs[d+"/"] {
				dirs[d+"/"] = true
				files = append(files, file{name: d + "/", mode: 0o755, dir: true})
			}
		}
		links = append(links, file{name: applet, mode: 0o777, link: "/bin/busybox"})
	}
	// Parents before children, links sorted: the same busybox gives the
	// same layer.
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	sort.Slice(links, func(i, j int) bool { return links[i].name < links[j].name })
	return append(files, links...), nil
}
