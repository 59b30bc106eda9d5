package cluster

import (
	"archive/tar"
	"bytes"
	"context"
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
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ImageFile is one file of an image built by PushImage: its path in the
// image and the local file it is copied from.
type ImageFile struct {
	Path   string // in the image, without the leading slash: "memhog"
	Source string // a local file
}

// Image describes a small image built locally, with no Docker engine and
// nothing pulled: files copied from this machine in one layer.
type Image struct {
	// Ref is where it is pushed: host:port/name:tag, on a registry that
	// takes plain HTTP without credentials (Cluster.Registry).
	Ref string
	// Busybox, when set, is a statically linked busybox laid out as
	// /bin/busybox with a link for each applet (/bin/sh, /bin/echo...).
	Busybox string
	Files   []ImageFile
	// Entrypoint and Cmd are the image's defaults.
	Entrypoint, Cmd []string
}

// PushImage builds img and pushes it, returning its digest.
func PushImage(ctx context.Context, img Image) (string, error) {
	var entries []tarEntry
	dirs := map[string]bool{}
	addDirs := func(p string) {
		var parents []string
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if !dirs[parents[i]] {
				dirs[parents[i]] = true
				entries = append(entries, tarEntry{name: parents[i] + "/", mode: 0o755, dir: true})
			}
		}
	}
	entries = append(entries, tarEntry{name: "tmp/", mode: 0o1777, dir: true})
	dirs["tmp"] = true
	if img.Busybox != "" {
		data, err := os.ReadFile(img.Busybox)
		if err != nil {
			return "", err
		}
		list, err := exec.CommandContext(ctx, img.Busybox, "--list-full").Output()
		if err != nil {
			return "", fmt.Errorf("%s --list-full: %w", img.Busybox, err)
		}
		addDirs("bin/busybox")
		entries = append(entries, tarEntry{name: "bin/busybox", mode: 0o755, data: data})
		applets := strings.Fields(string(list))
		sort.Strings(applets)
		for _, a := range applets {
			a = strings.TrimPrefix(a, "/")
			if a == "bin/busybox" || strings.Contains(a, "..") || !strings.Contains(a, "bin/") {
				continue
			}
			addDirs(a)
			entries = append(entries, tarEntry{name: a, mode: 0o777, link: "/bin/busybox"})
		}
	}
	for _, f := range img.Files {
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return "", err
		}
		addDirs(f.Path)
		entries = append(entries, tarEntry{name: f.Path, mode: 0o755, data: data})
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		switch {
		case e.dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case e.link != "":
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, e.link
		}
		if err := tw.WriteHeader(h); err != nil {
			return "", err
		}
		if _, err := tw.Write(e.data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return "", err
	}
	image, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", err
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: time.Unix(0, 0)}
	cf.Config.Entrypoint, cf.Config.Cmd = img.Entrypoint, img.Cmd
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	image, err = mutate.ConfigFile(image, cf)
	if err != nil {
		return "", err
	}
	ref, err := name.ParseReference(img.Ref, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, image, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", img.Ref, err)
	}
	d, err := image.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

type tarEntry struct {
	name string
	mode int64
	data []byte
	dir  bool
	link string
}
