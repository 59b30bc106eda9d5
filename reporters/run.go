package reporters

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// RunReporter publishes a run of units (a run file) in one place, as one
// report: one summary, one comment, one JSON report.
type RunReporter interface {
	Name() string
	ReportRun(ctx context.Context, run *result.Run) error
}

// ReportRun runs every reporter on a run of units and returns their
// failures as warnings, each naming its reporter.
func (m Multi) ReportRun(ctx context.Context, run *result.Run) []error {
	var warnings []error
	for _, r := range m {
		rr, ok := r.(RunReporter)
		if !ok {
			warnings = append(warnings, fmt.Errorf("%s: does not report a run of units", r.Name()))
			continue
		}
		if err := rr.ReportRun(ctx, run); err != nil {
			warnings = append(warnings, fmt.Errorf("%s: %w", r.Name(), err))
		}
	}
	return warnings
}

var (
	_ RunReporter = (*JSONReport)(nil)
	_ RunReporter = (*DiffFile)(nil)
	_ RunReporter = (*GitHubSummary)(nil)
	_ RunReporter = (*GitHubOutputs)(nil)
	_ RunReporter = (*GitHubAnnotations)(nil)
	_ RunReporter = (*PullRequestComment)(nil)
	_ RunReporter = (*MergeRequestNote)(nil)
	_ RunReporter = (*Dotenv)(nil)
	_ RunReporter = (*TektonResults)(nil)
)

// ReportRun implements RunReporter: the run, every unit's whole result in it.
func (j *JSONReport) ReportRun(_ context.Context, run *result.Run) error {
	return j.write(run)
}

// ReportRun implements RunReporter: every unit's diffs, in the units' order.
func (d *DiffFile) ReportRun(_ context.Context, run *result.Run) error {
	return writeFile(d.Path, []byte(d.Redact.String(FullDiff(run.Total()))))
}

// ReportRun implements RunReporter.
func (s *GitHubSummary) ReportRun(_ context.Context, run *result.Run) error {
	md, _ := RunFit(run, s.Page, SummaryLimit)
	return safely(func() { s.Action.AddStepSummary(s.Redact.String(md)) })
}

// ReportRun implements RunReporter: the totals under the single run's
// names, then each unit's <unit>-changed and <unit>-reason.
func (g *GitHubOutputs) ReportRun(_ context.Context, run *result.Run) error {
	return g.write(RunOutputs(run, g.ReportPath, g.DiffPath), RunOutputNames(run))
}

// ReportRun implements RunReporter: the failed objects of every unit.
func (a *GitHubAnnotations) ReportRun(ctx context.Context, run *result.Run) error {
	return a.Report(ctx, run.Total())
}

// ReportRun implements RunReporter, as ReportRun of GitHubOutputs.
func (d *Dotenv) ReportRun(_ context.Context, run *result.Run) error {
	return d.write(RunOutputs(run, d.ReportPath, d.DiffPath), RunOutputNames(run))
}

// ReportRun implements RunReporter: the Task's results are the run's
// totals (a Task declares its results; per-unit results belong to a
// Pipeline of one Task per unit, which gantry plan writes). A run of one
// unit, as each task of that Pipeline is, gives the unit's own result:
// its inventory and history revision, which totals do not have.
func (t *TektonResults) ReportRun(ctx context.Context, run *result.Run) error {
	if len(run.Units) == 1 && run.Units[0].Result != nil {
		return t.Report(ctx, run.Units[0].Result)
	}
	return t.Report(ctx, run.Total())
}

// RunOutputs are the outputs of a run of units: the totals by the single
// run's names, and per unit <unit>-changed and <unit>-reason.
func RunOutputs(run *result.Run, reportPath, diffPath string) map[string]string {
	out := Outputs(run.Total(), reportPath, diffPath)
	out["inventory"] = ""
	for _, u := range run.Units {
		out[u.Name+"-changed"] = strconv.FormatBool(u.Changed())
		out[u.Name+"-reason"] = string(u.Reason)
	}
	return out
}

// RunOutputNames lists a run's outputs in a stable order.
func RunOutputNames(run *result.Run) []string {
	names := OutputNames()
	for _, u := range run.Units {
		names = append(names, u.Name+"-changed", u.Name+"-reason")
	}
	return names
}

// RunMarker is the hidden marker of a run file's comment: one comment per
// run file, whatever its units, and one per selection of its units (the
// unit input), as the jobs of a plan each run one.
func RunMarker(run *result.Run) string {
	for _, u := range run.Units {
		if u.Result != nil && u.Base != "" {
			return "gantry:comment offline-diff run-file=" + markerValue(run.RunFile) + selectionMarker(run)
		}
	}
	return "gantry:comment run-file=" + markerValue(run.RunFile) + selectionMarker(run)
}

// selectionMarker is " unit=" and the run's selection of units, sorted,
// or nothing when the run was of every unit.
func selectionMarker(run *result.Run) string {
	if len(run.Selected) == 0 {
		return ""
	}
	names := make([]string, len(run.Selected))
	for i, n := range run.Selected {
		names[i] = markerValue(n)
	}
	slices.Sort(names)
	return " unit=" + strings.Join(slices.Compact(names), ",")
}

// RunStickyBody is RunFit's rendering for a comment updated in place,
// redacted, with a hidden key of its content without what changes on
// every run (timings, the link to the run), as StickyBody.
func RunStickyBody(run *result.Run, page Page, limit int, redact *redact.Redactor) string {
	body, detail := RunFit(run, page, limit)
	stable := *run
	stable.Units = make([]result.Unit, len(run.Units))
	for i, u := range run.Units {
		r := *u.Result
		r.Started, r.Finished = time.Time{}, time.Time{}
		r.Stages = make([]result.Stage, len(u.Stages))
		for j, s := range u.Stages {
			s.Duration = 0
			r.Stages[j] = s
		}
		u.Result = &r
		stable.Units[i] = u
	}
	page.RunURL = ""
	sum := sha256.Sum256([]byte(redact.String(RunMarkdown(&stable, page, detail))))
	return redact.String(body) + fmt.Sprintf("\n<!-- gantry-content %x -->\n", sum[:12])
}

// runIcon is a unit's or a run's outcome at a glance.
func runIcon(r result.Reason) string {
	if r.Succeeded() {
		return "✅"
	}
	switch r {
	case result.ReasonProgressing:
		return "📝"
	case result.ReasonSuspended:
		return "⏸️"
	case result.ReasonDependencyNotReady:
		return "⏭️"
	case result.ReasonDriftDetected:
		return "⚠️"
	}
	return "❌"
}

// unitOutcome is a unit's outcome in words: its reason, and for a unit
// that reached its goal, whether anything changed.
func unitOutcome(u result.Unit) string {
	switch {
	case u.Reason == result.ReasonValidated:
		return "valid"
	case u.Reason == result.ReasonNoChanges:
		return "no changes"
	case u.Reason == result.ReasonNoDrift:
		return "in sync"
	case u.Reason == result.ReasonDeleted:
		return "deleted"
	case u.Reason == result.ReasonDriftDetected:
		n := u.Counts()[result.Drifted] + u.Counts()[result.Missing]
		return fmt.Sprintf("%d drifted", n)
	case u.Reason == result.ReasonProgressing:
		return "changes pending"
	case u.Reason.Succeeded() && u.Changed():
		return "changed"
	case u.Reason.Succeeded():
		return "unchanged"
	}
	return string(u.Reason)
}

// RunMarkdown renders a run of units at the given detail: the run's
// headline, a table of its units, the order they ran in, then a section
// per unit, open where it failed or changed, folded where nothing
// happened. Every unit keeps its headline at every detail.
func RunMarkdown(run *result.Run, page Page, detail Detail) string {
	var b strings.Builder
	if page.Marker != "" {
		fmt.Fprintf(&b, "<!-- %s -->\n", page.Marker)
	}
	fmt.Fprintf(&b, "### %s gantry %s: %s\n\n", runIcon(run.Reason), run.Command, redact.MarkdownText(oneLine(run.Message)))

	actions := result.ActionsOf(run.Command)
	b.WriteString("| unit | cluster | outcome | " + strings.Join(result.Labels(run.Command, actions), " | ") + " | time |\n|---|---|---|")
	b.WriteString(strings.Repeat("---|", len(actions)+1) + "\n")
	for _, u := range run.Units {
		counts := u.Counts()
		fmt.Fprintf(&b, "| %s %s | %s | %s |", runIcon(u.Reason), cell(u.Name), cell(u.Cluster.String()), unitOutcome(u))
		for _, a := range actions {
			fmt.Fprintf(&b, " %d |", counts[a])
		}
		fmt.Fprintf(&b, " %s |\n", round(u.Finished.Sub(u.Started)))
	}
	b.WriteString("\n")

	if levels := run.Levels(); len(levels) > 1 {
		var steps []string
		for _, l := range levels {
			names := make([]string, len(l))
			for i, n := range l {
				names[i] = code(n)
			}
			steps = append(steps, strings.Join(names, ", "))
		}
		fmt.Fprintf(&b, "**Order** %s\n\n", strings.Join(steps, " → "))
	}

	for _, u := range run.Units {
		open := ""
		if result.Severity(u.Reason) >= 3 || u.Reason == result.ReasonProgressing || u.Reason == result.ReasonDriftDetected || (u.Reason.Succeeded() && u.Changed()) {
			open = " open"
		}
		fmt.Fprintf(&b, "<details%s><summary>%s <b>%s</b>: %s</summary>\n\n", open, runIcon(u.Reason), redact.HTMLText(oneLine(u.Name)), redact.HTMLText(oneLine(unitOutcome(u))))
		switch u.Reason {
		case result.ReasonSuspended, result.ReasonDependencyNotReady:
			b.WriteString(redact.MarkdownText(oneLine(u.Message)) + "\n")
		default:
			body := Markdown(u.Result, Page{}, detail)
			// The section's summary is the unit's headline.
			_, body, _ = strings.Cut(body, "\n\n")
			b.WriteString(body)
		}
		b.WriteString("\n</details>\n\n")
	}
	if page.RunURL != "" && detail > FullDiffs {
		fmt.Fprintf(&b, "<sub>Every diff in full: [the job summary and the JSON report of this run](%s)</sub>\n", page.RunURL)
	}
	return b.String()
}

// RunFit renders a run of units at the most detail whose size is at most
// limit bytes; CountsOnly is returned even when it does not fit.
func RunFit(run *result.Run, page Page, limit int) (string, Detail) {
	return fit(limit, func(d Detail) string { return RunMarkdown(run, page, d) })
}
