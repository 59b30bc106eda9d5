package result

import (
	"slices"
	"testing"
)

func TestDiffLabelsSayWhatWouldHappen(t *testing.T) {
	got := Labels("diff", Actions)
	want := []string{"to create", "to configure", "to recreate", "unchanged", "to delete", "skipped", "failed"}
	if !slices.Equal(got, want) {
		t.Errorf("diff: got %q, want %q", got, want)
	}
	got = Labels("apply", Actions)
	want = []string{"created", "configured", "recreated", "unchanged", "deleted", "skipped", "failed"}
	if !slices.Equal(got, want) {
		t.Errorf("apply: got %q, want %q", got, want)
	}
}
