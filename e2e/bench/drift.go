package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// driftScenario: a set of apps as teams ship them (appsSet: per app a
// Deployment, a Service, a ConfigMap, an HPA and a PDB), applied once;
// then, per repetition, a no-op apply and a drift of the same set with
// nothing drifted, back to back. gantry drift compares the live objects
// with the revision the apply recorded. kubectl's closest peer, a
// server-side diff of the set, is timed beside it.
func (b *bench) driftScenario(ctx context.Context) []row {
	apps := max(b.objects/objectsPerApp, 1)
	ns := fmt.Sprintf("bench-drift-%d", b.nsSeq+1)
	b.nsSeq++
	dir := filepath.Join(b.work, ns)
	b.must(appsSet(dir, ns, apps, 0, "1.0.0"))
	base := []string{"--inventory=drift", "--inventory-namespace=default", "--timeout=5m"}
	b.must(b.exec(b.gantry, append([]string{"apply", "--path=" + dir, "--wait=false"}, base...)...))
	var noop, drift, kubectl []time.Duration
	for rep := range b.reps {
		d, err := timed(func() error {
			return b.exec(b.gantry, append([]string{"apply", "--path=" + dir, "--wait=false"}, base...)...)
		})
		b.must(err)
		noop = append(noop, d)
		d, err = timed(func() error { return b.exec(b.gantry, append([]string{"drift"}, base...)...) })
		b.must(err)
		drift = append(drift, d)
		b.logf("drift rep %d: no-op apply %s, drift %s", rep+1, noop[rep], drift[rep])
	}
	for range b.kubectlReps {
		d, err := timed(func() error {
			return b.exec(b.kubectl, "diff", "--server-side", "--force-conflicts", "--field-manager=gantry", "-R", "-f", dir)
		})
		b.must(err)
		kubectl = append(kubectl, d)
	}
	n := apps*objectsPerApp + 1
	return []row{{name: fmt.Sprintf("drift of %d objects, none drifted (floor: a no-op apply of the same set; kubectl: diff --server-side)", n),
		gantry: median(drift), flr: median(noop), kubectl: median(kubectl), ratios: ratios(drift, noop), target: "≤ 1.5 × the no-op apply"}}
}
