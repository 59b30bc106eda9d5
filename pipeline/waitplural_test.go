package pipeline

import (
	"strings"
	"testing"
	"time"
)

// One object is one object, in the wait's progress lines and failure.
func TestWaitLinesCountOneObject(t *testing.T) {
	if got := progressLine([]waitingObject{{ref: "Deployment.apps/shop/web"}}, 1, 5*time.Second, 25*time.Second); !strings.HasPrefix(got, "still waiting for 1 of 1 object after 5s") {
		t.Errorf("progress line: %q", got)
	}
	if got := progressLine([]waitingObject{{ref: "a"}}, 2, 5*time.Second, 0); !strings.HasPrefix(got, "still waiting for 1 of 2 objects after 5s") {
		t.Errorf("progress line: %q", got)
	}
	if got := waitFailure([]notReadyObject{{ref: "Deployment.apps/shop/web", status: "InProgress"}}, 1, 30*time.Second); !strings.HasPrefix(got, "1 of 1 object not ready within the timeout (30s):") {
		t.Errorf("failure: %q", got)
	}
	many := make([]notReadyObject, maxFailureObjects+1)
	if got := waitFailure(many, len(many), 0); !strings.Contains(got, "and 1 more object not ready") {
		t.Errorf("failure: %q", got)
	}
}
