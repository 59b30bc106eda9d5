package health

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Attacks (from a review): one call of CEL does work that neither the
// cost limit (charged after the call) nor the deadline (looked at on a
// comprehension's steps) can stop, on an object of a size the API
// server takes or with no help from the object at all. Each is now
// counted before it runs, and fails the object at once.

// widget is a Widget whose status holds the given fields.
func widget(status map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "x", "namespace": "ns"},
		"status":   status,
	}}
}

// nestedConcat is a list of 2^k ones made in k steps: each joins the
// list with itself by +, which makes a view of the two, charged one.
func nestedConcat(k int, one string) string {
	l := "[" + one + "]"
	for range k {
		l = fmt.Sprintf("[%s].map(a, a+a)[0]", l)
	}
	return l
}

// twoMaps is status.m and status.m2, equal maps of n entries, each held
// under a key "a" (the static estimate reads the size of status.m, one,
// not of what it holds).
func twoMaps(n int) map[string]any {
	in, in2 := map[string]any{}, map[string]any{}
	for i := range n {
		in[fmt.Sprint("k", i)] = int64(i)
		in2[fmt.Sprint("k", i)] = int64(i)
	}
	return map[string]any{"m": map[string]any{"a": in}, "m2": map[string]any{"a": in2}}
}

// twoLists is status.a and status.b, lists of n numbers; b's are all
// a's last one when same, else none of a's.
func twoLists(n int, same bool) map[string]any {
	a, b := make([]any, n), make([]any, n)
	for i := range n {
		a[i], b[i] = int64(i), int64(n+i)
		if same {
			b[i] = int64(n - 1)
		}
	}
	return map[string]any{"a": a, "b": b}
}

// deepView is nestedConcat(k) joined with one more element d times, each
// a view of the one before.
func deepView(k, d int) string {
	l := nestedConcat(k, "1")
	for range d {
		l = fmt.Sprintf("[%s].map(a, a+[1])[0]", l)
	}
	return l
}

// refs is a list literal of n references to status.name.
func refs(name string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("status."+name+", ", n), ", ") + "]"
}

func TestOneCallsWorkIsCountedBeforeItRuns(t *testing.T) {
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	s := func(n int, c string) map[string]any { return map[string]any{"s": long(c, n)} }
	one := "status.m == status.m2"
	for _, c := range []struct {
		name   string
		expr   string
		status map[string]any
	}{
		// in over a view of 2^k elements: its bound once asked the view
		// for its elements as one Go slice (2^40: a fatal out of memory).
		{"in a list of 2^40 made by +", "0 in " + nestedConcat(40, "1"), nil},
		{"in a list of 2^26 made by +", "0 in " + nestedConcat(26, "1"), nil},
		// replace() makes its result in one call: 1.5 GB from the
		// object's 1 MB, or 1.8 GB from the rule alone.
		{"replace of the object's string", "status.s.replace('x', '" + long("y", 1500) + "') == ''", s(1_000_000, "x")},
		{"replace of the rule's string", "'" + long("x", 1000) + "'.replace('x', '" + long("x", 900) + "').replace('x', '" + long("y", 2000) + "') == ''", nil},
		// indexOf compares the substring at each position (5.3 s).
		{"indexOf", "status.s.indexOf('" + long("a", 3000) + "b') == 0", s(1_000_000, "a")},
		{"lastIndexOf", "status.s.lastIndexOf('" + long("a", 3000) + "b') == 0", s(1_000_000, "a")},
		{"indexOf of the rule's string", "'" + long("a", 1000) + "'.replace('a', '" + long("a", 900) + "').indexOf('" + long("a", 2000) + "b') == 0", nil},
		// join of a list of references to the object's string.
		{"join", "'" + long("x", 1100) + "'.split('').map(x, status.s).join() == ''", s(1_000_000, "x")},
		{"format", "'%s'.format(['" + long("x", 1100) + "'.split('').map(x, status.s)]) == ''", s(1_000_000, "x")},
		// A pattern within the limit of instructions, over 1.4 MB (4.8 s).
		{"matches", "status.s.matches('[a-z]{0,40}[a-z]{0,40}b')", s(1_400_000, "a")},
		{"matches, 32 stars", "status.s.matches('(" + long("a*", 32) + ")b')", s(1_400_000, "a")},
		// sets compare each element with each (24 s, 3 GB).
		{"sets.contains", "sets.contains(status.a, status.b)", twoLists(20000, false)},
		{"sets.intersects", "sets.intersects(status.a, status.b)", twoLists(20000, false)},
		{"sets.equivalent", "sets.equivalent(status.a, status.b)", twoLists(20000, true)},
		{"sets.contains, the last one", "sets.contains(status.a, status.b)", twoLists(20000, true)},
		{"sets of lists made by +", "sets.contains(" + nestedConcat(14, "2") + " + [1], " + nestedConcat(14, "1") + ")", nil},
		// An optional is compared by what it holds (a second review).
		{"optionals of lists made by +", "optional.of(" + nestedConcat(20, "1") + ") == optional.of(" + nestedConcat(20, "1") + ")", nil},
		{"a list of optionals", "[optional.of(" + nestedConcat(26, "1") + ")] == [optional.of(" + nestedConcat(26, "1") + ")]", nil},
		{"an optional in a list of them", "optional.of(" + nestedConcat(26, "1") + ") in [optional.of(" + nestedConcat(26, "1") + ")]", nil},
		{"sets of optionals", "sets.contains([optional.of(" + nestedConcat(26, "1") + ")], [optional.of(" + nestedConcat(26, "1") + ")])", nil},
		{"optionals of the object's maps", "optional.of(" + refs("m", 150) + ") == optional.of(" + refs("m2", 150) + ")", bigMaps(40000, 1).Object["status"].(map[string]any)},
		// A view reached through 60 levels of views costs each element
		// its depth (10 s): lists joined by + are made whole.
		{"a deep view compared", "[" + deepView(19, 60) + "].map(x, x == x)[0]", nil},
		{"in a deep view", "[" + deepView(19, 60) + "].map(x, 2 in x)[0]", nil},
		// Equalities the estimate takes as small, run uncounted (6.9 s).
		{"equalities run uncounted", strings.Repeat(one+" && ", (MaxExpressionBytes-len(one))/len(one+" && ")) + one, twoMaps(45000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.status == nil {
				c.status = map[string]any{}
			}
			rule := &Rule{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{}, Current: c.expr}
			if _, _, err := Compile([]Rule{*rule}, false); err != nil {
				t.Fatalf("the rule is refused: %v", err)
			}
			e, err := newEvaluator(rule)
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			res, err := e.Evaluate(context.Background(), widget(c.status))
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%v %.160v; %s, %d MB", res, err, took, alloc>>20)
			if err == nil {
				t.Errorf("the rule gave a verdict (%v); its work is over the bound", res.Status)
			}
			// Its deadline, and at most one bounded call past it.
			if took > 2*MaxEvalTime {
				t.Errorf("one object's evaluation took %s, deadline %s", took, MaxEvalTime)
			}
			if alloc > 256<<20 {
				t.Errorf("one object's evaluation allocated %d MB", alloc>>20)
			}
		})
	}
}

// The guarded calls still give CEL's answers on values of ordinary size.
func TestGuardedCallsGiveCELsAnswers(t *testing.T) {
	u := widget(map[string]any{"message": "Ready: all 3 replicas are up", "tags": []any{"a", "b"}, "m": map[string]any{"x": int64(1)}})
	wantCurrent(t, u, map[string]bool{
		"status.message.matches('^Ready')":                                           true,
		"matches(status.message, 'replicas? are')":                                   true,
		"status.message.matches('^Failed')":                                          false,
		"status.message.indexOf('3') == 11":                                          true,
		"status.message.lastIndexOf('e') == 24":                                      true,
		"status.message.indexOf('up', 5) == 26":                                      true,
		"status.message.replace('3', 'three') == 'Ready: all three replicas are up'": true,
		"status.message.replace('e', 'E', 1) == 'REady: all 3 replicas are up'":      true,
		"status.tags.join('-') == 'a-b'":                                             true,
		"status.tags.join() == 'ab'":                                                 true,
		"'%s=%d'.format(['x', status.m.x]) == 'x=1'":                                 true,
		"sets.contains(status.tags, ['b'])":                                          true,
		"sets.contains(status.tags, ['c'])":                                          false,
		"sets.intersects(status.tags, ['c', 'a'])":                                   true,
		"sets.equivalent(status.tags, ['b', 'a', 'a'])":                              true,
		"'x' in status.m && !('y' in status.m)":                                      true,
		"'a' in status.tags":                                                         true,
		"status.m == {'x': 1}":                                                       true,
		"status.m != {'x': 1.0}":                                                     false,
		"[status.m, status.tags] == [{'x': 1}, ['a', 'b']]":                          true,
		"status.tags.map(t, t + t) == ['aa', 'bb']":                                  true,
		"status.tags + ['c'] == ['a', 'b', 'c']":                                     true,
		"size(status.tags + status.tags) == 4":                                       true,
		"(status.tags + [])[1] == 'b' && ([] + status.tags)[0] == 'a'":               true,
		"'c' in status.tags + ['c']":                                                 true,
		"status.message + '!' == 'Ready: all 3 replicas are up!'":                    true,
		"b'ab' + b'c' == b'abc'":                                                     true,
		"1 + 2 == 3 && 1.5 + 1.5 == 3.0":                                             true,
	})
}

// wantCurrent evaluates each expression, as a user's rule's current, on
// u: current or not as want says, with no error.
func wantCurrent(t *testing.T, u *unstructured.Unstructured, want map[string]bool) {
	t.Helper()
	for expr, current := range want {
		rule := &Rule{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{}, Current: expr}
		e, err := newEvaluator(rule)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Evaluate(context.Background(), u)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if got := res.Status == "Current"; got != current {
			t.Errorf("%s: %v, want current %v", expr, res.Status, current)
		}
	}
}

// A key the rule computes from the object is never printed, whatever
// the rule's text holds: a rule holding every 3-digit string printed any
// 3-digit value it indexed with. A field the rule writes is named.
func TestAMissingKeyIsNamedOnlyAsWritten(t *testing.T) {
	every := deBruijn(3)
	u := widget(map[string]any{"pin": "471"})
	// Every 3-digit key written as a literal, never evaluated.
	keys := func(lo, hi int) string {
		var b strings.Builder
		for i := lo; i < hi; i++ {
			fmt.Fprintf(&b, "x['%03d'],", i)
		}
		return "false && [" + strings.TrimSuffix(b.String(), ",") + "] == []"
	}
	for expr, want := range map[string]string{
		"{'': 1}[status.pin] == 1 || '" + every + "' == ''": "reads a key computed from the object",
		// An error of CEL's that quotes a string the rule made of the
		// object's value: not a missing key (a second review).
		"int('no such k' + 'ey: ' + status.pin) == 0 || " + keys(0, 300):                     "cannot be evaluated on this object: a type conversion error",
		"timestamp(0).getHours('no such k' + 'ey: ' + status.pin) == 0 || " + keys(300, 600): "cannot be evaluated on this object",
		"duration('no such k' + 'ey: ' + status.pin) == duration('1s') || " + keys(600, 900): "cannot be evaluated on this object",
		"status.ready == true":                           "reads ready,",
		"status['ready'] == true":                        "reads ready,",
		"status.conditions.exists(c, c.type == 'Ready')": "reads conditions,",
	} {
		set, _, err := Compile([]Rule{{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{}, Current: expr}}, false)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := set.Evaluate(context.Background(), u)
		msg := strings.ReplaceAll(v.Result.Message, every, "<every 3 digits>")
		if i := strings.LastIndex(msg, ") "); i >= 0 {
			msg = msg[i:] // what follows the rule's own text
		}
		if strings.Contains(msg, "471") || !strings.Contains(msg, want) {
			t.Errorf("%.60s: %q, want %q and not the value", expr, msg, want)
		}
	}
}

// deBruijn is a string of digits holding every string of n digits.
func deBruijn(n int) string {
	const k = 10
	a := make([]int, k*n)
	var seq []byte
	var db func(t, p int)
	db = func(t, p int) {
		if t > n {
			if n%p == 0 {
				for _, x := range a[1 : p+1] {
					seq = append(seq, byte('0'+x))
				}
			}
			return
		}
		a[t] = a[t-p]
		db(t+1, p)
		for j := a[t-p] + 1; j < k; j++ {
			a[t] = j
			db(t+1, t)
		}
	}
	db(1, 1)
	return string(seq) + string(seq[:n-1])
}

// A comprehension adds one element a step to a list of its own: charged
// the element, not the list, so that map() and filter() of a long list
// stay within the bound.
func TestComprehensionsOfALongListStayWithinTheBound(t *testing.T) {
	// 5000: charged the list each step, map() would cost 12.5 million.
	l := make([]any, 5000)
	for i := range l {
		l[i] = int64(i)
	}
	rule := &Rule{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{},
		Current: "status.l.map(x, x + 1).filter(x, x > 10).size() == 4990 && (status.l + status.l).size() == 10000"}
	e, err := newEvaluator(rule)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Evaluate(context.Background(), widget(map[string]any{"l": l}))
	if err != nil || res.Status != "Current" {
		t.Errorf("%v %v", res, err)
	}
}

// Optional entries of list and map literals are refused at the rule's
// line: CEL's error for one that is not optional spells its value out.
func TestOptionalEntriesAreRefused(t *testing.T) {
	for _, expr := range []string{"[?status.?x] == []", "{?'a': status.?x} == {}", "[1, ?optional.none()] == [1]"} {
		_, _, err := Compile([]Rule{{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:3", Lines: map[string]int{"current": 4}, Current: expr}}, false)
		if err == nil || !strings.Contains(err.Error(), "rules.yaml:4") || !strings.Contains(err.Error(), "optional entries") {
			t.Errorf("%s: %v", expr, err)
		}
	}
	if _, _, err := Compile([]Rule{{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:3", Current: "status.?ready.orValue(false)"}}, false); err != nil {
		t.Errorf("an optional field is refused: %v", err)
	}
}

// An expression out of time is out of time even where its logic absorbs
// the error (an && with a false side): no verdict, so none is kept. A
// map() of 40,000 elements is within the cost and, in cel-go's tracker
// whose accumulation grows with the list, far past 500 ms.
func TestOutOfTimeUnderAnAndIsOutOfTime(t *testing.T) {
	l := make([]any, 40000)
	for i := range l {
		l[i] = int64(i)
	}
	rule := &Rule{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{},
		Current: "status.l.map(x, x + 1).size() > 0 && false"}
	e, err := newEvaluator(rule)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Evaluate(context.Background(), widget(map[string]any{"l": l}))
	if !errors.Is(err, errTooLong) {
		t.Errorf("%v, %v; want out of time", res, err)
	}
}

// fill repeats unit, joined by sep, between prefix and suffix, as many
// times as an expression holds.
func fill(prefix, unit, sep, suffix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; b.Len()+len(unit)+len(sep)+len(suffix) <= MaxExpressionBytes; i++ {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(unit)
	}
	b.WriteString(suffix)
	return b.String()
}

// Attacks (from a third review): one step of a comprehension, or an
// expression with none, makes hundreds of calls, each doing work in
// proportion to a long string or list and charged one: the deadline,
// looked at on a comprehension's steps only, came after seconds. Now
// every call of a user's expression looks at the deadline, and an
// equality or a sets function is charged what it walks.
func TestManyCallsInOneStepStopAtTheDeadline(t *testing.T) {
	ints := make([]any, 700000)
	for i := range ints {
		ints[i] = int64(i)
	}
	maps := make([]any, 460000)
	for i := range maps {
		maps[i] = map[string]any{}
	}
	str := func(unit string, n int) map[string]any { return map[string]any{"s": strings.Repeat(unit, n)} }
	made := "'" + strings.Repeat("0h", 10) + "'" + strings.Repeat(".replace('h', 'h"+strings.Repeat("0h", 9)+"')", 4) + ".replace('h', 'h0h0h')"
	for _, c := range []struct {
		name   string
		rule   Rule
		status map[string]any
	}{
		{"equalities of a long list, in one step", Rule{Current: fill("[status.l].all(l, size([", "l == [1]", ",", "]) < 0)")}, map[string]any{"l": maps}},
		{"equalities of a long list with a number", Rule{Current: fill("[status.l].all(l, size([", "l == 1", ",", "]) < 0)")}, map[string]any{"l": ints}},
		{"sets of a long list", Rule{Current: fill("[status.l].all(l, size([", "sets.contains([l], [1])", ",", "]) < 0)")}, map[string]any{"l": maps}},
		{"equalities with no comprehension, three expressions", Rule{
			InProgress: fill("size([", "status.l == [1]", ",", "]) < 0"),
			Failed:     fill("size([", "status.l == [1]", ",", "]) < 0"),
			Current:    fill("size([", "status.l == [1]", ",", "]) < 0")}, map[string]any{"l": ints}},
		{"duration() of a long string", Rule{Current: fill("[status.s].all(s, size([", "duration(s)", ",", "]) < 0)")}, str("0h", 700000)},
		{"size() of a long string", Rule{Current: fill("[status.s].all(s, size([", "size(s)", ",", "]) < 0)")}, str("é", 700000)},
		{"charAt() of a long string", Rule{Current: fill("[status.s].all(s, size([", "s.charAt(0)", ",", "]) < 0)")}, str("a", 1400000)},
		{"substring() of a long string", Rule{Current: fill("[status.s].all(s, size([", "s.substring(0, 1)", ",", "]) < 0)")}, str("a", 1400000)},
		{"trim() of a long string", Rule{Current: fill("[status.s].all(s, size([", "s.trim()", ",", "]) < 0)")}, str(" ", 1400000)},
		{"int() of a long string, failing", Rule{Current: fill("", "int(status.s) == 0", " || ", "")}, str("a", 1400000)},
		{"duration() of a string the rule made", Rule{Current: fill("["+made+"].all(s, size([", "duration(s)", ",", "]) < 0)")}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.status == nil {
				c.status = map[string]any{}
			}
			rule := c.rule
			rule.APIVersion, rule.Kind, rule.Origin, rule.Lines = "example.com/v1", "Widget", "rules.yaml:1", map[string]int{}
			if _, _, err := Compile([]Rule{rule}, false); err != nil {
				t.Fatalf("the rule is refused: %v", err)
			}
			e, err := newEvaluator(&rule)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := e.Evaluate(context.Background(), widget(c.status))
			took := time.Since(start)
			t.Logf("%v %.160v; %s", res, err, took)
			// Within its deadline, with a verdict or without.
			if took > 2*MaxEvalTime {
				t.Errorf("one object's evaluation took %s, deadline %s", took, MaxEvalTime)
			}
		})
	}
}

// + of two maps has no such overload, as CEL's own + says (the guard
// once called its list's + on them).
func TestAddOfMapsHasNoSuchOverload(t *testing.T) {
	rule := &Rule{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{}, Current: "status.m + status.m == {}"}
	e, err := newEvaluator(rule)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Evaluate(context.Background(), widget(map[string]any{"m": map[string]any{"a": int64(1)}})); err == nil || !strings.HasSuffix(err.Error(), "no such overload: _+_") {
		t.Errorf("%v, want no such overload", err)
	}
}

// Attacks (from a fourth review): CEL's checker, which the static
// estimate needs, took 5 s for one expression of 240 nested literals
// (three rules of three: 1 min 50 s, before anything was written); and
// before each run the sizes of the paths the estimate reads were
// measured outside the deadline, once per path however often the
// expression named it (2,038 walks of a list of 700,000: 11 s). A deep
// expression is not estimated, the paths are measured once each, and
// within a bound, past which the expression runs counted.
func TestWhatTheEstimateNeedsIsBounded(t *testing.T) {
	deep := strings.Repeat("{1:", 240) + "status.l" + strings.Repeat("}", 240) + " == {}"
	if checked, _ := checkedForEstimate(deep); checked != nil {
		t.Errorf("an expression of 240 nested literals was estimated")
	}
	if checked, _ := checkedForEstimate(strings.Repeat("{1:", 8) + "status.l" + strings.Repeat("}", 8) + " == {}"); checked == nil {
		t.Errorf("an expression of 8 nested literals was not estimated")
	}
	if _, _, err := Compile([]Rule{{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Current: deep}}, false); err != nil {
		t.Errorf("the deep expression is refused: %v", err)
	}

	expr := fill("status.l.all(x, [", "x", ",", "]==[])")
	rule := &Rule{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{}, InProgress: expr, Failed: expr, Current: expr}
	e, err := newEvaluator(rule)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.exprs[0].sized); n > 2 {
		t.Errorf("%d paths measured (%q), want status.l and its elements once each", n, e.exprs[0].sized)
	}
	l := make([]any, 700000)
	for i := range l {
		l[i] = int64(0)
	}
	if e.exprs[0].uncounted(widget(map[string]any{"l": l}).Object) {
		t.Errorf("a list of 700,000 measured whole to run uncounted")
	}
	w := sizeWalk{left: maxSizeWalk}
	w.at(widget(map[string]any{"l": l}).Object, []string{"status", "l", "@items"})
	if w.left != 0 {
		t.Errorf("the walk read past its bound: %d left", w.left)
	}
	start := time.Now()
	res, err := e.Evaluate(context.Background(), widget(map[string]any{"l": l}))
	t.Logf("%v %.100v; %s", res, err, time.Since(start))
	if took := time.Since(start); took > 2*MaxEvalTime {
		t.Errorf("one object's evaluation took %s, deadline %s", took, MaxEvalTime)
	}
}
