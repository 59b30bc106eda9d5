package reporters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v89/github"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// CommentLimit is GitHub's limit for a comment body (65,536 characters).
const CommentLimit = 65536

// PullRequestComment keeps exactly one comment per inventory on a pull
// request, updated in place on every run. Its comment is the one that
// carries the inventory's hidden marker AND was written by the token's own
// identity: a marker alone can be planted by anyone who may comment.
type PullRequestComment struct {
	// APIURL is GITHUB_API_URL (GitHub Enterprise Server works too);
	// GraphQLURL is GITHUB_GRAPHQL_URL.
	APIURL, GraphQLURL string
	Token              string
	Owner, Repo        string
	Number             int
	Page               Page // Marker identifies the inventory's comment
	Redact             *redact.Redactor
	HTTPClient         *http.Client
}

var _ Reporter = (*PullRequestComment)(nil)

// Name implements Reporter.
func (*PullRequestComment) Name() string { return "GitHub pull request comment" }

// CommentMarker is the hidden marker of an inventory's comment.
func CommentMarker(res *result.Result) string {
	inv := "none"
	if res.Inventory != nil && res.Inventory.Name != "" {
		inv = markerValue(res.Inventory.Namespace) + "/" + markerValue(res.Inventory.Name)
	}
	if res.Base != "" {
		// The preview without a cluster has a comment of its own: it
		// never replaces the live diff's, nor is replaced by it.
		return "gantry:comment offline-diff inventory=" + inv
	}
	return "gantry:comment inventory=" + inv
}

// ErrNoWriteAccess is returned when the token may not comment (the token
// of a pull request from a fork is read-only).
var ErrNoWriteAccess = errors.New("the token may not write comments (a pull request from a fork gets a read-only token; the workflow needs pull-requests: write)")

// Report implements Reporter.
func (p *PullRequestComment) Report(ctx context.Context, res *result.Result) error {
	client, err := p.client()
	if err != nil {
		return err
	}
	page := p.Page
	page.Marker = CommentMarker(res)
	return p.publish(ctx, client, page.Marker, StickyBody(res, page, CommentLimit, p.Redact))
}

// ReportRun implements RunReporter: one comment per run file.
func (p *PullRequestComment) ReportRun(ctx context.Context, run *result.Run) error {
	client, err := p.client()
	if err != nil {
		return err
	}
	page := p.Page
	page.Marker = RunMarker(run)
	return p.publish(ctx, client, page.Marker, RunStickyBody(run, page, CommentLimit, p.Redact))
}

func (p *PullRequestComment) client() (*github.Client, error) {
	hc := p.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	base := strings.TrimSuffix(p.APIURL, "/") + "/"
	return github.NewClient(github.WithHTTPClient(hc), github.WithAuthToken(p.Token), github.WithURLs(&base, &base), github.WithUserAgent("gantry"))
}

// publish writes body as the comment that carries marker and was written
// by the token's identity, creating it or updating it in place.
func (p *PullRequestComment) publish(ctx context.Context, client *github.Client, marker, body string) error {
	me, err := p.viewer(ctx, client)
	if err != nil {
		return fmt.Errorf("finding the token's identity: %w", err)
	}
	existing, err := p.find(ctx, client, me, marker)
	if err != nil {
		return classify(err)
	}
	if existing == nil {
		_, _, err = client.Issues.CreateComment(ctx, p.Owner, p.Repo, p.Number, &github.IssueComment{Body: github.Ptr(body)})
		return classify(err)
	}
	if Unchanged(existing.GetBody(), body) {
		return nil // nothing new to say (timings do not count): no write, no notification
	}
	_, _, err = client.Issues.EditComment(ctx, p.Owner, p.Repo, existing.GetID(), &github.IssueComment{Body: github.Ptr(body)})
	return classify(err)
}

// viewer returns the login of the token's identity. GraphQL's viewer works
// for personal tokens and for installation tokens alike (REST GET /user
// answers 403 to the workflow's GITHUB_TOKEN).
func (p *PullRequestComment) viewer(ctx context.Context, client *github.Client) (string, error) {
	url := p.GraphQLURL
	if url == "" {
		url = graphQLURL(p.APIURL)
	}
	req, err := client.NewRequest(ctx, http.MethodPost, url, map[string]string{"query": "query { viewer { login } }"})
	if err != nil {
		return "", err
	}
	var out struct {
		Data struct {
			Viewer struct {
				Login string `json:"login"`
			} `json:"viewer"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if _, err := client.Do(req, &out); err != nil {
		return "", classify(err)
	}
	if len(out.Errors) > 0 {
		return "", errors.New(out.Errors[0].Message)
	}
	if out.Data.Viewer.Login == "" {
		return "", errors.New("GraphQL viewer has no login")
	}
	return out.Data.Viewer.Login, nil
}

// graphQLURL derives the GraphQL endpoint from the REST one:
// https://api.github.com -> https://api.github.com/graphql,
// https://ghes/api/v3 -> https://ghes/api/graphql.
func graphQLURL(api string) string {
	api = strings.TrimSuffix(api, "/")
	if strings.HasSuffix(api, "/api/v3") {
		return strings.TrimSuffix(api, "/v3") + "/graphql"
	}
	return api + "/graphql"
}

// find returns this inventory's comment by this identity, if any.
func (p *PullRequestComment) find(ctx context.Context, client *github.Client, me, marker string) (*github.IssueComment, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		comments, resp, err := client.Issues.ListComments(ctx, p.Owner, p.Repo, p.Number, opts)
		if err != nil {
			return nil, err
		}
		for _, c := range comments {
			if carriesMarker(c.GetBody(), marker) && ownedBy(c.GetUser(), me) {
				return c, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

// ownedBy matches a comment's author to the token's identity: a user by
// login, an app (GitHub Actions among them) by its bot login, which REST
// shows as "<slug>[bot]" and GraphQL's viewer as "<slug>".
func ownedBy(u *github.User, me string) bool {
	if u == nil {
		return false
	}
	login := u.GetLogin()
	return strings.EqualFold(login, me) || (u.GetType() == "Bot" && strings.EqualFold(login, me+"[bot]"))
}

// classify turns permission refusals into ErrNoWriteAccess.
func classify(err error) error {
	var ge *github.ErrorResponse
	if errors.As(err, &ge) && ge.Response != nil && (ge.Response.StatusCode == http.StatusForbidden || ge.Response.StatusCode == http.StatusNotFound) {
		return fmt.Errorf("%w: %s", ErrNoWriteAccess, ge.Message)
	}
	return err
}
