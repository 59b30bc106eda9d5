package pipeline

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/e2e/cluster"
)

// sopsFixture encrypts a Secret with the real sops CLI for a fresh age key,
// as Flux users keep them in git, and returns the folder and the key.
func sopsFixture(t *testing.T, extraSOPSArgs ...string) (dir, key string) {
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
	dir = t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "key.txt")
	if out, err := exec.Command(keygen, "-o", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("age-keygen: %v\n%s", err, out)
	}
	pub, err := exec.Command(keygen, "-y", keyFile).Output()
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(plain, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: shop\nstringData:\n  password: canary-sops-4d1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--encrypt", "--age", strings.TrimSpace(string(pub)), "--encrypted-regex", "^(data|stringData)$"}, extraSOPSArgs...)
	cmd := exec.Command(sopsBin, append(args, plain)...)
	cmd.Dir = t.TempDir() // no .sops.yaml above it
	cmd.Env = []string{"HOME=" + t.TempDir()}
	enc, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops --encrypt: %v", err)
	}
	if strings.Contains(string(enc), "canary-sops-4d1") {
		t.Fatal("sops did not encrypt")
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.enc.yaml"), enc, 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return dir, string(k)
}

func TestSOPSSecretDecryptedAtBuild(t *testing.T) {
	t.Parallel()
	dir, key := sopsFixture(t)
	ids, err := artifact.ParseIdentities(key)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := Build(BuildOptions{Path: dir, WorkDir: dir, SOPSIdentities: ids})
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1 {
		t.Fatalf("%d objects", len(objects))
	}
	o := objects[0]
	if _, ok := o.Object["sops"]; ok {
		t.Error("the sops metadata is still there")
	}
	if got := o.Object["stringData"].(map[string]any)["password"]; got != "canary-sops-4d1" {
		t.Errorf("password %v", got)
	}
	if o.Source != "secret.enc.yaml" || o.GetNamespace() != "shop" {
		t.Errorf("source %q namespace %q", o.Source, o.GetNamespace())
	}
}

func TestSOPSRefusals(t *testing.T) {
	t.Parallel()
	dir, _ := sopsFixture(t)
	_, otherKey := sopsFixture(t)
	other, _ := artifact.ParseIdentities(otherKey)

	_, err := Build(BuildOptions{Path: dir, WorkDir: dir})
	if err == nil || !strings.Contains(err.Error(), "secret.enc.yaml: Secret/db is encrypted with SOPS: give sops-age-key") {
		t.Errorf("without a key: %v", err)
	}
	_, err = Build(BuildOptions{Path: dir, WorkDir: dir, SOPSIdentities: other})
	if err == nil || !strings.Contains(err.Error(), "none of the sops-age-key identities can decrypt it") {
		t.Errorf("with another key: %v", err)
	}
}

// A kustomize transformer that changes an encrypted object breaks its MAC:
// refused, with why, exactly as Flux refuses it.
func TestSOPSTransformedSecretFailsIntegrity(t *testing.T) {
	t.Parallel()
	dir, key := sopsFixture(t)
	ids, _ := artifact.ParseIdentities(key)
	k := "resources: [secret.enc.yaml]\nlabels:\n  - pairs: {team: shop}\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Build(BuildOptions{Path: dir, WorkDir: dir, SOPSIdentities: ids})
	if err == nil || !strings.Contains(err.Error(), "integrity check (MAC) failed") || strings.Contains(err.Error(), "canary") {
		t.Errorf("got %v", err)
	}
	// With the MAC over encrypted values only, the same overlay builds.
	dir2, key2 := sopsFixture(t, "--mac-only-encrypted")
	ids2, _ := artifact.ParseIdentities(key2)
	if err := os.WriteFile(filepath.Join(dir2, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	objects, err := Build(BuildOptions{Path: dir2, WorkDir: dir2, SOPSIdentities: ids2})
	if err != nil || objects[0].GetLabels()["team"] != "shop" {
		t.Errorf("mac-only-encrypted with labels: %v", err)
	}
}
