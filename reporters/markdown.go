package reporters

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/diffs"
	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// Detail is how much of a run a Markdown rendering shows. Renderings step
// down the levels until they fit their platform's size limit.
type Detail int

const (
	// FullDiffs shows every changed object's diff.
	FullDiffs Detail = iota
	// ShortDiffs cuts each diff to a few lines.
	ShortDiffs
	// ObjectsOnly lists the changed and failed objects without diffs.
	ObjectsOnly
	// CountsOnly shows the outcome and the counts.
	CountsOnly
)

func (d Detail) String() string {
	return [...]string{"full diffs", "shortened diffs", "objects only", "counts only"}[d]
}

// shortDiffLines is how many lines of each diff ShortDiffs keeps.
const shortDiffLines = 20

// maxTableRows bounds the object tables, so that 10,000 changes still
// render within every platform's limit at ObjectsOnly.
const maxTableRows = 250

// Page is the context a Markdown rendering links to.
type Page struct {
	// RunURL links to the CI run (its job summary), when known.
	RunURL string
	// Marker, when set, is embedded as a hidden HTML comment so that the
	// comment can be found again.
	Marker string
}

func outcomeIcon(res *result.Result) string {
	switch {
	case res.Reason == result.ReasonProgressing:
		return "📝"
	case res.Command == "rollback" && res.Reason == result.ReasonRolledBack:
		return "↩️"
	case res.Reason == result.ReasonDriftDetected:
		return "⚠️"
	case res.Succeeded():
		return "✅"
	default:
		return "❌"
	}
}

func headline(res *result.Result) string {
	c := res.Counts()
	switch {
	case res.Command == "diff" && res.Reason == result.ReasonProgressing:
		n := c[result.Created] + c[result.Configured] + c[result.Recreated] + c[result.Deleted]
		return fmt.Sprintf("%s gantry diff%s: %d %s pending", outcomeIcon(res), against(res), n, plural(n, "change", "changes"))
	case res.Command == "diff" && res.Succeeded():
		return fmt.Sprintf("%s gantry diff%s: no changes", outcomeIcon(res), against(res))
	case res.Command == "diff" && res.Base != "":
		return fmt.Sprintf("%s gantry diff%s: %s", outcomeIcon(res), against(res), res.Reason)
	case res.Command == "drift" && res.Reason == result.ReasonDriftDetected:
		n := c[result.Drifted] + c[result.Missing]
		corrected := ""
		if res.Correction != nil {
			corrected = ", corrected"
		}
		return fmt.Sprintf("%s gantry drift: %d %s drifted%s", outcomeIcon(res), n, plural(n, "object", "objects"), corrected)
	case res.Command == "drift" && res.Succeeded():
		return fmt.Sprintf("%s gantry drift: no drift", outcomeIcon(res))
	case res.Command == "rollback" && res.RolledBackTo > 0:
		return fmt.Sprintf("%s gantry rollback to revision %d: %s", outcomeIcon(res), res.RolledBackTo, res.Reason)
	case res.Cause != "" && res.Reason == result.ReasonRolledBack:
		return fmt.Sprintf("%s gantry %s: %s, rolled back to revision %d", outcomeIcon(res), res.Command, res.Cause, res.Rollback.RolledBackTo)
	case res.Cause != "":
		return fmt.Sprintf("%s gantry %s: %s, and the rollback failed: %s", outcomeIcon(res), res.Command, res.Cause, res.Reason)
	default:
		return fmt.Sprintf("%s gantry %s: %s", outcomeIcon(res), res.Command, res.Reason)
	}
}

// against says what an offline diff compared with.
func against(res *result.Result) string {
	if res.Base == "" {
		return ""
	}
	return " against " + code(res.Base) + ", offline"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Markdown renders res at the given detail.
func Markdown(res *result.Result, page Page, detail Detail) string {
	var b strings.Builder
	if page.Marker != "" {
		fmt.Fprintf(&b, "<!-- %s -->\n", page.Marker)
	}
	fmt.Fprintf(&b, "### %s\n\n", headline(res))
	if res.Failed() && res.Message != "" {
		b.WriteString(quote(firstLines(res.Message, 12)))
		b.WriteString("\n")
	}

	counts := res.Counts()
	actions := result.ActionsOf(res.Command)
	b.WriteString("| " + strings.Join(result.Labels(res.Command, actions), " | ") + " |\n|")
	b.WriteString(strings.Repeat("---|", len(actions)) + "\n|")
	for _, a := range actions {
		fmt.Fprintf(&b, " %d |", counts[a])
	}
	b.WriteString("\n\n")

	var facts []string
	if res.Inventory != nil && res.Inventory.Name != "" {
		facts = append(facts, "**Inventory** "+code(res.Inventory.Namespace+"/"+res.Inventory.Name))
	}
	if res.Revision != "" {
		facts = append(facts, "**Revision** "+code(res.Revision))
	}
	if res.RecordedRevision > 0 {
		facts = append(facts, fmt.Sprintf("**History** revision %d", res.RecordedRevision))
	}
	if a := res.Artifact; a != nil {
		note := ""
		switch {
		case a.Signed:
			note = " (signed)"
		case a.Verified:
			note = " (signature verified)"
		}
		facts = append(facts, "**Artifact** "+code(a.URL)+note)
	}
	for _, c := range res.Charts {
		fact := "**Chart** " + code(c.Name) + " from " + code(c.Folder)
		if c.Lookup {
			fact += "; its templates call lookup, answered empty (as helm template answers it)"
		}
		if len(c.LeftOut) > 0 {
			fact += fmt.Sprintf("; %d %s left out", len(c.LeftOut), plural(len(c.LeftOut), "hook", "hooks"))
			var names []string
			for _, l := range c.LeftOut {
				names = append(names, code(l))
			}
			fact += ": " + strings.Join(names, ", ")
		}
		facts = append(facts, fact)
	}
	if fact := healthRulesFact(res.Objects); fact != "" {
		facts = append(facts, fact)
	}
	if len(res.Stages) > 0 {
		var st []string
		for _, s := range res.Stages {
			switch {
			case s.Skipped != "":
				st = append(st, s.Name+" (skipped)")
			case s.Error != "":
				st = append(st, fmt.Sprintf("%s ❌ %s", s.Name, round(s.Duration)))
			default:
				st = append(st, fmt.Sprintf("%s %s", s.Name, round(s.Duration)))
			}
		}
		facts = append(facts, "**Stages** "+strings.Join(st, " · "))
	}
	if len(facts) > 0 {
		b.WriteString(strings.Join(facts, "  \n") + "\n\n")
	}

	var failed, changed, taking []result.Object
	for _, o := range res.Objects {
		if len(o.Conflicts) > 0 {
			taking = append(taking, o)
		}
		switch o.Action {
		case result.Failed:
			failed = append(failed, o)
		case result.Created, result.Configured, result.Recreated, result.Deleted, result.Drifted, result.Missing:
			changed = append(changed, o)
		}
		if o.Health != nil && o.Health.Status != "Current" && o.Action != result.Failed {
			failed = append(failed, o)
		}
	}

	var omitted []string
	if detail <= ObjectsOnly {
		if len(failed) > 0 {
			b.WriteString("#### Not applied or not ready\n\n| object | file | why |\n|---|---|---|\n")
			for i, o := range failed {
				if i == maxTableRows {
					omitted = append(omitted, fmt.Sprintf("%d more failing objects", len(failed)-i))
					break
				}
				why := o.Error
				if o.Health != nil && o.Health.Message != "" {
					why = o.Health.Status + ": " + o.Health.Message
				}
				fmt.Fprintf(&b, "| %s | %s | %s |\n", codeCell(o.Ref()), cell(o.Where()), cell(why))
			}
			b.WriteString("\n")
		}
		if res.Command == "drift" && len(changed) > 0 {
			b.WriteString("#### Drift\n\n| object | field | change | value | by | when |\n|---|---|---|---|---|---|\n")
			rows := 0
		driftRows:
			for _, o := range changed {
				for _, d := range o.Drift {
					if rows == maxTableRows {
						omitted = append(omitted, "more drifted fields")
						break driftRows
					}
					field, by, when := codeCell(d.Field), cell(d.Manager), ""
					if o.Action == result.Missing {
						field, by = "(the whole object)", "deleted by hand"
					}
					if d.Time != nil {
						when = d.Time.UTC().Format("2006-01-02 15:04 UTC")
					}
					value := ""
					if v := d.Values(); v != "" {
						value = codeCell(v)
					}
					fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", codeCell(o.Ref()), field, cell(d.Change), value, by, when)
					rows++
				}
			}
			b.WriteString("\n")
		} else if len(changed) > 0 {
			b.WriteString("#### Changes\n\n| object | action | file | lines |\n|---|---|---|---|\n")
			for i, o := range changed {
				if i == maxTableRows {
					omitted = append(omitted, fmt.Sprintf("%d more changed objects", len(changed)-i))
					break
				}
				add, del := diffs.Lines(o.Diff)
				fmt.Fprintf(&b, "| %s | %s | %s | +%d −%d |\n", codeCell(o.Ref()), o.Action.Label(res.Command), cell(o.Where()), add, del)
			}
			b.WriteString("\n")
		}
		if len(taking) > 0 {
			b.WriteString("#### Fields taken from other field managers\n\n| object | field | manager |\n|---|---|---|\n")
			rows := 0
		takenRows:
			for _, o := range taking {
				for _, c := range o.Conflicts {
					if rows == maxTableRows {
						omitted = append(omitted, "more fields taken from other managers")
						break takenRows
					}
					fmt.Fprintf(&b, "| %s | %s | %s |\n", codeCell(o.Ref()), codeCell(c.Field), cell(c.Manager))
					rows++
				}
			}
			b.WriteString("\n")
		}
	} else if len(failed)+len(changed)+len(taking) > 0 {
		omitted = append(omitted, "the object lists")
	}

	if detail <= ShortDiffs {
		shortened := 0
		for _, o := range changed {
			if o.Diff == "" {
				continue
			}
			d := o.Diff
			if detail == ShortDiffs {
				if cut, n := firstN(d, shortDiffLines); n > 0 {
					d = cut + fmt.Sprintf("… %d more lines\n", n)
					shortened++
				}
			}
			add, del := diffs.Lines(o.Diff)
			fmt.Fprintf(&b, "<details><summary><code>%s</code> %s (+%d −%d)</summary>\n\n%s\n</details>\n\n", redact.HTMLText(oneLine(o.Ref())), o.Action.Label(res.Command), add, del, fence("diff", d))
		}
		if shortened > 0 {
			omitted = append(omitted, fmt.Sprintf("the tail of %d long %s", shortened, plural(shortened, "diff", "diffs")))
		}
	} else if len(changed) > 0 {
		omitted = append(omitted, "the diffs")
	}

	for _, other := range []struct {
		title string
		run   *result.Result
	}{{"Rollback", res.Rollback}, {"Correction", res.Correction}} {
		title, sub := other.title, other.run
		if sub == nil {
			continue
		}
		// The other run, as its own rendering one level down.
		md := Markdown(sub, Page{}, detail)
		md = strings.Replace(md, "### ", "#### "+title+": ", 1)
		md = strings.ReplaceAll(md, "\n#### ", "\n##### ")
		b.WriteString(md + "\n")
	}

	if len(omitted) > 0 || page.RunURL != "" {
		var tail []string
		if len(omitted) > 0 {
			tail = append(tail, fmt.Sprintf("Shown: %s; left out to stay within the size limit: %s.", detail, strings.Join(omitted, ", ")))
		}
		if page.RunURL != "" {
			tail = append(tail, fmt.Sprintf("[Run details](%s)", page.RunURL))
		}
		b.WriteString("<sub>" + strings.Join(tail, " ") + "</sub>\n")
	}
	return b.String()
}

// Fit renders res at the most detail whose size is at most limit bytes.
// CountsOnly is returned even when it does not fit (it is a few hundred
// bytes).
func Fit(res *result.Result, page Page, limit int) (string, Detail) {
	return fit(limit, func(d Detail) string { return Markdown(res, page, d) })
}

// fit renders at the most detail whose size is at most limit bytes, and
// at CountsOnly when none is.
func fit(limit int, render func(Detail) string) (string, Detail) {
	for d := FullDiffs; d < CountsOnly; d++ {
		if s := render(d); len(s) <= limit {
			return s, d
		}
	}
	return render(CountsOnly), CountsOnly
}

// StickyBody renders res for a comment that is updated in place: Fit's
// rendering, redacted, ending with a hidden key of its content without
// what changes on every run (stage timings, the link to the run). A
// comment that already carries the key says the same: Unchanged tells.
func StickyBody(res *result.Result, page Page, limit int, redact *redact.Redactor) string {
	body, detail := Fit(res, page, limit)
	stable := *res
	stable.Stages = make([]result.Stage, len(res.Stages))
	for i, s := range res.Stages {
		s.Duration = 0
		stable.Stages[i] = s
	}
	page.RunURL = ""
	sum := sha256.Sum256([]byte(redact.String(Markdown(&stable, page, detail))))
	return redact.String(body) + fmt.Sprintf("\n<!-- gantry-content %x -->\n", sum[:12])
}

// Unchanged reports whether an existing comment carries the same content
// key as body. The key is read only where gantry writes it, the body's
// last line: a key quoted in the content (a diff, a name) is content,
// and cannot make a comment look as if it said what it does not.
func Unchanged(existing, body string) bool {
	key := lastLine(body)
	return strings.HasPrefix(key, "<!-- gantry-content ") && lastLine(existing) == key
}

// lastLine is the last line of s that is not empty, without its spaces.
func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	return strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:])
}

func round(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// cell makes text safe inside a Markdown table cell: text, on one row.
func cell(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return " "
	}
	s = strings.ReplaceAll(redact.MarkdownText(s), "\r", "")
	return strings.ReplaceAll(s, "\n", "<br>")
}

// oneLine keeps a value on one line, as the wait's messages are: the
// redact.Redactor masks a secret in that form too.
func oneLine(s string) string { return result.OneLine(s) }

// code is a value as an inline code span: on one line, between backtick
// fences longer than any run of backticks inside it, so that no value
// ends the span early. Within a span nothing is markup: no mention, no
// HTML, no quick action.
func code(s string) string {
	s = oneLine(s)
	if s == "" {
		return "` `"
	}
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return f + s + f
}

// codeCell is a code span inside a table cell, whose pipes would
// otherwise end the cell.
func codeCell(s string) string {
	return strings.ReplaceAll(code(s), "|", "\\|")
}

func quote(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		l = strings.TrimRight(l, "\r")
		// Leading spaces would make an indented code block: kept as
		// no-break spaces, which Markdown does not count.
		body := strings.TrimLeft(l, " \t")
		indent := strings.Repeat("\u00a0", len(l)-len(body))
		b.WriteString("> " + indent + redact.MarkdownText(body) + "\n")
	}
	return b.String()
}

// fence wraps text in a code fence longer than any backtick run inside it.
func fence(lang, s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", max(3, longest+1))
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return f + lang + "\n" + s + f
}

// firstN keeps the first n lines of s and says how many it dropped.
func firstN(s string, n int) (string, int) {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) <= n {
		return s, 0
	}
	return strings.Join(lines[:n], ""), len(lines) - n
}

func firstLines(s string, n int) string {
	cut, dropped := firstN(s, n)
	if dropped > 0 {
		return cut + fmt.Sprintf("… %d more lines", dropped)
	}
	return cut
}

// healthRulesFact says which health rules decided the readiness of how
// many objects (kstatus decided the others): the first few rules by name.
func healthRulesFact(objects []result.Object) string {
	count := map[string]int{}
	var rules []string
	for _, o := range objects {
		if o.Health == nil || o.Health.Rule == "" {
			continue
		}
		if count[o.Health.Rule] == 0 {
			rules = append(rules, o.Health.Rule)
		}
		count[o.Health.Rule]++
	}
	if len(rules) == 0 {
		return ""
	}
	const shown = 4
	var parts []string
	for i, r := range rules {
		if i == shown {
			parts = append(parts, fmt.Sprintf("%d more", len(rules)-shown))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", cell(r), count[r]))
	}
	return "**Health** decided by " + strings.Join(parts, ", ") + "; kstatus decided the rest"
}
