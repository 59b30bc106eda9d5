package main

import (
	"context"
	"path/filepath"
	"time"
)

// firstAndNoop times, for gantry (b.reps runs) and kubectl and kapp
// (b.kubectlReps runs each), the first apply and the no-op of the set that
// write puts in dir, each run in a namespace of its own (the inventory's,
// or kapp's app's), without waiting for readiness: gantry with
// --wait=false, kubectl apply --server-side, kapp deploy --wait=false.
// It returns the rows "first apply of <name>" and "no-op re-apply of
// <name>". The no-op starts settle after the first apply: a set of large
// CRDs keeps the API server busy for a second or two after it returns
// (establishing them, publishing their schemas), and a CI run's next
// deploy finds that done.
func (b *bench) firstAndNoop(ctx context.Context, scenario, name string, settle time.Duration, write func(dir, ns string) error) []row {
	type tool struct {
		name        string
		reps        int
		first, noop []time.Duration
		run         func(dir, ns string) error
	}
	tools := []*tool{
		{name: "gantry", reps: b.reps, run: func(dir, ns string) error {
			return b.exec(b.gantry, "apply", "--path="+dir, "--inventory="+scenario, "--inventory-namespace="+ns, "--wait=false", "--timeout=5m")
		}},
		{name: "kubectl", reps: b.kubectlReps, run: func(dir, _ string) error {
			return b.exec(b.kubectl, "apply", "--server-side", "-f", dir)
		}},
		{name: "kapp", reps: b.kubectlReps, run: func(dir, ns string) error {
			return b.exec(b.kapp, "deploy", "--yes", "--app="+scenario, "--namespace="+ns, "--file="+dir, "--wait=false")
		}},
	}
	if b.kapp == "" {
		tools = tools[:2]
	}
	for _, t := range tools {
		for rep := range t.reps {
			ns, err := b.namespace(ctx, scenario+"-"+t.name)
			b.must(err)
			dir := filepath.Join(b.work, scenario, ns)
			b.must(write(dir, ns))
			d, err := timed(func() error { return t.run(dir, ns) })
			b.must(err)
			t.first = append(t.first, d)
			time.Sleep(settle)
			d, err = timed(func() error { return t.run(dir, ns) })
			b.must(err)
			t.noop = append(t.noop, d)
			b.logf("%s, %s, rep %d: first %s, no-op %s", scenario, t.name, rep+1, t.first[rep], t.noop[rep])
		}
	}
	g, k := tools[0], tools[1]
	kp := &tool{}
	if len(tools) > 2 {
		kp = tools[2]
	}
	return []row{
		{name: "first apply of " + name, gantry: median(g.first), kubectl: median(k.first), kapp: median(kp.first), target: "faster than kubectl and kapp"},
		{name: "no-op re-apply of " + name, gantry: median(g.noop), kubectl: median(k.noop), kapp: median(kp.noop), target: "faster than kubectl and kapp"},
	}
}
