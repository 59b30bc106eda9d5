// Package plan writes a run file's units as the jobs of a CI engine: a
// GitHub reusable workflow, a GitLab child pipeline or a Tekton Pipeline,
// a job per unit, ordered by depends-on. What a run file names reaches
// the plan as data, never as its keys.
package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/result"
)

// imageRepository is where gantry's container image is published.
const imageRepository = "ghcr.io/gantry-dev/gantry"

var (
	// releaseVersion matches the versions that name a published image.
	releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	notLabel       = regexp.MustCompile(`[^a-z0-9]+`)
)

// Unit is a unit of the run file, as much of it as its job is written
// from.
type Unit struct {
	// Name is the unit's name, which its job runs it by.
	Name string
	// DependsOn names the units it runs after.
	DependsOn []string
	// EnvRefs are the variables its inputs read with {env: NAME}.
	EnvRefs []string
	// Suspend leaves the unit out of the plan.
	Suspend bool
}

// Options are what a plan is written with besides its units.
type Options struct {
	// Format is the CI engine's: github, gitlab or tekton.
	Format string
	// File is the run file, as the jobs name it.
	File string
	// Image is the gantry image the jobs run (a mirror); empty, gantry's
	// own at the release Version names.
	Image string
	// PipelineName is the Tekton Pipeline's name; empty, gantry- and the
	// run file's name.
	PipelineName string
	// RunFileEnv is the run-file-env the plan was given, which its jobs
	// get.
	RunFileEnv []string
	// Version is the version of the gantry writing the plan: the jobs
	// of a release run that release, those of any other build
	// PinnedRelease.
	Version string
}

// Write is the plan of units in the format o names: a job per unit,
// each running gantry on that unit alone, ordered by depends-on, with
// suspended units left out. A run file with no plan in that format is an
// *InvalidError.
func Write(units []Unit, o Options) ([]byte, error) {
	// Every engine expands what follows a $ in a job's values: GitHub
	// ${{ expressions }}, GitLab $VARIABLES, Tekton $(params.x). The run
	// file's path goes into them, and a workflow may take it from what a
	// pull request changed.
	if strings.Contains(o.File, "$") {
		return nil, &InvalidError{fmt.Sprintf("the run file's path %s holds a $, which a CI engine would expand in the plan's jobs: rename it", strconv.Quote(o.File))}
	}
	switch o.Format {
	case "github":
		return githubPlan(units, o.File, o.Image, o.Version)
	case "tekton":
		return tektonPlan(units, o.File, o.PipelineName, o.RunFileEnv)
	case "gitlab":
		return gitlabPlan(units, o.File, planImage(o.Image, o.Version), o.RunFileEnv)
	}
	return nil, fmt.Errorf("format %q: want github, tekton or gitlab", o.Format)
}

// Levels are the units that run, by dependency level, in the run file's
// order within a level; a suspended unit is left out, and so is the
// dependency on it.
func Levels(units []Unit) [][]Unit {
	run := &result.Run{}
	// Every unit is known before any dependency is looked up: a unit may
	// depend on one the run file lists after it.
	byName := unitsByName(units)
	for _, u := range units {
		if !u.Suspend {
			run.Units = append(run.Units, result.Unit{Name: u.Name, DependsOn: activeDeps(u, byName)})
		}
	}
	var levels [][]Unit
	for _, names := range run.Levels() {
		var level []Unit
		for _, n := range names {
			level = append(level, *byName[n])
		}
		levels = append(levels, level)
	}
	return levels
}

// unitsByName finds units by name; of two of one name, the later.
func unitsByName(units []Unit) map[string]*Unit {
	byName := map[string]*Unit{}
	for i := range units {
		byName[units[i].Name] = &units[i]
	}
	return byName
}

// activeDeps are a unit's dependencies that run: a suspended unit's
// dependents wait for nothing from it.
func activeDeps(u Unit, byName map[string]*Unit) []string {
	var deps []string
	for _, d := range u.DependsOn {
		if dep, ok := byName[d]; ok && !dep.Suspend {
			deps = append(deps, d)
		}
	}
	return deps
}

// githubPlan is a reusable workflow (on: workflow_call) with a job per
// unit, needs from depends-on: a unit starts as soon as those it depends
// on succeeded, a failed unit stops only its dependents (jobs of a
// workflow go on when a sibling fails; a matrix would cancel them), and
// each job gets the variables its run file reads with {env: NAME}, from
// the secrets of the same name, the kubeconfig and the record-key.
func githubPlan(units []Unit, file, image, version string) ([]byte, error) {
	byName := unitsByName(units)
	file = filepath.ToSlash(file)
	// A job runs one unit, but gantry reads the whole run file, every
	// reference of every unit (a suspended one's too): each job is given
	// every variable the file reads, or the others' references would be
	// refused.
	var allRefs []string
	for _, u := range units {
		for _, ref := range u.EnvRefs {
			if !slices.Contains(allRefs, ref) {
				allRefs = append(allRefs, ref)
			}
		}
	}
	// GitHub reads a step's env keys and secrets' names without regard
	// to case: two names that differ only in it would be one key (the
	// workflow is refused, or one value wins), and kubeconfig would be
	// the kubeconfig's, GANTRY_X an input of gantry's.
	keys := map[string]string{kubeconfigSecret: kubeconfigSecret}
	for _, ref := range allRefs {
		up := strings.ToUpper(ref)
		other, clash := keys[up]
		clash = clash && other != ref
		if strings.HasPrefix(up, "GANTRY_") || strings.HasPrefix(up, "INPUT_") {
			other, clash = "gantry's inputs", true
		}
		if clash {
			return nil, &InvalidError{fmt.Sprintf("the run file reads the variable %s, which a GitHub workflow cannot tell from %s (it ignores case in env keys and secrets' names): rename it", strconv.Quote(ref), other)}
		}
		keys[up] = ref
	}
	jobs := yamlv2.MapSlice{}
	var unnamed []string
	for _, l := range Levels(units) {
		for _, u := range l {
			inputs := yamlv2.MapSlice{
				{Key: "command", Value: "${{ inputs.command }}"},
				{Key: "run-file", Value: file},
				{Key: "unit", Value: u.Name},
				// Signs each revision, as the README's workflow does;
				// empty (no such secret) records unsigned.
				{Key: "record-key", Value: "${{ secrets." + recordKeySecret + " }}"},
			}
			// The workflow's own kubeconfig, written by the step before:
			// every unit that names no kubeconfig of its own reaches its
			// cluster (its context) with it, and a kubeconfig the run file
			// names may reach only its servers (run-file-servers).
			env := yamlv2.MapSlice{{Key: "KUBECONFIG", Value: kubeconfigFile}}
			var refs []string
			for _, ref := range allRefs {
				if slices.Contains(refs, ref) {
					continue // a key is written once
				}
				if ref == "KUBECONFIG" {
					// The file above: the secret is its content.
					refs = append(refs, ref)
					continue
				}
				if !secretName.MatchString(ref) || strings.HasPrefix(strings.ToUpper(ref), "GITHUB_") {
					unnamed = append(unnamed, ref)
					continue
				}
				refs = append(refs, ref)
				env = append(env, yamlv2.MapItem{Key: ref, Value: "${{ secrets." + ref + " }}"})
			}
			if len(refs) > 0 {
				inputs = append(inputs, yamlv2.MapItem{Key: "run-file-env", Value: strings.Join(refs, "\n")})
			}
			step := yamlv2.MapSlice{}
			if image == "" {
				step = append(step, yamlv2.MapItem{Key: "uses", Value: "gantry-dev/gantry@" + release(version)})
				step = append(step, yamlv2.MapItem{Key: "with", Value: inputs})
			} else {
				// A docker:// step takes no inputs: they go as the
				// GANTRY_* variables gantry reads on every platform.
				step = append(step, yamlv2.MapItem{Key: "uses", Value: "docker://" + image})
				for _, in := range inputs {
					env = append(env, yamlv2.MapItem{Key: gantryVar(in.Key.(string)), Value: in.Value})
				}
			}
			if len(env) > 0 {
				step = append(step, yamlv2.MapItem{Key: "env", Value: env})
			}
			job := yamlv2.MapSlice{{Key: "name", Value: u.Name}}
			if deps := activeDeps(u, byName); len(deps) > 0 {
				var needs []string
				for _, d := range deps {
					needs = append(needs, jobID(d))
				}
				job = append(job, yamlv2.MapItem{Key: "needs", Value: needs})
			}
			job = append(job,
				yamlv2.MapItem{Key: "runs-on", Value: "ubuntu-latest"},
				// Two runs never write one unit at once; a newer run
				// waits rather than cancelling one that is applying.
				yamlv2.MapItem{Key: "concurrency", Value: yamlv2.MapSlice{
					{Key: "group", Value: "gantry-" + planName(file) + "-" + u.Name + "-${{ inputs.command }}"},
					{Key: "cancel-in-progress", Value: false},
				}},
				yamlv2.MapItem{Key: "steps", Value: []any{
					yamlv2.MapSlice{{Key: "uses", Value: "actions/checkout@v4"}, {Key: "with", Value: yamlv2.MapSlice{{Key: "fetch-depth", Value: 0}}}},
					// Outside the checkout, where the pull request's files
					// are: in the runner's folder the action's container
					// sees as /github/home.
					yamlv2.MapSlice{
						{Key: "name", Value: "kubeconfig"},
						{Key: "run", Value: writeKubeconfig},
						{Key: "env", Value: yamlv2.MapSlice{{Key: "KUBECONFIG_DATA", Value: "${{ secrets." + kubeconfigSecret + " }}"}}},
					},
					step,
				}},
			)
			jobs = append(jobs, yamlv2.MapItem{Key: jobID(u.Name), Value: job})
		}
	}
	wf := yamlv2.MapSlice{
		{Key: "name", Value: "gantry " + planName(file)},
		{Key: "on", Value: yamlv2.MapSlice{{Key: "workflow_call", Value: yamlv2.MapSlice{
			{Key: "inputs", Value: yamlv2.MapSlice{{Key: "command", Value: yamlv2.MapSlice{
				{Key: "description", Value: "What each unit runs: diff, validate, apply or drift."},
				{Key: "type", Value: "string"},
				{Key: "default", Value: "apply"},
			}}}},
		}}}},
		{Key: "permissions", Value: yamlv2.MapSlice{
			{Key: "contents", Value: "read"},
			{Key: "pull-requests", Value: "write"},
			{Key: "issues", Value: "write"},
		}},
		{Key: "jobs", Value: jobs},
	}
	head := []string{
		"The units of " + file + ", a job each, needs from depends-on (written by gantry plan --format github).",
		"Keep it as .github/workflows/gantry-" + planName(file) + ".yml and call it from a workflow:",
		"  jobs:",
		"    deploy:",
		"      uses: ./.github/workflows/gantry-" + planName(file) + ".yml",
		"      with: {command: apply}   # diff on pull requests",
		"      secrets: inherit",
		"A unit runs once those it depends on succeeded; a failed unit stops its dependents, not its siblings.",
		"To delete, run gantry delete --run-file " + file + " in one job: it deletes in the reverse order.",
		"Secrets of the repository, which secrets: inherit passes on:",
		"  " + kubeconfigSecret + ": the kubeconfig, with the contexts the units name; each job writes it outside the checkout",
		"    (" + kubeconfigFile + " in the action's container) and gives it to gantry as KUBECONFIG, for every unit that names none.",
		"  " + recordKeySecret + ": the record-key that signs each revision (openssl rand -base64 32).",
	}
	var passed []string
	for _, ref := range allRefs {
		if secretName.MatchString(ref) && !strings.HasPrefix(strings.ToUpper(ref), "GITHUB_") && ref != "KUBECONFIG" && !slices.Contains(passed, ref) {
			passed = append(passed, ref)
		}
	}
	if len(passed) > 0 {
		slices.Sort(passed)
		head = append(head, "  "+strings.Join(passed, ", ")+": what the run file reads with {env: NAME}, as the variable of the same name.")
	}
	if len(unnamed) > 0 {
		slices.Sort(unnamed)
		head = append(head, "Not a secret's name, so not passed: "+strings.Join(slices.Compact(unnamed), ", ")+". Set them in each job's env.")
	}
	return planYAML(head, wf)
}

// The secrets a GitHub plan's jobs read for every unit, and the file the
// kubeconfig is written to, as the README's workflow writes it: in the
// runner's temporary folder that a container action sees as its home,
// /github/home, never in the checkout, where the pull request's
// kustomizations could read it.
const (
	kubeconfigSecret = "KUBECONFIG"
	recordKeySecret  = "GANTRY_RECORD_KEY"
	kubeconfigFile   = "/github/home/kubeconfig"
	writeKubeconfig  = `mkdir -p "$RUNNER_TEMP/_github_home" && (umask 077 && printf '%s\n' "$KUBECONFIG_DATA" > "$RUNNER_TEMP/_github_home/kubeconfig")`
)

// secretName is what GitHub allows as a secret's name.
var secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// jobID is a unit's job: unit names are DNS labels, and a job's id must
// start with a letter or _. No DNS label starts with _, so two units
// never make one id (as 1a and unit-1a did, when the prefix was unit-).
func jobID(unit string) string {
	if unit != "" && unit[0] >= '0' && unit[0] <= '9' {
		return "_" + unit
	}
	return unit
}

// gantryVar is an input's GANTRY_* variable.
func gantryVar(input string) string {
	return "GANTRY_" + strings.ToUpper(strings.ReplaceAll(input, "-", "_"))
}

// release is the release plan's jobs run: that of the gantry writing
// it, version, or for a build that is no release, the one the templates
// name.
func release(version string) string {
	if releaseVersion.MatchString(version) {
		return version
	}
	return PinnedRelease
}

// PinnedRelease is the release action.yml and the GitLab and Tekton
// templates name (a test keeps them the same).
const PinnedRelease = "v0.1.0"

// planImage is the image plan's jobs run: the one given (a mirror), or
// gantry's own at release(version).
func planImage(given, version string) string {
	if given != "" {
		return given
	}
	return imageRepository + ":" + release(version)
}

// deleteTask is the Tekton task that deletes a unit.
func deleteTask(unit string) string { return "delete-" + unit }

// tektonPlan is a Pipeline whose tasks run the gantry Task on one unit
// each. Tekton's runAfter is fixed, and delete goes the other way, so
// each unit has two tasks, whose when expressions pick one by the
// command: the unit's, runAfter the units it depends on, for every
// command but delete; delete-<unit>, runAfter the delete tasks of the
// units that depend on it, for delete. A task its when skips holds up
// none that run after it.
func tektonPlan(units []Unit, file, name string, runFileEnv []string) ([]byte, error) {
	if name == "" {
		name = "gantry-" + planName(file)
	}
	byName := unitsByName(units)
	levels := Levels(units)
	dependents := map[string][]string{}
	for _, l := range levels {
		for _, u := range l {
			if byName[deleteTask(u.Name)] != nil && !byName[deleteTask(u.Name)].Suspend {
				return nil, &InvalidError{fmt.Sprintf("units %s and %s: a Tekton plan names the task that deletes %s %s, which is the other unit's task; rename one", u.Name, deleteTask(u.Name), u.Name, deleteTask(u.Name))}
			}
			for _, d := range activeDeps(u, byName) {
				dependents[d] = append(dependents[d], deleteTask(u.Name))
			}
		}
	}
	param := func(name, value string) map[string]any { return map[string]any{"name": name, "value": value} }
	task := func(name string, u Unit, operator string, after []string) map[string]any {
		t := map[string]any{
			"name":    name,
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
			"when": []any{map[string]any{"input": "$(params.command)", "operator": operator, "values": []string{"delete"}}},
		}
		if len(after) > 0 {
			t["runAfter"] = after
		}
		return t
	}
	var tasks []any
	for _, l := range levels {
		for _, u := range l {
			tasks = append(tasks, task(u.Name, u, "notin", activeDeps(u, byName)))
		}
	}
	for i := len(levels) - 1; i >= 0; i-- {
		for _, u := range levels[i] {
			tasks = append(tasks, task(deleteTask(u.Name), u, "in", dependents[u.Name]))
		}
	}
	pipeline := map[string]any{
		"apiVersion": "tekton.dev/v1",
		"kind":       "Pipeline",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"description": "The units of " + filepath.ToSlash(file) + ", one gantry Task each (written by gantry plan --format tekton): " +
				"diff, validate, apply and drift in dependency order, delete in the reverse order, dependents first. " +
				"Cluster credentials: the service account the PipelineRun runs its tasks as (taskRunTemplate.serviceAccountName), " +
				"or a kubeconfig workspace bound to a Secret and the kubeconfig param naming its file. " +
				"Secrets are keys of the Secret secret-name: GANTRY_RECORD_KEY signs each revision, " +
				"and the variables run-file-env names are what the run file reads with {env: NAME}.",
			"params": []any{
				map[string]any{"name": "command", "type": "string", "default": "apply", "description": "diff, validate, apply or drift, each unit after those it depends on; delete, each unit after those that depend on it."},
				map[string]any{"name": "kubeconfig", "type": "string", "default": "", "description": "The kubeconfig every unit uses, such as /workspace/kubeconfig/config with the kubeconfig workspace bound to a Secret with the key config. Empty: the service account the tasks run as, or each unit's own kubeconfig."},
				map[string]any{"name": "secret-name", "type": "string", "default": "gantry-secrets", "description": "The Secret whose keys become the tasks' variables: GANTRY_RECORD_KEY and the other secret inputs as GANTRY_<INPUT>, and the variables the run file reads."},
				map[string]any{"name": "run-file-env", "type": "string", "default": strings.Join(runFileEnv, "\n"), "description": "The variables the run file may read with {env: NAME}, one name or pattern a line (the run-file-env param of the gantry Task; by default what gantry plan was given)."},
			},
			"workspaces": []any{
				map[string]any{"name": "source", "description": "The repository checkout."},
				map[string]any{"name": "kubeconfig", "optional": true},
			},
			"tasks": tasks,
		},
	}
	j, err := json.Marshal(pipeline)
	if err != nil {
		return nil, fmt.Errorf("error marshaling into JSON: %w", err)
	}
	return yaml.JSONToYAML(yamlSafeJSON(j))
}

// yamlSafeJSON is JSON text that YAML reads as JSON does. JSON writes as
// they are characters that YAML refuses in a stream (DEL, the C1
// controls, U+FFFE, U+FFFF) or reads as a line break (NEL): a run file
// named with one had no Tekton plan, or one naming another file. They
// are written as \u escapes instead, which both read as the character:
// JSON text holds them only in strings.
func yamlSafeJSON(j []byte) []byte {
	if !bytes.ContainsFunc(j, yamlEscaped) {
		return j
	}
	var b bytes.Buffer
	for _, r := range string(j) {
		if yamlEscaped(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.Bytes()
}

// yamlEscaped says whether r is written as a \u escape in the JSON
// text YAML reads.
func yamlEscaped(r rune) bool {
	return r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || r == 0xfffe || r == 0xffff
}

// gitlabPlan is a child pipeline (trigger: include: artifact) with a job
// per unit in gantry's image, needs from depends-on, and the rules of the
// GitLab template: diff on a merge request, apply on the default branch
// but never on a schedule, drift on a schedule. A child pipeline's own
// CI_PIPELINE_SOURCE is parent_pipeline, so the parent's trigger job
// passes its source on as GANTRY_PIPELINE_SOURCE.
func gitlabPlan(units []Unit, file, image string, runFileEnv []string) ([]byte, error) {
	byName := unitsByName(units)
	file = filepath.ToSlash(file)
	command := func(c string) yamlv2.MapSlice {
		return yamlv2.MapSlice{{Key: "GANTRY_COMMAND", Value: c}}
	}
	variables := yamlv2.MapSlice{{Key: "GANTRY_RUN_FILE", Value: file}}
	if len(runFileEnv) > 0 {
		variables = append(variables, yamlv2.MapItem{Key: "GANTRY_RUN_FILE_ENV", Value: strings.Join(runFileEnv, "\n")})
	}
	doc := yamlv2.MapSlice{
		{Key: "stages", Value: []string{"gantry"}},
		{Key: ".gantry-unit", Value: yamlv2.MapSlice{
			{Key: "stage", Value: "gantry"},
			{Key: "image", Value: yamlv2.MapSlice{{Key: "name", Value: image}, {Key: "entrypoint", Value: []string{""}}}},
			{Key: "variables", Value: variables},
			{Key: "rules", Value: []yamlv2.MapSlice{
				// A command the parent names is its own choice.
				{{Key: "if", Value: `$GANTRY_COMMAND`}},
				// A schedule is drift's: an apply beside it would put
				// back, unreported, what drift is to report.
				{{Key: "if", Value: `$GANTRY_PIPELINE_SOURCE == "schedule"`}, {Key: "variables", Value: command("drift")}},
				{{Key: "if", Value: `$GANTRY_PIPELINE_SOURCE == "merge_request_event"`}, {Key: "variables", Value: command("diff")}},
				{{Key: "if", Value: `$GANTRY_PIPELINE_SOURCE && $CI_COMMIT_REF_NAME == $CI_DEFAULT_BRANCH && $CI_COMMIT_TAG == null`}, {Key: "variables", Value: command("apply")}},
				{{Key: "when", Value: "never"}},
			}},
			{Key: "allow_failure", Value: yamlv2.MapSlice{{Key: "exit_codes", Value: []int{3}}}}, // drift found drift
			{Key: "script", Value: []string{"/gantry"}},
			{Key: "artifacts", Value: yamlv2.MapSlice{
				{Key: "when", Value: "always"},
				{Key: "paths", Value: []string{".gantry/"}},
				{Key: "reports", Value: yamlv2.MapSlice{{Key: "dotenv", Value: "gantry.env"}}},
			}},
		}},
	}
	for _, l := range Levels(units) {
		for _, u := range l {
			// Order only: a unit takes nothing of those it needs, least of
			// all their dotenv, whose variables would win over its own.
			needs := []yamlv2.MapSlice{}
			for _, d := range activeDeps(u, byName) {
				needs = append(needs, yamlv2.MapSlice{{Key: "job", Value: "gantry-" + d}, {Key: "artifacts", Value: false}})
			}
			doc = append(doc, yamlv2.MapItem{Key: "gantry-" + u.Name, Value: yamlv2.MapSlice{
				{Key: "extends", Value: ".gantry-unit"},
				{Key: "variables", Value: yamlv2.MapSlice{{Key: "GANTRY_UNIT", Value: u.Name}}},
				{Key: "needs", Value: needs},
				{Key: "resource_group", Value: "gantry-" + u.Name},
			}})
		}
	}
	return planYAML([]string{
		"The units of " + file + ", a job each, needs from depends-on (written by gantry plan --format gitlab).",
		"Trigger it from the parent pipeline, passing the parent's source on:",
		"  gantry-units:",
		"    trigger:",
		"      include: [{artifact: gantry-plan.yml, job: gantry-plan}]",
		"      strategy: depend",
		"    variables:",
		"      GANTRY_PIPELINE_SOURCE: $CI_PIPELINE_SOURCE",
		"diff on a merge request, apply on the default branch (never on a schedule), drift on a schedule;",
		"a GANTRY_COMMAND the parent sets wins. To delete, run gantry delete --run-file " + file + " in one job: it deletes in the reverse order.",
		"The jobs take the project's CI/CD variables, as the GitLab template's do:",
		"  KUBECONFIG: a File variable, the kubeconfig, with the contexts the units name;",
		"  GANTRY_RECORD_KEY: the record-key that signs each revision (masked); GANTRY_GITLAB_TOKEN: for the merge request note;",
		"  and the variables the run file reads with {env: NAME} (GANTRY_RUN_FILE_ENV lets it read them).",
	}, doc)
}

// InvalidError is a run file that has no plan in the format asked: bad
// input, as an invalid run file is.
type InvalidError struct{ msg string }

func (e *InvalidError) Error() string { return e.msg }

// planName is a DNS label made of the run file's name, for the Pipeline.
func planName(file string) string {
	base := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	name := strings.Trim(notLabel.ReplaceAllString(strings.ToLower(base), "-"), "-")
	if name == "" || name == "gantry" {
		name = "units" // gantry-units, not gantry-gantry
	}
	return name
}

// planYAML writes a plan: head as its comment, then body, its data. No
// text of a plan is written by hand, so that nothing a run file names (a
// unit, a variable, the file itself) can end a comment or start a key:
// the body is written by the encoder that has always written plans (its
// layout is what users keep in their repositories), the comment by
// yaml.v3, which writes each line of a node's comment as a comment. A
// line that would not print as one line of text (a line ending of any
// kind, a control character, bytes that are no UTF-8) is quoted first:
// the encoder checks values, not comments. What is written is read back
// before it is returned: it must hold the body's data and nothing else.
func planYAML(head []string, body yamlv2.MapSlice) ([]byte, error) {
	lines := make([]string, len(head))
	for i, l := range head {
		lines[i] = commentLine(l)
	}
	var comment bytes.Buffer
	enc := yamlv3.NewEncoder(&comment)
	// The comment of an empty mapping: the encoder writes the comment,
	// then the mapping as {}, which is left out.
	err := enc.Encode(&yamlv3.Node{Kind: yamlv3.DocumentNode, Content: []*yamlv3.Node{
		{Kind: yamlv3.MappingNode, Style: yamlv3.FlowStyle, HeadComment: strings.Join(lines, "\n")},
	}})
	if err == nil {
		err = enc.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("writing the plan's comment: %w", err)
	}
	head0, ok := bytes.CutSuffix(comment.Bytes(), []byte("{}\n"))
	if !ok {
		return nil, fmt.Errorf("writing the plan's comment: the encoder wrote %q", comment.Bytes())
	}
	data, err := yamlv2.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("writing the plan: %w", err)
	}
	out := append(head0, data...)
	var want, got any
	errWant, errGot := yamlv3.Unmarshal(data, &want), yamlv3.Unmarshal(out, &got)
	if err := errors.Join(errWant, errGot); err != nil || !reflect.DeepEqual(want, got) {
		return nil, fmt.Errorf("writing the plan: what was written does not read back as the plan (%v)", err)
	}
	return out, nil
}

// commentLine is a line of a plan's comment: as it is when it prints as
// one line of text, quoted otherwise.
func commentLine(l string) string {
	for _, r := range l {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(l)
		}
	}
	return l
}
