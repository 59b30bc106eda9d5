package health

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Attack/robustness: Set.Evaluate keeps the verdict of an object's
// resourceVersion whatever made it, also a verdict that says nothing of
// the object: "it was stopped: the run ended" when the caller's context
// ended (or "took longer than" under CPU load). Sets are shared per
// process (CompileOnce), so a later poll or run that asks about the same
// UID and resourceVersion with a live context is told Failed, though the
// rule decides Current.
func TestCachedVerdictOfEndedContextReusedAttack(t *testing.T) {
	rules := []Rule{{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{},
		Current: "status.items.all(i, i > 0)"}}
	set, _, err := Compile(rules, false)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "x", "namespace": "ns", "uid": "0d7a", "resourceVersion": "42"},
		"status":   map[string]any{"items": []any{int64(1), int64(2), int64(3)}},
	}}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	first, _ := set.Evaluate(ended, u)
	t.Logf("with an ended context: %s %q", first.Result.Status, first.Result.Message)
	v, _ := set.Evaluate(context.Background(), u)
	if v.Result.Status != status.CurrentStatus {
		t.Fatalf("with a live context: %s %q, want Current", v.Result.Status, v.Result.Message)
	}
}

// A verdict that the rule ran out of its time is not kept either: it says
// more of the machine's load than of the object.
func TestOutOfTimeVerdictIsNotKept(t *testing.T) {
	rules := []Rule{{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{},
		Current: "status.l.all(b, true)"}}
	set, _, err := Compile(rules, false)
	if err != nil {
		t.Fatal(err)
	}
	long := make([]any, 300000)
	for i := range long {
		long[i] = int64(0)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "x", "namespace": "ns", "uid": "0d7b", "resourceVersion": "7"},
		"status":   map[string]any{"l": long},
	}}
	v, _ := set.Evaluate(context.Background(), u)
	if v.Result.Status != status.FailedStatus {
		t.Fatalf("%s %q, want it stopped", v.Result.Status, v.Result.Message)
	}
	if len(set.decided) != 0 {
		t.Errorf("the verdict %q is kept", v.Result.Message)
	}
}
