package entrypoint

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/reporters"
	"github.com/gantry-dev/gantry/result"
)

// runFileOf is the run file an apply, diff, delete or validate was given,
// if any.
func runFileOf(inv *config.Given) string {
	switch inv.Command {
	case "apply", "diff", "delete", "validate", "drift":
		return config.RunFileInput(*inv)
	}
	return ""
}

// runFile runs the units of a run file as their graph allows, each as a
// single run of the command, and reports them as one run.
func runFile(ctx context.Context, inv *config.Given, file string, p platform, stdout, stderr io.Writer) int {
	env := inv.Env
	units, unitsErr := config.LoadUnits(*inv, file, false)
	all := units // a selection's dependencies too
	dependedOn := map[string]bool{}
	if unitsErr == nil && len(units[0].Config.Units) > 0 {
		units, dependedOn, unitsErr = config.SelectUnits(units, units[0].Config.Units)
	}
	// The run's own inputs (report, summary, comment, tokens) come from
	// the command line and the variables only: every unit has the same.
	var runCfg *config.Config
	if unitsErr == nil {
		runCfg = units[0].Config
	} else {
		runCfg, _ = config.Load(*inv) // for the report of a run file refused whole
	}
	var secrets []string
	for _, u := range units {
		secrets = append(secrets, u.Config.Secrets...)
	}
	if runCfg != nil {
		secrets = append(secrets, runCfg.Secrets...)
	}
	s := newSession(env, p, secrets, stderr)
	defer s.run.Close()
	s.run.RunFile = all
	s.run.BaseRunFile = config.RunFileAt(*inv, file)
	if runCfg != nil && runCfg.Trace {
		defer s.startTrace()()
	}
	if runCfg != nil {
		s.console.color, s.console.quiet, s.console.verb = useColor(runCfg.Color, stderr, env), runCfg.Quiet, runCfg.Command
	}
	run := &result.Run{Schema: result.RunSchemaVersion, Command: inv.Command, Version: Version, RunFile: file,
		Started: time.Now(), Units: []result.Unit{}}

	if unitsErr != nil {
		s.console.printf("gantry: invalid run file %s:\n%s\n", file, config.Indent(unitsErr.Error()))
		run.Finished, run.Reason, run.Message = time.Now(), result.ReasonInvalidInput, unitsErr.Error()
		if runCfg != nil && runCfg.Report != "" {
			if err := (&reporters.JSONReport{Path: runCfg.Report, Redact: s.redact}).ReportRun(ctx, run); err != nil {
				s.console.warn("JSON report: " + err.Error())
			}
		}
		return ExitInvalid
	}
	run.Selected = runCfg.Units
	if w := pullRequestWriteWarning(run.Command, env, p); w != "" {
		s.console.warn(w)
	}
	warned := map[string]bool{} // units share their defaults' rules
	var warnings []string
	for _, u := range units {
		for _, w := range u.Config.HealthWarnings {
			if !warned[w] {
				warned[w] = true
				warnings = append(warnings, w)
			}
		}
	}
	for _, w := range boundWarnings(warnings) {
		s.console.warn(w)
	}
	for _, o := range config.Overrides(*inv) {
		s.console.printf("gantry: %s applies to every unit of %s\n", o, file)
	}

	runs := s.run.Units(ctx, units, runCfg.UnitsConcurrency, inv.Command == "delete",
		func(ctx context.Context, u *config.Unit, dependents bool) *result.Result {
			out := s.console.forUnit(u.Name)
			res := s.run.Unit(ctx, u, out, dependents || dependedOn[u.Name])
			out.summary(res)
			return res
		})

	code := ExitOK
	for _, r := range runs {
		run.Units = append(run.Units, result.Unit{Name: r.Unit.Name, Cluster: config.ClusterInfo(r.Unit.Config), DependsOn: r.Unit.DependsOn, Result: r.Result})
		switch r.Result.Reason {
		case result.ReasonSuspended, result.ReasonDependencyNotReady:
			s.console.forUnit(r.Unit.Name).printf("%s: %s", r.Result.Reason, r.Result.Message)
		}
		if r.Result.Reason != result.ReasonSuspended { // not run, as asked
			code = worstExit(code, exitCode(r.Result, r.Unit.Config))
		}
	}
	run.Finished = time.Now()
	run.Conclude()
	s.console.printf("gantry %s: %s: %s\n", run.Command, run.Reason, run.Message)

	if run.Command == "diff" || run.Command == "drift" || runCfg.Output != "text" {
		if err := writeRunDiff(stdout, run, runCfg.Output, workspace(env), p == githubActions, useColor(runCfg.Color, stdout, env), s.redact); err != nil {
			s.console.warn("printing the result: " + err.Error())
		}
	}
	set, warnings := reporterSet(runCfg, env, p, s.redact, s.gha, stdout)
	for _, w := range warnings {
		s.console.warn(w)
	}
	for _, err := range set.ReportRun(ctx, run) {
		s.console.warn(err.Error())
	}
	return code
}

// writeRunDiff prints a diff of every unit: as text, each unit's under a
// line that names it; as JSON or YAML, the whole run.
func writeRunDiff(w io.Writer, run *result.Run, format, base string, fenced, color bool, redact *redact.Redactor) error {
	if format == "junit" || format == "sarif" {
		if fenced {
			end, err := fence(w)
			if err != nil {
				return err
			}
			defer end()
		}
		var suites []reporters.Suite
		for _, u := range run.Units {
			if u.Result != nil {
				suites = append(suites, reporters.Suite{Name: u.Name, Result: u.Result})
			}
		}
		return writeMachine(w, format, base, suites, redact)
	}
	if format == "json" || format == "yaml" {
		if fenced {
			end, err := fence(w)
			if err != nil {
				return err
			}
			defer end()
		}
		b, err := marshalAs(format, run)
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, redact.String(b))
		return err
	}
	for _, u := range run.Units {
		if _, err := fmt.Fprintf(w, "# unit %s: %s\n", u.Name, u.Reason); err != nil {
			return err
		}
		if !u.Reason.Succeeded() && u.Reason != result.ReasonProgressing && u.Reason != result.ReasonDriftDetected {
			continue
		}
		if err := writeDiff(w, u.Result, "text", "", fenced, color, redact); err != nil {
			return err
		}
	}
	return nil
}

// worstExit is the exit code of a run of units: the worst unit's, bad
// input before failure before pending changes before success.
func worstExit(codes ...int) int {
	rank := map[int]int{ExitOK: 0, ExitChanges: 1, ExitFailed: 2, ExitInvalid: 3}
	worst := ExitOK
	for _, c := range codes {
		if rank[c] > rank[worst] {
			worst = c
		}
	}
	return worst
}

// maxWarnings is the most warnings about health rules printed: the rules
// come from files a pull request writes, which could hold thousands.
const maxWarnings = 10

func boundWarnings(ws []string) []string {
	if len(ws) <= maxWarnings {
		return ws
	}
	return append(ws[:maxWarnings:maxWarnings], fmt.Sprintf("%d more warnings about health rules", len(ws)-maxWarnings))
}
