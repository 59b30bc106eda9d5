package health

import (
	"context"
	"strconv"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
)

// The cost of deciding one ready Certificate by its built-in rule,
// against kstatus's Compute of it.
func BenchmarkEvaluate(b *testing.B) {
	set, _, err := Compile(nil, true)
	if err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	u := obj(t, "cert-manager.io/v1", "Certificate", "status:\n  conditions:\n  - type: Ready\n    status: \"True\"\n    observedGeneration: 2\n    reason: Ready\n    message: up to date\n")
	b.Run("rule", func(b *testing.B) {
		for b.Loop() {
			if v, ok := set.Evaluate(context.Background(), u); !ok || v.Result.Status != status.CurrentStatus {
				b.Fatal(v.Result)
			}
		}
	})
	var mine Rule
	for _, r := range BuiltInRules() {
		if r.Kind == "Certificate" {
			mine = r
			mine.Origin = "bench.yaml:1"
		}
	}
	user, _, err := Compile([]Rule{mine}, false)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("user-rule", func(b *testing.B) {
		version := 0
		for b.Loop() {
			// A new version each time: decided again, not kept.
			version++
			u.SetResourceVersion(strconv.Itoa(version))
			if v, ok := user.Evaluate(context.Background(), u); !ok || v.Result.Status != status.CurrentStatus {
				b.Fatal(v.Result)
			}
		}
	})
	b.Run("kstatus", func(b *testing.B) {
		for b.Loop() {
			if _, err := status.Compute(u); err != nil {
				b.Fatal(err)
			}
		}
	})
}
