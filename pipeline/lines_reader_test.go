package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/sources"
)

// The report reads a build's files again, for the lines objects and
// patches start on: through the build's own reader, so that it reads
// nothing the build would refuse. Before, it opened any path an object
// or a kustomization named: a FIFO blocked the run for ever, a link into
// .git or out of the workspace was read.
func TestLinesReadOnlyWhatTheBuildReads(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(ws, ".git"), 0o755))
	cfg := "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic c2VjcmV0\nkind: Leak\nmetadata:\n  name: leak\n"
	must(os.WriteFile(filepath.Join(ws, ".git", "config"), []byte(cfg), 0o600))
	must(os.WriteFile(filepath.Join(outside, "x.yaml"), []byte("kind: Leak\nmetadata:\n  name: leak\n"), 0o600))
	must(os.Symlink(".git/config", filepath.Join(ws, "git.yaml")))
	must(os.Symlink(filepath.Join(outside, "x.yaml"), filepath.Join(ws, "out.yaml")))
	must(syscall.Mkfifo(filepath.Join(ws, "fifo.yaml"), 0o600))
	must(os.WriteFile(filepath.Join(ws, "ok.yaml"), []byte("kind: ConfigMap\nmetadata:\n  name: ok\n"), 0o600))

	l := &lines{workDir: ws, read: sourceReader(sources.BuildOptions{Path: ws, WorkDir: ws})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, f := range []string{"git.yaml", "out.yaml", "fifo.yaml", ".git/config"} {
			if docs := l.docs(f); len(docs) > 0 {
				t.Errorf("%s was read: %v", f, docs)
			}
		}
		if docs := l.docs("ok.yaml"); len(docs) != 1 || !strings.EqualFold(docs[0].name, "ok") {
			t.Errorf("ok.yaml: want its one document, got %v", docs)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("reading the files for their lines blocked (a FIFO read as a file)")
	}
}
