package health

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Attack (from a review): MaxEvalTime (500 ms per object) is only looked
// at on the steps of a comprehension (InterruptCheckFrequency), and CEL's
// cost charges an equality of lists their length, whatever they hold. A
// run-file rule without any comprehension that compares lists holding the
// object's two maps, again and again, cost a few hundred units and ran
// far past the deadline, uncounted; the object's status picks the maps'
// size. Now an equality costs what its operands hold, in the estimate
// and in the counted run.
func TestEqualityIsChargedWhatItCompares(t *testing.T) {
	m, m2 := map[string]any{}, map[string]any{}
	for i := 0; i < 40000; i++ {
		m[fmt.Sprint("k", i)] = int64(i)
		m2[fmt.Sprint("k", i)] = int64(i)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "x", "namespace": "ns"},
		"status":   map[string]any{"m": m, "m2": m2},
	}}
	// Each equality compares two lists of one map: CEL charges it the
	// lists' length, one. (The review's first form, one equality of two
	// lists of 200 references to the maps, is one call: its work is done
	// before any bound can look at it. It is left, said in the notes.)
	rule := &Rule{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{},
		Current: strings.TrimSuffix(strings.Repeat("[status.m] == [status.m2] && ", 130), " && ")}
	if len(rule.Current) > MaxExpressionBytes {
		t.Fatalf("expression %d bytes", len(rule.Current))
	}
	e, err := newEvaluator(rule)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := e.Evaluate(context.Background(), u)
	took := time.Since(start)
	t.Logf("%v %.200v in %s", res, err, took)
	if took > 2*MaxEvalTime {
		t.Fatalf("one object's evaluation took %s, deadline %s never fired", took, MaxEvalTime)
	}
}
