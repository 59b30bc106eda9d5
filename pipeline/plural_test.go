package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gantry-dev/gantry/sources"
)

// Counts of objects read as English: "1 object", "2 objects".
func TestObjectCountsInWords(t *testing.T) {
	t.Parallel()
	if got := []string{nObjects(0), nObjects(1), nObjects(2)}; !slices.Equal(got, []string{"0 objects", "1 object", "2 objects"}) {
		t.Errorf("got %q", got)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "cm.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	obs := &infos{}
	if _, res := Render(context.Background(), Options{Build: sources.BuildOptions{Path: file, WorkDir: dir}}, obs); !res.Succeeded() {
		t.Fatalf("%s: %s", res.Reason, res.Message)
	}
	if want := "1 object from " + file; !slices.Contains(obs.all(), want) {
		t.Errorf("infos %q, want %q", obs.all(), want)
	}
}
