package reporters

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/reporters/fakeapi"
	"github.com/gantry-dev/gantry/result"
)

// driftSample is a drift that found a scaled Deployment and a deleted
// Secret (its value, if it leaked, would be "hunter2-canary").
func driftSample(fields ...string) *result.Result {
	when := time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC)
	res := &result.Result{Schema: result.SchemaVersion, Command: "drift", Reason: result.ReasonDriftDetected,
		Message: "2 objects drifted", Inventory: &result.Inventory{Name: "shop", Namespace: "deploy"}}
	var drift []result.Drift
	for _, f := range fields {
		d := result.Drift{Field: f, Change: "changed", Manager: "kubectl", Time: &when}
		if f == ".spec.replicas" {
			d.Applied, d.Live = "2", "5"
		}
		drift = append(drift, d)
	}
	res.Objects = []result.Object{
		{ID: "shop_web_apps_Deployment", APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Action: result.Drifted, Drift: drift,
			Diff: "--- live\n+++ applied\n-  replicas: 5\n+  replicas: 2\n"},
		{ID: "shop_token__Secret", APIVersion: "v1", Kind: "Secret", Namespace: "shop", Name: "token", Action: result.Missing,
			Drift: []result.Drift{{Field: ".", Change: "removed"}}, Diff: "+data:\n+  token: hunter2-canary\n"},
	}
	return res
}

func noDrift() *result.Result {
	return &result.Result{Schema: result.SchemaVersion, Command: "drift", Reason: result.ReasonSucceeded,
		Inventory: &result.Inventory{Name: "shop", Namespace: "deploy"},
		Objects:   []result.Object{{ID: "shop_web_apps_Deployment", APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Action: result.InSync}}}
}

// lifecycle runs a drift reporter through the life of one drift: none,
// found, found again unchanged, changed, gone, found again.
func lifecycle(t *testing.T, r Reporter) {
	t.Helper()
	ctx := context.Background()
	for i, res := range []*result.Result{noDrift(), driftSample(".spec.replicas"), driftSample(".spec.replicas"),
		driftSample(".spec.replicas", ".metadata.labels.owner"), noDrift(), noDrift(), driftSample(".spec.replicas")} {
		if err := r.Report(ctx, res); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	// A failed drift says nothing either way.
	failed := noDrift()
	failed.Reason = result.ReasonValidationFailed
	if err := r.Report(ctx, failed); err != nil {
		t.Fatal(err)
	}
}

func TestGitHubDriftIssueLifecycle(t *testing.T) {
	t.Parallel()
	gh := &fakeapi.GitHub{T: t, Token: "ghs_canarytoken123", Viewer: "github-actions"}
	planted := &fakeapi.Issue{Number: 1, Title: "planted", Body: "<!-- " + DriftMarker(driftSample()) + " -->\nfake", State: "open", User: fakeapi.User{Login: "mallory", Type: "User"}}
	gh.SeedIssues(planted)
	srv := httptest.NewServer(gh)
	defer srv.Close()
	r := &GitHubDriftIssue{APIURL: srv.URL, GraphQLURL: srv.URL + "/graphql", Token: gh.Token, Owner: "acme", Repo: "shop",
		Page: Page{RunURL: "https://github.com/acme/shop/actions/runs/42"}, Redact: redact.New(gh.Token, "hunter2-canary")}
	lifecycle(t, r)

	want := "POST issue 101, PATCH issue 101 open, PATCH issue 101 closed, POST issue 102"
	if got := strings.Join(gh.Writes(), ", "); got != want {
		t.Errorf("writes %q, want %q", got, want)
	}
	issues := gh.Issues()
	if issues[0].Body != planted.Body || issues[0].State != "open" {
		t.Errorf("someone else's issue with the marker was touched: %+v", issues[0])
	}
	first, second := issues[1], issues[2]
	if first.State != "closed" || first.StateReason != "completed" || !strings.Contains(first.Body, "No drift any more") {
		t.Errorf("the first issue, once the drift was gone: %+v", first)
	}
	if second.State != "open" || second.Title != "Drift in inventory deploy/shop (gantry)" {
		t.Errorf("the second issue: %+v", second)
	}
	for _, want := range []string{"<!-- gantry:drift inventory=deploy/shop -->", "⚠️ gantry drift: 2 objects drifted", "| `Deployment.apps/shop/web` | `.spec.replicas` | changed | `2 → 5` | kubectl | 2026-11-24 09:30 UTC |", "deleted by hand"} {
		if !strings.Contains(second.Body, want) {
			t.Errorf("issue body lacks %q:\n%s", want, second.Body)
		}
	}
	for _, b := range gh.Bodies() {
		if strings.Contains(b, "hunter2-canary") || strings.Contains(b, gh.Token) {
			t.Errorf("a secret reached an issue:\n%s", b)
		}
	}
}

func TestGitLabDriftIssueLifecycle(t *testing.T) {
	t.Parallel()
	gl := &fakeapi.GitLab{T: t, Token: "glpat-canary", Me: 77}
	srv := httptest.NewServer(gl)
	defer srv.Close()
	r := &GitLabDriftIssue{APIURL: srv.URL + "/api/v4", Token: gl.Token, ProjectID: "123", Redact: redact.New(gl.Token, "hunter2-canary")}
	lifecycle(t, r)
	want := "POST issue 1, PUT issue 1 opened, PUT issue 1 closed, POST issue 2"
	if got := strings.Join(gl.Writes(), ", "); got != want {
		t.Errorf("writes %q, want %q", got, want)
	}
	issues := gl.Issues()
	if len(issues) != 2 || issues[0].State != "closed" || issues[1].State != "opened" {
		t.Fatalf("issues: %+v", issues)
	}
	if !strings.Contains(issues[1].Description, "<!-- gantry:drift inventory=deploy/shop -->") || strings.Contains(issues[1].Description, "hunter2-canary") {
		t.Errorf("issue description:\n%s", issues[1].Description)
	}
	// Without a token it says what it needs.
	none := &GitLabDriftIssue{APIURL: srv.URL + "/api/v4", ProjectID: "123", Redact: redact.New()}
	if err := none.Report(context.Background(), driftSample()); err == nil || !strings.Contains(err.Error(), "CI_JOB_TOKEN cannot write issues") {
		t.Errorf("without a token: %v", err)
	}
}

// A drift of more fields than a table shows says once that it left some
// out, however many objects they spread over.
func TestDriftTableSaysOnceWhatItLeftOut(t *testing.T) {
	res := driftSample()
	res.Objects = res.Objects[:0]
	for i := range 3 {
		var drift []result.Drift
		for j := range maxTableRows {
			drift = append(drift, result.Drift{Field: fmt.Sprintf(".data.k%d", j), Change: "changed", Manager: "kubectl"})
		}
		res.Objects = append(res.Objects, result.Object{ID: fmt.Sprintf("shop_cm%d__ConfigMap", i), APIVersion: "v1", Kind: "ConfigMap",
			Namespace: "shop", Name: fmt.Sprintf("cm%d", i), Action: result.Drifted, Drift: drift})
	}
	body := StickyBody(res, Page{}, 1<<20, nil)
	if n := strings.Count(body, "more drifted fields"); n != 1 {
		t.Errorf("%q said %d times, want once", "more drifted fields", n)
	}
	if n := strings.Count(body, "| `ConfigMap/shop/cm"); n != maxTableRows {
		t.Errorf("%d drift rows, want %d", n, maxTableRows)
	}
}

// The jobs of a plan each run one unit of the same run file (the unit
// input): each keeps its own merge request note and drift issue. Before,
// all of them carried the run file's marker, so each job overwrote the
// note of the one before (the merge request showed the last unit's diff
// alone), and a unit without drift closed the issue another had opened.
func TestEachUnitOfAPlanKeepsItsOwnNoteAndDriftIssue(t *testing.T) {
	t.Parallel()
	gl := &fakeapi.GitLab{T: t, Token: "glpat-canary", Me: 77}
	srv := httptest.NewServer(gl)
	defer srv.Close()
	ctx := context.Background()
	unitRun := func(command, unit string, res *result.Result, selected bool) *result.Run {
		run := &result.Run{Schema: result.RunSchemaVersion, Command: command, RunFile: "gantry.yaml", Units: []result.Unit{{Name: unit, Result: res}}}
		if selected {
			run.Selected = []string{unit}
		}
		run.Conclude()
		return run
	}
	note := &MergeRequestNote{APIURL: srv.URL + "/api/v4", Token: gl.Token, ProjectID: "123", IID: 9, Redact: redact.New()}
	for round := 0; round < 2; round++ {
		for _, unit := range []string{"base", "app-a", "app-b"} {
			res := noDrift()
			res.Command, res.Reason = "diff", result.ReasonNoChanges
			if err := note.ReportRun(ctx, unitRun("diff", unit, res, true)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The second round finds each unit's note as it left it: no write.
	if got, want := strings.Join(gl.Writes(), ", "), "POST 1, POST 2, POST 3"; got != want {
		t.Errorf("note writes %q, want %q", got, want)
	}
	notes := gl.Notes()
	if len(notes) != 3 {
		t.Fatalf("%d notes for three units", len(notes))
	}
	for i, unit := range []string{"base", "app-a", "app-b"} {
		if n := notes[i]; !strings.HasPrefix(n.Body, "<!-- gantry:comment run-file=gantry.yaml unit="+unit+" -->\n") || !strings.Contains(n.Body, unit) {
			t.Errorf("note %d:\n%s", n.ID, n.Body)
		}
	}
	// A run of every unit keeps the run file's note.
	if m := RunMarker(unitRun("diff", "base", noDrift(), false)); m != "gantry:comment run-file=gantry.yaml" {
		t.Errorf("the marker of a run of every unit: %q", m)
	}

	issue := &GitLabDriftIssue{APIURL: srv.URL + "/api/v4", Token: gl.Token, ProjectID: "123", Redact: redact.New()}
	if err := issue.ReportRun(ctx, unitRun("drift", "app-b", driftSample(".spec.replicas"), true)); err != nil {
		t.Fatal(err)
	}
	if err := issue.ReportRun(ctx, unitRun("drift", "app-a", noDrift(), true)); err != nil {
		t.Fatal(err)
	}
	issues := gl.Issues()
	if len(issues) != 1 || issues[0].State != "opened" || issues[0].Title != "Drift in run file gantry.yaml, unit app-b (gantry)" ||
		!strings.HasPrefix(issues[0].Description, "<!-- gantry:drift run-file=gantry.yaml unit=app-b -->\n") {
		t.Errorf("issues after app-b drifted and app-a did not: %+v", issues)
	}
}
