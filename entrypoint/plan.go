package entrypoint

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/result"
)

// imageRepository is where gantry's container image is published.
const imageRepository = "ghcr.io/gantry-dev/gantry"

var (
	// releaseVersion matches the versions that name a published image.
	releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	notLabel       = regexp.MustCompile(`[^a-z0-9]+`)
)

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
	cfg := units[0].Config
	var out []byte
	switch cfg.Format {
	case "github":
		out, err = githubPlan(units)
	case "tekton":
		out, err = tektonPlan(units, file)
	case "gitlab":
		out, err = gitlabPlan(units, file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gantry plan: %v\n", err)
		return ExitFailed
	}
	if _, err := stdout.Write(out); err != nil {
		return ExitFailed
	}
	return ExitOK
}

// planLevels are the units that run, by dependency level, in the run
// file's order within a level; a suspended unit is left out, and so is
// the dependency on it.
func planLevels(units []*config.Unit) [][]*config.Unit {
	run := &result.Run{}
	// Every unit is known before any dependency is looked up: a unit may
	// depend on one the run file lists after it.
	byName := map[string]*config.Unit{}
	for _, u := range units {
		byName[u.Name] = u
	}
	for _, u := range units {
		if !u.Suspend {
			run.Units = append(run.Units, result.Unit{Name: u.Name, DependsOn: activeDeps(u, byName)})
		}
	}
	var levels [][]*config.Unit
	for _, names := range run.Levels() {
		var level []*config.Unit
		for _, n := range names {
			level = append(level, byName[n])
		}
		levels = append(levels, level)
	}
	return levels
}

// activeDeps are a unit's dependencies that run: a suspended unit's
// dependents wait for nothing from it.
func activeDeps(u *config.Unit, byName map[string]*config.Unit) []string {
	var deps []string
	for _, d := range u.DependsOn {
		if dep, ok := byName[d]; ok && !dep.Suspend {
			deps = append(deps, d)
		}
	}
	return deps
}

// githubPlan is a matrix per dependency level, for fromJSON: a workflow
// has one job per level, each needing the one before.
func githubPlan(units []*config.Unit) ([]byte, error) {
	type entry struct {
		Unit string `json:"unit"`
	}
	type matrix struct {
		Include []entry `json:"include"`
	}
	var levels []matrix
	for _, l := range planLevels(units) {
		var m matrix
		for _, u := range l {
			m.Include = append(m.Include, entry{u.Name})
		}
		levels = append(levels, m)
	}
	b, err := json.Marshal(struct {
		Levels []matrix `json:"levels"`
	}{levels})
	return append(b, '\n'), err
}

// tektonPlan is a Pipeline whose tasks run the gantry Task on one unit
// each, runAfter the units it depends on.
func tektonPlan(units []*config.Unit, file string) ([]byte, error) {
	byName := map[string]*config.Unit{}
	for _, u := range units {
		byName[u.Name] = u
	}
	param := func(name, value string) map[string]any { return map[string]any{"name": name, "value": value} }
	var tasks []any
	for _, l := range planLevels(units) {
		for _, u := range l {
			t := map[string]any{
				"name":    u.Name,
				"taskRef": map[string]any{"name": "gantry"},
				"params": []any{
					param("command", "$(params.command)"),
					param("run-file", filepath.ToSlash(file)),
					param("unit", u.Name),
					param("kubeconfig", "$(params.kubeconfig)"),
					param("secret-name", "$(params.secret-name)"),
					param("run-file-env", "$(params.run-file-env)"),
				},
				"workspaces": []any{
					map[string]any{"name": "source", "workspace": "source"},
					map[string]any{"name": "kubeconfig", "workspace": "kubeconfig"},
				},
			}
			if deps := activeDeps(u, byName); len(deps) > 0 {
				t["runAfter"] = deps
			}
			tasks = append(tasks, t)
		}
	}
	pipeline := map[string]any{
		"apiVersion": "tekton.dev/v1",
		"kind":       "Pipeline",
		"metadata":   map[string]any{"name": "gantry-" + planName(file)},
		"spec": map[string]any{
			"description": "The units of " + filepath.ToSlash(file) + ", one gantry Task each, in dependency order (written by gantry plan).",
			"params": []any{
				map[string]any{"name": "command", "type": "string", "default": "apply", "description": "diff, apply or delete"},
				map[string]any{"name": "kubeconfig", "type": "string", "default": "", "description": "The kubeconfig param of the gantry Task."},
				map[string]any{"name": "secret-name", "type": "string", "default": "gantry-secrets", "description": "The secret-name param of the gantry Task."},
				map[string]any{"name": "run-file-env", "type": "string", "default": "", "description": "The variables the run file may read with {env: NAME} (the run-file-env param of the gantry Task)."},
			},
			"workspaces": []any{
				map[string]any{"name": "source", "description": "The repository checkout."},
				map[string]any{"name": "kubeconfig", "optional": true},
			},
			"tasks": tasks,
		},
	}
	return yaml.Marshal(pipeline)
}

// gitlabPlan is a child pipeline (trigger: include: artifact) with a job
// per unit in gantry's image, needs from depends-on.
func gitlabPlan(units []*config.Unit, file string) ([]byte, error) {
	byName := map[string]*config.Unit{}
	for _, u := range units {
		byName[u.Name] = u
	}
	image := imageRepository + ":latest"
	if releaseVersion.MatchString(Version) {
		image = imageRepository + ":" + Version
	}
	doc := map[string]any{
		"stages": []any{"gantry"},
		".gantry-unit": map[string]any{
			"stage":     "gantry",
			"image":     map[string]any{"name": image, "entrypoint": []any{""}},
			"variables": map[string]any{"GANTRY_RUN_FILE": filepath.ToSlash(file), "GANTRY_COMMAND": "apply"},
			"script":    []any{"/gantry"},
			"artifacts": map[string]any{"when": "always", "paths": []any{".gantry/"}, "reports": map[string]any{"dotenv": "gantry.env"}},
		},
	}
	for _, l := range planLevels(units) {
		for _, u := range l {
			needs := []any{}
			for _, d := range activeDeps(u, byName) {
				needs = append(needs, "gantry-"+d)
			}
			doc["gantry-"+u.Name] = map[string]any{
				"extends":        ".gantry-unit",
				"variables":      map[string]any{"GANTRY_UNIT": u.Name},
				"needs":          needs,
				"resource_group": "gantry-" + u.Name,
			}
		}
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("# The units of "+filepath.ToSlash(file)+", one job each, in dependency order (written by gantry plan).\n"+
		"# GANTRY_COMMAND is apply; set it to diff for a merge request's preview.\n"), b...), nil
}

// planName is a DNS label made of the run file's name, for the Pipeline.
func planName(file string) string {
	base := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	name := strings.Trim(notLabel.ReplaceAllString(strings.ToLower(base), "-"), "-")
	if name == "" || name == "gantry" {
		name = "units" // gantry-units, not gantry-gantry
	}
	return name
}
