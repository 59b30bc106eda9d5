package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
)

// Of an age key file as age-keygen writes it, only the key is a secret:
// its comment lines, the public key among them, are not masked.
func TestAgeKeyFileMasksOnlyTheKey(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	created := "# created: 2026-01-02T03:04:05Z"
	public := "# public key: " + id.Recipient().String()
	file := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(file, []byte(created+"\n"+public+"\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sops-age-key", "age-identities"} {
		c, err := Load(Given{Command: "diff", CommandOrigin: "the command line", Flags: map[string]string{name: file, "offline": "true", "base": "HEAD"}, Env: map[string]string{}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Contains(c.Secrets, id.String()) {
			t.Errorf("%s: the key is not masked: %q", name, c.Secrets)
		}
		for _, s := range c.Secrets {
			if strings.Contains(s, "#") || strings.Contains(s, id.Recipient().String()) {
				t.Errorf("%s: a comment line is masked: %q", name, s)
			}
		}
	}
}
