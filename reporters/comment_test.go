package reporters

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gantry-dev/gantry/result"
)

type ghUser struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

type ghComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User ghUser `json:"user"`
}

// fakeGitHub answers the few endpoints the comment reporter uses, checking
// each request as GitHub documents it: method, path, token, headers, body.
type fakeGitHub struct {
	t      *testing.T
	token  string
	viewer string // GraphQL viewer login
	user   bool   // a personal token: it writes as viewer (User), not viewer[bot] (Bot)
	forbid bool   // answer writes with 403, as for a fork's read-only token

	mu       sync.Mutex
	comments []*ghComment
	nextID   int64
	writes   []string // "POST 1", "PATCH 1"
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.t
	if got := r.Header.Get("Authorization"); got != "Bearer "+f.token {
		t.Errorf("%s %s: Authorization %q", r.Method, r.URL.Path, got)
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), "application/vnd.github") && r.URL.Path != "/graphql" {
		t.Errorf("%s %s: Accept %q", r.Method, r.URL.Path, r.Header.Get("Accept"))
	}
	if r.Header.Get("X-GitHub-Api-Version") == "" {
		t.Errorf("%s %s: no X-GitHub-Api-Version header", r.Method, r.URL.Path)
	}
	readBody := func() map[string]string {
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", r.Method, r.URL.Path, ct)
		}
		var m map[string]string
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("%s %s: body %q is not a JSON object of strings: %v", r.Method, r.URL.Path, b, err)
		}
		return m
	}
	w.Header().Set("Content-Type", "application/json")

	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/graphql":
		if q := readBody()["query"]; !strings.Contains(q, "viewer") || !strings.Contains(q, "login") {
			t.Errorf("GraphQL query %q does not ask for the viewer's login", q)
		}
		fmt.Fprintf(w, `{"data":{"viewer":{"login":%q}}}`, f.viewer)

	case r.Method == http.MethodGet && r.URL.Path == "/repos/acme/shop/issues/7/comments":
		if r.URL.Query().Get("per_page") != "100" {
			t.Errorf("list comments: per_page %q", r.URL.Query().Get("per_page"))
		}
		_ = json.NewEncoder(w).Encode(f.comments)

	case r.Method == http.MethodPost && r.URL.Path == "/repos/acme/shop/issues/7/comments":
		body := readBody()["body"]
		if f.forbid {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest/issues/comments#create-an-issue-comment","status":"403"}`)
			return
		}
		f.check(body)
		f.nextID++
		c := &ghComment{ID: f.nextID, Body: body, User: f.author()}
		f.comments = append(f.comments, c)
		f.writes = append(f.writes, fmt.Sprintf("POST %d", c.ID))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(c)

	case r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/repos/acme/shop/issues/comments/"):
		id, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/repos/acme/shop/issues/comments/"), 10, 64)
		body := readBody()["body"]
		f.check(body)
		for _, c := range f.comments {
			if c.ID == id {
				if c.User != f.author() {
					t.Errorf("PATCH of comment %d by %s, someone else's", id, c.User.Login)
				}
				c.Body = body
				f.writes = append(f.writes, fmt.Sprintf("PATCH %d", id))
				_ = json.NewEncoder(w).Encode(c)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found"}`)

	default:
		t.Errorf("unexpected request %s %s", r.Method, r.URL)
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found"}`)
	}
}

// author is how the REST API shows the token's identity.
func (f *fakeGitHub) author() ghUser {
	if f.user {
		return ghUser{Login: f.viewer, Type: "User"}
	}
	return ghUser{Login: f.viewer + "[bot]", Type: "Bot"}
}

func (f *fakeGitHub) check(body string) {
	if body == "" || len([]rune(body)) > CommentLimit {
		f.t.Errorf("comment body of %d characters", len([]rune(body)))
	}
}

func newCommenter(srv *httptest.Server, token string) *PullRequestComment {
	return &PullRequestComment{
		APIURL: srv.URL, GraphQLURL: srv.URL + "/graphql", Token: token,
		Owner: "acme", Repo: "shop", Number: 7,
		Page:   Page{RunURL: "https://github.com/acme/shop/actions/runs/42"},
		Redact: NewRedactor(token),
	}
}

func TestPullRequestCommentLifecycle(t *testing.T) {
	t.Parallel()
	gh := &fakeGitHub{t: t, token: "ghs_canarytoken123", viewer: "github-actions"}
	// Someone else planted a comment carrying our marker: it must be left
	// alone, not taken for ours.
	planted := &ghComment{ID: 100, Body: "<!-- " + CommentMarker(sample()) + " -->\nfake", User: ghUser{Login: "mallory", Type: "User"}}
	gh.comments = append(gh.comments, planted)
	gh.nextID = 100
	srv := httptest.NewServer(gh)
	defer srv.Close()
	c := newCommenter(srv, gh.token)
	ctx := t.Context()

	// 1: a new comment.
	if err := c.Report(ctx, sample()); err != nil {
		t.Fatal(err)
	}
	// 2: a changed result updates that same comment.
	changed := sample()
	changed.Revision = "main@sha1:feedbeef"
	if err := c.Report(ctx, changed); err != nil {
		t.Fatal(err)
	}
	// 3: the same result again writes nothing.
	if err := c.Report(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(gh.writes, ", "), "POST 101, PATCH 101"; got != want {
		t.Errorf("writes %q, want %q", got, want)
	}
	if planted.Body != "<!-- "+CommentMarker(sample())+" -->\nfake" {
		t.Errorf("the planted comment was changed")
	}
	if !strings.Contains(gh.comments[1].Body, "feedbeef") || strings.Contains(gh.comments[1].Body, gh.token) {
		t.Errorf("comment body:\n%s", gh.comments[1].Body)
	}

	// Another inventory gets its own comment.
	other := sample()
	other.Inventory = &result.Inventory{Name: "api", Namespace: "deploy"}
	if err := c.Report(ctx, other); err != nil {
		t.Fatal(err)
	}
	if len(gh.comments) != 3 {
		t.Errorf("%d comments, want the planted one and one per inventory", len(gh.comments))
	}
}

func TestPersonalTokenOwnsCommentsAsUser(t *testing.T) {
	t.Parallel()
	gh := &fakeGitHub{t: t, token: "ghp_personal", viewer: "octocat", user: true}
	gh.comments = []*ghComment{{ID: 5, Body: "<!-- " + CommentMarker(sample()) + " -->\nold", User: ghUser{Login: "octocat", Type: "User"}}}
	gh.nextID = 5
	srv := httptest.NewServer(gh)
	defer srv.Close()
	if err := newCommenter(srv, gh.token).Report(t.Context(), sample()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(gh.writes, ", "); got != "PATCH 5" {
		t.Errorf("writes %q, want the user's own comment updated", got)
	}
}

func TestForbiddenCommentIsAWarning(t *testing.T) {
	t.Parallel()
	gh := &fakeGitHub{t: t, token: "ghs_readonly", viewer: "github-actions", forbid: true}
	srv := httptest.NewServer(gh)
	defer srv.Close()
	err := Multi{newCommenter(srv, gh.token)}.Report(t.Context(), sample())
	if len(err) != 1 || !errors.Is(err[0], ErrNoWriteAccess) {
		t.Fatalf("warnings %v, want one ErrNoWriteAccess", err)
	}
	if !strings.Contains(err[0].Error(), "GitHub pull request comment") || !strings.Contains(err[0].Error(), "Resource not accessible by integration") {
		t.Errorf("warning %q", err[0])
	}
}

func TestGraphQLURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://api.github.com":          "https://api.github.com/graphql",
		"https://ghes.example.com/api/v3": "https://ghes.example.com/api/graphql",
	} {
		if got := graphQLURL(in); got != want {
			t.Errorf("graphQLURL(%q) = %q, want %q", in, got, want)
		}
	}
}
