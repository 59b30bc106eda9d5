package health

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
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
		if v.Result.Status != "Failed" || !strings.Contains(v.Result.Message, "cannot be evaluated on this object: it would cost more than the bound of one expression on one object") {
			t.Errorf("%s: %s after %s; want it stopped at the bound, said", expr[:40], v.Result, took)
		}
	}
}
