package health

import (
	"context"
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// gantry's evaluator decides every status shape of every built-in rule as
// Flux's own StatusEvaluator decides it: the same status, or both an
// error.
func TestEvaluatorIsFluxs(t *testing.T) {
	n := 0
	for gk, list := range shapes {
		parsed := schema.ParseGroupKind(gk)
		var rule *Rule
		for _, r := range builtInRules() {
			if g := r.groupKind(); g == parsed || g == (schema.GroupKind{Group: parsed.Group}) {
				rule = r
			}
		}
		if rule == nil {
			t.Fatalf("%s: no rule", gk)
		}
		ours, err := newEvaluator(rule)
		if err != nil {
			t.Fatal(err)
		}
		flux, err := fluxcel.NewStatusEvaluator(&kustomize.HealthCheckExpressions{Current: rule.Current, InProgress: rule.InProgress, Failed: rule.Failed})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			u := obj(t, rule.APIVersion, parsed.Kind, s.yaml)
			got, gotErr := ours.Evaluate(context.Background(), u)
			want, wantErr := flux.Evaluate(context.Background(), u)
			switch {
			case (gotErr != nil) != (wantErr != nil):
				t.Errorf("%s, %s: ours %v %v, Flux's %v %v", gk, s.name, got, gotErr, want, wantErr)
			case gotErr == nil && got.Status != want.Status:
				t.Errorf("%s, %s: ours %s, Flux's %s", gk, s.name, got.Status, want.Status)
			}
			n++
		}
	}
	t.Logf("%d shapes decided as Flux decides them", n)
}

// The work of one expression on one object is bounded, whatever makes it:
// a chain of replace() that grows a string tenfold per call (which Flux's
// program never interrupts), nested comprehensions over a long list.
func TestEvaluationWorkIsBounded(t *testing.T) {
	for _, expr := range []string{
		"spec.x" + strings.Repeat(".replace('a','aaaaaaaaaa')", 9) + " == ''",
		"spec.l.all(a, spec.l.all(b, spec.l.all(c, true)))",
		"spec.x" + strings.Repeat(".replace('a','aa')", 40) + " == ''",
	} {
		rules := []Rule{{APIVersion: "example.com/v1", Kind: "Widget", Current: expr, Origin: "rules.yaml:1", Lines: map[string]int{}}}
		set, _, err := Compile(rules, false)
		if err != nil {
			t.Fatal(err)
		}
		u := obj(t, "example.com/v1", "Widget", "spec:\n  x: a\n  l: ["+strings.TrimSuffix(strings.Repeat("1,", 300), ",")+"]\n")
		start := time.Now()
		v, _ := set.Evaluate(context.Background(), u)
		took := time.Since(start)
		// Stopped by the bound, not by time: unbounded, these run for
		// seconds to hours and end without an error.
		t.Logf("%s: stopped after %s", expr[:40], took)
		// (Or by the deadline, on a loaded machine, whichever comes
		// first.)
		if v.Result.Status != "Failed" || !strings.Contains(v.Result.Message, "cannot be evaluated on this object: it would cost more than the bound of one expression on one object") &&
			!strings.Contains(v.Result.Message, "cannot be evaluated on this object: it took longer than the bound of one expression on one object") {
			t.Errorf("%s: %s after %s; want it stopped at the bound, said", expr[:40], v.Result, took)
		}
	}
}

// A user's rule runs without counting its work only where CEL's static
// estimate, for an object of that one's sizes, shows the work small: a
// rule over the conditions of an object as controllers leave it, not over
// a long list, nor nested comprehensions, nor calls whose result CEL
// cannot size. Counted or not, the verdict is the same.
func TestUncountedRunsOnlyWhereTheEstimateAllows(t *testing.T) {
	conditions := func(n int) string {
		return "status:\n  conditions:\n" + strings.Repeat("  - {type: Other, status: 'False'}\n", n-1) + "  - {type: Ready, status: 'True'}\n"
	}
	for _, tc := range []struct {
		name, expr, body string
		uncounted        bool
	}{
		{"conditions", "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')", conditions(3), true},
		{"optional conditions", "status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True')", conditions(3), true},
		{"a variable that hides a field", "[status.conditions[0].type + status.conditions[0].type].exists(status, status.?x.orValue('') == '')", conditions(3), false},
		{"what orValue gives grown", "status.?conditions.orValue([]).exists(c, c.type + c.type + c.type != '')", conditions(3), false},
		{"a long message in a condition", "status.conditions.exists(e, e.message.contains(e.type))", "status:\n  conditions:\n  - {type: Ready, status: 'True', message: " + strings.Repeat("x", 100000) + " Ready}\n", false},
		{"a short message in a condition", "status.conditions.exists(e, e.message.contains(e.type))", "status:\n  conditions:\n  - {type: Ready, status: 'True', message: Ready}\n", true},
		{"a long list of conditions", "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')", conditions(5000), false},
		{"nested comprehensions, a short list", "status.conditions.all(a, status.conditions.all(b, status.conditions.exists(c, c.status == 'True')))", conditions(3), true},
		{"nested comprehensions, a longer list", "status.conditions.all(a, status.conditions.all(b, status.conditions.exists(c, c.status == 'True')))", conditions(30), false},
		{"a call CEL cannot estimate", "status.conditions[0].type.replace('O', 'OO') != ''", conditions(3), false},
		{"a call CEL can estimate", "status.conditions[0].type + status.conditions[1].type != ''", conditions(3), true},
		{"a field not declared", "self.status == 'x' || status.conditions.exists(c, c.status == 'True')", conditions(3), false},
	} {
		r := &Rule{APIVersion: "example.com/v1", Kind: "Widget", Current: tc.expr, Origin: "rules.yaml:1", Lines: map[string]int{}}
		e, err := newEvaluator(r)
		if err != nil {
			t.Fatal(err)
		}
		u := obj(t, "example.com/v1", "Widget", tc.body)
		res, err := e.Evaluate(context.Background(), u)
		if err != nil || res.Status != status.CurrentStatus {
			t.Errorf("%s: %v %v, want Current", tc.name, res, err)
		}
		var n uint64
		w := sizeWalk{left: maxSizeWalk}
		for _, path := range e.exprs[0].sized {
			n = max(n, w.at(u.Object, path))
		}
		b := bits.Len64(n)
		if got := e.exprs[0].fast[b].Load() == 1; got != tc.uncounted {
			t.Errorf("%s: run uncounted %v, want %v", tc.name, got, tc.uncounted)
		}
	}
}

// What CEL's cost does not price alike is bounded by time and by the
// rules' text: a comprehension whose counted steps slow down with the
// list (cel-go's tracker), work a call does at the cost of one (size()
// of a long string, again and again), and a top-level key with a dot,
// which an unchecked expression reads for status.conditions in place of
// the field the estimate measured. A pattern of matches() is written in
// the rule, and small.
func TestWorkCELDoesNotPriceIsBounded(t *testing.T) {
	long := func(n int, item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	for _, tc := range []struct{ name, expr, object, says string }{
		{"a long list, counted", "status.l.all(b, true)", `{"status": {"l": ` + long(300000, "0") + `}}`, "took longer than"},
		{"size() of a long string, repeated", "[" + strings.Repeat("0,", 99) + "0].all(a, [" + strings.Repeat("0,", 99) + "0].all(b, size(status.s) > 0))", `{"status": {"s": "` + strings.Repeat("é", 700000) + `"}}`, "took longer than"},
		{"a dotted top-level key", "status.conditions.map(a, status.conditions.map(b, b)).size() > 0", `{"status": {}, "status.conditions": ` + long(3000, "0") + `}`, "than the bound"},
	} {
		rules := []Rule{{APIVersion: "example.com/v1", Kind: "Widget", Current: tc.expr, Origin: "rules.yaml:1", Lines: map[string]int{}}}
		set, _, err := Compile(rules, false)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, ` + strings.TrimPrefix(tc.object, "{"))); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		v, _ := set.Evaluate(context.Background(), u)
		took := time.Since(start)
		t.Logf("%s: %s after %s", tc.name, v.Result, took)
		// Unbounded, each runs for tens of seconds to minutes.
		if v.Result.Status != status.FailedStatus || !strings.Contains(v.Result.Message, tc.says) || took > 20*time.Second {
			t.Errorf("%s: %s after %s; want it stopped, saying %q", tc.name, v.Result, took, tc.says)
		}
	}
	// The dotted key's object is never judged by the estimate: it runs
	// counted.
	e, err := newEvaluator(&Rule{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.conditions.exists(c, c == 0)", Origin: "rules.yaml:1", Lines: map[string]int{}})
	if err != nil {
		t.Fatal(err)
	}
	dotted := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{}, "status.conditions": []any{int64(0)}}}
	if _, err := e.Evaluate(context.Background(), dotted); err != nil {
		t.Fatal(err)
	}
	for b := range e.exprs[0].fast {
		if e.exprs[0].fast[b].Load() != 0 {
			t.Errorf("an object with a dotted top-level key was judged by the estimate (bucket %d)", b)
		}
	}
	// map and filter accumulate their results: counted or not, a rule
	// over 2000 conditions decides the same.
	conditions := long(2000, "{type: Ready, status: 'True'}")
	for _, expr := range []string{"status.conditions.map(c, c.type).size() > 0", "status.conditions.filter(c, c.status == 'True').size() > 0"} {
		e, err := newEvaluator(&Rule{APIVersion: "example.com/v1", Kind: "Widget", Current: expr, Origin: "rules.yaml:1", Lines: map[string]int{}})
		if err != nil {
			t.Fatal(err)
		}
		u := obj(t, "example.com/v1", "Widget", "status:\n  conditions: "+conditions+"\n")
		val, _, err := e.exprs[0].bounded.ContextEval(context.Background(), u.Object)
		if err != nil || val != types.True {
			t.Errorf("%s counted: %v %v, want true", expr, val, err)
		}
	}
	for text, want := range map[string]string{
		"status.s.matches(spec.p)":        "matches() takes a pattern written in the rule",
		"matches(status.s, spec.p)":       "matches() takes a pattern written in the rule",
		"status.s.matches('[ab]{1000}c')": "over the limit of 200",
		"status.s.matches('(')":           "does not compile",
		"status.s.matches('^v[0-9]+$')":   "",
	} {
		rules, err := ParseText([]byte("- apiVersion: example.com/v1\n  kind: Widget\n  current: \""+text+"\"\n"), "rules.yaml", 1)
		if err == nil {
			_, _, err = Compile(rules, false)
		}
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), "rules.yaml:3: health rule for Widget.example.com: current: ") || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", text, err, want)
		}
	}
}

// A deadline serves the next object only while it has not ended: after
// an object that ran out of time, and under a parent that ended or
// changed, the next object gets its whole time.
func TestADeadlineIsKeptOnlyWhileItHasNotEnded(t *testing.T) {
	e, err := newEvaluator(&Rule{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.l.all(b, true)", Origin: "rules.yaml:1", Lines: map[string]int{}})
	if err != nil {
		t.Fatal(err)
	}
	widget := func(n int) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		l := "[" + strings.TrimSuffix(strings.Repeat("0,", n), ",") + "]"
		if err := u.UnmarshalJSON([]byte(`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "status": {"l": ` + l + `}}`)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	small, large := widget(3), widget(300000)
	for i := range 3 {
		if res, err := e.Evaluate(context.Background(), small); err != nil || res.Status != status.CurrentStatus {
			t.Fatalf("object %d: %v %v, want Current", i, res, err)
		}
	}
	if len(e.idle) != 1 {
		t.Errorf("%d deadlines kept after three objects one after the other, want 1", len(e.idle))
	}
	if _, err := e.Evaluate(context.Background(), large); err == nil || !strings.Contains(err.Error(), "took longer than") {
		t.Fatalf("the long list: %v, want it stopped at its deadline", err)
	}
	if res, err := e.Evaluate(context.Background(), small); err != nil || res.Status != status.CurrentStatus {
		t.Errorf("after a deadline ended: %v %v, want Current", res, err)
	}
	parent, cancel := context.WithCancel(context.Background())
	if res, err := e.Evaluate(parent, small); err != nil || res.Status != status.CurrentStatus {
		t.Errorf("under a new parent: %v %v, want Current", res, err)
	}
	cancel()
	if _, err := e.Evaluate(parent, small); err == nil || strings.Contains(err.Error(), "took longer than") {
		t.Errorf("under a parent that ended: %v, want its end, not a deadline", err)
	}
	if res, err := e.Evaluate(context.Background(), small); err != nil || res.Status != status.CurrentStatus {
		t.Errorf("after a parent ended: %v %v, want Current", res, err)
	}
}

// A rule's expressions run as one program where that decides without an
// error; every outcome is then what Flux's evaluator, which runs them one
// after the other, decides: a status, or an error where Flux has one
// (the one said is the sequential run's). A comment at an expression's
// end does not reach into the next.
func TestOneProgramDecidesAsTheExpressionsInTurn(t *testing.T) {
	rules := []Rule{
		{InProgress: "status.?phase.orValue('') == 'Working' // still at it", Failed: "status.?phase.orValue('') == 'Broken'", Current: "status.?phase.orValue('') == 'Done'"},
		{InProgress: "status.phase == 'Working'", Failed: "status.phase == 'Broken'", Current: "status.ready"},
		{Failed: "status.?phase.orValue('')", Current: "status.?phase.orValue('') == 'Done'"},
		{Failed: "status.?n.orValue(0) > 2", Current: "status.?n.orValue(0) == 2 // two"},
		{InProgress: "status.?n.orValue(0) < 1", Current: "status.n / (status.n - 2) == 1"},
	}
	objects := []string{
		`{}`, `{"phase": "Working"}`, `{"phase": "Broken"}`, `{"phase": "Done"}`, `{"phase": "Done", "ready": true}`,
		`{"phase": "Other", "ready": false}`, `{"n": 0}`, `{"n": 1}`, `{"n": 2}`, `{"n": 3}`, `{"phase": 7}`,
	}
	for i := range rules {
		r := &rules[i]
		r.APIVersion, r.Kind, r.Origin, r.Lines = "example.com/v1", "Widget", "rules.yaml:1", map[string]int{}
		ours, err := newEvaluator(r)
		if err != nil {
			t.Fatal(err)
		}
		if ours.combined == nil {
			t.Fatalf("rule %d: its expressions were not made one program", i)
		}
		flux, err := fluxcel.NewStatusEvaluator(&kustomize.HealthCheckExpressions{Current: r.Current, InProgress: r.InProgress, Failed: r.Failed})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objects {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON([]byte(`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "status": ` + o + `}`)); err != nil {
				t.Fatal(err)
			}
			got, gotErr := ours.Evaluate(context.Background(), u)
			want, wantErr := flux.Evaluate(context.Background(), u)
			switch {
			case (gotErr != nil) != (wantErr != nil):
				t.Errorf("rule %d on %s: %v %v; Flux: %v %v", i, o, got, gotErr, want, wantErr)
			case gotErr != nil && gotErr.Error() != wantErr.Error():
				t.Errorf("rule %d on %s: error %q; Flux's %q", i, o, gotErr, wantErr)
			case gotErr == nil && got.Status != want.Status:
				t.Errorf("rule %d on %s: %s; Flux: %s", i, o, got.Status, want.Status)
			}
		}
	}
}

// The expressions run as one program only where that program's work runs
// uncounted: counted, one bound (MaxCost) would serve all the
// expressions, where Flux's order gives each its own, and an object
// whose expressions each fit their bound could exhaust the one.
// (An attacker's review had inProgress and current each under MaxCost
// and together over it: the rule failed where Flux's decides Current.)
func TestOneProgramOnlyWhereItsWorkIsNotCounted(t *testing.T) {
	cat := "size(status.s + status.s) > 0"
	rule := &Rule{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{},
		InProgress: cat + " && status.s.size() < 0", Current: cat + " && " + cat}
	e, err := newEvaluator(rule)
	if err != nil || e.combined == nil {
		t.Fatalf("%v, combined %v", err, e.combined)
	}
	for n, want := range map[int]bool{3: true, 200000: false} {
		u := obj(t, "example.com/v1", "Widget", "status:\n  s: "+strings.Repeat("x", n)+"\n")
		if got := e.combined.uncounted(u.Object); got != want {
			t.Errorf("a string of %d: the one program runs uncounted %v, want %v", n, got, want)
		}
		res, err := e.Evaluate(context.Background(), u)
		if err != nil || res.Status != status.CurrentStatus {
			t.Errorf("a string of %d: %v %v, want Current", n, res, err)
		}
	}
}
