package reporters

import (
	"fmt"
	"strings"

	"github.com/gantry-dev/gantry/result"
)

// runIcon is a unit's or a run's outcome at a glance.
func runIcon(r result.Reason) string {
	switch r {
	case result.ReasonSucceeded:
		return "✅"
	case result.ReasonProgressing:
		return "📝"
	case result.ReasonSuspended:
		return "⏸️"
	case result.ReasonDependencyNotReady:
		return "⏭️"
	}
	return "❌"
}

// unitOutcome is a unit's outcome in words: its reason, and for a unit
// that reached its goal, whether anything changed.
func unitOutcome(u result.Unit) string {
	switch {
	case u.Reason == result.ReasonSucceeded && u.Command == "diff":
		return "no changes"
	case u.Reason == result.ReasonProgressing:
		return "changes pending"
	case u.Reason == result.ReasonSucceeded && u.Changed():
		return "changed"
	case u.Reason == result.ReasonSucceeded:
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
	fmt.Fprintf(&b, "### %s gantry %s: %s\n\n", runIcon(run.Reason), run.Command, run.Message)

	b.WriteString("| unit | cluster | outcome | " + strings.Join(actionNames(), " | ") + " | time |\n|---|---|---|")
	b.WriteString(strings.Repeat("---|", len(result.Actions)+1) + "\n")
	for _, u := range run.Units {
		counts := u.Counts()
		fmt.Fprintf(&b, "| %s %s | %s | %s |", runIcon(u.Reason), cell(u.Name), cell(u.Cluster.String()), unitOutcome(u))
		for _, a := range result.Actions {
			fmt.Fprintf(&b, " %d |", counts[a])
		}
		fmt.Fprintf(&b, " %s |\n", round(u.Finished.Sub(u.Started)))
	}
	b.WriteString("\n")

	if levels := run.Levels(); len(levels) > 1 {
		var steps []string
		for _, l := range levels {
			steps = append(steps, "`"+strings.Join(l, "`, `")+"`")
		}
		fmt.Fprintf(&b, "**Order** %s\n\n", strings.Join(steps, " → "))
	}

	for _, u := range run.Units {
		open := ""
		if result.Severity(u.Reason) >= 3 || u.Reason == result.ReasonProgressing || (u.Reason == result.ReasonSucceeded && u.Changed()) {
			open = " open"
		}
		fmt.Fprintf(&b, "<details%s><summary>%s <b>%s</b>: %s</summary>\n\n", open, runIcon(u.Reason), htmlEscape(u.Name), htmlEscape(unitOutcome(u)))
		switch u.Reason {
		case result.ReasonSuspended, result.ReasonDependencyNotReady:
			b.WriteString(u.Message + "\n")
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
	for d := FullDiffs; d < CountsOnly; d++ {
		if s := RunMarkdown(run, page, d); len(s) <= limit {
			return s, d
		}
	}
	return RunMarkdown(run, page, CountsOnly), CountsOnly
}
