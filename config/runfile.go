package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources/yamlbound"
	"github.com/gantry-dev/gantry/suggest"
)

// Unit is one deploy: a source, a cluster and an inventory, configured as
// a single run is. The command line and its variables make a run of one
// unit; a run file makes many, with the order between them.
type Unit struct {
	Name string
	// DependsOn names the units that must have applied, and be healthy,
	// before this one starts.
	DependsOn []string
	// Suspend: the unit is reported Suspended and not run; its
	// dependents wait for nothing from it.
	Suspend bool
	Config  *Config
	// Where is the unit's place in the run file (file:line).
	Where string
	// EnvRefs are the variables its inputs (and the defaults') read with
	// {env: NAME}: what a CI job that runs it alone must be given.
	EnvRefs []string
}

// UnitInputs are the inputs a unit of a run file may set: all but those
// of the whole run and those the workflow alone decides.
func UnitInputs() []Input {
	var out []Input
	for _, in := range Inputs {
		if !runLevel[in.Name] && workflowOnly[in.Name] == "" {
			out = append(out, in)
		}
	}
	return out
}

// pathInputs hold paths, which a run file gives relative to itself and
// which must lie inside the workspace: each a folder (true) or files.
var pathInputs = map[string]bool{"path": true, "crds": true, "kubeconfig": false, "patches": false, "chart": true, "values": false, "health-rules": false}

// unitName is a unit's name: it becomes part of step output names
// (web-changed), so it is a DNS label, as inventories are.
var unitName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// unitSpec is one unit as its run file gives it, before it is configured.
type unitSpec struct {
	Name      string
	DependsOn []string
	Suspend   bool
	// settings are the unit's inputs (the defaults' first, then its
	// own), raw, each with where it was written.
	settings map[string]value
	where    string // file:line, for messages
	envRefs  []string
}

// MaxUnits is the most units a run file may list. A run file is read on
// pull and merge requests, whose authors write it: a longer one is
// refused as soon as it is parsed, before any unit is configured.
const MaxUnits = 1000

// MaxRunFileBytes is the largest run file read, whatever max-file-bytes
// allows the build: a thousand units in block style with every input
// fit in it several times over, and a file it admits is parsed in a
// fraction of a second, so that MaxUnits is judged at once.
const MaxRunFileBytes = 1 << 20

// loadRunFile reads a run file: a list of units under units:, and under
// defaults: the inputs they share. Every problem in it is reported at
// once, each naming the file and line. env resolves the secret references.
func loadRunFile(path string, env map[string]string, pol *policy, refsOnly bool) ([]*unitSpec, error) {
	if _, err := pol.confine(".", path, false, pol.maxFileBytes); err != nil {
		return nil, fmt.Errorf("run-file: %w (the workspace is the input workspace; by default GITHUB_WORKSPACE, CI_PROJECT_DIR, or the git repository of the working directory)", err)
	}
	data, err := pol.read(path, min(pol.maxFileBytes, MaxRunFileBytes))
	if err != nil {
		return nil, fmt.Errorf("run-file: %w", err)
	}
	// A run file is the pull request's, read by the bounded parser as
	// every source is: a document whose aliases expand out of
	// proportion is refused whole, before any unit is read.
	doc, err := yamlbound.Node(data)
	if refused := (*yamlbound.Error)(nil); errors.As(err, &refused) {
		return nil, fmt.Errorf("run-file %s: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s:%d: %s", path, problemLine(data, err), strings.TrimPrefix(yamlLine.ReplaceAllString(err.Error(), ""), "yaml: "))
	}
	r := &runFileReader{path: path, dir: filepath.Dir(path), env: env, policy: pol, refsOnly: refsOnly}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("run-file %s: want a mapping with units: (and optionally defaults:)", path)
	}
	var defaults map[string]value
	var units *yaml.Node
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		switch k.Value {
		case "defaults":
			r.envRefs = nil
			defaults = r.settings(v, "defaults")
			r.defaultRefs = r.envRefs
			r.defaultChartByName = defaults["chart-repository"].raw != ""
		case "units":
			units = v
		default:
			r.fail(k, "unknown key %q: a run file has units and defaults", k.Value)
		}
	}
	var specs []*unitSpec
	switch {
	case units == nil:
		r.fail(top, "no units: list the units to run under units:")
	case units.Kind != yaml.SequenceNode || len(units.Content) == 0:
		r.fail(units, "units: want a list of units, each a mapping with name and the inputs of one run")
	case len(units.Content) > MaxUnits:
		// Refused before any unit is read: each costs a configuration,
		// and a pull request writes the file.
		return nil, fmt.Errorf("%s: units: %d units, over the limit of %d a run file may list", r.at(units), len(units.Content), MaxUnits)
	default:
		for _, u := range units.Content {
			if spec := r.unit(u, defaults); spec != nil {
				specs = append(specs, spec)
			}
		}
	}
	// What could be read is returned with every problem, so that the
	// checks that follow name theirs in the same round.
	return specs, errors.Join(r.errs...)
}

type runFileReader struct {
	path, dir string
	env       map[string]string
	policy    *policy
	errs      []error
	// refsOnly checks secret references without reading them: plan
	// writes jobs that read them where they run.
	refsOnly bool
	// masks are the lines of the values the input being read read
	// through references.
	masks []string
	// inputs are the inputs by name, made once for every unit.
	inputs map[string]Input
	// envRefs are the variables the settings being read refer to with
	// {env: NAME}; defaultRefs, those of defaults, which every unit reads.
	envRefs, defaultRefs []string
	// chartByName says the settings being read name a chart by its name
	// in a chart-repository, not by its folder; defaultChartByName, that
	// the defaults do.
	chartByName, defaultChartByName bool
}

func (r *runFileReader) at(n *yaml.Node) string { return fmt.Sprintf("%s:%d", r.path, n.Line) }

func (r *runFileReader) fail(n *yaml.Node, format string, a ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s", r.at(n), fmt.Sprintf(format, a...)))
}

// unit reads one entry of units: its name, depends-on and suspend, and
// its inputs over the defaults.
func (r *runFileReader) unit(n *yaml.Node, defaults map[string]value) *unitSpec {
	if n.Kind != yaml.MappingNode {
		r.fail(n, "a unit is a mapping with name and the inputs of one run")
		return nil
	}
	spec := &unitSpec{where: r.at(n), settings: map[string]value{}}
	for k, v := range defaults {
		spec.settings[k] = v
	}
	var own []*yaml.Node // the unit's inputs, read once its name is known
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "name":
			spec.Name = v.Value
			if v.Kind != yaml.ScalarNode || !unitName.MatchString(v.Value) || len(v.Value) > 40 {
				r.fail(v, "unit name %q: want lower-case letters, digits and '-', at most 40 characters, as in infra-crds", v.Value)
			}
		case "depends-on":
			items := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				items = v.Content
			}
			for _, it := range items {
				if it.Kind != yaml.ScalarNode || it.Value == "" {
					r.fail(it, "depends-on: want unit names")
					continue
				}
				spec.DependsOn = append(spec.DependsOn, it.Value)
			}
		case "suspend":
			if v.Kind != yaml.ScalarNode || (v.Value != "true" && v.Value != "false") {
				r.fail(v, "suspend: %q is not true or false", v.Value)
			}
			spec.Suspend = v.Value == "true"
		default:
			own = append(own, k, v)
		}
	}
	if spec.Name == "" {
		r.fail(n, "a unit without a name: every unit has one (name: web)")
		return nil
	}
	r.envRefs = slices.Clone(r.defaultRefs)
	for k, v := range r.settings(&yaml.Node{Kind: yaml.MappingNode, Content: own}, "unit "+spec.Name) {
		spec.settings[k] = v
	}
	spec.envRefs = r.envRefs
	return spec
}

// settings reads a mapping of inputs into raw values, as flags give them.
// Lists become one value per line; paths are made relative to the run
// file's folder; secrets are read from the reference that names them.
func (r *runFileReader) settings(n *yaml.Node, what string) map[string]value {
	out := map[string]value{}
	if n.Kind != yaml.MappingNode {
		r.fail(n, "%s: want a mapping of inputs, such as timeout: 5m", what)
		return out
	}
	if r.inputs == nil {
		r.inputs = map[string]Input{}
		for _, in := range Inputs {
			r.inputs[in.Name] = in
		}
	}
	inputs := r.inputs
	r.chartByName = r.defaultChartByName || r.policy.chartByName
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "chart-repository" && n.Content[i+1].Value != "" {
			r.chartByName = true
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		in, ok := inputs[k.Value]
		switch {
		case !ok:
			if k.Value == "name" || k.Value == "depends-on" || k.Value == "suspend" {
				r.fail(k, "%s: %s is a unit's own, not a default", what, k.Value)
			} else if best := suggest.Closest(k.Value, slices.Sorted(maps.Keys(inputs))); best != "" {
				r.fail(k, "%s: unknown input %q; did you mean %s?", what, k.Value, best)
			} else {
				r.fail(k, "%s: unknown input %q (docs/reference.md lists them)", what, k.Value)
			}
			continue
		case runLevel[in.Name]:
			r.fail(k, "%s: %s is a setting of the whole run, not of a unit: give it on the command line or as a variable", what, in.Name)
			continue
		case workflowOnly[in.Name] != "":
			r.fail(k, "%s: %s decides %s, which is the workflow's to decide: give it as a flag or variable, never in a run file", what, in.Name, workflowOnly[in.Name])
			continue
		}
		origin := fmt.Sprintf("%s, %s", r.at(k), what)
		if in.Name == "health-rules" && v.Kind == yaml.SequenceNode {
			// Read as rules, each named at its line of this file.
			out[in.Name] = value{rules: v, file: r.path, origin: origin, from: FromRunFile}
			continue
		}
		r.masks = nil
		raw, ok := r.raw(in, v, what)
		if !ok {
			continue
		}
		if dir, isPath := pathInputs[in.Name]; isPath && !(in.Name == "health-rules" && rulesText(raw)) {
			if raw, ok = r.paths(v, what, in.Name, raw, dir); !ok {
				continue
			}
		}
		if ageKeyInputs[in.Name] {
			// Of key text, only the keys are secrets: not its comments.
			r.masks = slices.DeleteFunc(r.masks, func(l string) bool { return !slices.Contains(keyLines(raw), l) })
		}
		val := value{raw: raw, origin: origin, from: FromRunFile, masks: r.masks}
		if in.Name == "health-rules" && rulesText(raw) {
			// Rules written as text: numbered from where it starts.
			val.file, val.line = r.path, v.Line
			if v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
				val.line++
			}
		}
		out[in.Name] = val
	}
	return out
}

// raw is an input's value as the text a flag would give.
func (r *runFileReader) raw(in Input, v *yaml.Node, what string) (string, bool) {
	switch {
	case in.Name == "substitute": // secret by the names of its values
		return r.substitutions(v, what)
	case in.Secret:
		s, ok := r.secret(v, what+": "+in.Name)
		return s, ok
	case v.Kind == yaml.ScalarNode:
		if in.Bool && v.Value != "true" && v.Value != "false" {
			r.fail(v, "%s: %s: %q is not true or false", what, in.Name, v.Value)
			return "", false
		}
		return v.Value, true
	case v.Kind == yaml.SequenceNode && in.Lines:
		var lines []string
		for _, it := range v.Content {
			if it.Kind != yaml.ScalarNode {
				r.fail(it, "%s: %s: want a list of text values", what, in.Name)
				return "", false
			}
			lines = append(lines, it.Value)
		}
		return strings.Join(lines, "\n"), true
	}
	r.fail(v, "%s: %s: want a single value%s", what, in.Name, map[bool]string{true: " or a list", false: ""}[in.Lines])
	return "", false
}

// secret reads a secret input from its reference, {env: NAME} or
// {file: path}. A secret written in the file itself is refused: a run
// file is committed, and what it holds is read by everyone who can read
// the repository. Messages never echo the value.
func (r *runFileReader) secret(v *yaml.Node, what string) (string, bool) {
	if v.Kind != yaml.MappingNode || len(v.Content) != 2 {
		r.fail(v, "%s is a secret: refer to it as {env: VARIABLE} or {file: path}; a run file never holds a secret itself", what)
		return "", false
	}
	kind, ref := v.Content[0].Value, v.Content[1].Value
	if kind == "env" {
		// The workflow's run-file-env decides what may be read, for a
		// plan too: a plan passes its jobs only what it allows, and
		// only names, which go on into the jobs it writes.
		if err := r.policy.mayRead(ref); err != nil {
			r.fail(v, "%s: {env: %s}: %v", what, shownName(ref), err)
			return "", false
		}
		if !slices.Contains(r.envRefs, ref) {
			r.envRefs = append(r.envRefs, ref)
		}
	}
	if r.refsOnly && (kind == "env" || kind == "file") && ref != "" {
		return "", false
	}
	var s string
	switch kind {
	case "env":
		var ok bool
		if s, ok = r.env[ref]; !ok || s == "" {
			r.fail(v, "%s: the variable %s is not set", what, ref)
			return "", false
		}
	case "file":
		p, err := r.policy.confine(r.dir, ref, false, maxReferenceBytes)
		var b []byte
		if err == nil {
			b, err = r.policy.readReference(p, maxReferenceBytes)
		}
		if err != nil {
			r.fail(v, "%s: {file: %s}: %v", what, ref, err)
			return "", false
		}
		s = string(b)
	default:
		r.fail(v, "%s: %q is not a reference; want {env: VARIABLE} or {file: path}", what, kind)
		return "", false
	}
	// What a reference reads is a secret, masked everywhere; a value too
	// short to be a mask would be printed, or would mask ordinary words.
	m := masks(s)
	if len(m) == 0 {
		r.fail(v, "%s: the value read from {%s: %s} has no line of %d characters or more: too short to mask, and every value read through a reference is masked as a secret", what, kind, ref, MinMaskLength)
		return "", false
	}
	r.masks = append(r.masks, m...)
	return s, true
}

// substitutions reads substitute as a mapping (NAME: value) or a list of
// NAME=value lines. A value whose name says it is secret is read from a
// reference only, as the secret inputs are; any value may be one.
func (r *runFileReader) substitutions(v *yaml.Node, what string) (string, bool) {
	var lines []string
	ok := true
	switch v.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := v.Content[i], v.Content[i+1]
			var s string
			switch {
			case val.Kind == yaml.MappingNode:
				var good bool
				if s, good = r.secret(val, what+": substitute "+k.Value); !good {
					ok = ok && r.refsOnly
					continue
				}
				s = strings.TrimSuffix(s, "\n")
				if strings.Contains(s, "\n") {
					r.fail(val, "%s: substitute %s: a substituted value is one line", what, k.Value)
					ok = false
					continue
				}
			case val.Kind != yaml.ScalarNode:
				r.fail(val, "%s: substitute %s: want a value or {env: VARIABLE}", what, k.Value)
				ok = false
				continue
			case secretName.MatchString(k.Value) && val.Value != "":
				r.fail(val, "%s: substitute %s looks secret by its name: refer to it as {env: VARIABLE} or {file: path}", what, k.Value)
				ok = false
				continue
			default:
				s = val.Value
			}
			lines = append(lines, k.Value+"="+s)
		}
	case yaml.SequenceNode:
		for _, it := range v.Content {
			k, _, _ := strings.Cut(it.Value, "=")
			if it.Kind == yaml.ScalarNode && secretName.MatchString(strings.TrimSpace(k)) {
				r.fail(it, "%s: substitute %s looks secret by its name: write substitute as a mapping and refer to it as {env: VARIABLE}", what, strings.TrimSpace(k))
				ok = false
				continue
			}
			lines = append(lines, it.Value)
		}
	default:
		r.fail(v, "%s: substitute: want a mapping of NAME: value", what)
		return "", false
	}
	return strings.Join(lines, "\n"), ok
}

// paths confines each line of a path input: relative to the run file's
// folder, inside the workspace, a folder (dir) or a regular file; a
// kubeconfig is checked for what it would run or read.
func (r *runFileReader) paths(v *yaml.Node, what, input, raw string, dir bool) (string, bool) {
	var out []string
	ok := true
	for _, l := range strings.Split(raw, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if input == "chart" && (strings.HasPrefix(strings.TrimSpace(l), "oci://") || r.chartByName) {
			// A chart fetched, not a folder: allow-remote-charts decides
			// where from, when the unit is configured.
			out = append(out, strings.TrimSpace(l))
			continue
		}
		if input == "crds" && strings.Contains(l, "://") {
			r.fail(v, "%s: crds: %s: an artifact is an endpoint, the workflow's to name: a run file names folders of CRDs only", what, l)
			ok = false
			continue
		}
		p, err := r.policy.confine(r.dir, strings.TrimSpace(l), dir, r.policy.maxFileBytes)
		// Checked where it is used: plan and offline runs connect to
		// nothing.
		if err == nil && input == "kubeconfig" && !r.policy.offline && !r.refsOnly {
			err = r.policy.checkKubeconfig(p)
		}
		if err != nil {
			r.fail(v, "%s: %s: %v", what, input, err)
			ok = false
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, "\n"), ok
}

// LoadUnits makes the units of a run file, each configured as a
// single run is. Inputs given on the command line or as variables apply
// to every unit, over what the file says; a variable that holds an
// input's default (as action.yml and the CI templates set every input)
// is taken as not given. The graph is checked before anything runs:
// unknown names, cycles, two units on one inventory of one cluster, a
// unit with no source.
func LoadUnits(g Given, file string, refsOnly bool) ([]*Unit, error) {
	if p := firstNonEmpty(g.Path, g.Flags["path"]); p != "" {
		return nil, fmt.Errorf("path %q: a run file gives each unit its path; give one or the other", p)
	}
	pol, err := workflowPolicy(g)
	if err != nil {
		return nil, err
	}
	// Every problem is named in one round: those of reading the file,
	// those of each unit's inputs, and those of the graph.
	specs, err := loadRunFile(file, g.Env, pol, refsOnly)
	if err != nil && specs == nil {
		return nil, err
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	var units, all []*Unit
	for _, s := range specs {
		u := &Unit{Name: s.Name, DependsOn: s.DependsOn, Suspend: s.Suspend, Where: s.where, EnvRefs: s.envRefs}
		all = append(all, u)
		ug := g
		ug.unit = s.settings
		cfg, err := configure(&ug)
		if err != nil {
			errs = append(errs, fmt.Errorf("unit %s (%s):\n%s", s.Name, s.where, Indent(err.Error())))
			continue
		}
		if !cfg.PathGiven && cfg.Artifact == "" && cfg.Command != "delete" {
			errs = append(errs, fmt.Errorf("unit %s (%s): no source: give it a path, a chart or an artifact", s.Name, s.where))
		}
		u.Config = cfg
		units = append(units, u)
	}
	errs = append(errs, checkGraph(all)...)
	return units, errors.Join(errs...)
}

// RunFileAt reads file as another revision holds it, with g's inputs:
// within maps the workspace and the run file to that revision's tree,
// which is then the workspace of every path the file names. No file
// there: no units.
func RunFileAt(g Given, file string) func(within func(string) string, root string) ([]*Unit, error) {
	return func(within func(string) string, root string) ([]*Unit, error) {
		ws, err := WorkspaceOf(g)
		if err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, err
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		if rel, err := filepath.Rel(ws, abs); err != nil || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("%s is outside the workspace %s", file, ws)
		}
		there := within(abs)
		if _, err := os.Lstat(there); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		// The workspace there is the same folder, not a link the other
		// revision made: a link would widen it (to the checkout the
		// workflow narrowed it in, say).
		if err := noLinks(root, within(ws)); err != nil {
			return nil, fmt.Errorf("the workspace: %w", err)
		}
		at := g
		at.Flags = maps.Clone(g.Flags)
		if at.Flags == nil {
			at.Flags = map[string]string{}
		}
		at.Flags["workspace"] = within(ws)
		return LoadUnits(at, there, false)
	}
}

// noLinks says path, a folder below root, is reached from root through
// no link.
func noLinks(root, path string) error {
	rel, err := filepath.Rel(root, path)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return fmt.Errorf("%s is not below %s", path, root)
	}
	at := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." {
			continue
		}
		at = filepath.Join(at, part)
		fi, err := os.Lstat(at)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a link", at)
		}
	}
	return nil
}

// checkGraph refuses what would make a run of units ambiguous or endless:
// two units of one name, a dependency on no unit, a cycle (named as a
// chain), and two units on one inventory of one cluster (each would
// prune the other's objects).
func checkGraph(units []*Unit) []error {
	var errs []error
	byName := map[string]*Unit{}
	for _, u := range units {
		if _, dup := byName[u.Name]; dup {
			errs = append(errs, fmt.Errorf("unit %s (%s) is named twice", u.Name, u.Where))
		}
		byName[u.Name] = u
	}
	for _, u := range units {
		for _, d := range u.DependsOn {
			if _, ok := byName[d]; !ok {
				errs = append(errs, fmt.Errorf("unit %s (%s) depends on %s, which is not a unit of the run file", u.Name, u.Where, d))
			}
		}
	}
	if cycle := findCycle(units, byName); cycle != nil {
		errs = append(errs, fmt.Errorf("units depend on each other in a cycle: %s (%s)", strings.Join(cycle, " -> "), byName[cycle[0]].Where))
	}
	owner := map[string]string{}
	for _, u := range units {
		if u.Config == nil || u.Config.Inventory == "" || u.Config.Offline {
			continue // its inputs failed, or an offline unit reaches no cluster
		}
		key := clusterOf(u.Config) + "|" + u.Config.InventoryNamespace + "|" + u.Config.Inventory
		if other, dup := owner[key]; dup {
			errs = append(errs, fmt.Errorf("units %s and %s (%s) use one inventory, %s/%s, on one cluster: each would prune the other's objects; give each its own inventory",
				other, u.Name, u.Where, u.Config.InventoryNamespace, u.Config.Inventory))
			continue
		}
		owner[key] = u.Name
	}
	return errs
}

// SelectUnits keeps the units named, as a CI engine's job for a unit runs
// them: the engine has run their dependencies, so only the dependencies
// among them are kept. dependedOn names those others depend on in the
// whole run file, which must still wait to be healthy.
func SelectUnits(units []*Unit, names []string) (selected []*Unit, dependedOn map[string]bool, err error) {
	dependedOn = map[string]bool{}
	byName := map[string]bool{}
	for _, u := range units {
		byName[u.Name] = true
		for _, d := range u.DependsOn {
			dependedOn[d] = true
		}
	}
	var unknown []string
	for _, n := range names {
		if !byName[n] {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, nil, fmt.Errorf("unit: %s is not a unit of the run file", strings.Join(unknown, ", "))
	}
	for _, u := range units {
		if !slices.Contains(names, u.Name) {
			continue
		}
		kept := *u
		kept.DependsOn = slices.DeleteFunc(slices.Clone(u.DependsOn), func(d string) bool { return !slices.Contains(names, d) })
		selected = append(selected, &kept)
	}
	return selected, dependedOn, nil
}

// findCycle returns a cycle of dependencies as a chain that ends where it
// starts (a -> b -> a), or nil.
func findCycle(units []*Unit, byName map[string]*Unit) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(name string) []string
	visit = func(name string) []string {
		switch state[name] {
		case onPath:
			start := slices.Index(path, name)
			return append(slices.Clone(path[start:]), name)
		case done:
			return nil
		}
		u, ok := byName[name]
		if !ok {
			return nil // an unknown name, refused on its own
		}
		state[name] = onPath
		path = append(path, name)
		for _, d := range u.DependsOn {
			if c := visit(d); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[name] = done
		return nil
	}
	for _, u := range units {
		if c := visit(u.Name); c != nil {
			return c
		}
	}
	return nil
}

// clusterOf names a unit's cluster by its server's address, never its
// credentials; where the kubeconfig cannot be read, by what the unit names.
func clusterOf(c *Config) string {
	if server := ClusterInfo(c).Server; server != "" {
		return server
	}
	return "kubeconfig " + c.Kubeconfig + ", context " + c.Context
}

// RunFileInput is the run-file input, by the inputs' precedence.
func RunFileInput(g Given) string {
	if f := strings.TrimSpace(g.Flags["run-file"]); f != "" {
		return f
	}
	return firstNonEmpty(strings.TrimSpace(g.Env["INPUT_RUN-FILE"]), strings.TrimSpace(g.Env["GANTRY_RUN_FILE"]))
}

// Overrides names the unit inputs given on the command line or as
// variables, which apply to every unit over the run file.
func Overrides(g Given) []string {
	var out []string
	for _, in := range Inputs {
		if runLevel[in.Name] {
			continue
		}
		if _, ok := g.Flags[in.Name]; ok {
			out = append(out, fmt.Sprintf("%s (from --%s)", in.Name, in.Name))
			continue
		}
		for _, name := range []string{in.EnvName(), in.GantryEnvName()} {
			if v := g.Env[name]; v != "" && v != in.Default && v != in.ActionDefault {
				out = append(out, fmt.Sprintf("%s (from %s)", in.Name, name))
				break
			}
		}
	}
	return out
}

// ClusterInfo names a unit's cluster: its context and its API server's
// address, read from its kubeconfig; never its credentials.
func ClusterInfo(c *Config) result.Cluster {
	if c.Offline {
		return result.Cluster{} // offline: no cluster, no kubeconfig read
	}
	cl := result.Cluster{Context: c.Context}
	if cl.Context == "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if c.Kubeconfig != "" {
			rules.ExplicitPath = c.Kubeconfig
		}
		if raw, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).RawConfig(); err == nil {
			cl.Context = raw.CurrentContext
		}
	}
	if rc, err := kube.RESTConfig(kube.Options{Kubeconfig: c.Kubeconfig, Context: c.Context}); err == nil {
		cl.Server = rc.Host
	}
	return cl
}

// Indent lists the lines of s as an indented list, for messages that
// hold several problems.
func Indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasPrefix(l, " ") {
			b.WriteString("  " + l + "\n") // a line of the item above
			continue
		}
		b.WriteString("  - " + l + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// yamlLine is the "line N: " the YAML parser puts in its messages.
var yamlLine = regexp.MustCompile(`line (\d+): `)

// problemLine is the line of data a YAML error is about. The parser names
// the line where the block around the problem starts (an indentation
// error on line 4 of a list begun on line 1 reads "line 1"); the line
// after the last one up to which the file still parses is the one at
// fault (a flow mapping over several lines parses again once closed).
// Run files are small, so reading prefixes is cheap; past a bound (in
// lines and in bytes) the parser's own line is kept.
func problemLine(data []byte, err error) int {
	parserLine := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		parserLine, _ = strconv.Atoi(m[1])
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > 2000 || len(data) > 128<<10 {
		return parserLine // reading every prefix would cost a hostile file's square
	}
	lastGood := 0
	var prefix []byte
	for i, l := range lines {
		prefix = append(prefix, l...)
		if _, err := yamlbound.Node(prefix); err == nil {
			lastGood = i + 1
		}
	}
	if lastGood >= len(lines) {
		return parserLine
	}
	return lastGood + 1
}

// rulesText says whether health-rules' value is rules or none, not the
// path of a file of them.
func rulesText(raw string) bool {
	raw = strings.TrimSpace(raw)
	return raw == "none" || strings.HasPrefix(raw, "-") || strings.HasPrefix(raw, "[")
}
