// Package fakeapi holds local stand-ins for the GitHub and GitLab APIs
// that gantry's reporters call. Each checks every request as the real API
// documents it (method, path, authentication, headers, JSON body) and
// reports mistakes to the test, so tests prove what gantry would send.
package fakeapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// User is an author as GitHub's REST API shows it.
type User struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

// Comment is an issue comment as GitHub's REST API shows it.
type Comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User User   `json:"user"`
}

// Issue is an issue as GitHub's REST API shows it.
type Issue struct {
	Number      int    `json:"number"`
	Title       string `json:"title"`
	Body        string `json:"body"`
	State       string `json:"state"`
	StateReason string `json:"state_reason,omitempty"`
	User        User   `json:"user"`
}

// GitHub answers the endpoints gantry's pull request comment and drift
// issue use, for pull request 7 of acme/shop and its issues, checking each
// request as GitHub documents it: method, path, token, headers, body.
// Mistakes are reported to T.
type GitHub struct {
	T      testing.TB
	Token  string
	Viewer string // GraphQL viewer login
	User   bool   // a personal token: it writes as Viewer (User), not Viewer[bot] (Bot)
	Forbid bool   // answer writes with 403, as for a fork's read-only token

	mu       sync.Mutex
	comments []*Comment
	nextID   int64
	writes   []string // "POST 1", "PATCH 1"
	bodies   []string // every body written, in order
	issues   []*Issue
}

// Issues returns copies of the repository's issues.
func (f *GitHub) Issues() []Issue {
	f.mu.Lock()
	defer f.mu.Unlock()
	return copies(f.issues)
}

// SeedIssues adds existing issues.
func (f *GitHub) SeedIssues(is ...*Issue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.issues = append(f.issues, is...)
}

// Bodies returns every comment body written, in order.
func (f *GitHub) Bodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

// Seed adds existing comments; new ones are numbered after the last.
func (f *GitHub) Seed(cs ...*Comment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		f.comments = append(f.comments, c)
		f.nextID = max(f.nextID, c.ID)
	}
}

// Comments returns copies of the comments.
func (f *GitHub) Comments() []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Comment, len(f.comments))
	for i, c := range f.comments {
		out[i] = *c
	}
	return out
}

// Writes lists the writes made, as "POST id" and "PATCH id".
func (f *GitHub) Writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

func (f *GitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.T
	if got := r.Header.Get("Authorization"); got != "Bearer "+f.Token {
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
		fmt.Fprintf(w, `{"data":{"viewer":{"login":%q}}}`, f.Viewer)

	case r.Method == http.MethodGet && r.URL.Path == "/repos/acme/shop/issues/7/comments":
		if r.URL.Query().Get("per_page") != "100" {
			t.Errorf("list comments: per_page %q", r.URL.Query().Get("per_page"))
		}
		_ = json.NewEncoder(w).Encode(f.comments)

	case r.Method == http.MethodPost && r.URL.Path == "/repos/acme/shop/issues/7/comments":
		body := readBody()["body"]
		if f.Forbid {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest/issues/comments#create-an-issue-comment","status":"403"}`)
			return
		}
		f.check(body)
		f.nextID++
		c := &Comment{ID: f.nextID, Body: body, User: f.author()}
		f.comments = append(f.comments, c)
		f.writes = append(f.writes, fmt.Sprintf("POST %d", c.ID))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(c)

	case r.Method == http.MethodGet && r.URL.Path == "/repos/acme/shop/issues":
		q := r.URL.Query()
		if q.Get("per_page") != "100" || q.Get("state") != "open" {
			t.Errorf("list issues: state %q, per_page %q", q.Get("state"), q.Get("per_page"))
		}
		var open []*Issue
		for _, is := range f.issues {
			if is.State == "open" {
				open = append(open, is)
			}
		}
		_ = json.NewEncoder(w).Encode(open)

	case r.Method == http.MethodPost && r.URL.Path == "/repos/acme/shop/issues":
		m := readBody()
		if f.Forbid {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"message":"Resource not accessible by integration","status":"403"}`)
			return
		}
		if m["title"] == "" {
			t.Errorf("create issue without a title")
		}
		f.check(m["body"])
		is := &Issue{Number: len(f.issues) + 100, Title: m["title"], Body: m["body"], State: "open", User: f.author()}
		f.issues = append(f.issues, is)
		f.writes = append(f.writes, fmt.Sprintf("POST issue %d", is.Number))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(is)

	case r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/repos/acme/shop/issues/") && !strings.HasPrefix(r.URL.Path, "/repos/acme/shop/issues/comments/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/repos/acme/shop/issues/"))
		m := readBody()
		for _, is := range f.issues {
			if is.Number != n {
				continue
			}
			if is.User != f.author() {
				t.Errorf("PATCH of issue %d by %s, someone else's", n, is.User.Login)
			}
			if b, ok := m["body"]; ok {
				f.check(b)
				is.Body = b
			}
			switch m["state"] {
			case "":
			case "open", "closed":
				is.State, is.StateReason = m["state"], m["state_reason"]
			default:
				t.Errorf("issue state %q", m["state"])
			}
			f.writes = append(f.writes, fmt.Sprintf("PATCH issue %d %s", n, is.State))
			_ = json.NewEncoder(w).Encode(is)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found"}`)

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
func (f *GitHub) author() User {
	if f.User {
		return User{Login: f.Viewer, Type: "User"}
	}
	return User{Login: f.Viewer + "[bot]", Type: "Bot"}
}

func (f *GitHub) check(body string) {
	f.bodies = append(f.bodies, body)
	if body == "" || len([]rune(body)) > 65536 {
		f.T.Errorf("comment body of %d characters", len([]rune(body)))
	}
}

// Note is a merge request note as GitLab's API shows it.
type Note struct {
	ID     int64  `json:"id"`
	Body   string `json:"body"`
	Author struct {
		ID       int64  `json:"id"`
		Username string `json:"username"`
	} `json:"author"`
}

// GitLabIssue is an issue as GitLab's API shows it.
type GitLabIssue struct {
	ID          int64  `json:"id"`
	IID         int64  `json:"iid"`
	Title       string `json:"title"`
	Description string `json:"description"`
	State       string `json:"state"`
	Author      struct {
		ID int64 `json:"id"`
	} `json:"author"`
}

// GitLab answers the endpoints gantry's merge request note and drift issue
// use, for merge request 9 of project 123 and its issues, checking each
// request as GitLab documents it.
type GitLab struct {
	T      testing.TB
	Token  string
	Me     int64 // the token's user id
	Forbid bool  // answer writes with 403, as for a token without the api scope

	mu     sync.Mutex
	notes  []*Note
	nextID int64
	writes []string
	issues []*GitLabIssue
}

// Issues returns copies of the project's issues.
func (f *GitLab) Issues() []GitLabIssue {
	f.mu.Lock()
	defer f.mu.Unlock()
	return copies(f.issues)
}

// Seed adds existing notes; new ones are numbered after the last.
func (f *GitLab) Seed(ns ...*Note) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range ns {
		f.notes = append(f.notes, n)
		f.nextID = max(f.nextID, n.ID)
	}
}

// Notes returns copies of the notes.
func (f *GitLab) Notes() []Note {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Note, len(f.notes))
	for i, n := range f.notes {
		out[i] = *n
	}
	return out
}

// Writes lists the writes made, as "POST id" and "PUT id".
func (f *GitLab) Writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

func (f *GitLab) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.T
	if got := r.Header.Get("PRIVATE-TOKEN"); got != f.Token {
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
		if s == "" || len([]rune(s)) > 1_000_000 {
			t.Errorf("note body of %d characters", len([]rune(s)))
		}
		return s
	}
	const notes = "/api/v4/projects/123/merge_requests/9/notes"
	const issues = "/api/v4/projects/123/issues"
	issueBody := func() map[string]any {
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", r.Method, r.URL.Path, ct)
		}
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("%s %s: body %q: %v", r.Method, r.URL.Path, b, err)
		}
		if d, ok := m["description"].(string); ok && (d == "" || len([]rune(d)) > 1_048_576) {
			t.Errorf("issue description of %d characters", len([]rune(d)))
		}
		return m
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == issues:
		if r.URL.Query().Get("state") != "opened" {
			t.Errorf("list issues: state %q", r.URL.Query().Get("state"))
		}
		author, err := strconv.ParseInt(r.URL.Query().Get("author_id"), 10, 64)
		if r.URL.Query().Has("author_id") && err != nil {
			t.Errorf("list issues: author_id %q", r.URL.Query().Get("author_id"))
		}
		var open []*GitLabIssue
		for _, is := range f.issues {
			if is.State == "opened" && (err != nil || is.Author.ID == author) {
				open = append(open, is)
			}
		}
		_ = json.NewEncoder(w).Encode(open)
	case r.Method == http.MethodPost && r.URL.Path == issues && !f.Forbid:
		m := issueBody()
		title, _ := m["title"].(string)
		desc, _ := m["description"].(string)
		if title == "" {
			t.Errorf("create issue without a title")
		}
		is := &GitLabIssue{ID: int64(len(f.issues) + 1000), IID: int64(len(f.issues) + 1), Title: title, Description: desc, State: "opened"}
		is.Author.ID = f.Me
		f.issues = append(f.issues, is)
		f.writes = append(f.writes, fmt.Sprintf("POST issue %d", is.IID))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(is)
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, issues+"/") && !f.Forbid:
		iid, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, issues+"/"), 10, 64)
		m := issueBody()
		for _, is := range f.issues {
			if is.IID != iid {
				continue
			}
			if is.Author.ID != f.Me {
				t.Errorf("PUT of issue %d by user %d", iid, is.Author.ID)
			}
			if d, ok := m["description"].(string); ok {
				is.Description = d
			}
			switch m["state_event"] {
			case nil:
			case "close":
				is.State = "closed"
			case "reopen":
				is.State = "opened"
			default:
				t.Errorf("state_event %v", m["state_event"])
			}
			f.writes = append(f.writes, fmt.Sprintf("PUT issue %d %s", iid, is.State))
			_ = json.NewEncoder(w).Encode(is)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v4/user":
		fmt.Fprintf(w, `{"id":%d,"username":"project_123_bot_abc","bot":true}`, f.Me)
	case r.Method == http.MethodGet && r.URL.Path == notes:
		_ = json.NewEncoder(w).Encode(f.notes)
	case (r.Method == http.MethodPost || r.Method == http.MethodPut) && f.Forbid:
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"message":"403 Forbidden"}`)
	case r.Method == http.MethodPost && r.URL.Path == notes:
		f.nextID++
		n := &Note{ID: f.nextID, Body: body()}
		n.Author.ID = f.Me
		f.notes = append(f.notes, n)
		f.writes = append(f.writes, fmt.Sprintf("POST %d", n.ID))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(n)
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, notes+"/"):
		id, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, notes+"/"), 10, 64)
		for _, n := range f.notes {
			if n.ID == id {
				if n.Author.ID != f.Me {
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

// copies returns a copy of each element, for callers to read without the
// lock.
func copies[T any](ps []*T) []T {
	out := make([]T, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out
}
