package result

import (
	"fmt"
	"strings"
	"time"
)

// RunSchemaVersion versions the JSON form of Run, as SchemaVersion does
// Result's.
const RunSchemaVersion = "gantry.dev/run/v1"

// Run is the outcome of a run of several units (a run file): every unit's
// own result, and the run's, which is its worst unit's.
type Run struct {
	Schema   string    `json:"schema"`
	Command  string    `json:"command"`
	Version  string    `json:"gantryVersion"`
	RunFile  string    `json:"runFile"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Reason   Reason    `json:"reason"`
	Message  string    `json:"message"`
	Units    []Unit    `json:"units"`
	// Selected are the units the run was asked for (the unit input),
	// empty for all of them. A selection has its own comment, note and
	// drift issue: a plan's jobs each run one unit of the same run file.
	Selected []string `json:"-"`
}

// Unit is one unit's outcome: its name, cluster and dependencies, and
// everything a single run's result holds.
type Unit struct {
	Name      string   `json:"name"`
	Cluster   Cluster  `json:"cluster"`
	DependsOn []string `json:"dependsOn,omitempty"`
	*Result
}

// Cluster names the cluster a unit ran against, never its credentials.
type Cluster struct {
	Context string `json:"context,omitempty"`
	// Server is the API server's address.
	Server string `json:"server,omitempty"`
}

func (c Cluster) String() string {
	switch {
	case c.Context != "" && c.Server != "":
		return c.Context + " (" + c.Server + ")"
	case c.Server != "":
		return c.Server
	}
	return c.Context
}

// Severity ranks a reason for a run of units: the run takes its worst
// unit's reason. Bad input ranks first (4), then a failure (3), then a
// unit not run because its dependency failed (2), then pending changes
// (1); success and a suspended unit rank 0.
func Severity(r Reason) int {
	if r.Succeeded() {
		return 0
	}
	switch r {
	case ReasonSuspended:
		return 0
	case ReasonProgressing, ReasonDriftDetected:
		return 1
	case ReasonDependencyNotReady:
		return 2
	case ReasonBuildFailed, ReasonInvalidInput:
		return 4
	}
	return 3
}

// Conclude sets the run's reason, the first of its worst units', and a
// message that counts the units by outcome and names those that failed.
func (r *Run) Conclude() {
	r.Reason = SuccessFor(r.Command)
	worst := 0
	var failed []string
	counts := map[string]int{}
	for _, u := range r.Units {
		s := Severity(u.Reason)
		if s > worst {
			worst, r.Reason = s, u.Reason
		}
		switch {
		case u.Reason == ReasonSuspended:
			counts["suspended"]++
		case u.Reason == ReasonDependencyNotReady:
			counts["not run"]++
		case u.Reason == ReasonDriftDetected:
			counts["drifted"]++
		case s == 1:
			counts["with changes pending"]++
		case s == 0 && r.Command == "drift":
			counts["in sync"]++
		case s == 0 && r.Command == "validate":
			counts["valid"]++
		case s == 0 && u.Changed():
			counts["changed"]++
		case s == 0:
			counts["unchanged"]++
		default:
			counts["failed"]++
			failed = append(failed, fmt.Sprintf("%s (%s)", u.Name, u.Reason))
		}
	}
	var parts []string
	for _, k := range []string{"failed", "not run", "drifted", "with changes pending", "changed", "unchanged", "in sync", "valid", "suspended"} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	units := "units"
	if len(r.Units) == 1 {
		units = "unit"
	}
	r.Message = fmt.Sprintf("%d %s: %s", len(r.Units), units, strings.Join(parts, ", "))
	if len(failed) > 0 {
		r.Message += "; failed: " + strings.Join(failed, ", ")
	}
}

// Levels orders the units by their dependencies: the first level depends
// on nothing, each next one on units of the levels before it. Names keep
// the run file's order within a level.
func (r *Run) Levels() [][]string {
	level := map[string]int{}
	deps := map[string][]string{}
	for _, u := range r.Units {
		deps[u.Name] = u.DependsOn
	}
	var depth func(name string, seen map[string]bool) int
	depth = func(name string, seen map[string]bool) int {
		if l, ok := level[name]; ok {
			return l
		}
		if seen[name] {
			return 0 // a cycle, refused before a run starts
		}
		seen[name] = true
		l := 0
		for _, d := range deps[name] {
			l = max(l, depth(d, seen)+1)
		}
		level[name] = l
		return l
	}
	var levels [][]string
	for _, u := range r.Units {
		l := depth(u.Name, map[string]bool{})
		for len(levels) <= l {
			levels = append(levels, nil)
		}
		levels[l] = append(levels[l], u.Name)
	}
	return levels
}

// Total is the run as one result: every unit's objects, the run's
// reason, and a message naming each unit that did not reach its goal,
// for what reports a run by its totals (step outputs, annotations).
func (r *Run) Total() *Result {
	t := &Result{Schema: SchemaVersion, Command: r.Command, Version: r.Version, Started: r.Started, Finished: r.Finished,
		Reason: r.Reason, Message: r.Message, Stages: []Stage{}, Objects: []Object{}}
	var why []string
	for _, u := range r.Units {
		if t.Revision == "" {
			t.Revision = u.Revision
		}
		t.Objects = append(t.Objects, u.Objects...)
		if Severity(u.Reason) >= 2 {
			why = append(why, fmt.Sprintf("unit %s: %s: %s", u.Name, u.Reason, u.Message))
		}
	}
	if len(why) > 0 {
		t.Message = strings.Join(why, "\n")
	}
	return t
}
