// Package sopsfixture encrypts test fixtures with the real sops CLI, as
// users keep secrets in git, for the tests of gantry's decryption.
package sopsfixture

import (
	"bufio"
	"encoding/base64"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/gantry-dev/gantry/e2e/cluster"
)

// CLI is the real sops CLI (built by make tools) and an age key of its
// own, as a user who keeps secrets in git has them.
type CLI struct {
	bin, recipient string
	// Key is the age identity that decrypts what it encrypts.
	Key string
}

// New makes a key and finds the CLI; it skips the test under -short.
func New(t *testing.T) *CLI {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the sops and age-keygen CLIs built by make tools")
	}
	sopsBin, err := cluster.Tool("sops")
	if err != nil {
		t.Fatal(err)
	}
	keygen, err := cluster.Tool("age-keygen")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "key.txt")
	if out, err := exec.Command(keygen, "-o", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("age-keygen: %v\n%s", err, out)
	}
	pub, err := exec.Command(keygen, "-y", keyFile).Output()
	if err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &CLI{bin: sopsBin, recipient: strings.TrimSpace(string(pub)), Key: string(k)}
}

// Identities parses Key.
func (c *CLI) Identities(t *testing.T) []age.Identity {
	t.Helper()
	ids, err := age.ParseIdentities(strings.NewReader(c.Key))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// Encrypt encrypts file in place with the sops CLI and returns what the
// file held before.
func (c *CLI) Encrypt(t *testing.T, file string, args ...string) []byte {
	t.Helper()
	plain, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.bin, append(append([]string{"--encrypt", "--age", c.recipient}, args...), file)...)
	cmd.Dir = t.TempDir() // no .sops.yaml above it
	cmd.Env = []string{"HOME=" + t.TempDir()}
	enc, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops --encrypt %s: %v", file, err)
	}
	if err := os.WriteFile(file, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	return plain
}

var base64Placeholder = regexp.MustCompile(`\$\{BASE64:([^}]+)\}`)

// Tree copies the folder src and encrypts the files its encrypt list names
// with the sops CLI; ${BASE64:file} in a manifest becomes that file's
// encrypted bytes, base64-encoded.
func (c *CLI) Tree(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	list, err := os.Open(filepath.Join(dir, "encrypt"))
	if err != nil {
		t.Fatal(err)
	}
	defer list.Close()
	sc := bufio.NewScanner(list)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		plain := c.Encrypt(t, filepath.Join(dir, f[0]), f[1:]...)
		enc, _ := os.ReadFile(filepath.Join(dir, f[0]))
		if strings.Contains(string(enc), strings.TrimSpace(string(plain))) {
			t.Fatalf("sops left %s in clear", f[0])
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil || !base64Placeholder.Match(b) {
			return err
		}
		b = base64Placeholder.ReplaceAllFunc(b, func(m []byte) []byte {
			enc, err := os.ReadFile(filepath.Join(dir, string(base64Placeholder.FindSubmatch(m)[1])))
			if err != nil {
				t.Fatal(err)
			}
			return []byte(base64.StdEncoding.EncodeToString(enc))
		})
		return os.WriteFile(p, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
