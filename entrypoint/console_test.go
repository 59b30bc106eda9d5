package entrypoint

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// A run as the console shows it, on each platform.
func TestConsoleGolden(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]platform{"plain": plainCLI, "github": githubActions, "gitlab": gitlabCI} {
		var b strings.Builder
		c := newConsole(&b, redact.New("hunter2-secret"), p)
		c.now = func() time.Time { return time.Unix(1795000000, 0) }
		c.StageStarted("apply")
		c.ObjectDone(result.Object{Kind: "ConfigMap", Namespace: "shop", Name: "settings", Action: result.Unchanged})
		c.ObjectDone(result.Object{Kind: "Deployment", Namespace: "shop", Name: "web", Action: result.Configured})
		c.ObjectDone(result.Object{Kind: "Service", Namespace: "shop", Name: "bad", Action: result.Failed, Error: "port 99999: must be between 1 and 65535; password hunter2-secret"})
		c.StageFinished(result.Stage{Name: "apply", Duration: 31 * time.Millisecond, Error: "1 object failed"})
		c.warn("GitHub pull request comment: the token may not write comments\nsecond line")
		c.summary(&result.Result{Command: "apply", Reason: result.ReasonApplyFailed, Message: "Service/shop/bad: port 99999",
			Inventory: &result.Inventory{Name: "shop", Namespace: "deploy"}, Revision: "main@sha1:0123abcd",
			Objects: []result.Object{{Action: result.Configured}, {Action: result.Failed}, {Action: result.Unchanged}}})
		out := b.String()
		if strings.Contains(out, "hunter2-secret") {
			t.Errorf("%s: a secret reached the console", name)
		}
		path := filepath.Join("testdata", "console-"+name+".txt")
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
			t.Errorf("%s differs from %s:\n%s", name, path, out)
		}
	}
}

// A run that failed before any object was considered prints its reason
// and message, not a row of zero counters.
func TestConsoleSummaryWithoutObjects(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	c := newConsole(&b, redact.New(), plainCLI)
	c.summary(&result.Result{Command: "apply", Reason: result.ReasonBuildFailed, Message: "kustomization.yaml: no such file",
		Inventory: &result.Inventory{Name: "shop", Namespace: "deploy"}, Objects: []result.Object{}})
	if want := "gantry apply: BuildFailed (inventory deploy/shop)\n  - kustomization.yaml: no such file\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// A diff previews: its counts say what an apply would do.
func TestConsoleDiffSummarySaysWhatWouldHappen(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	c := newConsole(&b, redact.New(), plainCLI)
	c.summary(&result.Result{Command: "diff", Reason: result.ReasonProgressing,
		Inventory: &result.Inventory{Name: "shop", Namespace: "deploy"},
		Objects:   []result.Object{{Action: result.Created}, {Action: result.Configured}, {Action: result.Deleted}, {Action: result.Unchanged}}})
	out := b.String()
	if !strings.Contains(out, "1 to create, 1 to configure, 0 to recreate, 1 unchanged, 1 to delete, 0 skipped, 0 failed") {
		t.Errorf("diff summary:\n%s", out)
	}
	b.Reset()
	c.summary(&result.Result{Command: "apply", Reason: result.ReasonSucceeded,
		Inventory: &result.Inventory{Name: "shop", Namespace: "deploy"},
		Objects:   []result.Object{{Action: result.Created}}})
	if out := b.String(); !strings.Contains(out, "1 created, 0 configured") {
		t.Errorf("apply summary:\n%s", out)
	}
}

// A diff's objects are what would happen to them, line by line as in its
// tables: "to create", never "created".
func TestConsoleDiffSaysWhatWouldHappen(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	c := newConsole(&b, redact.New(), plainCLI)
	c.verb = "diff"
	c.ObjectDone(result.Object{Kind: "ConfigMap", Namespace: "shop", Name: "new", Action: result.Created})
	c.ObjectDone(result.Object{Kind: "Deployment", Namespace: "shop", Name: "web", Action: result.Configured})
	out := b.String()
	if !strings.Contains(out, "ConfigMap/shop/new to create") || !strings.Contains(out, "Deployment.apps/shop/web to configure") && !strings.Contains(out, "Deployment/shop/web to configure") || strings.Contains(out, "created") {
		t.Errorf("a diff's objects:\n%s", out)
	}
}
