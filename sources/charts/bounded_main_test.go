package charts

import (
	"os"
	"testing"
)

// The test binary is its own renderer, as gantry is: any package whose
// tests call RenderBounded needs this TestMain.
func TestMain(m *testing.M) {
	if child, code := ChildMain(); child {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
