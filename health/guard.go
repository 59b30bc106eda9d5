package health

import (
	"math"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// A user's expression is bounded by MaxCost, charged after each call
// (sizeCost), and by MaxEvalTime, looked at on the steps of a
// comprehension. Neither stops one call: CEL compares two lists, finds a
// substring, matches a pattern or makes a replace()'s result in one step;
// CEL's + makes a view of two lists (2^n elements in n steps, which
// gantry's + does not); and the object's maps may be referenced from a
// rule's lists any number of times. So the calls whose work is not bounded by the size of
// what they are given and what they make count their work before they
// do it, against a budget of MaxCost for the run of one expression on
// one object, counted on the counted run and the uncounted one alike.
// A call over what is left of it fails, and the object with it.

// workExceeded is said by a call over the budget; evalError names it as
// it names CEL's cost limit.
const workExceeded = "work limit exceeded"

// workName is the activation's name of its own budget: no expression can
// name it (it is not an identifier).
const workName = "\x00gantry.work"

// workActivation is the object's fields, as the expression's variables,
// and the budget of one run.
type workActivation struct {
	obj  map[string]any
	used uint64
}

func (a *workActivation) ResolveName(name string) (any, bool) {
	if name == workName {
		return a, true
	}
	v, ok := a.obj[name]
	return v, ok
}

func (*workActivation) Parent() interpreter.Activation { return nil }

// guarded says, for each function a call may name, what its work is
// with these arguments (receiver first), counting no further than
// limit, and, where gantry calls it itself, how. A function not here is
// bounded by what it is given or what it makes, which sizeCost charges.
var guarded = map[string]struct {
	work func(args []ref.Val, limit uint64) uint64
	call func(args []ref.Val) ref.Val
}{
	operators.Equals:    {equalityWork, func(a []ref.Val) ref.Val { return types.Equal(a[0], a[1]) }},
	operators.NotEquals: {equalityWork, func(a []ref.Val) ref.Val { return types.Bool(types.Equal(a[0], a[1]) != types.True) }},
	operators.In:        {inWork, inList},
	// Lists joined by + are made whole (a view of views would make a
	// list of 2^n elements in n steps, each element reached through
	// every level), strings and bytes are as long as both.
	operators.Add: {addWork, nil},
	"matches":     {matchesWork, matches},
	// Each position of the string is compared with the substring.
	"indexOf":     {func(a []ref.Val, _ uint64) uint64 { return satMul(strLen(a, 0), strLen(a, 1)) }, nil},
	"lastIndexOf": {func(a []ref.Val, _ uint64) uint64 { return satMul(strLen(a, 0), strLen(a, 1)) }, nil},
	"replace":     {replaceWork, nil},
	// What they make is as long as the values they are given, which
	// may be views of the same values many times.
	"join":   {joinWork, nil},
	"format": {func(a []ref.Val, limit uint64) uint64 { return satAdd(strLen(a, 0), 2*deepSizeOf(a, 1, limit)) }, nil},
	// Each element of one list is looked for in the other.
	"sets.contains":   {setsWork(1), nil},
	"sets.intersects": {setsWork(1), nil},
	"sets.equivalent": {setsWork(2), nil},
}

// guardWork is the decorator of a user's programs: a call of a guarded
// function counts its work first.
func guardWork(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok {
		return i, nil
	}
	g, ok := guarded[call.Function()]
	if !ok {
		// Its work is bounded by what it is given (a string it
		// parses, copies or counts): many of them in one step of a
		// comprehension, or with none, stop at the deadline.
		return &interruptible{call}, nil
	}
	impl := g.call
	if impl == nil {
		var err error
		if impl, err = dispatch(call.Function(), len(call.Args())); err != nil || impl == nil {
			return i, err
		}
	}
	if call.Function() == operators.Add {
		impl = flatAdd(impl)
	}
	gc := &guardedCall{InterpretableCall: call, name: call.Function(), args: call.Args(), work: g.work, impl: impl}
	switch call.Function() {
	case operators.Equals:
		gc.equality = 1
	case operators.NotEquals:
		gc.equality = -1
	}
	if gc.name == "matches" {
		// Not one CEL's optimizer would replace by its own matcher
		// of a constant pattern, unguarded.
		gc.name = "matches (guarded)"
	}
	return gc, nil
}

// dispatch is CEL's own implementation of function for arity arguments,
// choosing the overload by the arguments' types as an unchecked
// expression's call does.
func dispatch(function string, arity int) (func([]ref.Val) ref.Val, error) {
	all, err := dispatchers()
	if err != nil {
		return nil, err
	}
	o := all[function]
	var impl func([]ref.Val) ref.Val
	switch {
	case o == nil:
		return nil, nil
	case arity == 1 && o.Unary != nil:
		impl = func(a []ref.Val) ref.Val { return o.Unary(a[0]) }
	case arity == 2 && o.Binary != nil:
		impl = func(a []ref.Val) ref.Val { return o.Binary(a[0], a[1]) }
	case o.Function != nil:
		impl = func(a []ref.Val) ref.Val { return o.Function(a...) }
	default:
		return nil, nil
	}
	if o.OperandTrait == 0 {
		return impl, nil
	}
	// As CEL's call does: a first operand without the trait (a map
	// given to +) has no such overload.
	return func(a []ref.Val) ref.Val {
		if len(a) == 0 || !a[0].Type().HasTrait(o.OperandTrait) {
			return types.NewErr("no such overload: %s", function)
		}
		return impl(a)
	}, nil
}

// interruptible is a call that looks at the deadline before it runs.
type interruptible struct {
	interpreter.InterpretableCall
}

func (c *interruptible) Eval(a interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(a))
}

func (c *interruptible) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	if frame.CheckInterrupt() {
		return types.WrapErr(interpreter.InterruptError{})
	}
	return c.InterpretableCall.Exec(frame)
}

// dispatchers are, by name, the guarded functions' overloads that choose
// among their own by the arguments' types: read once from the
// environment, not for each call a rule makes.
var dispatchers = sync1(func() (map[string]*functions.Overload, error) {
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	out := map[string]*functions.Overload{}
	fns := env.Functions()
	for name := range guarded {
		decl, ok := fns[name]
		if !ok {
			continue
		}
		bindings, err := decl.Bindings()
		if err != nil {
			return nil, err
		}
		for _, b := range bindings {
			if b.Operator == name {
				out[name] = b
			}
		}
	}
	return out, nil
})

// guardedCall is a call that counts its work before it calls. It stays a
// call (the function, overload and arguments are the original's), so
// that the cost tracker charges it as it charged the original.
type guardedCall struct {
	interpreter.InterpretableCall
	name string
	args []interpreter.InterpretableV2
	work func([]ref.Val, uint64) uint64
	impl func([]ref.Val) ref.Val
	// equality is 1 for ==, -1 for !=: decided without counting when
	// either side is no list, map or optional (most of a rule's).
	equality int
}

func (c *guardedCall) Function() string { return c.name }

func (c *guardedCall) Eval(a interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(a))
}

func (c *guardedCall) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	if frame.CheckInterrupt() {
		return types.WrapErr(interpreter.InterruptError{})
	}
	if c.equality != 0 && len(c.args) == 2 {
		l, r := c.args[0].Exec(frame), c.args[1].Exec(frame)
		switch {
		case types.IsUnknownOrError(l):
			return l
		case types.IsUnknownOrError(r):
			return r
		case flat(l) || flat(r):
			// Compared in one step (a string: as long as it is,
			// already paid for).
			if c.equality > 0 {
				return types.Equal(l, r)
			}
			return types.Bool(types.Equal(l, r) != types.True)
		}
		return c.counted(frame, []ref.Val{l, r})
	}
	args := make([]ref.Val, len(c.args))
	for i, n := range c.args {
		args[i] = n.Exec(frame)
	}
	// Strict, as CEL's calls of these functions are: an error or an
	// unknown among the arguments is the result.
	for _, a := range args {
		if types.IsUnknownOrError(a) {
			return a
		}
	}
	return c.counted(frame, args)
}

// counted calls c with args when their work is within what is left of
// the run's budget.
func (c *guardedCall) counted(frame *interpreter.ExecutionFrame, args []ref.Val) ref.Val {
	var own workActivation // a run with no budget of its own: this call's
	budget := &own
	if w, ok := frame.ResolveName(workName); ok {
		if a, ok := w.(*workActivation); ok {
			budget = a
		}
	}
	left := uint64(MaxCost) - min(budget.used, MaxCost)
	work := c.work(args, left+1)
	if work > left {
		budget.used = MaxCost + 1
		return types.NewErr("%s: %s would do more than the %d units of work left of the bound of one expression on one object", workExceeded, c.InterpretableCall.Function(), left)
	}
	budget.used += work
	return c.impl(args)
}

// addWork is what + copies: both lists, or only the right one added to
// a comprehension's own list (map() and filter() add one element a
// step); both strings or bytes.
func addWork(a []ref.Val, _ uint64) uint64 {
	if len(a) != 2 {
		return 0
	}
	if la, ok := listLen(a[0]); ok {
		lb, _ := listLen(a[1])
		if _, accumulating := a[0].(traits.MutableLister); accumulating {
			return lb
		}
		return satAdd(la, lb)
	}
	switch l := a[0].(type) {
	case types.String:
		return satAdd(uint64(len(l)), strLen(a, 1))
	case types.Bytes:
		if r, ok := a[1].(types.Bytes); ok {
			return uint64(len(l) + len(r))
		}
	}
	return 0
}

// flatAdd is CEL's + (add), but two lists make one list of their
// elements, not a view of the two.
func flatAdd(add func([]ref.Val) ref.Val) func([]ref.Val) ref.Val {
	return func(a []ref.Val) ref.Val {
		l, okl := a[0].(traits.Lister)
		r, okr := a[1].(traits.Lister)
		if _, accumulating := a[0].(traits.MutableLister); !okl || !okr || accumulating {
			return add(a)
		}
		la, _ := listLen(l)
		lb, _ := listLen(r)
		elems := make([]ref.Val, 0, la+lb)
		for _, list := range []traits.Lister{l, r} {
			for it := list.Iterator(); it.HasNext() == types.True; {
				elems = append(elems, it.Next())
			}
		}
		return types.NewRefValList(types.DefaultTypeAdapter, elems)
	}
}

// flat says v holds no other values: compared in one step.
func flat(v ref.Val) bool {
	switch v.(type) {
	case traits.Lister, traits.Mapper, *types.Optional:
		return false
	}
	return true
}

func equalityWork(a []ref.Val, limit uint64) uint64 {
	if len(a) != 2 {
		return 0
	}
	// The smaller operand bounds the comparison; what is walked to
	// know it is charged too.
	d0 := deepSize(a[0], limit)
	return satAdd(d0, deepSize(a[1], min(limit, d0+1)))
}

func inWork(a []ref.Val, limit uint64) uint64 {
	// In a list, each element is compared with the value looked for:
	// at most the list's values are walked. A map's keys are looked up.
	if len(a) != 2 {
		return 0
	}
	if _, list := a[1].(traits.Lister); list {
		return deepSize(a[1], limit)
	}
	return 0
}

func inList(a []ref.Val) ref.Val {
	if len(a) != 2 {
		return types.NewErr("no such overload")
	}
	if c, ok := a[1].(traits.Container); ok {
		return c.Contains(a[0])
	}
	return types.ValOrErr(a[1], "no such overload")
}

// strLen is the length in bytes of args[i] when it is a string, else 0.
func strLen(args []ref.Val, i int) uint64 {
	if i < len(args) {
		if s, ok := args[i].(types.String); ok {
			return uint64(len(s))
		}
	}
	return 0
}

func deepSizeOf(args []ref.Val, i int, limit uint64) uint64 {
	if i < len(args) {
		return deepSize(args[i], limit)
	}
	return 0
}

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// replaceWork is the length of what replace() makes: each replacement
// (at most n, when given) adds the new text.
func replaceWork(a []ref.Val, _ uint64) uint64 {
	if len(a) < 3 {
		return 0
	}
	s, ok0 := a[0].(types.String)
	old, ok1 := a[1].(types.String)
	repl, ok2 := a[2].(types.String)
	if !ok0 || !ok1 || !ok2 {
		return 0
	}
	count := uint64(strings.Count(string(s), string(old)))
	if len(a) > 3 {
		if n, ok := a[3].(types.Int); ok && n >= 0 {
			count = min(count, uint64(n))
		}
	}
	return satAdd(uint64(len(s)), satMul(count, uint64(len(repl))))
}

func joinWork(a []ref.Val, limit uint64) uint64 {
	if len(a) == 0 {
		return 0
	}
	n := deepSize(a[0], limit)
	if l, ok := a[0].(traits.Lister); ok {
		if size, ok := l.Size().(types.Int); ok && size > 0 {
			n = satAdd(n, satMul(uint64(size), strLen(a, 1)))
		}
	}
	return n
}

// setsWork: each element of one list is compared with each of the
// other's, a comparison bounded by the smaller; equivalent looks both
// ways.
func setsWork(ways uint64) func([]ref.Val, uint64) uint64 {
	return func(a []ref.Val, limit uint64) uint64 {
		if len(a) != 2 {
			return 0
		}
		la, oka := listLen(a[0])
		lb, okb := listLen(a[1])
		if !oka || !okb || la == 0 || lb == 0 {
			return la + lb
		}
		da, db := deepSize(a[0], limit), deepSize(a[1], limit)
		return satAdd(da+db, satMul(ways, min(satMul(la, db), satMul(lb, da))))
	}
}

func listLen(v ref.Val) (uint64, bool) {
	if l, ok := v.(traits.Lister); ok {
		if size, ok := l.Size().(types.Int); ok && size >= 0 {
			return uint64(size), true
		}
	}
	return 0, false
}

// matchesWork is what RE2 does at most: each byte of the string through
// each instruction of the pattern's program.
func matchesWork(a []ref.Val, _ uint64) uint64 {
	if len(a) != 2 {
		return 0
	}
	s, ok0 := a[0].(types.String)
	p, ok1 := a[1].(types.String)
	if !ok0 || !ok1 {
		return 0
	}
	re := compiledPattern(string(p))
	if re.err != nil {
		return 0 // matches fails, naming it
	}
	return satMul(uint64(len(s))+1, uint64(re.insts))
}

func matches(a []ref.Val) ref.Val {
	if len(a) != 2 {
		return types.NewErr("no such overload")
	}
	s, ok0 := a[0].(types.String)
	p, ok1 := a[1].(types.String)
	if !ok0 || !ok1 {
		return types.NewErr("no such overload")
	}
	re := compiledPattern(string(p))
	if re.err != nil {
		return types.NewErr("error parsing regexp: %v", re.err)
	}
	return types.Bool(re.re.MatchString(string(s)))
}

// pattern is a compiled pattern and the instructions of its program.
type pattern struct {
	re    *regexp.Regexp
	insts int
	err   error
}

// patterns keeps the patterns compiled: each is written in a rule
// (checkPatterns), so there are few; past maxPatterns, one is compiled
// on each call.
var patterns = struct {
	sync.Mutex
	m map[string]*pattern
}{m: map[string]*pattern{}}

const maxPatterns = 4096

func compiledPattern(p string) *pattern {
	patterns.Lock()
	c, ok := patterns.m[p]
	patterns.Unlock()
	if ok {
		return c
	}
	c = &pattern{}
	if c.re, c.err = regexp.Compile(p); c.err == nil {
		c.insts, c.err = patternInstructions(p)
	}
	patterns.Lock()
	if len(patterns.m) < maxPatterns {
		patterns.m[p] = c
	}
	patterns.Unlock()
	return c
}

// nativeBacked are the types of CEL's lists and maps that hold a Go
// value as it is (the object's, or a list of CEL values), whose Value()
// gives it without copying. Others (a view of two lists joined by +)
// make a copy of every element, however many, so they are walked by
// their iterators.
var nativeBacked = func() map[reflect.Type]bool {
	a := types.DefaultTypeAdapter
	return map[reflect.Type]bool{
		reflect.TypeOf(a.NativeToValue([]any{})):          true,
		reflect.TypeOf(a.NativeToValue(map[string]any{})): true,
		reflect.TypeOf(types.NewRefValList(a, nil)):       true,
	}
}()
