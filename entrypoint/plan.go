package entrypoint

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/plan"
)

// PinnedRelease is the release action.yml and the GitLab and Tekton
// templates name (a test keeps them the same).
const PinnedRelease = plan.PinnedRelease

// runPlan prints a run file's units as jobs of a CI engine, one per unit,
// each running gantry on that unit alone, ordered by depends-on. Suspended
// units are left out. Secrets are not read: the jobs read them where they
// run.
func runPlan(inv *config.Given, stdout, stderr io.Writer) int {
	file := config.RunFileInput(*inv)
	if file == "" {
		fmt.Fprintln(stderr, "gantry plan: run-file is required: the run file whose units to plan")
		return ExitInvalid
	}
	units, err := config.LoadUnits(config.Given{Command: "apply", CommandOrigin: inv.CommandOrigin, Flags: inv.Flags, Env: inv.Env}, file, true)
	if err != nil {
		fmt.Fprintf(stderr, "gantry plan: invalid run file %s:\n%s\n", file, config.Indent(err.Error()))
		return ExitInvalid
	}
	out, err := planFor(units, file, givenRunFileEnv(*inv))
	if err != nil {
		fmt.Fprintf(stderr, "gantry plan: %v\n", err)
		if errors.As(err, new(*plan.InvalidError)) {
			return ExitInvalid
		}
		return ExitFailed
	}
	if _, err := stdout.Write(out); err != nil {
		return ExitFailed
	}
	return ExitOK
}

// givenRunFileEnv is the run-file-env plan was given, by the inputs'
// precedence (flag, INPUT_*, GANTRY_*): one name or pattern a line. The
// run file was read with it, so each line is a name or pattern.
func givenRunFileEnv(g config.Given) []string {
	raw, ok := g.Flags["run-file-env"]
	if !ok {
		raw = g.Env["INPUT_RUN-FILE-ENV"]
	}
	if strings.TrimSpace(raw) == "" {
		raw = g.Env["GANTRY_RUN_FILE_ENV"]
	}
	var out []string
	for _, l := range strings.Split(raw, "\n") {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// planFor is the plan of units in the format their configuration names;
// runFileEnv is the run-file-env the plan was given, which its jobs get.
func planFor(units []*config.Unit, file string, runFileEnv []string) ([]byte, error) {
	cfg := units[0].Config
	return plan.Write(planUnits(units), plan.Options{
		Format:       cfg.Format,
		File:         file,
		Image:        cfg.Image,
		PipelineName: cfg.PipelineName,
		RunFileEnv:   runFileEnv,
		Version:      Version,
	})
}

// planUnits are units as a plan is written from them.
func planUnits(units []*config.Unit) []plan.Unit {
	out := make([]plan.Unit, len(units))
	for i, u := range units {
		out[i] = plan.Unit{Name: u.Name, DependsOn: u.DependsOn, EnvRefs: u.EnvRefs, Suspend: u.Suspend}
	}
	return out
}
