package health

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// MaxCost bounds the work of one expression on one object, in CEL's cost
// units plus the size of every string and map a call makes: a
// comprehension over a large list, or a string a chain of replace() grows
// tenfold per call, stops there, and the rule fails the object, naming
// the bound. MaxEvalTime bounds the rest.
const MaxCost = 1_000_000

// evaluator decides an object as Flux's StatusEvaluator (fluxcd/pkg/
// runtime/cel) decides it, in the same order, over the same CEL
// environment (health_test.go compares the two on every status shape),
// with the work of each expression bounded: Flux's programs check only
// their context, every hundred iterations of a comprehension, which a
// chain of string calls never reaches.
type evaluator struct {
	exprs []*program // inProgress, failed, current, in Flux's order
	// combined is exprs as one program, whose value is the number of
	// the first that is true (from 1), or 0: nil when the rule has one
	// expression.
	combined *program
	// user: a user's rule, whose evaluation on one object has a
	// deadline (MaxEvalTime).
	user bool
	mu   sync.Mutex
	idle []*deadline // deadlines kept for the next object (arm)
}

type program struct {
	expr   string
	status status.Status
	prg    cel.Program
	// bounded is the same program with its work counted and bounded
	// (a user's rule; nil for gantry's own). It runs on the objects for
	// which CEL's static estimate cannot show the expression's work
	// small: see fast.
	bounded cel.Program
	// checked is the expression type-checked over the object's fields
	// as dyn, for CEL's static cost estimate; nil when it does not check
	// (it names a field not declared there): then bounded always runs.
	checked *cel.Ast
	// sized are the paths into the object whose sizes the estimate
	// depends on (status.conditions, status.conditions.@items.type...).
	sized [][]string
	// fast[b] is what the estimate said for objects whose strings,
	// lists and maps at those paths are all shorter than 2^b: 0 not
	// asked yet, 1 small enough to run unbounded, 2 not.
	fast [65]atomic.Uint32
}

func newEvaluator(r *Rule) (*evaluator, error) {
	evaluatorsMade.Add(1)
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	e := &evaluator{user: r.Origin != BuiltIn}
	for _, x := range []struct {
		expr   string
		status status.Status
	}{{r.InProgress, status.InProgressStatus}, {r.Failed, status.FailedStatus}, {r.Current, status.CurrentStatus}} {
		if x.expr == "" {
			continue
		}
		p, err := newProgram(env, x.expr, e.user)
		if err != nil {
			return nil, err
		}
		p.status = x.status
		e.exprs = append(e.exprs, p)
	}
	if len(e.exprs) > 1 {
		// One program for the rule's expressions in their order: what
		// is decided without an error is what evaluating them one after
		// the other decides, at the cost of one evaluation. Each line
		// of its own: a comment ends at its line.
		text := "0"
		for i := len(e.exprs) - 1; i >= 0; i-- {
			text = fmt.Sprintf("(\n%s\n) ? %d : (%s)", e.exprs[i].expr, i+1, text)
		}
		if p, err := newProgram(env, text, e.user); err == nil {
			e.combined = p
		}
	}
	return e, nil
}

// newProgram makes expr's program: a user's bounded in work, and checked
// for CEL's estimate (program.checked).
func newProgram(env *cel.Env, expr string, user bool) (*program, error) {
	parsed, iss := env.Parse(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("failed to parse the CEL expression '%s': %s", expr, iss.String())
	}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100)}
	if user {
		// A user's expression stops at its deadline, looked at on
		// every step of a comprehension, and a call that can do much
		// work in one step counts it first (guardWork).
		opts = []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(1), cel.CustomDecoratorV2(guardWork)}
	}
	prg, err := env.Program(parsed, opts...)
	if err != nil {
		return nil, fmt.Errorf("failed to create CEL program: %w", err)
	}
	p := &program{expr: expr, prg: prg}
	if user {
		// gantry's own rules are linear in the object; the user's are
		// bounded.
		if p.bounded, err = env.Program(parsed, append(opts, cel.CostTracking(sizeCost{}), cel.CostLimit(MaxCost))...); err != nil {
			return nil, fmt.Errorf("failed to create CEL program: %w", err)
		}
		p.checked, p.sized = checkedForEstimate(expr)
	}
	return p, nil
}

// objectFields are the fields of an object an expression names as
// variables, declared dyn for the static estimate.
var objectFields = []string{"apiVersion", "kind", "metadata", "spec", "status", "data"}

var estimateEnv = sync1(func() (*cel.Env, error) {
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	var vars []cel.EnvOption
	for _, f := range objectFields {
		vars = append(vars, cel.Variable(f, cel.DynType))
	}
	return env.Extend(vars...)
})

// checkedForEstimate is expr checked for CEL's estimate, and the paths
// into the object whose sizes the estimate reads; nil when the estimate
// could not bound it.
func checkedForEstimate(expr string) (*cel.Ast, [][]string) {
	env, err := estimateEnv()
	if err != nil {
		return nil, nil
	}
	// CEL's checker takes time that grows fast with the nesting of
	// literals (2.6 ms at 24 levels, 5 s at 240): a deeper expression is
	// not estimated, and runs counted.
	if parsed, iss := env.Parse(expr); iss != nil && iss.Err() != nil || depth(parsed.NativeRep().Expr()) > maxEstimateDepth {
		return nil, nil
	}
	checked, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, nil
	}
	// CEL estimates a call it could not resolve to an overload (a
	// function of a dyn value) at no cost, and a function of its
	// extensions at the cost of one: an expression with either is left
	// to the counted run.
	std, err := standardFunctions()
	if err != nil {
		return nil, nil
	}
	native := checked.NativeRep()
	estimable := true
	ast.PreOrderVisit(native.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.CallKind:
			if !std[e.AsCall().FunctionName()] || len(native.GetOverloadIDs(e.ID())) == 0 {
				estimable = false
			}
		case ast.ComprehensionKind:
			// A variable named as a field of the object would hide it
			// from objectPath.
			c := e.AsComprehension()
			for _, v := range []string{c.IterVar(), c.IterVar2(), c.AccuVar()} {
				if slices.Contains(objectFields, v) {
					estimable = false
				}
			}
		}
	}))
	if !estimable {
		return nil, nil
	}
	var sized [][]string
	if _, err := env.EstimateCost(checked, sizeBound{b: 1, sized: &sized}); err != nil {
		return nil, nil
	}
	return checked, sized
}

// maxEstimateDepth is the deepest expression CEL's checker estimates.
const maxEstimateDepth = 24

// depth is the depth of e's tree.
func depth(e ast.Expr) int {
	var kids []ast.Expr
	switch e.Kind() {
	case ast.CallKind:
		c := e.AsCall()
		kids = c.Args()
		if c.IsMemberFunction() {
			kids = append([]ast.Expr{c.Target()}, kids...)
		}
	case ast.ListKind:
		kids = e.AsList().Elements()
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			if en.Kind() == ast.MapEntryKind {
				kids = append(kids, en.AsMapEntry().Key(), en.AsMapEntry().Value())
			}
		}
	case ast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			if f.Kind() == ast.StructFieldKind {
				kids = append(kids, f.AsStructField().Value())
			}
		}
	case ast.SelectKind:
		kids = []ast.Expr{e.AsSelect().Operand()}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		kids = []ast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()}
	}
	d := 0
	for _, k := range kids {
		d = max(d, depth(k))
	}
	return d + 1
}

// fastBound: an expression runs without counting its work on an object
// when CEL's static estimate of its cost, for an object whose every
// string, list and map the expression reads is at most the longest of
// them in that object, is within a twentieth of MaxCost. What a call makes is bounded by the cost CEL
// charges for making it, so the counted run (MaxCost with the size of
// every result added) could not have stopped it either.
const fastBound = MaxCost / 20

// run evaluates p on obj: unbounded when the estimate shows its work
// small for an object of obj's sizes, bounded otherwise.
func (p *program) run(ctx context.Context, obj map[string]any) (ref.Val, error) {
	if p.bounded == nil {
		val, _, err := p.prg.ContextEval(ctx, obj)
		return val, err
	}
	return p.runBounded(ctx, obj)
}

// vars are obj's fields as the variables of a run of a user's
// expression, with the budget of its guarded calls (guardWork).
func vars(obj map[string]any) interpreter.Activation { return &workActivation{obj: obj} }

// MaxEvalTime bounds the time of a user's rule on one object. CEL's cost
// does not price all work alike (a step of a comprehension's
// accumulation in cel-go's tracker grows with the list; a regular
// expression, an equality of maps, size() of a string cost one).
const MaxEvalTime = 500 * time.Millisecond

var errTooLong = fmt.Errorf("took longer than %s", MaxEvalTime)

func (p *program) runBounded(ctx context.Context, obj map[string]any) (ref.Val, error) {
	if p.uncounted(obj) {
		val, _, err := p.prg.ContextEval(ctx, vars(obj))
		return val, err
	}
	val, _, err := p.bounded.ContextEval(ctx, vars(obj))
	return val, err
}

// uncounted says whether p runs on obj without counting its work: gantry's
// own rules always; a user's where CEL's estimate shows it small for an
// object of obj's sizes.
func (p *program) uncounted(obj map[string]any) bool {
	if p.bounded == nil {
		return true
	}
	// A top-level key with a dot (status.conditions beside status) is
	// what an unchecked expression reads for status.conditions, before
	// status's own field: the sizes the estimate measured are not what
	// it reads.
	for k := range obj {
		if strings.Contains(k, ".") {
			return false
		}
	}
	if p.checked == nil {
		return false
	}
	var n uint64
	w := sizeWalk{left: maxSizeWalk}
	for _, path := range p.sized {
		n = max(n, w.at(obj, path))
	}
	if w.left == 0 {
		// Measuring would cost more than counting: counted.
		return false
	}
	b := bits.Len64(n)
	state := uint32(2)
	if b < 48 {
		state = p.fast[b].Load()
	}
	if state == 0 {
		state = 2
		if env, err := estimateEnv(); err == nil {
			if est, err := env.EstimateCost(p.checked, sizeBound{b: uint64(1) << b}); err == nil && est.Max <= fastBound {
				state = 1
			}
		}
		p.fast[b].Store(state)
	}
	return state == 1
}

// maxSizeWalk bounds the values the sizes of one run's paths are read
// from: an expression whose paths reach more (a list of 700,000 elements
// read by many paths) runs counted, rather than measured for seconds
// before it runs, outside its deadline.
const maxSizeWalk = 100_000

// sizeWalk reads sizes, no more than left values.
type sizeWalk struct{ left int }

// at is the size of the longest string (in bytes, at least its
// characters), list or map at path in v (@items, @values and @any: each
// element of a list or value of a map; @keys: each key of a map, or
// element of a list); when w has no values left, what it read.
func (w *sizeWalk) at(v any, path []string) uint64 {
	if w.left <= 0 {
		return 0
	}
	w.left--
	if len(path) == 0 {
		switch v := v.(type) {
		case string:
			return uint64(len(v))
		case map[string]any:
			return uint64(len(v))
		case []any:
			return uint64(len(v))
		}
		return 0
	}
	var n uint64
	switch path[0] {
	case "@items", "@values", "@any":
		switch v := v.(type) {
		case []any:
			for _, x := range v {
				n = max(n, w.at(x, path[1:]))
			}
		case map[string]any:
			for _, x := range v {
				n = max(n, w.at(x, path[1:]))
			}
		}
	case "@keys":
		// A comprehension over a dyn value: CEL names its variable
		// @keys, and it is a key of a map or an element of a list.
		switch v := v.(type) {
		case map[string]any:
			for k := range v {
				n = max(n, w.at(k, path[1:]))
			}
		case []any:
			for _, x := range v {
				n = max(n, w.at(x, path[1:]))
			}
		}
	default:
		if m, ok := v.(map[string]any); ok {
			n = w.at(m[path[0]], path[1:])
		}
	}
	return n
}

// sizeBound estimates every string, list and map reached from the
// object's fields at most b; nothing about the rest (what a call makes,
// CEL sizes from the call). sized, when set, records the paths asked.
type sizeBound struct {
	b     uint64
	sized *[][]string
}

func (s sizeBound) sizeOf(path []string) *checker.SizeEstimate {
	if s.sized != nil && !slices.ContainsFunc(*s.sized, func(p []string) bool { return slices.Equal(p, path) }) {
		*s.sized = append(*s.sized, slices.Clone(path))
	}
	return &checker.SizeEstimate{Min: 0, Max: s.b}
}

// standardFunctions are the functions of CEL's standard library and its
// optional types, whose costs CEL's estimate knows.
var standardFunctions = sync1(func() (map[string]bool, error) {
	env, err := cel.NewEnv(cel.OptionalTypes())
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for name := range env.Functions() {
		out[name] = true
	}
	return out, nil
})

func (s sizeBound) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if p := n.Path(); len(p) > 0 && slices.Contains(objectFields, p[0]) {
		return s.sizeOf(p)
	}
	return nil
}

// EstimateCallCost sizes what orValue gives when its optional is a field
// of the object (status.?conditions.orValue([])): CEL does not size an
// optional's value.
func (s sizeBound) EstimateCallCost(function, _ string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if (function == operators.Equals || function == operators.NotEquals || function == operators.In) && len(args) == 2 {
		// What the operands hold inside may be as large as the largest
		// value the expression reads (the counted run charges them
		// whole: sizeCost).
		size := func(a checker.AstNode) uint64 {
			if c := a.ComputedSize(); c != nil {
				return c.Max
			}
			if p, ok := objectPath(a.Expr()); ok {
				return s.sizeOf(p).Max
			}
			return s.b
		}
		n := min(size(args[0]), size(args[1]))
		if function == operators.In {
			n = size(args[1])
		}
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: satMul(max(n, 1), s.b) + 1}}
	}
	if function != "orValue" || target == nil || len(args) != 1 {
		return nil
	}
	path, ok := objectPath((*target).Expr())
	if !ok {
		return nil
	}
	var size uint64
	switch def := args[0]; {
	case def.ComputedSize() != nil:
		size = def.ComputedSize().Max
	default:
		p, ok := objectPath(def.Expr())
		if !ok {
			return nil
		}
		size = s.sizeOf(p).Max
	}
	size = max(size, s.sizeOf(path).Max)
	return &checker.CallEstimate{CostEstimate: checker.FixedCostEstimate(1), ResultSize: &checker.SizeEstimate{Min: 0, Max: size}}
}

// satMul is a*b, or the largest uint64 where that overflows.
func satMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

// objectPath is the path of e into the object, when e is a value of
// the object's, reached through fields, optional fields and indexes
// (@any) from one of its top-level fields.
func objectPath(e ast.Expr) ([]string, bool) {
	var rev []string
	for {
		switch e.Kind() {
		case ast.IdentKind:
			if !slices.Contains(objectFields, e.AsIdent()) {
				return nil, false
			}
			rev = append(rev, e.AsIdent())
			slices.Reverse(rev)
			return rev, true
		case ast.SelectKind:
			if e.AsSelect().IsTestOnly() {
				return nil, false
			}
			rev = append(rev, e.AsSelect().FieldName())
			e = e.AsSelect().Operand()
		case ast.CallKind:
			c := e.AsCall()
			switch c.FunctionName() {
			case "_?._":
				field := c.Args()[1]
				if field.Kind() != ast.LiteralKind {
					return nil, false
				}
				name, ok := field.AsLiteral().Value().(string)
				if !ok {
					return nil, false
				}
				rev = append(rev, name)
			case "_[_]", "_[?_]":
				rev = append(rev, "@any")
			default:
				return nil, false
			}
			e = c.Args()[0]
		default:
			return nil, false
		}
	}
}

// Evaluate is Flux's order: an object whose controller has not observed
// its generation is in progress; then the first of inProgress, failed and
// current that is true decides; none: in progress.
func (e *evaluator) Evaluate(ctx context.Context, u *unstructured.Unstructured) (res *status.Result, err error) {
	var expr string
	obj := u.UnstructuredContent()
	if observed, ok, err := unstructured.NestedInt64(obj, "status", "observedGeneration"); err == nil && ok {
		if generation, ok, err := unstructured.NestedInt64(obj, "metadata", "generation"); err == nil && ok && observed != generation {
			return resultOf(status.InProgressStatus), nil
		}
	}
	if e.user {
		d := e.arm(ctx)
		ctx = d.ctx
		defer func() {
			// Out of time even where the expression's logic took no
			// error (an && with a false side absorbs one): a verdict
			// reached so is not the expression's.
			if context.Cause(d.ctx) == errTooLong && d.parent.Err() == nil {
				res, err = nil, fmt.Errorf("failed to evaluate the CEL expression '%s': %w", expr, errTooLong)
			}
			e.disarm(d)
		}()
	}
	// The combined program runs only where its work is not counted:
	// counted, its one bound would be the sum of the expressions', where
	// Flux's order gives each its own.
	if e.combined != nil && e.combined.uncounted(obj) {
		// An error, or a value not a number (an expression not a
		// bool), is said as evaluating the expressions one after the
		// other says it.
		var in any = obj
		if e.user {
			in = vars(obj)
		}
		if val, _, err := e.combined.prg.ContextEval(ctx, in); err == nil {
			if i, ok := val.(types.Int); ok && i >= 0 && int(i) <= len(e.exprs) {
				if i == 0 {
					return resultOf(status.InProgressStatus), nil
				}
				return resultOf(e.exprs[i-1].status), nil
			}
		}
	}
	for _, p := range e.exprs {
		expr = p.expr
		val, err := p.run(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("failed to evaluate the CEL expression '%s': %w", p.expr, err)
		}
		b, ok := val.(types.Bool)
		if !ok {
			return nil, fmt.Errorf("failed to evaluate CEL expression as boolean: '%s'", p.expr)
		}
		if b {
			return resultOf(p.status), nil
		}
	}
	return resultOf(status.InProgressStatus), nil
}

// results are the evaluator's results, one of each status, never
// changed by those who read them.
var results = map[status.Status]*status.Result{
	status.InProgressStatus: {Status: status.InProgressStatus},
	status.FailedStatus:     {Status: status.FailedStatus},
	status.CurrentStatus:    {Status: status.CurrentStatus},
}

func resultOf(s status.Status) *status.Result { return results[s] }

// deepSize counts v's values, those inside its lists and maps too, up to
// limit. The object's own values (Go maps, slices and scalars behind
// CEL's) are walked as they are, without making a CEL value of each.
func deepSize(v ref.Val, limit uint64) uint64 {
	var n uint64
	var walk func(v ref.Val)
	var native func(v any)
	native = func(v any) {
		if n >= limit {
			return
		}
		switch v := v.(type) {
		case string:
			n += uint64(len(v)) + 1
		case []byte:
			n += uint64(len(v)) + 1
		case map[string]any:
			n++
			for k, e := range v {
				if n >= limit {
					return
				}
				n += uint64(len(k)) + 1
				native(e)
			}
		case []any:
			n++
			for _, e := range v {
				if n >= limit {
					return
				}
				native(e)
			}
		case []ref.Val:
			n++
			for _, e := range v {
				if n >= limit {
					return
				}
				walk(e)
			}
		case ref.Val:
			walk(v)
		default:
			n++
		}
	}
	walk = func(v ref.Val) {
		if n >= limit {
			return
		}
		// Each element counts at least one: a list or map of more than
		// what is left is over, however it is made (a view of lists
		// joined by + walks slowly).
		if sz, ok := v.(traits.Sizer); ok {
			if size, ok := sz.Size().(types.Int); ok && size > 0 && uint64(size) >= limit-n {
				n = limit
				return
			}
		}
		switch v := v.(type) {
		case types.String:
			n += uint64(len(v)) + 1
		case types.Bytes:
			n += uint64(len(v)) + 1
		case *types.Optional:
			// Compared by what it holds.
			n++
			if v.HasValue() {
				walk(v.GetValue())
			}
		case traits.Mapper:
			if nativeBacked[reflect.TypeOf(v)] {
				if m, ok := v.Value().(map[string]any); ok {
					native(m)
					return
				}
			}
			n++
			for it := v.Iterator(); n < limit && it.HasNext() == types.True; {
				k := it.Next()
				walk(k)
				walk(v.Get(k))
			}
		case traits.Lister:
			if nativeBacked[reflect.TypeOf(v)] {
				switch l := v.Value().(type) {
				case []any, []ref.Val:
					native(l)
					return
				}
			}
			n++
			for it := v.Iterator(); n < limit && it.HasNext() == types.True; {
				walk(it.Next())
			}
		default:
			n++
		}
	}
	walk(v)
	return min(n, limit)
}

// deadline is a context that ends MaxEvalTime after it is armed, unless
// it is disarmed first; one that did not end serves the next object, so
// that an object costs a timer's reset, not a context of its own.
type deadline struct {
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

// maxIdleDeadlines bounds the deadlines an evaluator keeps for reuse.
const maxIdleDeadlines = 8

// arm is a deadline under parent, armed.
func (e *evaluator) arm(parent context.Context) *deadline {
	e.mu.Lock()
	for len(e.idle) > 0 {
		d := e.idle[len(e.idle)-1]
		e.idle = e.idle[:len(e.idle)-1]
		if sameContext(d.parent, parent) && d.ctx.Err() == nil {
			e.mu.Unlock()
			d.timer.Reset(MaxEvalTime)
			return d
		}
		d.cancel(context.Canceled) // of another parent: it ends
	}
	e.mu.Unlock()
	d := &deadline{parent: parent}
	d.ctx, d.cancel = context.WithCancelCause(parent)
	d.timer = time.AfterFunc(MaxEvalTime, func() { d.cancel(errTooLong) })
	return d
}

// sameContext says a and b are one context; a context whose type cannot
// be compared (a struct holding a slice) is never the same.
func sameContext(a, b context.Context) bool {
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t != nil && t.Comparable() && a == b
}

// disarm stops d, and keeps it for the next object when it did not end.
func (e *evaluator) disarm(d *deadline) {
	if !d.timer.Stop() || d.ctx.Err() != nil {
		d.cancel(context.Canceled)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.idle) < maxIdleDeadlines {
		e.idle = append(e.idle, d)
		return
	}
	d.cancel(context.Canceled)
}

// sizeCost charges a call the size of what it returns (a string's bytes,
// a list's or map's elements), besides CEL's own cost: what a call makes
// is what it costs to make.
type sizeCost struct{}

func (sizeCost) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	// An equality, in, and the other calls whose work is not their
	// result's size count it themselves, before they run (guardWork).
	if _, list := result.(traits.Lister); list && (function == operators.Add || overloadID == overloads.AddList) {
		// Concatenated lists share their elements (and map and filter
		// accumulate their results so): charging the result's size
		// would charge a list of n elements n²/2.
		return nil
	}
	var n uint64
	switch v := result.(type) {
	case types.String:
		n = uint64(len(v))
	case types.Bytes:
		n = uint64(len(v))
	case traits.Sizer:
		if s, ok := v.Size().(types.Int); ok && s > 0 {
			n = uint64(s)
		}
	default:
		return nil
	}
	n++
	return &n
}
