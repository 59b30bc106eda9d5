package reporters

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sethvargo/go-githubactions"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/safefile"
)

// GitHub limits, from GitHub's documentation.
const (
	// SummaryLimit is the job summary's limit per step (1 MiB); we keep a
	// margin for what other steps' text around ours does not take.
	SummaryLimit = 1<<20 - 4<<10
	// maxAnnotations is how many error annotations a step shows.
	maxAnnotations = 10
)

// safely turns go-githubactions' panics (it panics when a file command
// cannot be written) into errors.
func safely(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	f()
	return nil
}

// GitHubSummary appends the run to the job summary (GITHUB_STEP_SUMMARY),
// at the most detail that stays under GitHub's 1 MiB limit.
type GitHubSummary struct {
	Action *githubactions.Action
	Page   Page
	Redact *redact.Redactor
}

var _ Reporter = (*GitHubSummary)(nil)

// Name implements Reporter.
func (*GitHubSummary) Name() string { return "GitHub job summary" }

// Report implements Reporter.
func (s *GitHubSummary) Report(_ context.Context, res *result.Result) error {
	md, _ := Fit(res, s.Page, SummaryLimit)
	return safely(func() { s.Action.AddStepSummary(s.Redact.String(md)) })
}

// Outputs are the step outputs gantry sets, by name. The diff never goes
// into an output (outputs end up in command lines); its file's path does.
func Outputs(res *result.Result, reportPath, diffPath string) map[string]string {
	c := res.Counts()
	out := map[string]string{
		"changed":   strconv.FormatBool(res.Changed()),
		"reason":    string(res.Reason),
		"revision":  res.Revision,
		"inventory": "",
		"report":    reportPath,
		"diff":      diffPath,
	}
	for _, a := range result.Actions {
		out[string(a)] = strconv.Itoa(c[a])
	}
	if res.Inventory != nil && res.Inventory.Name != "" {
		out["inventory"] = res.Inventory.Namespace + "/" + res.Inventory.Name
	}
	out["artifact-url"], out["artifact-digest"], out["artifact-tags"] = "", "", ""
	if a := res.Artifact; a != nil {
		out["artifact-url"], out["artifact-digest"], out["artifact-tags"] = a.URL, a.Digest, strings.Join(a.Tags, ",")
	}
	out["drifted"], out["drifted-objects"] = "", ""
	if res.Command == "drift" {
		n := c[result.Drifted] + c[result.Missing]
		out["drifted"], out["drifted-objects"] = strconv.FormatBool(n > 0), strconv.Itoa(n)
	}
	out["history-revision"], out["rolled-back-to"], out["cause"] = "", "", string(res.Cause)
	if res.RecordedRevision > 0 {
		out["history-revision"] = strconv.Itoa(res.RecordedRevision)
	}
	if to := res.RolledBackTo; to > 0 || res.Rollback != nil && res.Rollback.RolledBackTo > 0 {
		if to == 0 {
			to = res.Rollback.RolledBackTo
		}
		out["rolled-back-to"] = strconv.Itoa(to)
	}
	return out
}

// computedOutputs are the outputs whose values gantry computes itself
// (booleans, counts, reasons, revision numbers): never a secret, so never
// masked. A decrypted "true" or a short password that happens to read as
// a count must not turn changed into *** and silently skip the steps
// that test it. Every other output (a revision, names, paths, URLs) is
// masked as anything printed.
var computedOutputs = func() map[string]bool {
	m := map[string]bool{"changed": true, "reason": true, "cause": true, "drifted": true, "drifted-objects": true,
		"history-revision": true, "rolled-back-to": true}
	for _, a := range result.Actions {
		m[string(a)] = true
	}
	return m
}()

// outputValue is the value an output is written with: masked unless
// gantry computed it (a unit's <unit>-changed and <unit>-reason too).
func outputValue(name, v string, redact *redact.Redactor) string {
	if computedOutputs[name] || strings.HasSuffix(name, "-changed") || strings.HasSuffix(name, "-reason") {
		return v
	}
	return redact.String(v)
}

// OutputNames lists the outputs in a stable order.
func OutputNames() []string {
	names := []string{}
	for _, a := range result.Actions {
		names = append(names, string(a))
	}
	return append(names, "changed", "reason", "revision", "inventory", "report", "diff", "artifact-url", "artifact-digest", "artifact-tags",
		"history-revision", "rolled-back-to", "cause", "drifted", "drifted-objects")
}

// GitHubOutputs writes the step outputs to GITHUB_OUTPUT, each with a
// random heredoc delimiter so no value can end it early.
type GitHubOutputs struct {
	Path       string
	ReportPath string
	DiffPath   string
	Redact     *redact.Redactor
}

var _ Reporter = (*GitHubOutputs)(nil)

// Name implements Reporter.
func (*GitHubOutputs) Name() string { return "GitHub step outputs" }

// Report implements Reporter.
func (g *GitHubOutputs) Report(_ context.Context, res *result.Result) error {
	return g.write(Outputs(res, g.ReportPath, g.DiffPath), OutputNames())
}

// write appends the outputs to GITHUB_OUTPUT, in the order of names.
func (g *GitHubOutputs) write(outputs map[string]string, names []string) error {
	var b bytes.Buffer
	for _, name := range names {
		if err := writeOutput(&b, name, outputValue(name, outputs[name], g.Redact)); err != nil {
			return err
		}
	}
	return safefile.Append(g.Path, b.Bytes())
}

func writeOutput(w io.Writer, name, value string) error {
	delim := "ghadelimiter_" + rand.Text()
	for strings.Contains(value, delim) {
		delim = "ghadelimiter_" + rand.Text()
	}
	_, err := fmt.Fprintf(w, "%s<<%s\n%s\n%s\n", name, delim, value, delim)
	return err
}

// GitHubAnnotations writes an error annotation for each failed object,
// pointing at its manifest relative to the workspace. Beyond GitHub's ten
// per step, one annotation summarises the rest.
type GitHubAnnotations struct {
	Action *githubactions.Action
	// Workspace is what annotation paths are relative to.
	Workspace string
	Redact    *redact.Redactor
}

var _ Reporter = (*GitHubAnnotations)(nil)

// Name implements Reporter.
func (*GitHubAnnotations) Name() string { return "GitHub annotations" }

// Report implements Reporter.
func (a *GitHubAnnotations) Report(_ context.Context, res *result.Result) error {
	var failed []result.Object
	for _, o := range res.Objects {
		if o.Action == result.Failed || (o.Health != nil && o.Health.Status != "Current") {
			failed = append(failed, o)
		}
	}
	if len(failed) == 0 && res.Failed() {
		// A run that failed before any object (a build error): one
		// annotation with the message.
		return safely(func() {
			a.Action.WithFieldsMap(map[string]string{"title": "gantry " + string(res.Reason)}).
				Errorf("%s", noLogCommands(a.Redact.String(firstLines(res.Message, 20))))
		})
	}
	return safely(func() {
		for i, o := range failed {
			if i == maxAnnotations-1 && len(failed) > maxAnnotations {
				a.Action.WithFieldsMap(map[string]string{"title": "gantry: more failures"}).
					Errorf("%d more objects failed; the job summary lists them all", len(failed)-i)
				return
			}
			msg := o.Error
			if o.Health != nil && o.Health.Message != "" {
				msg = o.Health.Status + ": " + o.Health.Message
			}
			line, source := o.Line, o.Source
			if len(o.Problems) > 0 && o.Action == result.Failed {
				// One annotation per object, at its first field at
				// fault (in the patch that set it, if one did),
				// listing every problem with its line.
				lines := make([]string, len(o.Problems))
				for i, p := range o.Problems {
					lines[i] = p.At("")
					if p.Source != "" {
						lines[i] = p.At(a.relative(p.Source))
					}
				}
				msg = strings.Join(lines, "\n")
				if o.Problems[0].Line > 0 {
					line = o.Problems[0].Line
					if o.Problems[0].Source != "" {
						source = o.Problems[0].Source
					}
				}
			}
			fields := map[string]string{"title": noLogCommands(o.Ref() + " " + string(o.Action))}
			if source != "" && result.FileSource(source) {
				fields["file"] = a.relative(source)
				if line > 0 {
					fields["line"] = strconv.Itoa(line)
				}
			}
			a.Action.WithFieldsMap(fields).Errorf("%s", noLogCommands(a.Redact.String(msg)))
		}
	})
}

// noLogCommands keeps text inside a workflow command from carrying
// another: the runner reads ##[ anywhere in a line (line breaks the
// library escapes). The blocker is U+2800, which the runner's
// culture-sensitive search does not skip (it skips U+200B).
func noLogCommands(s string) string {
	return strings.ReplaceAll(s, "##[", "##\u2800[")
}

// relative makes a source path relative to the workspace, as annotations
// need it.
func (a *GitHubAnnotations) relative(p string) string {
	if a.Workspace == "" || !result.FileSource(p) {
		return p
	}
	abs := p
	if !filepath.IsAbs(p) {
		if wd, err := os.Getwd(); err == nil {
			abs = filepath.Join(wd, p)
		}
	}
	if rel, err := filepath.Rel(a.Workspace, abs); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// RunURL is the link to a workflow run, from the runner's environment.
func RunURL(getenv func(string) string) string {
	server, repo, run := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID")
	if server == "" || repo == "" || run == "" {
		return ""
	}
	u := fmt.Sprintf("%s/%s/actions/runs/%s", server, repo, run)
	if attempt := getenv("GITHUB_RUN_ATTEMPT"); attempt != "" && attempt != "1" {
		u += "/attempts/" + attempt
	}
	return u
}
