package health

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// MaxCost bounds the work of one expression on one object, in CEL's cost
// units plus the size of every string, list and map a call makes: a
// comprehension over a large list, or a string a chain of replace() grows
// tenfold per call, stops there (about a millisecond of work), and the
// rule fails the object, naming the bound.
const MaxCost = 1_000_000

// evaluator decides an object as Flux's StatusEvaluator (fluxcd/pkg/
// runtime/cel) decides it, in the same order, over the same CEL
// environment (health_test.go compares the two on every status shape),
// with the work of each expression bounded: Flux's programs check only
// their context, every hundred iterations of a comprehension, which a
// chain of string calls never reaches.
type evaluator struct {
	exprs []program // inProgress, failed, current, in Flux's order
}

type program struct {
	expr   string
	status status.Status
	prg    cel.Program
}

func newEvaluator(r *Rule) (*evaluator, error) {
	evaluatorsMade.Add(1)
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	e := &evaluator{}
	for _, x := range []struct {
		expr   string
		status status.Status
	}{{r.InProgress, status.InProgressStatus}, {r.Failed, status.FailedStatus}, {r.Current, status.CurrentStatus}} {
		if x.expr == "" {
			continue
		}
		parsed, iss := env.Parse(x.expr)
		if iss != nil && iss.Err() != nil {
			return nil, fmt.Errorf("failed to parse the CEL expression '%s': %s", x.expr, iss.String())
		}
		opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100)}
		if r.Origin != BuiltIn {
			// gantry's own rules are linear in the object; the user's
			// are bounded.
			opts = append(opts, cel.CostTracking(sizeCost{}), cel.CostLimit(MaxCost))
		}
		prg, err := env.Program(parsed, opts...)
		if err != nil {
			return nil, fmt.Errorf("failed to create CEL program: %w", err)
		}
		e.exprs = append(e.exprs, program{expr: x.expr, status: x.status, prg: prg})
	}
	return e, nil
}

// Evaluate is Flux's order: an object whose controller has not observed
// its generation is in progress; then the first of inProgress, failed and
// current that is true decides; none: in progress.
func (e *evaluator) Evaluate(ctx context.Context, u *unstructured.Unstructured) (*status.Result, error) {
	obj := u.UnstructuredContent()
	if observed, ok, err := unstructured.NestedInt64(obj, "status", "observedGeneration"); err == nil && ok {
		if generation, ok, err := unstructured.NestedInt64(obj, "metadata", "generation"); err == nil && ok && observed != generation {
			return &status.Result{Status: status.InProgressStatus}, nil
		}
	}
	for _, p := range e.exprs {
		val, _, err := p.prg.ContextEval(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("failed to evaluate the CEL expression '%s': %w", p.expr, err)
		}
		b, ok := val.(types.Bool)
		if !ok {
			return nil, fmt.Errorf("failed to evaluate CEL expression as boolean: '%s'", p.expr)
		}
		if b {
			return &status.Result{Status: p.status}, nil
		}
	}
	return &status.Result{Status: status.InProgressStatus}, nil
}

// sizeCost charges a call the size of what it returns (a string's bytes,
// a list's or map's elements), besides CEL's own cost: what a call makes
// is what it costs to make.
type sizeCost struct{}

func (sizeCost) CallCost(_, _ string, _ []ref.Val, result ref.Val) *uint64 {
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
