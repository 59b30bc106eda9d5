package main

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	// A stand-in for busybox: static, as Go builds it, and listing applets.
	busybox := filepath.Join(dir, "busybox")
	writeBusybox(t, busybox)
	if err := run(bin, ca, busybox, out, "ghcr.io/gantry-dev/gantry:test", "amd64", "test"); err != nil {
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
	files, links := map[string]int64{}, map[string]string{}
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
		if h.Typeflag == tar.TypeSymlink {
			links[h.Name] = h.Linkname
		}
		if h.ModTime.Unix() != 0 {
			t.Errorf("%s has a timestamp", h.Name)
		}
	}
	if files["gantry"] != 0o755 || files["etc/ssl/certs/ca-certificates.crt"] != 0o644 || files["bin/busybox"] != 0o755 {
		t.Errorf("files %v", files)
	}
	// The shell and the tools a job script uses, each a link to busybox.
	wantLinks := map[string]string{"bin/sh": "/bin/busybox", "bin/mkdir": "/bin/busybox", "usr/bin/env": "/bin/busybox"}
	if diff := cmp.Diff(wantLinks, links); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
	if _, ok := files["usr/bin/"]; !ok {
		t.Errorf("no usr/bin/ for usr/bin/env: %v", files)
	}

	// The same binary gives the same image.
	again, err := build(bin, ca, busybox, "amd64", "test")
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("digests %s and %s", d1, d2)
	}
}

// writeBusybox builds a static program that lists applets as busybox
// --list-full does.
func writeBusybox(t *testing.T, out string) {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(`package main

import "fmt"

func main() { fmt.Println("bin/sh\nbin/mkdir\nusr/bin/env\nbin/busybox") }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module busybox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir, cmd.Env = src, append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
}

// A busybox that needs a C library would not run in the image.
func TestDynamicBusyboxRefused(t *testing.T) {
	t.Parallel()
	ls, err := exec.LookPath("ls")
	if err != nil {
		t.Skip("no ls")
	}
	_, err = shellFiles(ls)
	if err == nil || !strings.Contains(err.Error(), "linked dynamically") {
		t.Errorf("got %v", err)
	}
}
