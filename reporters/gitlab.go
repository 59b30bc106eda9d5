package reporters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// GitLab limits, from GitLab's documentation.
const (
	// NoteLimit is the size of a merge-request note (1,000,000 characters).
	NoteLimit = 1_000_000
	// DotenvLimit is the size of a dotenv report artifact (5 KB).
	DotenvLimit = 5 * 1024
)

// ErrJobTokenCannotComment explains why no token means no note.
var ErrJobTokenCannotComment = errors.New("no gitlab-token: CI_JOB_TOKEN cannot post merge request notes; give gantry a project or group access token with the api scope (as a masked CI/CD variable) in gitlab-token")

// MergeRequestNote keeps exactly one note per inventory on a merge request,
// updated in place: found by its hidden marker AND the token's own user.
type MergeRequestNote struct {
	// APIURL is CI_API_V4_URL.
	APIURL     string
	Token      string
	ProjectID  string // CI_PROJECT_ID
	IID        int64  // CI_MERGE_REQUEST_IID
	Page       Page
	Redact     *redact.Redactor
	HTTPClient *http.Client
}

var _ Reporter = (*MergeRequestNote)(nil)

// Name implements Reporter.
func (*MergeRequestNote) Name() string { return "GitLab merge request note" }

// Report implements Reporter.
func (m *MergeRequestNote) Report(ctx context.Context, res *result.Result) error {
	page := m.Page
	page.Marker = CommentMarker(res)
	return m.publish(ctx, page.Marker, StickyBody(res, page, NoteLimit, m.Redact))
}

// ReportRun implements RunReporter: one note per run file.
func (m *MergeRequestNote) ReportRun(ctx context.Context, run *result.Run) error {
	page := m.Page
	page.Marker = RunMarker(run)
	return m.publish(ctx, page.Marker, RunStickyBody(run, page, NoteLimit, m.Redact))
}

// publish writes body as the note that carries marker and was written by
// the token's user, creating it or updating it in place.
func (m *MergeRequestNote) publish(ctx context.Context, marker, body string) error {
	if m.Token == "" {
		return ErrJobTokenCannotComment
	}
	client, me, err := gitlabAs(ctx, m.APIURL, m.Token, m.HTTPClient)
	if err != nil {
		return err
	}
	with := gitlab.WithContext(ctx)

	var existing *gitlab.Note
	opts := &gitlab.ListMergeRequestNotesOptions{ListOptions: gitlab.ListOptions{PerPage: 100}}
	for existing == nil {
		notes, resp, err := client.Notes.ListMergeRequestNotes(m.ProjectID, m.IID, opts, with)
		if err != nil {
			return err
		}
		for _, n := range notes {
			if n.Author.ID == me.ID && carriesMarker(n.Body, marker) {
				existing = n
				break
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	switch {
	case existing == nil:
		_, _, err = client.Notes.CreateMergeRequestNote(m.ProjectID, m.IID, &gitlab.CreateMergeRequestNoteOptions{Body: gitlab.Ptr(body)}, with)
	case Unchanged(existing.Body, body):
		return nil // nothing new to say (timings do not count)
	default:
		_, _, err = client.Notes.UpdateMergeRequestNote(m.ProjectID, m.IID, existing.ID, &gitlab.UpdateMergeRequestNoteOptions{Body: gitlab.Ptr(body)}, with)
	}
	return err
}

// gitlabAs is a client of GitLab's API with token, and the token's user,
// by whom gantry's own notes and issues are recognised.
func gitlabAs(ctx context.Context, api, token string, hc *http.Client) (*gitlab.Client, *gitlab.User, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	client, err := gitlab.NewClient(token, gitlab.WithBaseURL(api), gitlab.WithHTTPClient(hc), gitlab.WithoutRetries())
	if err != nil {
		return nil, nil, err
	}
	me, _, err := client.Users.CurrentUser(gitlab.WithContext(ctx))
	if err != nil {
		return nil, nil, fmt.Errorf("finding the token's user: %w", err)
	}
	return client, me, nil
}

// Dotenv writes the scalar outputs as a dotenv report artifact
// (artifacts:reports:dotenv): GANTRY_<NAME>=value, one line each, under
// GitLab's 5 KB.
type Dotenv struct {
	Path                 string
	ReportPath, DiffPath string
	Redact               *redact.Redactor
	// Inputs says which variables are gantry's inputs. An output of the
	// same name (revision, inventory, report) is written as
	// GANTRY_OUTPUT_<NAME>: a dotenv's variables win over a later job's
	// own, so that job's gantry would take this one's inventory, report
	// path and revision for its inputs.
	Inputs func(variable string) bool
}

// DotenvName is the variable an output is written as.
func (d *Dotenv) DotenvName(output string) string {
	v := "GANTRY_" + strings.ToUpper(strings.ReplaceAll(output, "-", "_"))
	if d.Inputs != nil && d.Inputs(v) {
		return "GANTRY_OUTPUT_" + strings.TrimPrefix(v, "GANTRY_")
	}
	return v
}

var _ Reporter = (*Dotenv)(nil)

// Name implements Reporter.
func (*Dotenv) Name() string { return "GitLab dotenv" }

// Report implements Reporter.
func (d *Dotenv) Report(_ context.Context, res *result.Result) error {
	return d.write(Outputs(res, d.ReportPath, d.DiffPath), OutputNames())
}

// write writes the outputs, in the order of names, as the dotenv file.
func (d *Dotenv) write(outputs map[string]string, names []string) error {
	var b strings.Builder
	for _, name := range names {
		v := dotenvValue(outputValue(name, outputs[name], d.Redact))
		fmt.Fprintf(&b, "%s=%s\n", d.DotenvName(name), v)
	}
	if b.Len() > DotenvLimit {
		return fmt.Errorf("dotenv would be %d bytes, over GitLab's %d", b.Len(), DotenvLimit)
	}
	return writeFile(d.Path, []byte(b.String()))
}

// dotenvValue is an output as the dotenv holds it: a value from git or a
// pull request (a branch named `fix$(touch${IFS}x)`) must not run, nor
// expand, when GitLab reads the file (it expands $ in the variables it
// makes) or a shell sources it. GitLab keeps quotes as they are, so the
// value cannot be quoted: every byte but letters, digits and
// `_ . / : @ + , = - *` is written percent-encoded (%24 for $), which
// neither reads as anything but text. gantry's own values (counts,
// reasons, digests, names) are made of those bytes and stay as they are.
func dotenvValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("_./:@+,=-*", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func singleLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
