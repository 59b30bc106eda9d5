package reporters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-github/v89/github"
	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// A drift issue is one issue per inventory (or run file), opened when
// drift finds something, updated while the drift lasts and closed once it
// is gone: what a scheduled drift workflow leaves for people to see. It is
// found as comments are, by its hidden marker and its author being the
// token's own identity.

// DriftMarker is the hidden marker of an inventory's drift issue.
func DriftMarker(res *result.Result) string {
	inv := "none"
	if res.Inventory != nil && res.Inventory.Name != "" {
		inv = markerValue(res.Inventory.Namespace) + "/" + markerValue(res.Inventory.Name)
	}
	return "gantry:drift inventory=" + inv
}

// driftTitle names the issue after what drifted.
func driftTitle(what string) string { return "Drift in " + what + " (gantry)" }

func drifted(res *result.Result) bool { return res.Reason == result.ReasonDriftDetected }

// driftIssue is what a drift issue says: its marker, its title, whether
// the drift lasts (the issue is open), and its body within a size limit.
type driftIssue struct {
	marker, title string
	open          bool
	body          func(limit int, redact *redact.Redactor) string
}

// driftIssueOf is the issue of one inventory's drift; ok is false for a
// run that is not a drift, or one that failed: only a drift that ran says
// whether there is drift.
func driftIssueOf(res *result.Result, page Page) (is driftIssue, ok bool) {
	if res.Command != "drift" || (!drifted(res) && !res.Succeeded()) {
		return is, false
	}
	page.Marker = DriftMarker(res)
	inv := strings.TrimPrefix(page.Marker, "gantry:drift inventory=")
	return driftIssue{marker: page.Marker, title: driftTitle("inventory " + inv), open: drifted(res),
		body: func(limit int, redact *redact.Redactor) string { return StickyBody(res, page, limit, redact) }}, true
}

// runDriftIssueOf is the issue of a run file's drift.
func runDriftIssueOf(run *result.Run, page Page) (is driftIssue, ok bool) {
	if run.Command != "drift" {
		return is, false
	}
	page.Marker = "gantry:drift run-file=" + markerValue(run.RunFile) + selectionMarker(run)
	what := "run file " + run.RunFile
	if len(run.Selected) > 0 {
		units := slices.Clone(run.Selected)
		slices.Sort(units)
		what += ", " + map[bool]string{true: "unit ", false: "units "}[len(units) == 1] + strings.Join(slices.Compact(units), ", ")
	}
	return driftIssue{marker: page.Marker, title: driftTitle(what), open: runDrifted(run),
		body: func(limit int, redact *redact.Redactor) string { return RunStickyBody(run, page, limit, redact) }}, true
}

func runDrifted(run *result.Run) bool {
	for _, u := range run.Units {
		if u.Result != nil && drifted(u.Result) {
			return true
		}
	}
	return false
}

// resolvedNote is what a closed drift issue says last.
func resolvedNote(marker, runURL string) string {
	s := fmt.Sprintf("<!-- %s -->\n### ✅ No drift any more\n\ngantry drift found every object as it was applied.", marker)
	if runURL != "" {
		s += fmt.Sprintf(" [Run details](%s)", runURL)
	}
	return s + "\n"
}

// GitHubDriftIssue keeps the drift issue of an inventory on a GitHub
// repository. The token needs issues: write.
type GitHubDriftIssue struct {
	APIURL, GraphQLURL string
	Token              string
	Owner, Repo        string
	Page               Page
	Redact             *redact.Redactor
	HTTPClient         *http.Client
}

var _ Reporter = (*GitHubDriftIssue)(nil)

// Name implements Reporter.
func (*GitHubDriftIssue) Name() string { return "GitHub drift issue" }

// Report implements Reporter.
func (g *GitHubDriftIssue) Report(ctx context.Context, res *result.Result) error {
	is, ok := driftIssueOf(res, g.Page)
	if !ok {
		return nil
	}
	return g.publish(ctx, is)
}

// ReportRun implements RunReporter: one issue per run file.
func (g *GitHubDriftIssue) ReportRun(ctx context.Context, run *result.Run) error {
	is, ok := runDriftIssueOf(run, g.Page)
	if !ok {
		return nil
	}
	return g.publish(ctx, is)
}

func (g *GitHubDriftIssue) publish(ctx context.Context, is driftIssue) error {
	marker, title, open := is.marker, is.title, is.open
	body := func() string { return is.body(CommentLimit, g.Redact) }
	pr := &PullRequestComment{APIURL: g.APIURL, GraphQLURL: g.GraphQLURL, Token: g.Token, HTTPClient: g.HTTPClient}
	client, err := pr.client()
	if err != nil {
		return err
	}
	me, err := pr.viewer(ctx, client)
	if err != nil {
		return fmt.Errorf("finding the token's identity: %w", err)
	}
	existing, err := g.find(ctx, client, me, marker)
	if err != nil {
		return classifyIssue(err)
	}
	switch {
	case existing == nil && !open:
		return nil
	case existing == nil:
		_, _, err = client.Issues.Create(ctx, g.Owner, g.Repo, &github.IssueRequest{Title: github.Ptr(title), Body: github.Ptr(body())})
	case !open:
		_, _, err = client.Issues.Edit(ctx, g.Owner, g.Repo, existing.GetNumber(), &github.IssueRequest{
			Body: github.Ptr(resolvedNote(marker, g.Page.RunURL)), State: github.Ptr("closed"), StateReason: github.Ptr("completed")})
	default:
		b := body()
		if Unchanged(existing.GetBody(), b) {
			return nil
		}
		_, _, err = client.Issues.Edit(ctx, g.Owner, g.Repo, existing.GetNumber(), &github.IssueRequest{Body: github.Ptr(b)})
	}
	return classifyIssue(err)
}

// find returns the open drift issue with marker by this identity, if any.
func (g *GitHubDriftIssue) find(ctx context.Context, client *github.Client, me, marker string) (*github.Issue, error) {
	opts := &github.IssueListByRepoOptions{State: "open", ListOptions: github.ListOptions{PerPage: 100}}
	for {
		issues, resp, err := client.Issues.ListByRepo(ctx, g.Owner, g.Repo, opts)
		if err != nil {
			return nil, err
		}
		for _, is := range issues {
			if !is.IsPullRequest() && carriesMarker(is.GetBody(), marker) && ownedBy(is.GetUser(), me) {
				return is, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.ListOptions.Page = resp.NextPage
	}
}

// classifyIssue says what a refused write needs.
func classifyIssue(err error) error {
	var ge *github.ErrorResponse
	if errors.As(err, &ge) && ge.Response != nil && (ge.Response.StatusCode == http.StatusForbidden || ge.Response.StatusCode == http.StatusNotFound) {
		return fmt.Errorf("the token may not write issues (the workflow needs permissions: issues: write): %s", ge.Message)
	}
	return err
}

// GitLabDriftIssue keeps the drift issue of an inventory on a GitLab
// project. The token must be a project or group access token with the api
// scope: CI_JOB_TOKEN cannot write issues.
type GitLabDriftIssue struct {
	APIURL     string
	Token      string
	ProjectID  string
	Page       Page
	Redact     *redact.Redactor
	HTTPClient *http.Client
}

var _ Reporter = (*GitLabDriftIssue)(nil)

// Name implements Reporter.
func (*GitLabDriftIssue) Name() string { return "GitLab drift issue" }

// Report implements Reporter.
func (g *GitLabDriftIssue) Report(ctx context.Context, res *result.Result) error {
	is, ok := driftIssueOf(res, g.Page)
	if !ok {
		return nil
	}
	return g.publish(ctx, is)
}

// ReportRun implements RunReporter: one issue per run file.
func (g *GitLabDriftIssue) ReportRun(ctx context.Context, run *result.Run) error {
	is, ok := runDriftIssueOf(run, g.Page)
	if !ok {
		return nil
	}
	return g.publish(ctx, is)
}

func (g *GitLabDriftIssue) publish(ctx context.Context, is driftIssue) error {
	marker, title, open := is.marker, is.title, is.open
	body := func() string { return is.body(NoteLimit, g.Redact) }
	if g.Token == "" {
		return fmt.Errorf("no gitlab-token: CI_JOB_TOKEN cannot write issues; give gantry a project or group access token with the api scope in gitlab-token")
	}
	client, me, err := gitlabAs(ctx, g.APIURL, g.Token, g.HTTPClient)
	if err != nil {
		return err
	}
	with := gitlab.WithContext(ctx)
	var existing *gitlab.Issue
	// Only the token's own issues: a project may have thousands open.
	opts := &gitlab.ListProjectIssuesOptions{State: gitlab.Ptr("opened"), AuthorID: gitlab.Ptr(me.ID), ListOptions: gitlab.ListOptions{PerPage: 100}}
	for existing == nil {
		issues, resp, err := client.Issues.ListProjectIssues(g.ProjectID, opts, with)
		if err != nil {
			return err
		}
		for _, is := range issues {
			if is.Author != nil && is.Author.ID == me.ID && carriesMarker(is.Description, marker) {
				existing = is
				break
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	switch {
	case existing == nil && !open:
		return nil
	case existing == nil:
		_, _, err = client.Issues.CreateIssue(g.ProjectID, &gitlab.CreateIssueOptions{Title: gitlab.Ptr(title), Description: gitlab.Ptr(body())}, with)
	case !open:
		_, _, err = client.Issues.UpdateIssue(g.ProjectID, existing.IID, &gitlab.UpdateIssueOptions{
			Description: gitlab.Ptr(resolvedNote(marker, g.Page.RunURL)), StateEvent: gitlab.Ptr("close")}, with)
	default:
		b := body()
		if Unchanged(existing.Description, b) {
			return nil
		}
		_, _, err = client.Issues.UpdateIssue(g.ProjectID, existing.IID, &gitlab.UpdateIssueOptions{Description: gitlab.Ptr(b)}, with)
	}
	return err
}
