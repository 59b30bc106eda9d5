package inventory

import (
	"testing"
	"time"
)

// A machine that slept (a laptop's lid closed, a suspended VM) stops the
// monotonic clock but not the wall clock: the time the Lease went without
// renewal is the longer of the two, so a run that wakes after its Lease
// expired does not write as if it still held it.
func TestUnrenewedCountsTimeTheMachineSlept(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name      string
		wallSince time.Duration // how far the wall clock moved since the renewal
		wantLost  bool
	}{
		{"no sleep", 0, false},
		{"slept past the Lease", 5 * time.Minute, true},
		{"wall clock set back", -5 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Held{duration: 30 * time.Second, renewed: now, renewedWall: now.Round(0).Add(-tc.wallSince)}
			got := h.unrenewed()
			if lost := got >= h.writable(); lost != tc.wantLost {
				t.Errorf("unrenewed %s (writable %s): lost %v, want %v", got, h.writable(), lost, tc.wantLost)
			}
			if tc.wantLost && got < tc.wallSince {
				t.Errorf("unrenewed %s, want at least the %s the machine slept", got, tc.wallSince)
			}
		})
	}
}
