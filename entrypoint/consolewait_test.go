package entrypoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// The wait as the log shows it, from the wait's own golden files (its
// progress lines and its failure, pipeline/testdata): the lines every 5 s
// while it waits, then the failure, each cause of the pods once. This is
// the text docs/report.md shows.
func TestConsoleWaitGolden(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "pipeline", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	progress, failure := read("wait-progress.txt"), strings.TrimSuffix(read("wait-failure.txt"), "\n")
	var b strings.Builder
	c := newConsole(&b, redact.New(), plainCLI)
	c.StageStarted("wait")
	for _, l := range strings.Split(strings.TrimSuffix(progress, "\n"), "\n") {
		c.Info(l)
	}
	c.StageFinished(result.Stage{Name: "wait", Duration: 30 * time.Second, Error: failure})
	c.summary(&result.Result{Command: "apply", Reason: result.ReasonHealthCheckFailed, Message: failure,
		Inventory: &result.Inventory{Name: "shop", Namespace: "deploy"}, Revision: "main@sha1:0123abcd",
		Objects: []result.Object{{Action: result.Created}, {Action: result.Unchanged}}})
	out := b.String()
	path := filepath.Join("testdata", "console-wait.txt")
	if *update {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if out != string(want) {
		t.Errorf("differs from %s (run with -update to accept):\n%s", path, out)
	}
}
