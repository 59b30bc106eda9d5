package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/e2e/latency"
	"k8s.io/client-go/tools/clientcmd"
)

// The units scenario: a platform team's run file of 20 units over three
// control planes, 5,000 objects in all. On each cluster a platform unit
// comes first; the other units of that cluster depend on it. Every unit
// brings its Namespace, which holds its inventory, and 249 ConfigMaps.
const (
	unitCount    = 20
	unitClusters = 3
	unitObjects  = 250
)

// unitsScenario times the run file's first apply and no-op as one graph
// (gantry apply --run-file), against the same units run one after another
// by a shell loop (gantry apply --run-file --unit, one process each), and
// the graph's no-op against the slowest single unit's no-op.
func (b *bench) unitsScenario(ctx context.Context) []row {
	kubeconfigs := []string{b.kubeconfig}
	for i := 1; i < unitClusters; i++ {
		c, err := (&cluster.Local{}).Start(ctx, cluster.Options{Name: fmt.Sprintf("bench-units-%d", i), ControlPlaneOnly: true})
		b.must(err)
		defer func() { _ = c.Stop(context.Background()) }()
		kubeconfigs = append(kubeconfigs, c.Kubeconfig)
		b.servers = append(b.servers, c.RESTConfig.Host)
		b.addPIDs(c)
	}
	rows := b.unitsOver(kubeconfigs, "")
	if b.only["far"] {
		// Each cluster behind a proxy of its own, as clusters in
		// other regions are.
		for _, rtt := range b.rtts {
			var far []string
			for i, kc := range kubeconfigs {
				cfg, err := clientcmd.BuildConfigFromFlags("", kc)
				b.must(err)
				p := &latency.Proxy{Target: hostPort(cfg.Host), RTT: rtt}
				b.must(p.Start())
				defer p.Close()
				file := filepath.Join(b.work, fmt.Sprintf("units-far-%d-%d.kubeconfig", rtt.Milliseconds(), i))
				b.must(latency.Kubeconfig(kc, p.Addr, file))
				far = append(far, file)
				b.servers = append(b.servers, "https://"+p.Addr)
			}
			for _, r := range b.unitsOver(far, fmt.Sprintf("f%d", rtt.Milliseconds())) {
				r.name = fmt.Sprintf("%d ms RTT: %s", rtt.Milliseconds(), r.name)
				if !strings.Contains(r.name, "the CPU it took") {
					r.target += fmt.Sprintf("; round trips: graph %s, baseline %s", trips(r.gantry, rtt), trips(r.flr, rtt))
				}
				rows = append(rows, r)
			}
		}
	}
	return rows
}

// unitsOver times the units scenario against the clusters kubeconfigs
// reach; prefix keeps the names of one call's units apart from another's.
func (b *bench) unitsOver(kubeconfigs []string, prefix string) []row {
	var graph, loop, slowestFirst, graphNoop, slowestNoop, cpuFloor []time.Duration
	var cpuNote string
	for rep := range b.reps {
		graphFile := b.unitsRunFile(fmt.Sprintf("%sg%d", prefix, rep), kubeconfigs)
		loopFile := b.unitsRunFile(fmt.Sprintf("%sl%d", prefix, rep), kubeconfigs)

		c0, p0, g0 := b.cpu()
		d, err := timed(func() error { return b.exec(b.gantry, "apply", "--run-file", graphFile) })
		b.must(err)
		graph = append(graph, d)
		// What the graph's first apply cost in CPU, on the runner's
		// cores: its time cannot be less than that over the cores.
		c1, p1, g1 := b.cpu()
		spent := (c1 - c0) + (p1 - p0) + (g1 - g0)
		cpuFloor = append(cpuFloor, spent/time.Duration(runtime.NumCPU()))
		cpuNote = fmt.Sprintf("CPU: gantry %s, the clusters %s, the proxies and bench %s, over %d cores", (g1 - g0).Round(10*time.Millisecond), (c1 - c0).Round(10*time.Millisecond), (p1 - p0).Round(10*time.Millisecond), runtime.NumCPU())
		b.logf("units, rep %d: graph's first apply %s; %s", rep+1, d, cpuNote)

		// The loop: each unit's first apply alone, one after another.
		var slowestAlone time.Duration
		d, err = timed(func() error {
			for u := range unitCount {
				d, err := timed(func() error { return b.exec(b.gantry, "apply", "--run-file", loopFile, "--unit", unitName(u)) })
				if err != nil {
					return err
				}
				slowestAlone = max(slowestAlone, d)
			}
			return nil
		})
		b.must(err)
		loop = append(loop, d)
		slowestFirst = append(slowestFirst, slowestAlone)

		d, err = timed(func() error { return b.exec(b.gantry, "apply", "--run-file", graphFile) })
		b.must(err)
		graphNoop = append(graphNoop, d)

		var slowest time.Duration
		for u := range unitCount {
			d, err := timed(func() error { return b.exec(b.gantry, "apply", "--run-file", graphFile, "--unit", unitName(u)) })
			b.must(err)
			slowest = max(slowest, d)
		}
		slowestNoop = append(slowestNoop, slowest)
		b.logf("units, rep %d: graph %s, loop %s (slowest unit %s); no-op graph %s, slowest unit alone %s", rep+1, graph[rep], loop[rep], slowestAlone, graphNoop[rep], slowest)
	}
	name := fmt.Sprintf("%d units over %d control planes, %d objects", unitCount, unitClusters, unitCount*unitObjects)
	noopTarget := "≤ 2 × the slowest unit"
	if prefix != "" { // far away
		noopTarget = "≤ 1.2 × the slowest unit"
	}
	return []row{
		{name: name + ": first apply, the graph (floor: the same units one after another, by a shell loop)",
			gantry: median(graph), flr: median(loop), ratios: ratios(graph, loop), target: "≤ 0.6 × the loop"},
		{name: name + ": first apply, the graph (floor: the slowest unit's first apply alone, in the loop)",
			gantry: median(graph), flr: median(slowestFirst), ratios: ratios(graph, slowestFirst), target: "≤ 1.3 × the slowest unit"},
		{name: name + ": no-op of the graph (floor: the slowest unit's no-op alone)",
			gantry: median(graphNoop), flr: median(slowestNoop), ratios: ratios(graphNoop, slowestNoop), target: noopTarget},
		{name: name + ": first apply, the graph (floor: the CPU it took, gantry's and the clusters', over the runner's cores)",
			gantry: median(graph), flr: median(cpuFloor), ratios: ratios(graph, cpuFloor), target: "none: where the time goes; " + cpuNote},
	}
}

func unitName(u int) string { return fmt.Sprintf("unit-%02d", u) }

// unitsRunFile writes the units' folders and their run file, with names of
// their own (prefix), and returns the run file's path.
func (b *bench) unitsRunFile(prefix string, kubeconfigs []string) string {
	dir := filepath.Join(b.work, "units-"+prefix)
	var rf strings.Builder
	rf.WriteString("defaults:\n  timeout: 5m\n  wait: false\nunits:\n")
	for u := range unitCount {
		ns := fmt.Sprintf("bench-units-%s-%02d", prefix, u)
		b.must(configMaps(filepath.Join(dir, unitName(u)), ns, unitObjects-1))
		b.must(os.WriteFile(filepath.Join(dir, unitName(u), "namespace.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"), 0o644))
		cluster := u % unitClusters
		deps := ""
		if u >= unitClusters {
			deps = fmt.Sprintf(", depends-on: [%s]", unitName(cluster)) // the platform unit of its cluster
		}
		// A run file names kubeconfigs inside its workspace.
		kc := fmt.Sprintf("cluster-%d.kubeconfig", cluster)
		data, err := os.ReadFile(kubeconfigs[cluster])
		b.must(err)
		b.must(os.WriteFile(filepath.Join(dir, kc), data, 0o600))
		fmt.Fprintf(&rf, "  - {name: %s, path: %s, inventory: %s, inventory-namespace: %s, kubeconfig: %s%s}\n",
			unitName(u), unitName(u), unitName(u), ns, kc, deps)
	}
	file := filepath.Join(dir, "gantry.yaml")
	b.must(os.WriteFile(file, []byte(rf.String()), 0o644))
	return file
}
