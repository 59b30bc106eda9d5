package reader

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Each refusal is typed, names the file as it was named, and holds none
// of its content.
func TestRefusals(t *testing.T) {
	t.Parallel()
	tr := newFuzzTree(t)
	in := func(p string) string { return filepath.Join(tr.root, filepath.FromSlash(p)) }
	links := map[string]string{
		"gitcfg":        ".git/config",
		"gitdir":        ".git",
		"up":            "..",
		"out":           filepath.Join(tr.outside, "secret"),
		"cred-link":     "cred.yaml",
		"loop":          "loop",
		"dir/back/link": "../../.git/config",
	}
	for link, target := range links {
		if err := os.MkdirAll(filepath.Dir(in(link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, in(link)); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"hard-git": ".git/config", "hard-cred": "cred.yaml", "dir/hard-key": "creds/key"} {
		if err := os.Link(in(target), in(name)); err != nil {
			t.Skipf("no hard links here: %v", err)
		}
	}
	if err := syscall.Mkfifo(in("fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in("big.yaml"), make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	r := New(Options{Root: tr.root, Deny: []string{in("cred.yaml"), in("creds")}, MaxFileBytes: 1024})
	for name, want := range map[string]Kind{
		".git/config":       Git,
		"gitcfg":            Git,
		"gitdir/config":     Git,
		"dir/back/link":     Git,
		"hard-git":          Git,
		"up/root/gitcfg":    Git,
		"up/outside/secret": Outside,
		"out":               Outside,
		"../outside/secret": Outside,
		"cred.yaml":         Credential,
		"cred-link":         Credential,
		"hard-cred":         Credential,
		"dir/hard-key":      Credential,
		"creds/key":         Credential,
		"loop":              Unresolved,
		"fifo.yaml":         NotRegular,
		"big.yaml":          TooLarge,
	} {
		b, err := r.ReadFile(in(name))
		var refused *Error
		if !errors.As(err, &refused) || refused.Kind != want || b != nil {
			t.Errorf("%s: got %q, %v; want a refusal of kind %d", name, b, err, want)
			continue
		}
		if !strings.HasPrefix(err.Error(), in(name)+": ") {
			t.Errorf("%s: the refusal does not name it: %v", name, err)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), string(s)) {
				t.Errorf("%s: the refusal quotes a secret: %v", name, err)
			}
		}
	}
	if b, err := r.ReadFile(in("dir/ok.yaml")); err != nil || string(b) != "c: d\n" {
		t.Errorf("a file of the workspace: %q, %v", b, err)
	}
	if _, err := r.ReadFile(in("missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// A walk reads the folder's files, leaves git's folder out, and fails
// on the first file it may not read, named by its path in the folder;
// it is bounded in count and size.
func TestWalk(t *testing.T) {
	t.Parallel()
	tr := newFuzzTree(t)
	r := New(Options{Root: tr.root})
	var got []string
	err := r.Walk(filepath.Join(tr.root, "dir"), WalkOptions{}, func(name string, _ []byte) error {
		got = append(got, name)
		return nil
	})
	if err != nil || strings.Join(got, " ") != "ok.yaml sub/.keep" {
		t.Errorf("walk: %v, %v", got, err)
	}
	if err := os.Symlink("../../.git/config", filepath.Join(tr.root, "dir", "sub", "cfg")); err != nil {
		t.Fatal(err)
	}
	var refused *Error
	err = r.Walk(tr.root, WalkOptions{Skip: func(name string, _ os.FileInfo) bool { return name == "cred.yaml" || name == "creds" }}, func(string, []byte) error { return nil })
	if !errors.As(err, &refused) || refused.Kind != Git || refused.Path != "dir/sub/cfg" {
		t.Errorf("a link to .git/config in the walk: %v", err)
	}
	err = r.Walk(filepath.Join(tr.root, "dir"), WalkOptions{}, func(string, []byte) error { return nil })
	if !errors.As(err, &refused) || refused.Kind != Outside || refused.Path != "sub/cfg" {
		t.Errorf("a link out of the walk's folder: %v", err)
	}
	if err := os.Remove(filepath.Join(tr.root, "dir", "sub", "cfg")); err != nil {
		t.Fatal(err)
	}
	err = r.Walk(filepath.Join(tr.root, "dir"), WalkOptions{MaxFiles: 1}, func(string, []byte) error { return nil })
	if !errors.As(err, &refused) || refused.Kind != TooMany {
		t.Errorf("over the count: %v", err)
	}
	err = r.Walk(filepath.Join(tr.root, "dir"), WalkOptions{MaxTotalBytes: 2}, func(string, []byte) error { return nil })
	if !errors.As(err, &refused) || refused.Kind != TooMany {
		t.Errorf("over the size: %v", err)
	}
}
