package sources

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Before the build, gantry reads the kustomizations of a folder for
// remote entries. That read had a door of its own (os.ReadFile after a
// size from Stat): a kustomization that is a link to /dev/zero (size 0)
// was read for ever, in gantry's own process. It reads through the
// build's reader now, which refuses what is not a regular file.
func TestKustomizationLinkToADeviceIsRefused(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	app := filepath.Join(ws, "app")
	if err := os.MkdirAll(filepath.Join(app, "base"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "kustomization.yaml"), []byte("resources: [base]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(app, "base", "kustomization.yaml")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Build(BuildOptions{Path: app, WorkDir: ws})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("want a refusal of a kustomization linked to a device, got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the build read a kustomization linked to /dev/zero without end")
	}
}
