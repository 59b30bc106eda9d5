package reporters

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/reporters/fakeapi"
)

func TestMergeRequestNoteLifecycle(t *testing.T) {
	t.Parallel()
	gl := &fakeapi.GitLab{T: t, Token: "glpat-canary", Me: 77}
	planted := &fakeapi.Note{ID: 500, Body: "<!-- " + CommentMarker(sample()) + " -->\nfake"}
	planted.Author.ID = 13
	gl.Seed(planted)
	srv := httptest.NewServer(gl)
	defer srv.Close()
	n := &MergeRequestNote{APIURL: srv.URL + "/api/v4", Token: gl.Token, ProjectID: "123", IID: 9, Redact: redact.New(gl.Token)}
	ctx := t.Context()
	changed := sample()
	changed.Revision = "main@sha1:feedbeef"
	if err := n.Report(ctx, sample()); err != nil {
		t.Fatal(err)
	}
	if err := n.Report(ctx, changed); err != nil {
		t.Fatal(err)
	}
	// The same result from another run, with other stage times.
	again := sample()
	again.Revision = "main@sha1:feedbeef"
	for i := range again.Stages {
		again.Stages[i].Duration += time.Second
	}
	if err := n.Report(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(gl.Writes(), ", "); got != "POST 501, PUT 501" {
		t.Errorf("writes %q, want a note created, then updated, then left alone", got)
	}
	if !strings.HasSuffix(gl.Notes()[0].Body, "fake") {
		t.Error("another user's note with our marker was changed")
	}
}

func TestMergeRequestNoteNeedsAToken(t *testing.T) {
	t.Parallel()
	err := (&MergeRequestNote{APIURL: "http://127.0.0.1:1/api/v4", ProjectID: "1", IID: 1}).Report(t.Context(), sample())
	if !errors.Is(err, ErrJobTokenCannotComment) || !strings.Contains(err.Error(), "CI_JOB_TOKEN cannot post") {
		t.Errorf("got %v", err)
	}
}

func TestDotenvAndTektonGolden(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := sample()
	inputs := func(v string) bool { return v == "GANTRY_REVISION" || v == "GANTRY_INVENTORY" || v == "GANTRY_REPORT" }
	if err := (&Dotenv{Path: filepath.Join(dir, "gantry.env"), ReportPath: ".gantry/report.json", DiffPath: ".gantry/diff.patch", Inputs: inputs}).Report(t.Context(), res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "gantry.env"))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "gitlab.env", string(b))

	results := filepath.Join(dir, "tekton")
	if err := (&TektonResults{Dir: results}).Report(t.Context(), res); err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, name := range TektonResultNames {
		v, err := os.ReadFile(filepath.Join(results, name))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&all, "%s=%s\n", name, v)
	}
	golden(t, "tekton-results.txt", all.String())
}

func TestMergeRequestNoteForbiddenIsAWarning(t *testing.T) {
	t.Parallel()
	gl := &fakeapi.GitLab{T: t, Token: "glpat-readonly", Me: 77, Forbid: true}
	srv := httptest.NewServer(gl)
	defer srv.Close()
	n := &MergeRequestNote{APIURL: srv.URL + "/api/v4", Token: gl.Token, ProjectID: "123", IID: 9}
	warnings := Multi{n}.Report(t.Context(), sample())
	if len(warnings) != 1 || !strings.Contains(warnings[0].Error(), "GitLab merge request note") || !strings.Contains(warnings[0].Error(), "403") {
		t.Errorf("warnings %v, want one naming the note and the 403", warnings)
	}
	if len(gl.Notes()) != 0 {
		t.Errorf("notes %v", gl.Notes())
	}
}
