package pipeline

import "testing"

func TestPruneLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit         PruneLimit
		stale, listed int
		want          bool
	}{
		{PruneLimit{}, 10, 10, true},  // the floor: ten objects may always go
		{PruneLimit{}, 11, 22, true},  // half
		{PruneLimit{}, 12, 20, false}, // 60 %
		{PruneLimit{}, 1000, 1001, false},
		{PruneLimit{Percent: 60, Given: true}, 12, 20, true},
		{PruneLimit{Percent: 59, Given: true}, 12, 20, false},
		{PruneLimit{Percent: 100, Given: true}, 1000, 1000, true},
		{PruneLimit{Count: 12, Given: true}, 12, 20, true},
		{PruneLimit{Count: 11, Given: true}, 12, 20, false},
		{PruneLimit{Count: 0, Given: true}, 1, 100, false}, // 0: no prune at all
		{PruneLimit{Count: 0, Given: true}, 0, 100, true},
	} {
		if got := tc.limit.allows(tc.stale, tc.listed); got != tc.want {
			t.Errorf("%s: %d of %d allowed %v, want %v", tc.limit, tc.stale, tc.listed, got, tc.want)
		}
	}
}
