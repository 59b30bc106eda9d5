package health

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Attacks (from a fifth review) on what a Set keeps between polls.

// Verdicts keep the object's own message whole: counted by number only,
// 2,000 objects made anew (each a new UID) with messages of 256 KiB kept
// 516 MiB. Now the messages kept are bounded too.
func TestKeptVerdictsAreBoundedInBytes(t *testing.T) {
	set, _, err := Compile([]Rule{{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Current: "status.ready == true"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	msg := strings.Repeat("m", 256<<10)
	for i := range 2000 {
		u := widget(map[string]any{"ready": false, "message": msg, "conditions": []any{map[string]any{"type": "Ready", "status": "False", "message": msg}}})
		u.SetUID(types.UID("uid-" + strconv.Itoa(i)))
		u.SetResourceVersion("1")
		set.Evaluate(context.Background(), u)
	}
	runtime.GC()
	set.mu.Lock()
	kept, size := len(set.decided), set.decidedBytes
	set.mu.Unlock()
	total := 0
	for _, d := range set.decided {
		if d.Result != nil {
			total += len(d.Result.Message)
		}
	}
	t.Logf("%d verdicts kept, %d bytes of messages", kept, total)
	if total != size {
		t.Errorf("decidedBytes %d, the messages kept hold %d", size, total)
	}
	if total > maxDecidedBytes {
		t.Errorf("%d bytes of messages kept, bound %d", total, maxDecidedBytes)
	}
}

// One object read as two kinds (an Event of the core group and of
// events.k8s.io, one UID and resourceVersion) is decided by each kind's
// rule, not by the verdict the other kept.
func TestAKeptVerdictIsTheSameRules(t *testing.T) {
	set, _, err := Compile([]Rule{
		{APIVersion: "example.com/v1", Kind: "Event", Origin: "rules.yaml:1", Current: "true"},
		{APIVersion: "other.example.com/v1", Kind: "Event", Origin: "rules.yaml:2", Current: "false", Failed: "true"},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		apiVersion string
		want       status.Status
	}{{"example.com/v1", status.CurrentStatus}, {"other.example.com/v1", status.FailedStatus}} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": c.apiVersion, "kind": "Event",
			"metadata": map[string]any{"name": "e", "namespace": "ns", "uid": "same-uid", "resourceVersion": "9"}}}
		v, ok := set.Evaluate(context.Background(), u)
		if !ok || v.Result.Status != c.want {
			t.Errorf("%s: %v %+v, want %s", c.apiVersion, ok, v.Result, c.want)
		}
	}
}

// valueContext is a context whose type cannot be compared.
type valueContext struct {
	context.Context
	names []string
}

// A context whose type cannot be compared made arm panic when it looked
// for a deadline to reuse.
func TestADeadlineOfAnUncomparableContext(t *testing.T) {
	e, err := newEvaluator(&Rule{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{}, Current: "status.ready == true"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ctx := valueContext{context.Background(), []string{"a"}}
		if res, err := e.Evaluate(ctx, widget(map[string]any{"ready": true})); err != nil || res.Status != status.CurrentStatus {
			t.Errorf("%v %v", res, err)
		}
	}
}
