package pipeline

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/inventory"
)

func TestPickRevision(t *testing.T) {
	rev := func(n int, digest, outcome string) *inventory.Revision {
		return &inventory.Revision{Number: n, Digest: digest, Outcome: outcome, Payloads: map[string]string{"": digest}}
	}
	const ok, failed, back = "ReconciliationSucceeded", "HealthCheckFailed", "RolledBack"
	// Newest first, as the store lists them.
	list := []*inventory.Revision{rev(6, "c", failed), rev(5, "b", ok), rev(4, "b", back), rev(3, "a", ok), rev(2, "z", failed)}
	tests := []struct {
		name   string
		list   []*inventory.Revision
		to     int
		failed *inventory.Revision
		want   int
		refuse string
	}{
		{name: "the last that succeeded before the current", list: list, want: 5},
		{name: "a chosen one, even one that failed", list: list, to: 2, want: 2},
		{name: "one not kept", list: list, to: 1, refuse: "no revision 1; it keeps 6 (HealthCheckFailed), 5"},
		{name: "the same set as the current is skipped", list: list[1:], want: 3},
		{name: "none before", list: list[4:], refuse: "no earlier revision that succeeded"},
		{name: "nothing recorded", refuse: "has no revisions"},
		{name: "atomic goes back past the failed one", list: list, failed: rev(6, "c", failed), want: 5},
		{name: "atomic, failed revision not recorded", list: list[1:], failed: rev(0, "c", failed), want: 5},
		{name: "atomic over the same set changes nothing", list: list, failed: rev(6, "b", failed), refuse: "same set as revision 5"},
		{name: "atomic on the first apply", list: list[:1], failed: rev(6, "c", failed), refuse: "no earlier revision that succeeded"},
		// One whose objects could not be stored, and that names no
		// artifact, cannot be applied again: the one before it is.
		{name: "one holding nothing is passed over", list: []*inventory.Revision{rev(3, "c", ok), {Number: 2, Digest: "b", Outcome: ok}, rev(1, "a", ok)}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pickRevision(tt.list, tt.to, tt.failed, "shop/shop")
			if tt.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refuse) {
					t.Fatalf("got %v, %v; want refusal %q", got, err, tt.refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Number != tt.want {
				t.Errorf("picked %d, want %d", got.Number, tt.want)
			}
		})
	}
}
