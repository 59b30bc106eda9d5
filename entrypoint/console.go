package entrypoint

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
	"unicode"

	"golang.org/x/term"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/diffs"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/logguard"
	"github.com/gantry-dev/gantry/pipeline"
	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources"
)

// console prints progress for a person: one line per stage (a collapsible
// group on GitHub, a section on GitLab), one line per object that changed,
// and a summary; in colour on a terminal. Every line goes through the
// redactor, whatever produced it.
type console struct {
	mu     *sync.Mutex // shared by the consoles of a run's units
	w      io.Writer
	redact *redact.Redactor
	p      platform
	color  bool
	now    func() time.Time // GitLab sections carry Unix times
	// unanswered counts the objects whose request got no answer: the
	// first is printed, the rest are summed up at the end.
	unanswered atomic.Int32
	// fenced counts the objects whose write the lost Lease stopped.
	fenced atomic.Int32
	// unit, in a run of several, starts each line: units run side by
	// side, so their stages are lines, not groups or sections.
	unit string
	// quiet prints no progress: stages, objects and notes.
	quiet bool
	// verb is the command, which labels what happens to objects: a
	// diff's are to happen.
	verb string
}

var _ pipeline.Observer = (*console)(nil)

func newConsole(w io.Writer, redact *redact.Redactor, p platform) *console {
	color := colorTerminal(w)
	return &console{mu: &sync.Mutex{}, w: w, redact: redact, p: p, color: color, now: time.Now}
}

// forUnit is the console of one unit of a run: every line starts with
// the unit's name.
func (c *console) forUnit(name string) *console {
	return &console{mu: c.mu, w: c.w, redact: c.redact, p: c.p, color: c.color, now: c.now, unit: name, quiet: c.quiet, verb: c.verb}
}

// Write lets client-go's warning writer print through the console.
func (c *console) Write(b []byte) (int, error) {
	c.printf("%s", b)
	return len(b), nil
}

func (c *console) printf(format string, a ...any) {
	c.write(c.w, format, a...)
}

// command prints one of gantry's own workflow commands (a group, a
// warning) on GitHub: beside the guard that keeps content from reading
// as one.
func (c *console) command(format string, a ...any) {
	c.write(logguard.Commands(c.w), format, a...)
}

func (c *console) write(w io.Writer, format string, a ...any) {
	s := c.redact.String(fmt.Sprintf(format, a...))
	if c.unit != "" {
		prefix := c.paint("2", "["+c.unit+"]") + " "
		s = prefix + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+prefix) + "\n"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprint(w, s)
}

func (c *console) paint(code, s string) string {
	if !c.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (c *console) StageStarted(name string) {
	if c.quiet {
		return
	}
	switch {
	case c.unit != "":
		c.printf("%s %s\n", c.paint("1", "▸"), name)
	case c.p == githubActions:
		c.command("::group::%s\n", name)
	case c.p == gitlabCI:
		c.printf("\x1b[0Ksection_start:%d:gantry_%s[collapsed=false]\r\x1b[0K%s\n", c.now().Unix(), name, name)
	default:
		c.printf("%s %s\n", c.paint("1", "▸"), name)
	}
}

func (c *console) StageFinished(s result.Stage) {
	if c.quiet {
		return
	}
	switch {
	case c.unit != "":
	case c.p == githubActions:
		c.command("::endgroup::\n")
	case c.p == gitlabCI:
		c.printf("\x1b[0Ksection_end:%d:gantry_%s\r\x1b[0K", c.now().Unix(), s.Name)
	}
	if s.Error != "" {
		c.printf("%s %s failed after %s\n", c.paint("31", "✗"), s.Name, s.Duration.Round(msRound))
		return
	}
	c.printf("%s %s (%s)\n", c.paint("32", "✓"), s.Name, s.Duration.Round(msRound))
}

func (c *console) ObjectDone(o result.Object) {
	if c.quiet || o.Action == result.Unchanged || o.Action == result.InSync {
		return
	}
	action := o.Action.Label(c.verb)
	switch o.Action {
	case result.Failed:
		action = c.paint("31", action)
	case result.Skipped:
		action = c.paint("33", action)
	default:
		action = c.paint("36", action)
	}
	fenced := o.Error == pipeline.Fenced
	if o.Unanswered && c.unanswered.Add(1) > 1 || fenced && c.fenced.Add(1) > 1 {
		return // the summary says how many
	}
	line := fmt.Sprintf("  %s %s", o.Ref(), action)
	if len(o.Problems) > 0 && o.Action == result.Failed {
		// One entry per object, each field at fault on a line of its own.
		for _, p := range o.Problems {
			line += "\n    " + p.At(o.Source)
		}
	} else if o.Error != "" {
		line += ": " + o.Error
	} else if len(o.Conflicts) > 0 {
		line += " (takes " + conflictList(o.Conflicts) + ")"
	}
	switch {
	case o.Unanswered:
		line += " (further objects without an answer are summed up at the end)"
	case fenced:
		line += " (further objects it stopped are summed up at the end)"
	}
	c.printf("%s\n", line)
	for _, d := range o.Drift {
		if o.Action == result.Missing {
			c.printf("    deleted by hand\n")
			break
		}
		by := ""
		if d.Manager != "" {
			by = " by " + d.Manager
		}
		if d.Time != nil {
			by += " at " + d.Time.UTC().Format(time.RFC3339)
		}
		values := ""
		if v := d.Values(); v != "" {
			values = ": " + v
		}
		c.printf("    %s %s%s%s\n", d.Field, d.Change, by, values)
	}
}

func (c *console) Info(msg string) {
	if c.quiet {
		if rest, ok := strings.CutPrefix(msg, "warning: "); ok {
			c.warn(rest) // warnings still print
		}
		return
	}
	c.printf("  %s\n", msg)
}

// warn reports a problem that does not fail the run.
func (c *console) warn(msg string) {
	if c.p == githubActions && c.unit == "" {
		c.command("::warning title=gantry::%s\n", escapeCommandData(msg))
		return
	}
	c.printf("%s %s\n", c.paint("33", "warning:"), msg)
}

// escapeCommandData escapes a workflow command's message as the runner
// expects.
func escapeCommandData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", "##[", "##"+logguard.Blocker+"[").Replace(s)
}

// summary prints the outcome, counts and, on failure, every error.
func (c *console) summary(res *result.Result) {
	counts := res.Counts()
	var parts []string
	actions := result.ActionsOf(res.Command)
	switch res.Command {
	case "push":
		// A push writes no object: it says what it pushed.
		actions = nil
		if a := res.Artifact; a != nil && a.URL != "" {
			what := "pushed " + a.URL
			if a.Signed {
				what += ", signed"
			}
			parts = append(parts, what)
		} else {
			parts = append(parts, "nothing pushed")
		}
	}
	if len(res.Objects) == 0 && !res.ReachedGoal() {
		// Nothing ran as far as any object: a row of zeros says nothing.
		actions = nil
	}
	for _, a := range actions {
		parts = append(parts, fmt.Sprintf("%d %s", counts[a], a.Label(res.Command)))
	}
	where := ""
	if res.Inventory != nil && res.Inventory.Name != "" {
		where = fmt.Sprintf(" (inventory %s/%s", res.Inventory.Namespace, res.Inventory.Name)
		if res.Revision != "" {
			where += ", revision " + res.Revision
		}
		where += ")"
	}
	reason := string(res.Reason)
	if res.ReachedGoal() {
		reason = c.paint("32", reason)
	} else if res.Failed() {
		reason = c.paint("31", reason)
	}
	if len(parts) > 0 {
		reason += ": " + strings.Join(parts, ", ")
	}
	c.printf("gantry %s: %s%s\n", res.Command, reason, where)
	if res.Message != "" && !res.Succeeded() {
		c.printf("%s\n", config.Indent(res.Message))
	}
}

const msRound = 1e6 // time.Millisecond, untyped for Round

// writeObjects prints the built objects as a YAML stream, with the values
// of Secrets redacted: build output ends up in CI logs. On GitHub the
// stream is fenced with ::stop-commands:: so that no manifest line can act
// as a workflow command. Every known secret (a secret-named substitution
// value, a value decrypted from a SOPS file into a ConfigMap) is masked.
func writeObjects(w io.Writer, objects []*sources.Object, fenced bool, redact *redact.Redactor) error {
	if fenced {
		end, err := fence(w)
		if err != nil {
			return err
		}
		defer end()
	}
	// Encoding is most of printing a large set: each object is encoded
	// on its own, on every core, and written in order.
	encoded := make([][]byte, len(objects))
	errs := make([]error, len(objects))
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), len(objects))
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(objects); i += workers {
				o := objects[i]
				u := pipeline.MaskFields(o.Unstructured, o.DecryptedFields)
				if u.GetKind() == "Secret" && u.GroupVersionKind().Group == "" {
					u = redactSecret(u)
				}
				// Each value is masked before it is written: however
				// YAML then quotes or folds it, no part of a secret is
				// left.
				encoded[i], errs[i] = sources.EncodeYAML(diffs.MaskStrings(u.DeepCopy().Object, redact.String))
			}
		})
	}
	wg.Wait()
	for i, b := range encoded {
		if err := errs[i]; err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, redact.String(string(b))); err != nil {
			return err
		}
	}
	return nil
}

func redactSecret(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	for _, field := range []string{"data", "stringData"} {
		m, ok, _ := unstructured.NestedMap(c.Object, field)
		if !ok {
			continue
		}
		for k := range m {
			m[k] = "*** (redacted)"
		}
		_ = unstructured.SetNestedMap(c.Object, m, field)
	}
	return c
}

// runInventory lists the inventories of a namespace, or shows one.
func (s *session) runInventory(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) int {
	invs, err := s.run.Inventories(ctx, cfg, s.console)
	for _, inv := range invs {
		if cfg.Inventory == "" {
			fmt.Fprintf(stdout, "%s/%s\t%d %s\tgit revision %s\tapplied %s\n", inv.Namespace, inv.Name, len(inv.Entries), plural(len(inv.Entries), "object", "objects"), orNone(inv.Revision), inv.LastApplied.Format("2006-01-02T15:04:05Z07:00"))
			continue
		}
		fmt.Fprintf(stdout, "inventory %s/%s: git revision %s, source %s, applied %s by gantry %s\n", inv.Namespace, inv.Name, orNone(inv.Revision), inv.Source, inv.LastApplied.Format("2006-01-02T15:04:05Z07:00"), inv.GantryVersion)
		for _, e := range inv.Entries {
			fmt.Fprintf(stdout, "%s\t%s\n", e.ID, e.Version)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "gantry:", err)
		return ExitFailed
	}
	return ExitOK
}

// runHistory lists an inventory's revisions, newest first.
func (s *session) runHistory(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) int {
	list, err := s.run.Revisions(ctx, cfg, s.console)
	if err != nil {
		fmt.Fprintln(stderr, "gantry:", err)
		return ExitFailed
	}
	if cfg.Output != "text" {
		b, err := marshalAs(cfg.Output, list)
		if err != nil {
			fmt.Fprintln(stderr, "gantry:", err)
			return ExitFailed
		}
		_, _ = io.WriteString(stdout, s.redact.String(b))
		return ExitOK
	}
	if len(list) == 0 {
		fmt.Fprintf(stderr, "gantry: inventory %s/%s has no revisions\n", cfg.InventoryNamespace, cfg.Inventory)
		return ExitOK
	}
	// What a revision carries is printed escaped, one line per revision,
	// and masked as everything else.
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tAPPLIED\tOUTCOME\tOBJECTS\tSOURCE\tGIT REVISION\tDIGEST\tBY\tNOTE")
	for _, v := range list {
		note := v.Note
		if v.Cause != "" {
			note = strings.TrimPrefix(note+"; after "+v.Cause, "; ")
		}
		if v.Outcome == inventory.OutcomePending {
			note = strings.TrimPrefix(note+"; its run has not recorded how it ended (running, or stopped without the inventory's lock)", "; ")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", v.Number, v.Time.Format(time.RFC3339), printable(v.Outcome), v.Objects,
			orNone(printable(cmp.Or(v.Artifact, v.Source))), orNone(printable(v.GitRevision)), shortDigest(printable(v.Digest)), printable(v.By), printable(note))
	}
	_ = tw.Flush()
	_, _ = io.WriteString(stdout, s.redact.String(b.String()))
	return ExitOK
}

// shortDigest is a digest as people compare them by eye.
func shortDigest(d string) string {
	if algo, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return algo + ":" + hex[:12]
	}
	return orNone(d)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// colorTerminal reports whether w is a terminal that may be coloured
// (NO_COLOR unset).
func colorTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == ""
}

// useColor says whether to colour what goes to w, as the color input
// asks: always, never, or auto: unless NO_COLOR is set, on a terminal,
// and in the logs of GitHub Actions and GitLab CI, which render colour
// (when w is the log: a pipe, not a file the output was sent to).
func useColor(mode string, w io.Writer, env map[string]string) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	if env["NO_COLOR"] != "" {
		return false
	}
	if colorTerminal(w) {
		return true
	}
	if env["GITHUB_ACTIONS"] == "true" || env["GITLAB_CI"] == "true" {
		f, ok := logguard.Behind(w).(*os.File) // the log behind GitHub's guard
		if !ok {
			return false
		}
		info, err := f.Stat()
		return err == nil && !info.Mode().IsRegular()
	}
	return false
}

// fence stops GitHub's runner from reading what follows on w as workflow
// commands, until end is called. The token is random: nothing written in
// between can end the fence.
func fence(w io.Writer) (end func(), err error) {
	token := "gantry-" + strings.ToLower(rand.Text())
	own := logguard.Commands(w) // the fence is gantry's own: beside the guard
	if _, err := fmt.Fprintf(own, "::stop-commands::%s\n", token); err != nil {
		return nil, err
	}
	return func() { fmt.Fprintf(own, "::%s::\n", token) }, nil
}

// conflictList names the fields an object's apply takes from other field
// managers.
func conflictList(conflicts []result.Conflict) string {
	parts := make([]string, len(conflicts))
	for i, c := range conflicts {
		parts[i] = c.Field + " from " + c.Manager
	}
	return strings.Join(parts, ", ")
}

// printable is a value read from the cluster as a table shows it: control
// characters (a line break, a tab, an escape) quoted, so that it stays in
// its cell and on its line.
func printable(v string) string {
	if !strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) {
		return v
	}
	q := strconv.Quote(v)
	return q[1 : len(q)-1]
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
