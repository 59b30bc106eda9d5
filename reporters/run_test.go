package reporters

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// sampleRun is a run of five units over two clusters: one unchanged, one
// changed, one failed, one not run for it, one suspended.
func sampleRun() *result.Run {
	start := time.Date(2026, 11, 21, 6, 0, 0, 0, time.UTC)
	a := result.Cluster{Context: "prod-a", Server: "https://10.0.0.1:6443"}
	b := result.Cluster{Context: "prod-b", Server: "https://10.0.0.2:6443"}
	unchanged := sample()
	unchanged.Reason, unchanged.Message = result.ReasonSucceeded, "applied"
	unchanged.Inventory = &result.Inventory{Name: "crds", Namespace: "platform"}
	unchanged.Objects = []result.Object{{ID: "_widgets.example.com_apiextensions.k8s.io_CustomResourceDefinition", APIVersion: "apiextensions.k8s.io/v1",
		Kind: "CustomResourceDefinition", Name: "widgets.example.com", Action: result.Unchanged, Stage: "apply", Source: "infra/crds/widgets.yaml"}}
	changed := sample()
	changed.Reason, changed.Message = result.ReasonSucceeded, "applied"
	changed.Objects = changed.Objects[:2]
	changed.Objects[1].Health = &result.Health{Status: "Current"}
	for _, r := range []*result.Result{unchanged, changed} {
		r.Stages[4].Error = ""
	}
	failed := sample()
	notRun := &result.Result{Command: "apply", Reason: result.ReasonDependencyNotReady, Message: "not run: it depends on app-b, which did not succeed", Started: start, Finished: start}
	suspended := &result.Result{Command: "apply", Reason: result.ReasonSuspended, Message: "suspended: not run", Started: start, Finished: start}
	run := &result.Run{Schema: result.RunSchemaVersion, Command: "apply", Version: "v0.1.0", RunFile: "gantry.yaml", Started: start, Finished: start.Add(9 * time.Second),
		Units: []result.Unit{
			{Name: "crds", Cluster: a, Result: unchanged},
			{Name: "app-a", Cluster: a, DependsOn: []string{"crds"}, Result: changed},
			{Name: "app-b", Cluster: b, DependsOn: []string{"crds"}, Result: failed},
			{Name: "last", Cluster: b, DependsOn: []string{"app-a", "app-b"}, Result: notRun},
			{Name: "later", Cluster: b, Result: suspended},
		}}
	run.Conclude()
	return run
}

func TestRunMarkdownGolden(t *testing.T) {
	t.Parallel()
	page := Page{RunURL: "https://github.com/acme/shop/actions/runs/42", Marker: "gantry:comment run-file=gantry.yaml"}
	run := sampleRun()
	if want := "5 units: 1 failed, 1 not run, 1 changed, 1 unchanged, 1 suspended; failed: app-b (HealthCheckFailed)"; run.Message != want || run.Reason != result.ReasonHealthCheckFailed {
		t.Errorf("run %s: %q, want %s: %q", run.Reason, run.Message, result.ReasonHealthCheckFailed, want)
	}
	for _, d := range []Detail{FullDiffs, CountsOnly} {
		golden(t, fmt.Sprintf("run-%d-%s.md", d, strings.ReplaceAll(d.String(), " ", "-")), RunMarkdown(run, page, d))
	}
}

// A run of many units whose diffs outgrow a comment keeps every unit's
// headline and says where the whole diffs are.
func TestRunOfManyUnitsFitsAComment(t *testing.T) {
	t.Parallel()
	run := &result.Run{Command: "diff"}
	for i := range 20 {
		res := big(300)
		res.Command, res.Reason = "diff", result.ReasonProgressing
		run.Units = append(run.Units, result.Unit{Name: fmt.Sprintf("unit-%02d", i), Result: res})
	}
	run.Conclude()
	page := Page{RunURL: "https://github.com/acme/shop/actions/runs/42"}
	body, d := RunFit(run, page, CommentLimit)
	if n := len([]rune(body)); n > CommentLimit {
		t.Errorf("%d characters at %s, over the comment's 65,536", n, d)
	}
	for _, u := range run.Units {
		if !strings.Contains(body, "<b>"+u.Name+"</b>: changes pending") {
			t.Errorf("%s has no headline at %s", u.Name, d)
		}
	}
	if !strings.Contains(body, "Every diff in full: [the job summary and the JSON report of this run](https://github.com/acme/shop/actions/runs/42)") {
		t.Errorf("the comment does not say where the whole diffs are")
	}
}

// The order of a run is its dependency levels.
func TestRunLevels(t *testing.T) {
	t.Parallel()
	got := fmt.Sprint(sampleRun().Levels())
	if want := "[[crds later] [app-a app-b] [last]]"; got != want {
		t.Errorf("levels %s, want %s", got, want)
	}
}

// The comment of a run file and its JSON report, as golden files; the
// comment carries the run file's marker and a content key that does not
// change with timings.
func TestRunCommentAndReportGolden(t *testing.T) {
	t.Parallel()
	page := Page{RunURL: "https://github.com/acme/shop/actions/runs/42", Marker: RunMarker(sampleRun())}
	body := RunStickyBody(sampleRun(), page, CommentLimit, redact.New())
	golden(t, "run-comment.md", body)
	if !strings.HasPrefix(body, "<!-- gantry:comment run-file=gantry.yaml -->\n") {
		t.Errorf("the comment does not start with its run file's marker")
	}
	later := sampleRun()
	for i := range later.Units {
		later.Units[i].Finished = later.Units[i].Finished.Add(time.Minute)
	}
	if !Unchanged(body, RunStickyBody(later, page, CommentLimit, redact.New())) {
		t.Errorf("a run that differs only in its timings is taken as changed")
	}

	path := t.TempDir() + "/report.json"
	if err := (&JSONReport{Path: path}).ReportRun(t.Context(), sampleRun()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "run-report.json", string(b))
}

// Step outputs of a run: the totals by the single run's names, and each
// unit's changed and reason.
func TestRunOutputs(t *testing.T) {
	t.Parallel()
	run := sampleRun()
	out := RunOutputs(run, ".gantry/report.json", ".gantry/report.diff")
	want := map[string]string{
		"reason": "HealthCheckFailed", "changed": "true", "created": "1", "configured": "2", "deleted": "1",
		"crds-changed": "false", "crds-reason": "ReconciliationSucceeded", "app-a-changed": "true",
		"app-b-reason": "HealthCheckFailed", "last-reason": "DependencyNotReady", "later-reason": "Suspended",
		"report": ".gantry/report.json",
	}
	for k, v := range want {
		if out[k] != v {
			t.Errorf("%s = %q, want %q", k, out[k], v)
		}
	}
	if names := RunOutputNames(run); len(names) != len(OutputNames())+2*len(run.Units) {
		t.Errorf("%d output names", len(names))
	}
}

// --report - of a run file: the report goes to standard output, and no
// file named "-" is written.
func TestJSONReportRunToStdout(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var out strings.Builder
	if err := (&JSONReport{Path: "-", Out: &out, Redact: redact.New()}).ReportRun(t.Context(), sampleRun()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"runFile": "gantry.yaml"`) {
		t.Errorf("standard output is not the run's report:\n%s", out.String())
	}
	if _, err := os.Lstat(filepath.Join(dir, "-")); err == nil {
		t.Error(`a file named "-" was written`)
	}
	if err := (&JSONReport{Path: "-", Redact: redact.New()}).ReportRun(t.Context(), sampleRun()); err == nil {
		t.Error("no standard output and no error")
	}
	if _, err := os.Lstat(filepath.Join(dir, "-")); err == nil {
		t.Error(`a file named "-" was written`)
	}
}

// A plan's Tekton task runs one unit of the run file: its results are
// that unit's, inventory and history revision included, as a Task run on
// one folder gives them. A run of several units gives the totals, which
// have no one inventory.
func TestTektonResultsOfOneUnit(t *testing.T) {
	t.Parallel()
	run := sampleRun()
	one := *run
	one.Units = run.Units[:1]
	one.Units[0].RecordedRevision = 3
	one.Conclude()
	tk := &TektonResults{Dir: t.TempDir()}
	if err := tk.ReportRun(t.Context(), &one); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"inventory": "platform/crds", "history-revision": "3", "reason": "ReconciliationSucceeded", "unchanged": "1", "changed": "false"} {
		if got := readFile(t, filepath.Join(tk.Dir, name)); got != want {
			t.Errorf("one unit: result %s = %q, want %q", name, got, want)
		}
	}
	tk = &TektonResults{Dir: t.TempDir()}
	if err := tk.ReportRun(t.Context(), run); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"inventory": "", "history-revision": "", "reason": "HealthCheckFailed", "created": "1"} {
		if got := readFile(t, filepath.Join(tk.Dir, name)); got != want {
			t.Errorf("five units: result %s = %q, want %q", name, got, want)
		}
	}
}
