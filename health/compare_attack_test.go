package health

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// bigMaps is a Widget whose status holds two equal maps of n entries and
// a list of k numbers.
func bigMaps(n, k int) *unstructured.Unstructured {
	m, m2 := map[string]any{}, map[string]any{}
	for i := range n {
		m[fmt.Sprint("k", i)] = int64(i)
		m2[fmt.Sprint("k", i)] = int64(i)
	}
	l := make([]any, k)
	for i := range l {
		l[i] = int64(i)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "x", "namespace": "ns"},
		"status":   map[string]any{"m": m, "m2": m2, "l": l},
	}}
}

// One equality (or in) compares its operands in one call, which no
// deadline interrupts: lists of references to the object's largest maps,
// written out in the rule or made by a comprehension (whose steps are
// few and counted), compared whole, ran for seconds to hours on one
// object. Now what a comparison would walk is counted before it runs,
// and one over the rule's budget fails the object at once.
func TestOneComparisonOfListsOfMapsIsBoundedBeforeItRuns(t *testing.T) {
	u := bigMaps(40000, 300)
	refs := func(name string, n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat("status."+name+", ", n), ", ") + "]"
	}
	for _, c := range []struct{ name, expr string }{
		{"written out", refs("m", 200) + " == " + refs("m2", 200)},
		{"not equal", refs("m", 200) + " != " + refs("m2", 200)},
		{"made by a comprehension", "status.l.map(x, status.l.map(y, status.m)) == status.l.map(x, status.l.map(y, status.m2))"},
		{"in a list made by a comprehension", "status.m in status.l.map(x, status.l.map(y, status.m2)).map(z, z).filter(z, false) + status.l.map(x, status.m2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rule := &Rule{APIVersion: "example.com/v1", Kind: "Widget", Origin: "rules.yaml:1", Lines: map[string]int{}, Current: c.expr}
			e, err := newEvaluator(rule)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := e.Evaluate(context.Background(), u)
			took := time.Since(start)
			t.Logf("%v %.300v in %s", res, err, took)
			if err == nil {
				t.Fatalf("the rule passed: %v", res)
			}
			// Its deadline, and at most one bounded walk past it.
			if took > 2*MaxEvalTime {
				t.Fatalf("one object's evaluation took %s, deadline %s", took, MaxEvalTime)
			}
		})
	}
}

// Comparisons of ordinary size still give CEL's answers.
func TestComparisonsStillCompare(t *testing.T) {
	wantCurrent(t, bigMaps(100, 10), map[string]bool{
		"status.m == status.m2":     true,
		"status.m != status.m2":     false,
		"[status.m] == [status.m2]": true,
		"status.m.k1 == 1":          true,
		"status.m.k1 == 2":          false,
		"3 in status.l":             true,
		"30 in status.l":            false,
		"'k5' in status.m":          true,
		"'x' in status.m":           false,
		"status.l.map(x, x * 2) == status.l.map(y, y + y)": true,
		"1 == 1.0": true,
		"'a' != 1": true,
	})
}

// iteratedSize is deepSize through CEL's iterators alone, value by value.
func iteratedSize(v ref.Val, limit uint64) uint64 {
	var n uint64
	var walk func(v ref.Val)
	walk = func(v ref.Val) {
		if n >= limit {
			return
		}
		switch v := v.(type) {
		case types.String:
			n += uint64(len(v)) + 1
		case types.Bytes:
			n += uint64(len(v)) + 1
		case traits.Mapper:
			n++
			for it := v.Iterator(); n < limit && it.HasNext() == types.True; {
				k := it.Next()
				walk(k)
				walk(v.Get(k))
			}
		case traits.Lister:
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

// deepSize walks the object's own Go values as CEL's iterators would
// count them: the same size, for every bound.
func TestDeepSizeOfGoValuesIsCELs(t *testing.T) {
	obj := map[string]any{
		"spec": map[string]any{"replicas": int64(3), "name": "web", "tags": []any{"a", "bb", int64(1), 2.5, true, nil, []byte("xyz")},
			"nested": []any{map[string]any{"k": "v", "l": []any{}}, map[string]any{}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "message": strings.Repeat("m", 300)}}},
	}
	v := types.DefaultTypeAdapter.NativeToValue(obj)
	whole := iteratedSize(v, math.MaxUint64)
	if whole < 300 {
		t.Fatalf("the object's size %d is less than its message's", whole)
	}
	for _, limit := range []uint64{1, 2, 5, 17, 100, 301, whole - 1, whole, whole + 1, math.MaxUint64} {
		if got, want := deepSize(v, limit), iteratedSize(v, limit); got != want && !(got >= limit && want >= limit) {
			t.Errorf("limit %d: deepSize %d, iterated %d", limit, got, want)
		}
	}
	// A list a rule made holds CEL values: counted the same.
	list := types.DefaultTypeAdapter.NativeToValue([]ref.Val{v, types.String("abc"), v})
	if got, want := deepSize(list, math.MaxUint64), iteratedSize(list, math.MaxUint64); got != want {
		t.Errorf("a list of CEL values: deepSize %d, iterated %d", got, want)
	}
}
