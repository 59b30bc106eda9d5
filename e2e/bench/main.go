// Command bench measures gantry against kubectl and against the floor (a
// minimal concurrent client that sends only the requests a scenario needs)
// on one local control plane, side by side, and prints the medians and
// their ratios as a Markdown table. Absolute times drift on shared
// machines; the ratios, measured in the same run, are what to compare.
//
//	make bench                       # builds gantry and the tools first
//	go run ./e2e/bench -objects 1000 -reps 3 -kubectl-reps 1
//	go run ./e2e/bench -only apply,prune   # some scenarios only
//
// Scenarios: apply (first apply, no-op, one change, diff), far (the same
// through a proxy that adds -rtts of round-trip time), newset (first
// apply of a Namespace with its objects, and of a CRD with its custom
// resources), prune, wait, build, memory, operator, tenants, units (a run
// file of 20 units over three control planes), offline, bundle (offline
// validation of a monitoring stack's bundle), drift, charts (build --chart
// of a platform chart against helm template), health (a poll of 1000
// custom resources decided by health rules, against kstatus alone),
// startup.
//
// kapp is timed beside kubectl, and kubectl-validate beside gantry's
// offline validation, where they are found: bin/ (make bench-peers builds
// them) or a folder named by BENCH_PEERS.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gantry-dev/gantry/e2e/cluster"
)

type bench struct {
	objects, reps, kubectlReps, workers int
	deployments, buildObjects           int
	memoryObjects, otherCRDs            int
	offlineObjects                      int
	only                                map[string]bool
	gantry, kubectl, kapp               string
	kubeconfig                          string
	// servers are the API servers of the bench's clusters, which its
	// run files' kubeconfigs reach.
	servers []string
	client  kubernetes.Interface
	http    *http.Client
	work    string
	nsSeq   int
	// rtts are the far scenario's round-trip times.
	rtts []time.Duration
	// gantryArgs are added to gantry's runs of the apply scenarios.
	gantryArgs []string
	// farScenarios are those the far scenario runs through its proxy.
	farScenarios map[string]bool
	// pids are the processes of the bench's clusters, whose CPU the
	// units scenario counts; gantryCPU, the CPU of gantry's runs so far.
	pids      []int
	gantryCPU time.Duration
}

func main() {
	b := &bench{}
	flag.IntVar(&b.objects, "objects", 1000, "ConfigMaps per scenario")
	flag.IntVar(&b.reps, "reps", 3, "repetitions for gantry and the floor")
	flag.IntVar(&b.kubectlReps, "kubectl-reps", 1, "repetitions for kubectl (slow)")
	flag.IntVar(&b.workers, "workers", 16, "concurrent workers of the floor")
	flag.IntVar(&b.deployments, "deployments", 200, "Deployments (each with a Service) of the wait scenario")
	flag.IntVar(&b.buildObjects, "build-objects", 5000, "resources of the build scenario's overlay")
	flag.IntVar(&b.memoryObjects, "memory-objects", 10000, "ConfigMaps of the memory scenario")
	flag.IntVar(&b.offlineObjects, "offline-objects", 5000, "objects of the offline scenario's set (its memory row validates twice as many)")
	flag.IntVar(&b.otherCRDs, "other-crds", 40, "CRDs of 285 KB the cluster serves in the operator scenario")
	only := flag.String("only", "apply,far,newset,prune,wait,build,components,memory,operator,tenants,units,offline,bundle,drift,charts,health,startup", "scenarios to run, comma-separated")
	gantryArgs := flag.String("gantry-args", "", "extra flags for gantry's runs of the apply and far scenarios, space-separated (--concurrency=64)")
	farScenarios := flag.String("far-scenarios", "apply,operator,drift", "what the far scenario times through its proxy, comma-separated")
	rtts := flag.String("rtts", "20ms,50ms", "round-trip times of the far scenario's proxy, comma-separated")
	flag.Parse()
	b.gantryArgs = strings.Fields(*gantryArgs)
	b.farScenarios = map[string]bool{}
	for _, s := range strings.Split(*farScenarios, ",") {
		b.farScenarios[strings.TrimSpace(s)] = true
	}
	for _, r := range strings.Split(*rtts, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(r))
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "bench: -rtts: %q is not a round-trip time\n", r)
			os.Exit(2)
		}
		b.rtts = append(b.rtts, d)
	}
	b.only = map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		b.only[strings.TrimSpace(s)] = true
	}
	if err := b.run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func (b *bench) run() error {
	ctx := context.Background()
	var err error
	if b.gantry, err = cluster.Tool("gantry"); err != nil {
		return err
	}
	if b.kubectl, err = cluster.Tool("kubectl"); err != nil {
		return err
	}
	b.kapp = peer("kapp")
	c, err := (&cluster.Local{}).Start(ctx, cluster.Options{Name: "bench"})
	if err != nil {
		return err
	}
	defer func() { _ = c.Stop(context.Background()) }()
	b.kubeconfig = c.Kubeconfig
	b.servers = append(b.servers, c.RESTConfig.Host)
	b.addPIDs(c)
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.QPS, cfg.Burst = -1, 0 // the floor is not rate limited on the client
	if b.http, err = rest.HTTPClientFor(cfg); err != nil {
		return err
	}
	if b.client, err = kubernetes.NewForConfigAndClient(cfg, b.http); err != nil {
		return err
	}
	if b.work, err = os.MkdirTemp("", "gantry-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.work)

	fmt.Fprintf(os.Stderr, "bench: %d objects, %d reps (kubectl %d), floor with %d workers\n", b.objects, b.reps, b.kubectlReps, b.workers)
	var rows []row
	if b.only["apply"] {
		rows = append(rows, b.applyScenarios(ctx)...)
	}
	if b.only["far"] {
		rows = append(rows, b.farScenario(ctx, b.rtts)...)
	}
	if b.only["newset"] {
		rows = append(rows, b.newSetScenarios(ctx)...)
	}
	if b.only["prune"] {
		rows = append(rows, b.pruneScenario(ctx)...)
	}
	if b.only["build"] {
		rows = append(rows, b.buildScenario())
	}
	if b.only["components"] {
		rows = append(rows, b.componentsScenario())
	}
	if b.only["memory"] {
		rows = append(rows, b.memoryScenario(ctx)...)
	}
	if b.only["operator"] {
		rows = append(rows, b.operatorScenario(ctx)...)
	}
	if b.only["tenants"] {
		rows = append(rows, b.tenantsScenario(ctx)...)
	}
	if b.only["units"] {
		rows = append(rows, b.unitsScenario(ctx)...)
	}
	if b.only["offline"] {
		rows = append(rows, b.offlineScenario(ctx)...)
	}
	if b.only["bundle"] {
		rows = append(rows, b.bundleScenario()...)
	}
	if b.only["drift"] {
		rows = append(rows, b.driftScenario(ctx)...)
	}
	if b.only["charts"] {
		rows = append(rows, b.chartsScenario()...)
	}
	if b.only["health"] {
		rows = append(rows, b.healthScenario()...)
	}
	// Last: its Deployments and pods leave the most behind.
	if b.only["wait"] {
		rows = append(rows, b.waitScenario(ctx))
	}
	if b.only["startup"] {
		rows = append(rows, b.versionStartup()...)
	}
	printTable(rows, b)
	return nil
}

// row is one scenario's medians.
type row struct {
	name                       string
	gantry, kubectl, kapp, flr time.Duration
	target                     string
	// ratios are gantry / floor per repetition; their median is reported
	// when there are any.
	ratios []float64
	// kratios are kubectl / gantry per repetition, likewise.
	kratios []float64
	// latency: the times are how long the tool took to return after the
	// event, not durations of work; memory: bytes, not times.
	latency bool
	memory  int64
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func (b *bench) must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// manifests writes the scenario's ConfigMaps in ns, their Namespace
// first, as an app brings its own; changed marks one of them as changed.
func (b *bench) manifests(ns string, changed bool) (string, error) {
	dir := filepath.Join(b.work, ns+fmt.Sprint(changed))
	if err := configMaps(dir, ns, b.objects); err != nil {
		return dir, err
	}
	file := filepath.Join(dir, "configmaps.yaml")
	body, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	if changed {
		body = []byte(strings.Replace(string(body), "key: v1", "key: v2", 1))
	}
	return dir, os.WriteFile(file, append([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n---\n"), body...), 0o644)
}

func (b *bench) namespace(ctx context.Context, tool string) (string, error) {
	b.nsSeq++
	ns := fmt.Sprintf("bench-%s-%d", tool, b.nsSeq)
	_, err := b.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return ns, err
}

func (b *bench) addPIDs(c *cluster.Cluster) {
	for _, p := range c.Processes {
		b.pids = append(b.pids, p.PID)
	}
}

// cpu is the CPU time, user and system, that the clusters' processes
// (etcd, the API servers, their controllers and kwok), the bench itself
// (the latency proxies run in it) and gantry's runs have used so far.
func (b *bench) cpu() (clusters, bench, gantry time.Duration) {
	for _, pid := range b.pids {
		clusters += procCPU(fmt.Sprintf("/proc/%d/stat", pid))
	}
	return clusters, procCPU("/proc/self/stat"), b.gantryCPU
}

// procCPU reads utime and stime from a /proc stat file, in clock ticks of
// 10 ms (USER_HZ is 100 on Linux); 0 when it cannot.
func procCPU(file string) time.Duration {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

func (b *bench) exec(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+b.kubeconfig)
	for i, a := range args {
		if a == "--run-file" && i+1 < len(args) {
			// The run file's folder is the workspace; its kubeconfigs
			// reach the bench's clusters.
			cmd.Env = append(cmd.Env, "GANTRY_WORKSPACE="+filepath.Dir(args[i+1]), "GANTRY_RUN_FILE_SERVERS="+strings.Join(b.servers, "\n"))
		}
	}
	out, err := cmd.CombinedOutput()
	if name == b.gantry && cmd.ProcessState != nil {
		b.gantryCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		// diff exits 1 (kubectl) or 3 (gantry) when there are changes.
		var ee *exec.ExitError
		if errors.As(err, &ee) && (ee.ExitCode() == 1 && strings.Contains(name, "kubectl") && args[0] == "diff" || ee.ExitCode() == 3) {
			return nil
		}
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return nil
}

// floor applies the ConfigMaps with raw server-side-apply PATCHes from a
// pool of workers, nothing else.
func (b *bench) floor(ctx context.Context, ns string, changed bool) error {
	return b.workersDo(0, b.objects, func(i int) error {
		v := "v1"
		if changed && i == 0 {
			v = "v2"
		}
		return b.floorConfigMap(ctx, ns, i, v, "", false)
	})
}

// bound sends the raw requests that validating every object before
// writing any takes: a dry-run of each ConfigMap, then its apply, both
// with the labels gantry's inventory puts on every object. It is what a
// first apply cannot do without, whatever the tool.
func (b *bench) bound(ctx context.Context, ns string) error {
	labels := fmt.Sprintf(`,"labels":{"gantry.dev/inventory":"bench","gantry.dev/inventory-namespace":%q}`, ns)
	for _, dryRun := range []bool{true, false} {
		if err := b.workersDo(0, b.objects, func(i int) error { return b.floorConfigMap(ctx, ns, i, "v1", labels, dryRun) }); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) floorConfigMap(ctx context.Context, ns string, i int, value, labels string, dryRun bool) error {
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%04d","namespace":%q%s},"data":{"key":%q,"payload":%q}}`, i, ns, labels, value, strings.Repeat("x", 200))
	opts := metav1.PatchOptions{FieldManager: "floor", Force: ptr(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := b.client.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("cm-%04d", i), types.ApplyPatchType, []byte(body), opts)
	return err
}

func ptr[T any](v T) *T { return &v }

// applyScenarios: first apply, no-op re-apply, one change, diff with one
// change; for each tool in a namespace of its own per repetition.
func (b *bench) applyScenarios(ctx context.Context) []row {
	type times struct{ first, noop, change, diff []time.Duration }
	var g, k, kp, f times
	var bounds []time.Duration
	must := b.must
	for rep := range b.reps {
		// floor
		ns, err := b.namespace(ctx, "floor")
		must(err)
		d, err := timed(func() error { return b.floor(ctx, ns, false) })
		must(err)
		f.first = append(f.first, d)
		d, err = timed(func() error { return b.floor(ctx, ns, false) })
		must(err)
		f.noop = append(f.noop, d)
		ns, err = b.namespace(ctx, "bound")
		must(err)
		d, err = timed(func() error { return b.bound(ctx, ns) })
		must(err)
		bounds = append(bounds, d)

		// gantry
		ns, err = b.namespace(ctx, "gantry")
		must(err)
		dir, err := b.manifests(ns, false)
		must(err)
		changedDir, err := b.manifests(ns, true)
		must(err)
		args := func(cmd, path string) []string {
			a := []string{cmd, "--path=" + path, "--inventory=bench", "--inventory-namespace=" + ns, "--timeout=5m"}
			if cmd == "apply" {
				a = append(a, "--wait=false")
			}
			return append(a, b.gantryArgs...)
		}
		d, err = timed(func() error { return b.exec(b.gantry, args("apply", dir)...) })
		must(err)
		g.first = append(g.first, d)
		d, err = timed(func() error { return b.exec(b.gantry, args("apply", dir)...) })
		must(err)
		g.noop = append(g.noop, d)
		d, err = timed(func() error { return b.exec(b.gantry, append(args("diff", changedDir), "--detailed-exitcode")...) })
		must(err)
		g.diff = append(g.diff, d)
		d, err = timed(func() error { return b.exec(b.gantry, args("apply", changedDir)...) })
		must(err)
		g.change = append(g.change, d)
		fmt.Fprintf(os.Stderr, "bench: rep %d: floor %s/%s, dry-runs then applies %s, gantry %s/%s/%s/%s\n", rep+1, f.first[rep], f.noop[rep], bounds[rep], g.first[rep], g.noop[rep], g.diff[rep], g.change[rep])

		if rep < b.kubectlReps {
			ns, err = b.namespace(ctx, "kubectl")
			must(err)
			dir, err := b.manifests(ns, false)
			must(err)
			changedDir, err := b.manifests(ns, true)
			must(err)
			file := filepath.Join(dir, "configmaps.yaml")
			changed := filepath.Join(changedDir, "configmaps.yaml")
			d, err = timed(func() error { return b.exec(b.kubectl, "apply", "--server-side", "-f", file) })
			must(err)
			k.first = append(k.first, d)
			d, err = timed(func() error { return b.exec(b.kubectl, "apply", "--server-side", "-f", file) })
			must(err)
			k.noop = append(k.noop, d)
			d, err = timed(func() error { return b.exec(b.kubectl, "diff", "--server-side", "-f", changed) })
			must(err)
			k.diff = append(k.diff, d)
			d, err = timed(func() error { return b.exec(b.kubectl, "apply", "--server-side", "-f", changed) })
			must(err)
			k.change = append(k.change, d)
			fmt.Fprintf(os.Stderr, "bench: rep %d: kubectl %s/%s/%s/%s\n", rep+1, k.first[rep], k.noop[rep], k.diff[rep], k.change[rep])
		}
		if b.kapp != "" && rep < b.kubectlReps {
			ns, err = b.namespace(ctx, "kapp")
			must(err)
			appNS, err := b.namespace(ctx, "kapp-app")
			must(err)
			dir, err := b.manifests(ns, false)
			must(err)
			changedDir, err := b.manifests(ns, true)
			must(err)
			deploy := func(dir string, extra ...string) error {
				return b.exec(b.kapp, append([]string{"deploy", "--yes", "--app=bench", "--namespace=" + appNS, "--file=" + dir, "--wait=false"}, extra...)...)
			}
			d, err = timed(func() error { return deploy(dir) })
			must(err)
			kp.first = append(kp.first, d)
			d, err = timed(func() error { return deploy(dir) })
			must(err)
			kp.noop = append(kp.noop, d)
			d, err = timed(func() error { return deploy(changedDir, "--diff-run", "--diff-changes") })
			must(err)
			kp.diff = append(kp.diff, d)
			d, err = timed(func() error { return deploy(changedDir) })
			must(err)
			kp.change = append(kp.change, d)
			fmt.Fprintf(os.Stderr, "bench: rep %d: kapp %s/%s/%s/%s\n", rep+1, kp.first[rep], kp.noop[rep], kp.diff[rep], kp.change[rep])
		}
	}
	n := fmt.Sprint(b.objects)
	return []row{
		{name: "first apply of " + n + " ConfigMaps (their Namespace in the set)", gantry: median(g.first), kubectl: median(k.first), kapp: median(kp.first), flr: median(f.first), ratios: ratios(g.first, f.first), target: "≤ 2.0 × floor, faster than kubectl and kapp"},
		{name: "first apply of " + n + ", against raw dry-runs of every object then raw applies, with the inventory labels", gantry: median(g.first), flr: median(bounds), ratios: ratios(g.first, bounds), target: "– (what validating first costs any tool)"},
		{name: "no-op re-apply of " + n + " (their Namespace in the set)", gantry: median(g.noop), kubectl: median(k.noop), kapp: median(kp.noop), flr: median(f.noop), ratios: ratios(g.noop, f.noop), target: "≤ 0.4 × floor, faster than kapp"},
		{name: "one change in " + n, gantry: median(g.change), kubectl: median(k.change), kapp: median(kp.change), flr: median(f.noop), ratios: ratios(g.change, f.noop), target: "≤ 0.5 × floor"},
		{name: "diff of " + n + " with one change", gantry: median(g.diff), kubectl: median(k.diff), kapp: median(kp.diff), flr: median(f.noop), ratios: ratios(g.diff, f.noop), target: "≤ 0.5 × floor, ≥ 8 × faster than kubectl diff --server-side"},
	}
}

// ratios divides the runs of one repetition pairwise: the machine's drift
// between repetitions cancels out.
func ratios(a, b []time.Duration) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		out = append(out, float64(a[i])/float64(b[i]))
	}
	return out
}

func (b *bench) versionStartup() []row {
	var ds []time.Duration
	var peak int64
	for range 21 {
		cmd := exec.Command(b.gantry, "version")
		d, err := timed(cmd.Run)
		if err == nil {
			ds = append(ds, d)
			peak = max(peak, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss*1024)
		}
	}
	return []row{
		{name: "`gantry version` start-up (21 runs)", gantry: median(ds), target: "≤ 50 ms"},
		{name: "peak RSS, `gantry version` (the most of 21 runs)", memory: peak, target: "≤ 50 MiB"},
	}
}

func ratio(a, b time.Duration) string {
	if a == 0 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

func fmtD(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return d.Round(time.Millisecond).String()
}

func printTable(rows []row, b *bench) {
	fmt.Printf("| scenario | gantry | floor | kubectl | kapp | gantry / floor | kubectl / gantry | kapp / gantry | target |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		switch {
		case r.memory > 0:
			fmt.Printf("| %s | %d MiB | – | – | – | – | – | – | %s |\n", r.name, r.memory>>20, r.target)
		case r.latency:
			fmt.Printf("| %s | %s | – | %s | – | – | – | – | %s |\n", r.name, fmtD(r.gantry), fmtD(r.kubectl), r.target)
		case r.flr == 0 && r.kubectl != 0:
			kg := ratio(r.kubectl, r.gantry)
			if len(r.kratios) > 0 {
				sort.Float64s(r.kratios)
				kg = fmt.Sprintf("%.2f", r.kratios[len(r.kratios)/2])
			}
			fmt.Printf("| %s | %s | – | %s | %s | – | %s | %s | %s |\n", r.name, fmtD(r.gantry), fmtD(r.kubectl), fmtD(r.kapp), kg, ratio(r.kapp, r.gantry), r.target)
		default:
			gf := ratio(r.gantry, r.flr)
			if len(r.ratios) > 0 {
				sort.Float64s(r.ratios)
				gf = fmt.Sprintf("%.2f", r.ratios[len(r.ratios)/2])
			}
			fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.name, fmtD(r.gantry), fmtD(r.flr), fmtD(r.kubectl), fmtD(r.kapp), gf, ratio(r.kubectl, r.gantry), ratio(r.kapp, r.gantry), r.target)
		}
	}
	kapp := "not found: make bench-peers, or BENCH_PEERS"
	if b.kapp != "" {
		kapp = b.kapp
	}
	fmt.Printf("\nkapp: %s.\n", kapp)
	fmt.Printf("\nMedians of %d runs (kubectl and kapp: %d); gantry / floor is the median of the ratios within each repetition; floor: %d workers of raw requests, no client rate limit.\n", b.reps, b.kubectlReps, b.workers)
}

// peer finds a peer tool that make bench times when it is there: in
// BENCH_PEERS, else in gantry's bin/ folder.
func peer(name string) string {
	if dir := os.Getenv("BENCH_PEERS"); dir != "" {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	if p, err := cluster.Tool(name); err == nil {
		return p
	}
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
