package sources

import (
	"os"
	"testing"

	"github.com/gantry-dev/gantry/sources/charts"
)

// The test binary renders charts in a process of its own, as gantry
// does: it is that process, started again.
func TestMain(m *testing.M) {
	if child, code := charts.ChildMain(); child {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
