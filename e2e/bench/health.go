package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"syscall"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/health"
)

// healthScenario measures what health rules cost the wait: the CPU of one
// poll of 1000 Certificates (decoding the LIST the API server answers,
// then deciding each object) with the built-in rule for Certificates,
// against the same poll decided by kstatus alone, when every object
// changed since the last poll and when none did. The rules are compiled
// once, before the first poll, as a run compiles them.
func (b *bench) healthScenario() []row {
	const objects, polls = 1000, 30
	builtIn, _, err := health.Compile(nil, true)
	b.must(err)
	// The built-in rule for Certificates, given as a user's rule: a
	// user's rule is bounded in work, which costs CEL's cost tracking.
	var mine health.Rule
	for _, r := range health.BuiltInRules() {
		if r.Kind == "Certificate" {
			mine = r
			mine.Origin = "bench.yaml:1"
		}
	}
	user, _, err := health.Compile([]health.Rule{mine}, false)
	b.must(err)
	version := 0
	// poll decodes a LIST as the poller does and decides each object;
	// its CPU, the list made outside the measure. changed: every object
	// has a new resourceVersion since the last poll (the most a poll
	// evaluates); otherwise none has, and each verdict is kept.
	poll := func(set *health.Set, changed bool) time.Duration {
		if changed {
			version += objects
		}
		list := certificateList(objects, version)
		start := cpuTime()
		var l unstructured.UnstructuredList
		b.must(l.UnmarshalJSON(list))
		for i := range l.Items {
			u := &l.Items[i]
			if set != nil {
				if v, ok := set.Evaluate(context.Background(), u); !ok || v.Result.Status != status.CurrentStatus {
					b.must(fmt.Errorf("the rule says %v of a ready Certificate", v.Result))
				}
				continue
			}
			if _, err := status.Compute(u); err != nil {
				b.must(err)
			}
		}
		return cpuTime() - start
	}
	cpu := func(set *health.Set, changed bool) time.Duration {
		// The garbage of the measure before is collected before this
		// one, not during it.
		runtime.GC()
		var total time.Duration
		for range polls {
			total += poll(set, changed)
		}
		return total / polls
	}
	poll(builtIn, true) // each rule's evaluator is made on its first use
	poll(user, true)
	var rows []row
	for _, c := range []struct {
		name    string
		set     *health.Set
		changed bool
	}{
		{"the built-in rule, every object changed since the last poll", builtIn, true},
		{"the same rule given as a user's (bounded in work), every object changed", user, true},
		{"a user's rule, no object changed since the last poll (verdicts kept)", user, false},
	} {
		var with, without []time.Duration
		for rep := range b.reps {
			// Alternated, the order swapped every repetition.
			if rep%2 == 0 {
				with = append(with, cpu(c.set, c.changed))
				without = append(without, cpu(nil, c.changed))
			} else {
				without = append(without, cpu(nil, c.changed))
				with = append(with, cpu(c.set, c.changed))
			}
			b.logf("health: %s, rep %d: %s of CPU a poll with rules, %s with kstatus alone", c.name, rep+1, with[rep], without[rep])
		}
		rows = append(rows, row{name: fmt.Sprintf("health rules: CPU of one poll of %d Certificates (LIST decoded, each decided) by %s, against kstatus alone (floor)", objects, c.name),
			gantry: median(with), flr: median(without), ratios: ratios(with, without), target: "≤ 1.1 × floor"})
	}
	return rows
}

// cpuTime is the CPU this process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// certificateList is a LIST answer of n ready Certificates, as
// cert-manager leaves them.
func certificateList(n, version int) []byte {
	items := make([]any, n)
	for i := range items {
		items[i] = map[string]any{
			"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
			"metadata": map[string]any{"name": fmt.Sprintf("cert-%04d", i), "namespace": "bench", "generation": 1,
				"uid": fmt.Sprintf("0000-%04d", i), "resourceVersion": fmt.Sprint(1000 + version + i),
				"labels": map[string]any{"app.kubernetes.io/name": "bench", "gantry.dev/inventory": "bench"}},
			"spec": map[string]any{"secretName": fmt.Sprintf("cert-%04d-tls", i), "dnsNames": []any{fmt.Sprintf("svc-%04d.bench.svc", i)},
				"issuerRef": map[string]any{"name": "selfsigned", "kind": "Issuer"}},
			"status": map[string]any{
				"notBefore": "2026-11-27T00:00:00Z", "notAfter": "2027-02-25T00:00:00Z", "renewalTime": "2027-01-26T00:00:00Z", "revision": 1,
				"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "observedGeneration": 1,
					"message": "Certificate is up to date and has not expired", "lastTransitionTime": "2026-11-27T00:00:01Z"}},
			},
		}
	}
	out, err := json.Marshal(map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "CertificateList", "metadata": map[string]any{"resourceVersion": "9999"}, "items": items})
	if err != nil {
		panic(err)
	}
	return out
}
