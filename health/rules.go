// Package health decides when a custom resource is ready by rules in
// Flux's shape (a Kustomization's healthCheckExprs): for a kind, or for
// every kind of a group, three CEL expressions over the object, current,
// inProgress and failed, evaluated as Flux evaluates them, after the same
// generation check. kstatus decides every kind no rule names.
//
// Rules are evaluated as Flux's evaluator (fluxcd/pkg/runtime/cel)
// evaluates them, so that a rule means here what it means in a
// Kustomization (tested against it), with the work of each expression
// bounded. Around it: an
// expression that reads a field the object does not have yet says the
// object is not ready yet, naming the expression and the field (Flux
// returns an error, and the wait runs to its timeout); a rule that finds
// the object failed ends the wait with the object's own message; and
// every expression is parsed before the first write, every mistake named
// at its line at once, with a warning for .all() over a list that may be
// empty.
package health

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/gantry-dev/gantry/result"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Rule is one entry of health-rules, as a Kustomization's
// healthCheckExprs entry: apiVersion's group and kind name the objects it
// decides (kind left out: every kind of the group).
type Rule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind,omitempty"`
	Current    string `json:"current"`
	InProgress string `json:"inProgress,omitempty"`
	Failed     string `json:"failed,omitempty"`

	// Origin says where the rule comes from, for messages and reports:
	// "built-in", or the file (or input) and line of its entry.
	Origin string `json:"-"`
	// Lines holds the line of each expression in Origin's file, by
	// field name (current, inProgress, failed); 0 when unknown.
	Lines map[string]int `json:"-"`
}

// BuiltIn is the Origin of the rules gantry brings.
const BuiltIn = "built-in"

// Name names the rule in messages: "built-in rule for Certificate.cert-manager.io",
// or "rule for ... at FILE:LINE".
func (r *Rule) Name() string {
	what := r.groupKind().String()
	if r.Kind == "" {
		what = "every kind of " + r.groupKind().Group
	}
	if r.Origin == BuiltIn {
		return "built-in rule for " + what
	}
	return "rule for " + what + " at " + r.Origin
}

func (r *Rule) groupKind() schema.GroupKind {
	gk := schema.FromAPIVersionAndKind(r.APIVersion, r.Kind).GroupKind()
	if r.Kind == "" {
		gk.Kind = ""
	}
	return gk
}

// Set is a run's compiled rules: the user's, and the built-in ones for
// the kinds no rule of the user's names.
type Set struct {
	byGK map[schema.GroupKind]*compiled

	// decided keeps the verdict of each object's newest resourceVersion,
	// by its UID: a rule's verdict depends on the object alone (CEL
	// reads no clock), so a poll evaluates only what changed since the
	// last.
	mu      sync.Mutex
	decided map[string]decided
	// decidedBytes are the bytes of the messages decided holds.
	decidedBytes int
}

// maxDecided bounds the objects whose verdicts are kept, and
// maxDecidedBytes their messages (an object's own message is quoted
// whole, and objects may be made anew, each a new UID, on every poll);
// past either they are forgotten.
const (
	maxDecided      = 100_000
	maxDecidedBytes = 16 << 20
)

// compiled is a rule and its evaluator, made on first use: a CEL
// environment per expression costs about a millisecond, which a run pays
// only for the kinds it waits for.
type compiled struct {
	rule *Rule
	eval func() (*evaluator, error)
	// keys are the fields and keys the rule's expressions name as
	// written (status.ready, m['ready']), and whether they index with
	// a key they compute (m[status.x]).
	keys func() (map[string]bool, bool)
	// current is the result of every object the rule finds ready.
	current *status.Result
}

func newCompiled(r *Rule) *compiled {
	return &compiled{rule: r, eval: sync1(func() (*evaluator, error) { return newEvaluator(r) }), keys: sync.OnceValues(func() (map[string]bool, bool) { return writtenKeys(r) }),
		current: &status.Result{Status: status.CurrentStatus, Message: r.Name() + ": current"}}
}

// decided is the verdict of an object's resourceVersion.
type decided struct {
	resourceVersion string
	// by is the rule that decided it.
	by *compiled
	Verdict
}

// secretKind is never decided by a rule: an expression over a Secret's
// data could carry it into a message (an error that quotes what it could
// not convert), and kstatus has a Secret ready when it exists.
var secretKind = schema.GroupKind{Kind: "Secret"}

// Verdict is what a rule decided of one object.
type Verdict struct {
	Result *status.Result
	// Rule is the rule that decided.
	Rule *Rule
}

// Rules returns the rules of the set, the user's first, in order.
func (s *Set) Rules() []*Rule {
	if s == nil {
		return nil
	}
	var out []*Rule
	for _, c := range s.byGK {
		out = append(out, c.rule)
	}
	return out
}

// For returns the rule that decides objects of gk, if any: one for the
// kind, else one for its whole group.
func (s *Set) For(gk schema.GroupKind) *Rule {
	if c := s.lookup(gk); c != nil {
		return c.rule
	}
	return nil
}

func (s *Set) lookup(gk schema.GroupKind) *compiled {
	if s == nil || gk == secretKind {
		return nil // see secretKind
	}
	if c, ok := s.byGK[gk]; ok {
		return c
	}
	return s.byGK[schema.GroupKind{Group: gk.Group}]
}

// Evaluate decides u by its rule; ok is false when no rule names its
// kind (kstatus decides it then).
func (s *Set) Evaluate(ctx context.Context, u *unstructured.Unstructured) (v Verdict, ok bool) {
	// outOfTime: the evaluation ran out of its time, which says more of
	// the machine's load than of the object.
	var outOfTime bool
	c := s.lookup(u.GroupVersionKind().GroupKind())
	if c == nil {
		return Verdict{}, false
	}
	if uid, rv := string(u.GetUID()), u.GetResourceVersion(); uid != "" && rv != "" {
		s.mu.Lock()
		kept, seen := s.decided[uid]
		s.mu.Unlock()
		// The same rule's: one object may be read as two kinds (an
		// Event of the core group and of events.k8s.io).
		if seen && kept.resourceVersion == rv && kept.by == c {
			return kept.Verdict, true
		}
		defer func() {
			if ctx.Err() != nil || outOfTime {
				// Said of the run, or of the machine's load, not of
				// the object: decided again next time.
				return
			}
			size := 0
			if v.Result != nil {
				size = len(v.Result.Message)
			}
			s.mu.Lock()
			if s.decided == nil || len(s.decided) >= maxDecided && !seen || s.decidedBytes+size > maxDecidedBytes {
				s.decided, s.decidedBytes = map[string]decided{}, 0
			}
			if old, ok := s.decided[uid]; ok && old.Result != nil {
				s.decidedBytes -= len(old.Result.Message)
			}
			s.decided[uid] = decided{resourceVersion: rv, by: c, Verdict: v}
			s.decidedBytes += size
			s.mu.Unlock()
		}()
	}
	v.Rule = c.rule
	eval, err := c.eval()
	if err != nil {
		v.Result = &status.Result{Status: status.FailedStatus, Message: fmt.Sprintf("%s: %v", c.rule.Name(), err)}
		return v, true
	}
	// An expression comes from a file a pull request may write: its
	// evaluation is bounded in work (MaxCost).
	res, err := eval.Evaluate(ctx, u)
	outOfTime = errors.Is(err, errTooLong)
	switch {
	case err != nil:
		which, expr, raw := c.which(err)
		if field, missing := missingField(err, raw); missing {
			// The key CEL names may have been computed from the
			// object's values (m[data.x]): it is printed only when it
			// is a field or key written in the rule, and the rule
			// computes no key that could be named instead.
			if written, computed := c.keys(); computed {
				field = "a key computed from the object"
			} else if !written[field] {
				field = "a field"
			}
			v.Result = &status.Result{Status: status.InProgressStatus,
				Message: fmt.Sprintf("%s: %s (%s) reads %s, which the object does not have yet", c.rule.Name(), which, expr, field)}
			return v, true
		}
		v.Result = &status.Result{Status: status.FailedStatus,
			Message: fmt.Sprintf("%s: %s (%s) cannot be evaluated on this object: %s", c.rule.Name(), which, expr, evalError(err))}
	case res.Status == status.FailedStatus:
		msg := c.rule.Name() + ": failed"
		if own := ObjectMessage(u, true); own != "" {
			msg += ": " + own
		}
		v.Result = &status.Result{Status: status.FailedStatus, Message: msg}
	case res.Status == status.CurrentStatus:
		v.Result = c.current
	default:
		msg := c.rule.Name() + ": in progress"
		if observedOld(u) {
			msg += ": its controller has not observed generation " + fmt.Sprint(u.GetGeneration()) + " yet"
		} else if own := ObjectMessage(u, false); own != "" {
			msg += ": " + own
		}
		v.Result = &status.Result{Status: status.InProgressStatus, Message: msg}
	}
	return v, true
}

// which names the expression an evaluation error is about, from the
// expression Flux's error quotes.
func (c *compiled) which(err error) (name, expr, raw string) {
	msg := err.Error()
	for _, e := range []struct{ name, expr string }{
		{"inProgress", c.rule.InProgress}, {"failed", c.rule.Failed}, {"current", c.rule.Current},
	} {
		if e.expr != "" && strings.Contains(msg, "'"+e.expr+"'") {
			return e.name, oneLine(e.expr), e.expr
		}
	}
	return "an expression", "", ""
}

// writtenKeys are the fields r's expressions select and the keys they
// index with as literals, and whether any indexes with a key it
// computes.
func writtenKeys(r *Rule) (map[string]bool, bool) {
	keys, computed := map[string]bool{}, false
	env, err := celEnv()
	if err != nil {
		return keys, true
	}
	for _, expr := range []string{r.Current, r.InProgress, r.Failed} {
		if expr == "" {
			continue
		}
		parsed, iss := env.Parse(expr)
		if iss != nil && iss.Err() != nil {
			return keys, true
		}
		celast.PreOrderVisit(parsed.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
			switch e.Kind() {
			case celast.SelectKind:
				keys[e.AsSelect().FieldName()] = true
			case celast.CallKind:
				call := e.AsCall()
				if f := call.FunctionName(); (f == operators.Index || f == operators.OptIndex) && len(call.Args()) == 2 {
					if k := call.Args()[1]; k.Kind() == celast.LiteralKind {
						keys[fmt.Sprint(k.AsLiteral().Value())] = true
					} else {
						computed = true
					}
				}
			}
		}))
	}
	return keys, computed
}

// missingField says whether err is expr's reading a field the object
// does not have (CEL's "no such key"), and which. Only CEL's own error of
// the evaluation counts, whole: the text of another may hold "no such
// key: " and what follows from the object's values (a string a rule
// made, quoted in an error of CEL's).
func missingField(err error, expr string) (string, bool) {
	if expr == "" {
		return "", false
	}
	rest, ok := strings.CutPrefix(err.Error(), "failed to evaluate the CEL expression '"+expr+"': ")
	if !ok {
		return "", false
	}
	for _, p := range []string{"no such key: ", "no such attribute(s): "} {
		if field, ok := strings.CutPrefix(rest, p); ok {
			if field = strings.TrimSpace(field); field == "" {
				field = "a field"
			}
			return field, true
		}
	}
	return "", false
}

// evalError says what kind of error CEL's is, in words of gantry's:
// CEL's messages may quote the values they could not use (a pattern that
// does not compile, a string that is not a number, a key computed from a
// value), and those are the object's, which may be secret. Only the
// kinds below are named; any other is "an evaluation error".
func evalError(err error) string {
	msg := err.Error()
	for _, k := range []struct{ cel, says string }{
		{"cost limit exceeded", "it would cost more than the bound of one expression on one object"},
		{workExceeded, "it would cost more than the bound of one expression on one object"},
		{"took longer than", "it took longer than the bound of one expression on one object (" + MaxEvalTime.String() + ")"},
		{"operation interrupted", "it was stopped: the run ended"},
		{"operation cancelled", "it was stopped: the run ended"},
		{"no such overload", "no such overload (an operator or function given values of types it does not take)"},
		{"type conversion error", "a type conversion error"},
		{"division by zero", "division by zero"},
		{"modulus by zero", "modulus by zero"},
		{"overflow", "an integer overflow"},
		{"index out of range", "an index out of range"},
		{"error parsing regexp", "a regular expression that does not compile"},
		{"invalid UTF-8", "bytes that are not UTF-8"},
		{"evaluate CEL expression as boolean", "it is not true or false"},
	} {
		if strings.Contains(msg, k.cel) {
			return k.says
		}
	}
	return "an evaluation error"
}

// observedOld says whether u's controller has not observed its newest
// generation: Flux's evaluator says in progress then, before any rule.
func observedOld(u *unstructured.Unstructured) bool {
	observed, ok, err := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return err == nil && ok && observed != u.GetGeneration()
}

// ObjectMessage is what the object itself says of its state. Of a
// failed object: the first condition that reports a failure (status False
// for a reason of failure, or a condition of failure True); then, of any:
// status.phase with status.phaseReason, its Ready (Synced, Available)
// condition when not True, the first condition that reports a problem,
// status.message.
func ObjectMessage(u *unstructured.Unstructured, failed bool) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var ready, problem, failure string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		st, _ := m["status"].(string)
		msg, _ := m["message"].(string)
		reason, _ := m["reason"].(string)
		text := msg
		switch {
		case text == "":
			text = reason
		case reason != "" && reason != typ:
			text = reason + ": " + msg
		}
		if text == "" {
			continue
		}
		bad := st == "False" && !negativePolarity(typ) || st == "True" && negativePolarity(typ)
		if failure == "" && (st == "False" && failureReason.MatchString(reason) || st == "True" && negativePolarity(typ)) {
			failure = text
		}
		if ready == "" && (typ == "Ready" || typ == "Synced" || typ == "Available") && st != "True" {
			ready = text
		}
		if problem == "" && bad {
			problem = text
		}
	}
	if failed && failure != "" {
		return oneLine(failure)
	}
	// A phase with the reason the controller gives for it (CloudNativePG
	// says why only there: its Ready is "Cluster Is Not Ready").
	if why, _, _ := unstructured.NestedString(u.Object, "status", "phaseReason"); why != "" {
		if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "" {
			why = phase + ": " + why
		}
		return oneLine(why)
	}
	if s := cmp.Or(ready, problem); s != "" {
		return oneLine(s)
	}
	for _, f := range []string{"message", "reason"} {
		if s, ok, _ := unstructured.NestedString(u.Object, "status", f); ok && s != "" {
			return oneLine(s)
		}
	}
	return ""
}

var failureReason = regexp.MustCompile(`(?i)fail|error|denied|invalid`)

// negativePolarity: conditions that report a problem when True.
func negativePolarity(typ string) bool {
	switch typ {
	case "Stalled", "Degraded", "Failed", "Failure", "Error", "NotReady", "Denied", "InvalidRequest":
		return true
	}
	return strings.HasSuffix(typ, "Failed") || strings.HasSuffix(typ, "Error") || strings.HasPrefix(typ, "Invalid")
}

// oneLine puts a message on one line, uncut: a message cut here, before
// anything masks it, would show the head of a secret the cut fell in.
// What is shown is masked, then cut, by the wait and the reporters; what
// is kept is text of the object, which the poller holds anyway.
func oneLine(s string) string { return result.OneLine(s) }

// evaluatorsMade counts the evaluators made, for the test that each rule's
// is made once.
var evaluatorsMade atomic.Int64

// sync1 makes f's result once, on first use: CEL environments cost
// milliseconds, which a run without rules must not pay at start-up.
func sync1[T any](f func() (T, error)) func() (T, error) {
	var once sync.Once
	var v T
	var err error
	return func() (T, error) {
		once.Do(func() { v, err = f() })
		return v, err
	}
}
