package reporters

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

type glNote struct {
	ID     int64  `json:"id"`
	Body   string `json:"body"`
	Author struct {
		ID       int64  `json:"id"`
		Username string `json:"username"`
	} `json:"author"`
}

// fakeGitLab answers the endpoints the note reporter uses, checking each
// request as GitLab documents it.
type fakeGitLab struct {
	t     *testing.T
	token string
	me    int64

	mu     sync.Mutex
	notes  []*glNote
	nextID int64
	writes []string
}

func (f *fakeGitLab) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.t
	if got := r.Header.Get("PRIVATE-TOKEN"); got != f.token {
		t.Errorf("%s %s: PRIVATE-TOKEN %q", r.Method, r.URL.Path, got)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"message":"401 Unauthorized"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	body := func() string {
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", r.Method, r.URL.Path, ct)
		}
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("%s %s: body %q: %v", r.Method, r.URL.Path, b, err)
		}
		s, _ := m["body"].(string)
		if s == "" || len([]rune(s)) > NoteLimit {
			t.Errorf("note body of %d characters", len([]rune(s)))
		}
		return s
	}
	const notes = "/api/v4/projects/123/merge_requests/9/notes"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v4/user":
		fmt.Fprintf(w, `{"id":%d,"username":"project_123_bot_abc","bot":true}`, f.me)
	case r.Method == http.MethodGet && r.URL.Path == notes:
		_ = json.NewEncoder(w).Encode(f.notes)
	case r.Method == http.MethodPost && r.URL.Path == notes:
		f.nextID++
		n := &glNote{ID: f.nextID, Body: body()}
		n.Author.ID = f.me
		f.notes = append(f.notes, n)
		f.writes = append(f.writes, fmt.Sprintf("POST %d", n.ID))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(n)
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, notes+"/"):
		id, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, notes+"/"), 10, 64)
		for _, n := range f.notes {
			if n.ID == id {
				if n.Author.ID != f.me {
					t.Errorf("PUT of note %d by user %d", id, n.Author.ID)
				}
				n.Body = body()
				f.writes = append(f.writes, fmt.Sprintf("PUT %d", id))
				_ = json.NewEncoder(w).Encode(n)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
	default:
		t.Errorf("unexpected request %s %s", r.Method, r.URL)
		w.WriteHeader(http.StatusNotFound)
	}
}

func TestMergeRequestNoteLifecycle(t *testing.T) {
	t.Parallel()
	gl := &fakeGitLab{t: t, token: "glpat-canary", me: 77, nextID: 500}
	planted := &glNote{ID: 400, Body: "<!-- " + CommentMarker(sample()) + " -->\nfake"}
	planted.Author.ID = 13
	gl.notes = append(gl.notes, planted)
	srv := httptest.NewServer(gl)
	defer srv.Close()
	n := &MergeRequestNote{APIURL: srv.URL + "/api/v4", Token: gl.token, ProjectID: "123", IID: 9, Redact: NewRedactor(gl.token)}
	ctx := t.Context()
	changed := sample()
	changed.Revision = "main@sha1:feedbeef"
	if err := n.Report(ctx, sample()); err != nil {
		t.Fatal(err)
	}
	if err := n.Report(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if err := n.Report(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(gl.writes, ", "); got != "POST 501, PUT 501" {
		t.Errorf("writes %q, want a note created, then updated, then left alone", got)
	}
	if !strings.HasSuffix(planted.Body, "fake") {
		t.Error("another user's note with our marker was changed")
	}
}

func TestMergeRequestNoteNeedsAToken(t *testing.T) {
	t.Parallel()
	err := (&MergeRequestNote{APIURL: "http://127.0.0.1:1/api/v4", ProjectID: "1", IID: 1}).Report(t.Context(), sample())
	if err != ErrJobTokenCannotComment || !strings.Contains(err.Error(), "CI_JOB_TOKEN cannot post") {
		t.Errorf("got %v", err)
	}
}

func TestDotenvAndTektonGolden(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := sample()
	if err := (&Dotenv{Path: filepath.Join(dir, "gantry.env"), ReportPath: ".gantry/report.json", DiffPath: ".gantry/diff.patch"}).Report(t.Context(), res); err != nil {
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
