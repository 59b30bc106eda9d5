package health

import (
	"errors"
	"fmt"
	"maps"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/parser"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/gantry-dev/gantry/sources/yamlbound"
	"github.com/gantry-dev/gantry/suggest"
)

// None, as health-rules, turns the built-in rules off.
const None = "none"

// MaxRules is the most rules a run reads: the rules come from files a
// pull request may write, and each is compiled before the run writes.
const MaxRules = 500

// MaxExpressionBytes bounds one expression, and MaxRulesBytes the text
// of all of a run's rules (a rules file too): parsing an expression costs
// up to a tenth of a second for the largest, and rules come from files a
// pull request may write.
const (
	MaxExpressionBytes = 4096
	MaxRulesBytes      = 64 << 10
)

// ParseText reads rules written as a YAML list (a Kustomization's
// healthCheckExprs). file names the text in messages (a file's path, or
// the input that gave it); its lines are counted from firstLine.
func ParseText(data []byte, file string, firstLine int) ([]Rule, error) {
	doc, err := yamlbound.Node(data)
	if err != nil {
		return nil, fmt.Errorf("%s: health rules: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return ParseNode(doc.Content[0], file, firstLine-1)
}

// ParseNode reads rules from a YAML list, as a run file holds them:
// lineOffset is added to the node's lines. Every problem is reported at
// once, each at its line.
func ParseNode(n *yaml.Node, file string, lineOffset int) ([]Rule, error) {
	at := func(n *yaml.Node) string { return fmt.Sprintf("%s:%d", file, n.Line+lineOffset) }
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s: health rules: want a list of rules, each with apiVersion, kind and current (and inProgress, failed), or %q", at(n), None)
	}
	if len(n.Content) > MaxRules {
		return nil, fmt.Errorf("%s: health rules: %d rules, over the limit of %d", at(n), len(n.Content), MaxRules)
	}
	fields := map[string]bool{"apiVersion": true, "kind": true, "current": true, "inProgress": true, "failed": true}
	var rules []Rule
	var errs []error
	for _, item := range n.Content {
		if item.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("%s: health rule: want a mapping with apiVersion, kind and current", at(item)))
			continue
		}
		r := Rule{Origin: at(item), Lines: map[string]int{}}
		for i := 0; i+1 < len(item.Content); i += 2 {
			k, v := item.Content[i], item.Content[i+1]
			if !fields[k.Value] {
				if best := suggest.Closest(k.Value, slices.Sorted(maps.Keys(fields))); best != "" {
					errs = append(errs, fmt.Errorf("%s: health rule: unknown field %q; did you mean %s?", at(k), k.Value, best))
				} else {
					errs = append(errs, fmt.Errorf("%s: health rule: unknown field %q (apiVersion, kind, current, inProgress, failed)", at(k), k.Value))
				}
				continue
			}
			if v.Kind != yaml.ScalarNode {
				errs = append(errs, fmt.Errorf("%s: health rule: %s: want text", at(v), k.Value))
				continue
			}
			line := v.Line + lineOffset
			if v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
				line++ // the text starts below its | or >
			}
			r.Lines[k.Value] = line
			switch k.Value {
			case "apiVersion":
				r.APIVersion = v.Value
			case "kind":
				r.Kind = v.Value
			case "current":
				r.Current = v.Value
			case "inProgress":
				r.InProgress = v.Value
			case "failed":
				r.Failed = v.Value
			}
		}
		if r.APIVersion == "" {
			errs = append(errs, fmt.Errorf("%s: health rule: no apiVersion: name the group and version of the kind it decides, such as cert-manager.io/v1", r.Origin))
			continue
		}
		if gk := r.groupKind(); gk == secretKind {
			errs = append(errs, fmt.Errorf("%s: health rule for Secret: Secrets are not decided by rules (an expression over their data could print it); kstatus has a Secret ready when it exists", r.Origin))
			continue
		} else if kubernetesGroup(gk.Group) {
			errs = append(errs, fmt.Errorf("%s: health rule for %s: rules decide custom resources; %s is one of Kubernetes' own API groups, whose kinds kstatus decides (docs/health.md)", r.Origin, r.what(), groupName(gk.Group)))
			continue
		}
		if r.Current == "" {
			errs = append(errs, fmt.Errorf("%s: health rule for %s: no current: it is the expression that says the object is ready", r.Origin, r.what()))
			continue
		}
		rules = append(rules, r)
	}
	return rules, errors.Join(errs...)
}

func (r *Rule) what() string {
	if r.Kind == "" {
		return "every kind of " + groupName(r.groupKind().Group)
	}
	return r.groupKind().String()
}

// Compile parses every expression of rules (the user's) and, unless
// builtIns is false, of the built-in rules for the kinds the user's do
// not name. Every mistake is reported at once, each at its line;
// warnings are the traps found in expressions that do compile.
func Compile(rules []Rule, builtIns bool) (*Set, []string, error) {
	s := &Set{byGK: map[schema.GroupKind]*compiled{}}
	var errs []error
	total := 0
	for i := range rules {
		total += len(rules[i].Current) + len(rules[i].InProgress) + len(rules[i].Failed)
	}
	if total > MaxRulesBytes {
		first := "health rules"
		if len(rules) > 0 {
			first = fileOf(rules[0].Origin)
		}
		return s, nil, fmt.Errorf("%s: health rules: %d bytes of expressions, over the limit of %d", first, total, MaxRulesBytes)
	}
	var warnings []string
	seen := map[schema.GroupKind]string{}
	for i := range rules {
		r := &rules[i]
		gk := r.groupKind()
		if prev, dup := seen[gk]; dup {
			errs = append(errs, fmt.Errorf("%s: health rule for %s: a rule for it is already at %s", r.Origin, r.what(), prev))
			continue
		}
		seen[gk] = r.Origin
		ok := true
		for _, e := range r.expressions() {
			w, err := check(r, e.name, e.expr)
			if err != nil {
				errs = append(errs, err)
				ok = false
			}
			warnings = append(warnings, w...)
		}
		if !ok {
			continue
		}
		c := newCompiled(r)
		if _, err := c.eval(); err != nil {
			errs = append(errs, fmt.Errorf("%s: health rule for %s: %w", r.Origin, r.what(), err))
			continue
		}
		s.byGK[gk] = c
	}
	if builtIns {
		for _, r := range builtInRules() {
			gk := r.groupKind()
			if _, mine := seen[gk]; mine {
				continue // the user's rule replaces it
			}
			if _, group := seen[schema.GroupKind{Group: gk.Group}]; group {
				continue // so does the user's rule for its whole group
			}
			s.byGK[gk] = newCompiled(r)
		}
	}
	return s, warnings, errors.Join(errs...)
}

type namedExpr struct{ name, expr string }

func (r *Rule) expressions() []namedExpr {
	var out []namedExpr
	for _, e := range []namedExpr{{"current", r.Current}, {"inProgress", r.InProgress}, {"failed", r.Failed}} {
		if e.expr != "" {
			out = append(out, e)
		}
	}
	return out
}

// celEnv parses as Flux's expressions are parsed: the same options.
var celEnv = sync1(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
		// Kept for the search for traps, which reads the macros as
		// written; it does not change what an expression means.
		cel.EnableMacroCallTracking(),
	)
})

// check parses one expression: a syntax error is named at its line in
// the rule's file; a parsed one is searched for traps.
func check(r *Rule, name, expr string) ([]string, error) {
	line := r.Lines[name]
	where := r.Origin
	if line > 0 {
		where = fileOf(r.Origin) + fmt.Sprintf(":%d", line)
	}
	if len(expr) > MaxExpressionBytes {
		return nil, fmt.Errorf("%s: health rule for %s: %s: %d bytes, over the limit of %d", where, r.what(), name, len(expr), MaxExpressionBytes)
	}
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	parsed, iss := env.Parse(expr)
	if iss != nil && iss.Err() != nil {
		var msgs []string
		at := where
		for i, e := range iss.Errors() {
			if i == 0 && line > 0 {
				// An error at the end of the text is on its last line.
				last := strings.Count(strings.TrimRight(expr, "\n"), "\n") + 1
				at = fmt.Sprintf("%s:%d", fileOf(r.Origin), line+min(e.Location.Line(), last)-1)
			}
			msgs = append(msgs, fmt.Sprintf("%s (column %d)", e.Message, e.Location.Column()+1))
		}
		return nil, fmt.Errorf("%s: health rule for %s: %s: %s", at, r.what(), name, strings.Join(msgs, "; "))
	}
	if err := checkPatterns(parsed.NativeRep().Expr()); err != nil {
		return nil, fmt.Errorf("%s: health rule for %s: %s: %w", where, r.what(), name, err)
	}
	if err := checkOptionalEntries(parsed.NativeRep().Expr()); err != nil {
		return nil, fmt.Errorf("%s: health rule for %s: %s: %w", where, r.what(), name, err)
	}
	return allTraps(parsed.NativeRep(), where, r, name), nil
}

// patternInstructions is the length of the program RE2 runs for
// pattern p: its work on each character it reads.
func patternInstructions(p string) (int, error) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return 0, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, err
	}
	return len(prog.Inst), nil
}

// checkOptionalEntries refuses optional entries of list and map literals
// ([?x], {?k: v}): CEL's error for one given a value that is not optional
// spells the value out whole, however large, and what it holds of the
// object. An optional field (status.?ready) and orValue() are kept.
func checkOptionalEntries(e celast.Expr) error {
	var err error
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		if err != nil {
			return
		}
		switch e.Kind() {
		case celast.ListKind:
			if len(e.AsList().OptionalIndices()) > 0 {
				err = errors.New("optional entries of a list ([?x]) are not taken: write the list without them, or use orValue()")
			}
		case celast.MapKind:
			for _, entry := range e.AsMap().Entries() {
				if entry.Kind() == celast.MapEntryKind && entry.AsMapEntry().IsOptional() {
					err = errors.New("optional entries of a map ({?k: v}) are not taken: write the map without them, or use orValue()")
					return
				}
			}
		}
	}))
	return err
}

// MaxPatternInstructions bounds a regular expression of matches(): the
// work of one match grows with the pattern's compiled program on every
// character of the string, and one call cannot be interrupted.
const MaxPatternInstructions = 200

// checkPatterns: every matches() has a pattern written in the rule
// (one read from the object could be anything), which compiles to at
// most MaxPatternInstructions.
func checkPatterns(e celast.Expr) error {
	var err error
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		if err != nil || e.Kind() != celast.CallKind || e.AsCall().FunctionName() != "matches" || len(e.AsCall().Args()) == 0 {
			return
		}
		args := e.AsCall().Args()
		pattern := args[len(args)-1]
		p, ok := "", pattern.Kind() == celast.LiteralKind
		if ok {
			p, ok = pattern.AsLiteral().Value().(string)
		}
		if !ok {
			err = errors.New("matches() takes a pattern written in the rule, not one computed from the object")
			return
		}
		n, perr := patternInstructions(p)
		if perr != nil {
			err = fmt.Errorf("the pattern %q does not compile: %v", p, perr)
			return
		}
		if n > MaxPatternInstructions {
			err = fmt.Errorf("the pattern %q compiles to %d instructions, over the limit of %d (its work grows with them on every character it reads)", p, n, MaxPatternInstructions)
		}
	}))
	return err
}

// fileOf is the file of an origin "FILE:LINE".
func fileOf(origin string) string {
	if i := strings.LastIndex(origin, ":"); i > 0 {
		return origin[:i]
	}
	return origin
}

// allTraps finds each x.all(...) whose x is not also required to hold
// something (size(x) > 0, x.exists(...), x.exists_one(...)) in the same
// expression: .all() over an empty or missing list (status.?conditions
// .orValue([])) is true, so such a rule calls an object ready before its
// controller wrote a word.
func allTraps(a *celast.AST, where string, r *Rule, name string) []string {
	info := a.SourceInfo()
	text := func(e celast.Expr) string {
		s, err := parser.Unparse(e, info)
		if err != nil {
			return ""
		}
		return s
	}
	var ranges []string
	guarded := map[string]bool{}
	for _, call := range info.MacroCalls() {
		if call.Kind() != celast.CallKind || !call.AsCall().IsMemberFunction() {
			continue
		}
		c := call.AsCall()
		target := text(c.Target())
		switch c.FunctionName() {
		case "all":
			ranges = append(ranges, target)
		case "exists", "exists_one":
			guarded[target] = true
		}
	}
	if len(ranges) == 0 {
		return nil
	}
	celast.PostOrderVisit(a.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() != celast.CallKind || e.AsCall().FunctionName() != "size" {
			return
		}
		c := e.AsCall()
		switch {
		case c.IsMemberFunction():
			guarded[text(c.Target())] = true
		case len(c.Args()) == 1:
			guarded[text(c.Args()[0])] = true
		}
	}))
	var out []string
	for _, rg := range ranges {
		if rg == "" || guarded[rg] {
			continue
		}
		out = append(out, fmt.Sprintf("%s: health rule for %s: %s: %s.all(...) is true when the list is empty or missing, so the rule can say ready before the controller wrote anything; require an element too, such as %s.exists(...) or size(%s) > 0",
			where, r.what(), name, rg, rg, rg))
	}
	return out
}

// kubernetesGroup says whether group is one of Kubernetes' own API groups
// (client-go's, and the API server's extensions): their kinds are
// kstatus's to decide, and among them are the kinds that hold secrets.
func kubernetesGroup(group string) bool {
	return group == "" || scheme.Scheme.IsGroupRegistered(group) ||
		group == "apiextensions.k8s.io" || group == "apiregistration.k8s.io"
}

func groupName(group string) string {
	if group == "" {
		return "the core group (v1)"
	}
	return group
}

// compiledSets keeps the sets CompileOnce made, by their rules: the units
// of a run file share their defaults' rules, compiled once.
var compiledSets sync.Map // string -> *onceSet

type onceSet struct {
	once     sync.Once
	set      *Set
	warnings []string
	err      error
}

// CompileOnce is Compile, made once per process for the same rules
// (their text and their places) and built-ins.
func CompileOnce(rules []Rule, builtIns bool) (*Set, []string, error) {
	var key strings.Builder
	fmt.Fprintf(&key, "%v\x00", builtIns)
	for _, r := range rules {
		fmt.Fprintf(&key, "%q %q %q %q %q %q %v\x00", r.APIVersion, r.Kind, r.Current, r.InProgress, r.Failed, r.Origin, r.Lines)
	}
	v, _ := compiledSets.LoadOrStore(key.String(), &onceSet{})
	o := v.(*onceSet)
	o.once.Do(func() { o.set, o.warnings, o.err = Compile(rules, builtIns) })
	return o.set, o.warnings, o.err
}
