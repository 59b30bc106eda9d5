package reporters

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/redact"
)

// gantry's own outputs (booleans, counts, reasons, revision numbers) are
// never masked, whatever secrets the run masks: a decrypted "true" or "1"
// must not turn changed into *** (a step testing
// steps.x.outputs.changed == 'true' would silently never run). Outputs
// that carry names, revisions or paths are masked as anything printed.
func TestComputedOutputsAreNotMasked(t *testing.T) {
	t.Parallel()
	redact := redact.New("true", "false", "HealthCheckFailed", "main@sha1:0123abcd")
	res := sample()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		w    Reporter
		file string
	}{
		{"GITHUB_OUTPUT", &GitHubOutputs{Path: filepath.Join(dir, "out"), Redact: redact}, filepath.Join(dir, "out")},
		{"dotenv", &Dotenv{Path: filepath.Join(dir, "gantry.env"), Redact: redact}, filepath.Join(dir, "gantry.env")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.w.Report(t.Context(), res); err != nil {
				t.Fatal(err)
			}
			got := readFile(t, tc.file)
			for _, want := range []string{"true", "HealthCheckFailed", "1"} {
				if !strings.Contains(got, want) {
					t.Errorf("lacks %q:\n%s", want, got)
				}
			}
			if strings.Contains(got, "main@sha1") || !strings.Contains(got, "***") {
				t.Errorf("the revision is not masked:\n%s", got)
			}
		})
	}
	tk := &TektonResults{Dir: t.TempDir(), Redact: redact}
	if err := tk.Report(t.Context(), res); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(tk.Dir, "changed")); got != "true" {
		t.Errorf("Tekton result changed: %q", got)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
