package reporters

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/reporters/fakeapi"
	"github.com/gantry-dev/gantry/result"
)

func newCommenter(srv *httptest.Server, token string) *PullRequestComment {
	return &PullRequestComment{
		APIURL: srv.URL, GraphQLURL: srv.URL + "/graphql", Token: token,
		Owner: "acme", Repo: "shop", Number: 7,
		Page:   Page{RunURL: "https://github.com/acme/shop/actions/runs/42"},
		Redact: redact.New(token),
	}
}

func TestPullRequestCommentLifecycle(t *testing.T) {
	t.Parallel()
	gh := &fakeapi.GitHub{T: t, Token: "ghs_canarytoken123", Viewer: "github-actions"}
	// Someone else planted a comment carrying our marker: it must be left
	// alone, not taken for ours.
	planted := "<!-- " + CommentMarker(sample()) + " -->\nfake"
	gh.Seed(&fakeapi.Comment{ID: 100, Body: planted, User: fakeapi.User{Login: "mallory", Type: "User"}})
	srv := httptest.NewServer(gh)
	defer srv.Close()
	c := newCommenter(srv, gh.Token)
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
	// 3: the same result again, from another run that took other
	// times, writes nothing.
	again := sample()
	again.Revision = "main@sha1:feedbeef"
	for i := range again.Stages {
		again.Stages[i].Duration *= 3
	}
	c.Page.RunURL = "https://github.com/acme/shop/actions/runs/43"
	if err := c.Report(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(gh.Writes(), ", "), "POST 101, PATCH 101"; got != want {
		t.Errorf("writes %q, want %q", got, want)
	}
	comments := gh.Comments()
	if comments[0].Body != planted {
		t.Errorf("the planted comment was changed")
	}
	if !strings.Contains(comments[1].Body, "feedbeef") || strings.Contains(comments[1].Body, gh.Token) {
		t.Errorf("comment body:\n%s", comments[1].Body)
	}

	// Another inventory gets its own comment.
	other := sample()
	other.Inventory = &result.Inventory{Name: "api", Namespace: "deploy"}
	if err := c.Report(ctx, other); err != nil {
		t.Fatal(err)
	}
	if len(gh.Comments()) != 3 {
		t.Errorf("%d comments, want the planted one and one per inventory", len(gh.Comments()))
	}
}

func TestPersonalTokenOwnsCommentsAsUser(t *testing.T) {
	t.Parallel()
	gh := &fakeapi.GitHub{T: t, Token: "ghp_personal", Viewer: "octocat", User: true}
	gh.Seed(&fakeapi.Comment{ID: 5, Body: "<!-- " + CommentMarker(sample()) + " -->\nold", User: fakeapi.User{Login: "octocat", Type: "User"}})
	srv := httptest.NewServer(gh)
	defer srv.Close()
	if err := newCommenter(srv, gh.Token).Report(t.Context(), sample()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(gh.Writes(), ", "); got != "PATCH 5" {
		t.Errorf("writes %q, want the user's own comment updated", got)
	}
}

func TestForbiddenCommentIsAWarning(t *testing.T) {
	t.Parallel()
	gh := &fakeapi.GitHub{T: t, Token: "ghs_readonly", Viewer: "github-actions", Forbid: true}
	srv := httptest.NewServer(gh)
	defer srv.Close()
	err := Multi{newCommenter(srv, gh.Token)}.Report(t.Context(), sample())
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

// A marker counts only as the first line of a body gantry's identity
// wrote: one quoted further down (in a diff, or through an object's name)
// belongs to that comment's content, and no run edits a comment because
// its body mentions that run's inventory. Names that could end the
// marker, or read as another's, are encoded in it.
func TestMarkersCannotBeForgedInContent(t *testing.T) {
	t.Parallel()
	gh := &fakeapi.GitHub{T: t, Token: "ghs_canarytoken123", Viewer: "github-actions"}
	prod := sample()
	prod.Inventory = &result.Inventory{Name: "shop", Namespace: "prod"}
	// The staging inventory's own comment, by the same bot, quotes the
	// production marker in a diff.
	quoting := "<!-- gantry:comment inventory=staging/shop -->\n```diff\n+ <!-- " + CommentMarker(prod) + " -->\n```"
	gh.Seed(&fakeapi.Comment{ID: 100, Body: quoting, User: fakeapi.User{Login: "github-actions[bot]", Type: "Bot"}})
	srv := httptest.NewServer(gh)
	defer srv.Close()
	c := newCommenter(srv, gh.Token)
	if err := c.Report(t.Context(), prod); err != nil {
		t.Fatal(err)
	}
	comments := gh.Comments()
	if len(comments) != 2 || comments[0].Body != quoting {
		t.Fatalf("production's run edited staging's comment: %d comments, first:\n%s", len(comments), comments[0].Body)
	}
	if !carriesMarker(comments[1].Body, CommentMarker(prod)) {
		t.Errorf("the new comment does not begin with its marker:\n%s", comments[1].Body)
	}

	for _, name := range []string{"shop -->\n<!-- gantry:comment inventory=prod/shop", "a--b", "x\ny"} {
		res := sample()
		res.Inventory = &result.Inventory{Name: name, Namespace: "prod"}
		m := CommentMarker(res)
		if strings.ContainsAny(m, "\n\r") || strings.Contains(m, "--") || m == CommentMarker(prod) {
			t.Errorf("inventory %q gives the marker %q", name, m)
		}
	}
}

// A comment cannot be frozen by its own content. A harmless commit whose
// ConfigMap value holds the content key of a later commit's comment (keys
// are deterministic when a run file pins revision) must not make the later
// run take its comment as unchanged: the key is read only from the line
// gantry writes it on, the body's last, never from the diff.
func TestContentKeyIsReadOnlyWhereGantryWritesIt(t *testing.T) {
	t.Parallel()
	page := Page{Marker: "gantry:comment inventory=prod/shop"}
	later := sample()
	later.Objects[1].Diff = deploymentDiff + "+    image: attacker/miner:1\n"
	laterBody := StickyBody(later, page, CommentLimit, redact.New())
	key := laterBody[strings.LastIndex(laterBody, "<!-- gantry-content "):]

	harmless := sample()
	harmless.Objects[0].Action, harmless.Objects[0].Diff = result.Configured,
		"--- live/ConfigMap/shop/settings\n+++ desired/ConfigMap/shop/settings\n@@ -1 +1 @@\n-  note: a\n+  note: \""+strings.TrimSpace(key)+"\"\n"
	harmlessBody := StickyBody(harmless, page, CommentLimit, redact.New())
	if !strings.Contains(harmlessBody, strings.TrimSpace(key)) {
		t.Fatalf("the harmless comment does not quote the later key; the case does not hold")
	}
	if Unchanged(harmlessBody, laterBody) {
		t.Errorf("a comment whose content quotes the later run's key is taken as unchanged: the later diff would never be shown")
	}
	if !Unchanged(laterBody, StickyBody(later, page, CommentLimit, redact.New())) {
		t.Errorf("the same content is taken as changed")
	}
}
