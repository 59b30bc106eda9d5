package reader

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The secrets of the tree the fuzzer builds: none is ever read.
var (
	gitSecret     = []byte("GIT-CONFIG-SECRET-extraheader-c2VjcmV0")
	headSecret    = []byte("GIT-HEAD-SECRET-refs")
	credSecret    = []byte("CREDENTIAL-FILE-SECRET-kubeconfig")
	credDirSecret = []byte("CREDENTIAL-FOLDER-SECRET-key")
	outSecret     = []byte("OUTSIDE-SECRET-canary")
)

var secrets = [][]byte{gitSecret, headSecret, credSecret, credDirSecret, outSecret}

// fuzzTree is a workspace beside a folder outside it:
//
//	base/root/.git/config      gitSecret (a checkout's token)
//	base/root/.git/HEAD        headSecret
//	base/root/cred.yaml        credSecret (deny-listed)
//	base/root/creds/key        credDirSecret (its folder deny-listed)
//	base/root/ok.yaml, base/root/dir/ok.yaml, base/root/dir/sub/
//	base/outside/secret        outSecret
//	base/outside/linked        no secret: see the hard links
type fuzzTree struct {
	base, root, outside string
}

func newFuzzTree(t *testing.T) fuzzTree {
	base := t.TempDir()
	tr := fuzzTree{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	for name, content := range map[string][]byte{
		"root/.git/config":   gitSecret,
		"root/.git/HEAD":     headSecret,
		"root/cred.yaml":     credSecret,
		"root/creds/key":     credDirSecret,
		"root/ok.yaml":       []byte("a: b\n"),
		"root/dir/ok.yaml":   []byte("c: d\n"),
		"root/dir/sub/.keep": nil,
		"outside/secret":     outSecret,
		"outside/linked":     []byte("linked from outside by a hard link\n"),
	} {
		p := filepath.Join(base, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// places are the folders of the workspace links are made in.
var places = []string{"", "dir/", "dir/sub/", "creds/"}

// target is the link target numbered n, for a link named name in the
// folder place of the workspace; prev is the link made before it.
func (tr fuzzTree) target(n byte, place, name, prev string) string {
	up := strings.Repeat("../", strings.Count(place, "/"))
	targets := []string{
		".git", ".git/config", up + ".git/config", up + ".git", up + ".git/HEAD",
		"cred.yaml", up + "cred.yaml", up + "creds", up + "creds/key",
		filepath.Join(tr.root, ".git", "config"), filepath.Join(tr.root, ".git"), filepath.Join(tr.root, "cred.yaml"),
		filepath.Join(tr.outside, "secret"), tr.outside, up + "../outside/secret", up + "../outside",
		"..", "../..", up, up + "..", "/", ".",
		name, prev, "dir", up + "dir", tr.root,
		"/proc/self/root" + filepath.Join(tr.root, ".git", "config"),
		up + "ok.yaml", "nowhere", up + ".git/../.git/config", up + "dir/../.git/config",
	}
	return targets[int(n)%len(targets)]
}

// hardTargets are what hard links are made to: two files refused by
// identity, and a file outside. A hard link is the file itself, where
// it is made: one made in the workspace to a file outside it is a file of
// the workspace (a checkout makes none), so that file holds no secret;
// the secret outside is reached only by symbolic links.
func (tr fuzzTree) hardTarget(n byte) string {
	targets := []string{
		filepath.Join(tr.root, ".git", "config"),
		filepath.Join(tr.root, ".git", "HEAD"),
		filepath.Join(tr.root, "cred.yaml"),
		filepath.Join(tr.root, "creds", "key"),
		filepath.Join(tr.outside, "linked"),
	}
	return targets[int(n)%len(targets)]
}

// rawString takes a length and that many bytes from data.
func rawString(data []byte) (string, []byte) {
	if len(data) == 0 {
		return "", data
	}
	n := min(int(data[0])%48, len(data)-1)
	s := strings.ReplaceAll(string(data[1:1+n]), "\x00", "_")
	return s, data[1+n:]
}

// FuzzReaderStaysInside builds, from the fuzzer's bytes, symbolic links
// (to .git, .git/config, the credential files, outside, .., absolute
// paths, loops and chains) and hard links in a workspace, then reads every
// path the fuzzer names and walks the workspace and its folders: no read
// that succeeds returns a secret's bytes.
func FuzzReaderStaysInside(f *testing.F) {
	// An op is three bytes: what (symbolic link to a numbered target,
	// hard link, symbolic link to a raw target, a raw path to read), the
	// place, the target; raw strings follow as a length and bytes.
	for _, seed := range [][]byte{
		{0, 0, 1},                      // gitcfg -> .git/config
		{0, 0, 0},                      // -> .git
		{0, 1, 2},                      // dir/x -> ../.git/config
		{0, 0, 5},                      // -> cred.yaml
		{0, 3, 5},                      // creds/x -> cred.yaml
		{0, 0, 9},                      // -> /abs/root/.git/config
		{0, 0, 12},                     // -> /abs/outside/secret
		{0, 0, 14},                     // -> ../outside/secret
		{0, 1, 16, 0, 0, 23},           // dir/l0 -> .., l1 -> dir/l0 (a chain)
		{0, 0, 22},                     // a loop: l0 -> l0
		{0, 0, 16, 0, 0, 23, 0, 0, 23}, // chains of links to ..
		{0, 0, 27},                     // /proc/self/root/...
		{0, 1, 30},                     // ../.git/../.git/config
		{0, 1, 31},                     // ../dir/../.git/config
		{1, 0, 0},                      // a hard link to .git/config
		{1, 1, 1},                      // dir/: a hard link to .git/HEAD
		{1, 0, 2},                      // a hard link to cred.yaml
		{1, 1, 3},                      // a hard link to creds/key
		{1, 0, 4},                      // a hard link to a file outside
		{2, 0, 0, 11, '.', 'g', 'i', 't', '/', 'c', 'o', 'n', 'f', 'i', 'g'},
		{3, 0, 0, 11, '.', 'g', 'i', 't', '/', 'c', 'o', 'n', 'f', 'i', 'g'},
		{3, 0, 0, 17, 'd', 'i', 'r', '/', '.', '.', '/', '.', 'g', 'i', 't', '/', 'H', 'E', 'A', 'D'},
		{0, 0, 16, 3, 0, 0, 14, 'l', '0', '/', '.', 'g', 'i', 't', '/', 'c', 'o', 'n', 'f'},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := newFuzzTree(t)
		var links, names []string
		prev := "l0"
		for i := 0; len(data) >= 3 && i < 24; i++ {
			kind, place, n := data[0]%4, places[int(data[1])%len(places)], data[2]
			data = data[3:]
			name := place + "l" + string(rune('a'+i%26))
			if n%3 == 0 {
				name += ".yaml"
			}
			full := filepath.Join(tr.root, filepath.FromSlash(name))
			switch kind {
			case 0:
				if os.Symlink(tr.target(n, place, filepath.Base(name), filepath.Base(prev)), full) == nil {
					links = append(links, full)
				}
			case 1:
				if os.Link(tr.hardTarget(n), full) == nil {
					links = append(links, full)
				}
			case 2:
				var raw string
				raw, data = rawString(data)
				if raw != "" && os.Symlink(raw, full) == nil {
					links = append(links, full)
				}
			case 3:
				var raw string
				raw, data = rawString(data)
				if raw != "" {
					names = append(names, raw)
				}
			}
			prev = name
		}
		r := New(Options{
			Root: tr.root,
			Deny: []string{filepath.Join(tr.root, "cred.yaml"), filepath.Join(tr.root, "creds")},
		})
		check := func(what string, b []byte) {
			t.Helper()
			for _, s := range secrets {
				if bytes.Contains(b, s) {
					t.Fatalf("%s read a secret (%s)", what, s)
				}
			}
		}
		read := func(rd *Reader, p string) {
			t.Helper()
			b, err := rd.ReadFile(p)
			if err == nil {
				check("ReadFile("+p+")", b)
			} else if strings.Contains(err.Error(), string(gitSecret)) {
				t.Fatalf("an error quotes a secret: %v", err)
			}
		}
		fixed := []string{".git/config", ".git/HEAD", ".git", "cred.yaml", "creds/key", "ok.yaml", "dir/ok.yaml",
			"dir/../.git/config", "../outside/secret", "dir/sub/../../.git/config"}
		for _, p := range fixed {
			read(r, filepath.Join(tr.root, p))
		}
		read(r, filepath.Join(tr.outside, "secret"))
		for _, p := range links {
			read(r, p)
			read(r.Within(filepath.Dir(p)), p)
		}
		for _, p := range names {
			if !filepath.IsAbs(p) {
				read(r, filepath.Join(tr.root, p))
				read(r.Within(filepath.Join(tr.root, "dir")), filepath.Join(tr.root, "dir", p))
			}
			read(r, p)
		}
		walk := func(dir string) {
			_ = r.Walk(dir, WalkOptions{MaxFiles: 1000, MaxTotalBytes: 1 << 20}, func(name string, b []byte) error {
				check("Walk("+dir+") at "+name, b)
				return nil
			})
		}
		walk(tr.root)
		walk(filepath.Join(tr.root, "dir"))
		for _, p := range links {
			// A walk's folder is its caller's to choose: those the
			// links lead to inside the workspace.
			if real, err := filepath.EvalSymlinks(p); err == nil && r.Inside(real) {
				if info, err := os.Stat(real); err == nil && info.IsDir() {
					walk(p)
				}
			}
		}
	})
}
