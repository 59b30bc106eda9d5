package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/e2e/latency"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// traced is one request of a --trace: its method, its path and the depth
// of the chain of answers it waited for.
type traced struct {
	method, path string
	depth        int
}

var traceLine = regexp.MustCompile(`^\s+\S+\s+\S+\s+(\d+)\s+(GET|POST|PUT|PATCH|DELETE) [^/\s]+(/\S*) ->`)

// requestsOf reads the requests a --trace printed.
func requestsOf(t *testing.T, stderr string) []traced {
	t.Helper()
	var out []traced
	for line := range strings.SplitSeq(stderr, "\n") {
		if m := traceLine.FindStringSubmatch(line); m != nil {
			depth, _ := strconv.Atoi(m[1])
			out = append(out, traced{m[2], m[3], depth})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no requests traced:\n%s", stderr)
	}
	return out
}

// A no-op sends no write: no Lease taken, no inventory written, no
// dry-run; and it is the reads that tell it so, which the API server
// confirms (the inventory's version is the same). One change writes, under
// the Lease.
func TestNoopSendsNoWrite(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  namespace: %s\ndata:\n  k: v\n", i, ns)
	}
	writeFile(t, filepath.Join(dir, "cms.yaml"), b.String())
	args := []string{"apply", "--path=" + dir, "--inventory=noop", "--inventory-namespace=" + ns, "--trace"}
	if r := gantry(t, args...); r.code != 0 {
		t.Fatalf("first apply: exit %d", r.code)
	}
	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	before, err := cms.Get(ctx, inventory.ConfigMapName("noop"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	r := gantry(t, args...)
	if c := r.res.Counts(); r.code != 0 || c["unchanged"] != 30 {
		t.Fatalf("no-op: exit %d, counts %v", r.code, c)
	}
	for _, q := range requestsOf(t, r.stderr) {
		if q.method != "GET" || strings.Contains(q.path, "dryRun") {
			t.Errorf("the no-op sent %s %s", q.method, q.path)
		}
	}
	after, err := cms.Get(ctx, inventory.ConfigMapName("noop"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the inventory was written by the no-op: version %s, then %s", before.ResourceVersion, after.ResourceVersion)
	}
	if _, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, inventory.ConfigMapName("noop"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Lease is left: %v", err)
	}

	// One change: the Lease is taken and given back, the object written.
	writeFile(t, filepath.Join(dir, "cms.yaml"), strings.Replace(b.String(), "k: v", "k: changed", 1))
	r = gantry(t, args...)
	if c := r.res.Counts(); r.code != 0 || c["configured"] != 1 {
		t.Fatalf("one change: exit %d, counts %v", r.code, c)
	}
	var writes []string
	for _, q := range requestsOf(t, r.stderr) {
		if q.method != "GET" && !strings.Contains(q.path, "dryRun") {
			writes = append(writes, q.method+" "+strings.SplitN(q.path, "?", 2)[0])
		}
	}
	lease := "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases"
	want := []string{"POST " + lease, "PATCH /api/v1/namespaces/" + ns + "/configmaps/cm-0", "DELETE " + lease + "/" + inventory.ConfigMapName("noop")}
	for _, w := range want {
		found := false
		for _, got := range writes {
			found = found || got == w
		}
		if !found {
			t.Errorf("one change: no %s among the writes %v", w, writes)
		}
	}
	if writes[0] != want[0] {
		t.Errorf("one change: the first write is %s, not the Lease's", writes[0])
	}
}

// Units on one cluster read its discovery, its version and the schemas of
// its built-in kinds once between them, not once each.
func TestUnitsOnOneClusterDiscoverOnce(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	root := t.TempDir()
	kc := inWorkspace(t, root, env.Cluster.Kubeconfig, "kubeconfig")
	var units strings.Builder
	for i := range 3 {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprint("app", i)), 0o755); err != nil {
			t.Fatal(err)
		}
		// Each unit brings a Namespace of its own, so that its ConfigMap
		// is checked offline against the cluster's /openapi/v3 first.
		own := fmt.Sprintf("%s-u%d", ns, i)
		t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(context.Background(), own, metav1.DeleteOptions{}) })
		writeFile(t, filepath.Join(root, fmt.Sprint("app", i), "cm.yaml"),
			fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[2]s\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%[1]d\n  namespace: %[2]s\ndata:\n  k: v\n", i, own))
		fmt.Fprintf(&units, "  - {name: app%d, path: app%d, inventory: app%d, kubeconfig: %s}\n", i, i, i, kc)
	}
	runFile := filepath.Join(root, "gantry.yaml")
	writeFile(t, runFile, fmt.Sprintf("defaults:\n  inventory-namespace: %s\nunits:\n%s", ns, units.String()))
	r := gantryRunFile(t, context.Background(), "apply", "--run-file", runFile, "--trace")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	count := map[string]int{}
	for _, q := range requestsOf(t, r.stderr) {
		if q.method == "GET" {
			count[strings.SplitN(q.path, "?", 2)[0]]++
		}
	}
	for _, p := range []string{"/api", "/apis", "/version", "/openapi/v3", "/openapi/v3/api/v1"} {
		if count[p] != 1 {
			t.Errorf("GET %s sent %d times by 3 units on one cluster, want once", p, count[p])
		}
	}
	if n := count["/api/v1/namespaces/"+ns+"/configmaps/"+inventory.ConfigMapName("app1")]; n == 0 {
		t.Errorf("the trace misses the units' own reads: %v", count)
	}
}

// A plan made before the Lease is made again when what it read changed
// before the run took the Lease: here another holder keeps the Lease while
// an object the plan found unchanged is edited by hand. Planned from its
// first reads, the run would leave the edit; planned again, it takes it
// back.
func TestPlanIsMadeAgainWhenItsReadsChanged(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	set := func(first string) string {
		var b strings.Builder
		for i := range 10 {
			v := "v"
			if i == 0 {
				v = first
			}
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  namespace: %s\ndata:\n  k: %s\n", i, ns, v)
		}
		return b.String()
	}
	writeFile(t, filepath.Join(dir, "cms.yaml"), set("v"))
	args := []string{"apply", "--path=" + dir, "--inventory=replan", "--inventory-namespace=" + ns}
	if r := gantry(t, args...); r.code != 0 {
		t.Fatalf("first apply: exit %d", r.code)
	}
	writeFile(t, filepath.Join(dir, "cms.yaml"), set("v2"))

	ctx := context.Background()
	store := &inventory.Store{Client: env.Client}
	held, err := store.Lock(ctx, ns, "replan", "another run", inventory.LockOptions{Duration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan gantryRun)
	go func() { done <- gantry(t, args...) }()
	// The run plans (cm-5 unchanged), then waits for the Lease.
	time.Sleep(3 * time.Second)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, "cm-5", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["k"] = "by hand"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	held.Release()
	r := <-done
	if r.code != 0 {
		t.Fatalf("apply: exit %d", r.code)
	}
	if !strings.Contains(r.stderr, "is locked by another run; waiting") {
		t.Errorf("the run did not wait for the Lease:\n%s", r.stderr)
	}
	// On a machine slow enough that the run had not planned within the
	// pause, its first plan already saw the edit: the counts below hold
	// either way, and without the second plan they do not.
	if !strings.Contains(r.stderr, "planning again under its Lease") {
		t.Logf("the run planned after the edit, not again")
	}
	if c := r.res.Counts(); c["configured"] != 2 {
		t.Errorf("counts %v, want cm-0 and cm-5 configured", c)
	}
	if cm, err := cms.Get(ctx, "cm-5", metav1.GetOptions{}); err != nil || cm.Data["k"] != "v" {
		t.Errorf("cm-5 holds %q (%v), want the edit by hand taken back", cm.Data["k"], err)
	}
}

// A Lease planted by someone else, valid and never given back, is not
// passed by the reads before the Lease: a no-op waits for it like any run,
// fails InventoryLocked at its timeout, and leaves the planted Lease and
// the inventory as they were.
func TestPlantedLeaseIsNotPassed(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.yaml"), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: %s\ndata:\n  k: v\n", ns))
	args := []string{"apply", "--path=" + dir, "--inventory=planted", "--inventory-namespace=" + ns}
	if r := gantry(t, args...); r.code != 0 {
		t.Fatalf("first apply: exit %d", r.code)
	}
	ctx := context.Background()
	now := metav1.NewMicroTime(time.Now())
	planted := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: inventory.ConfigMapName("planted"), Namespace: ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone else"), LeaseDurationSeconds: ptr.To(int32(3600)), AcquireTime: &now, RenewTime: &now},
	}
	leases := env.Client.CoordinationV1().Leases(ns)
	planted, err := leases.Create(ctx, planted, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName("planted"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	r := gantry(t, append(args, "--timeout=3s")...)
	if r.code != 1 || r.res.Reason != result.ReasonLocked || !strings.Contains(r.stderr, "someone else") {
		t.Errorf("no-op beside a planted Lease: exit %d, reason %s\n%s", r.code, r.res.Reason, r.stderr)
	}
	if l, err := leases.Get(ctx, planted.Name, metav1.GetOptions{}); err != nil || l.ResourceVersion != planted.ResourceVersion {
		t.Errorf("the planted Lease was changed: %v", err)
	}
	if now, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, inv.Name, metav1.GetOptions{}); err != nil || now.ResourceVersion != inv.ResourceVersion {
		t.Errorf("the inventory was written: %v", err)
	}
}

// A set that brings its own Namespace creates it to dry-run the rest in
// it; the answer to that write already says the Namespace is ready, so no
// poll (a LIST of namespaces) follows it before the Lease.
func TestNewNamespaceIsNotPolled(t *testing.T) {
	t.Parallel()
	own := env.Namespace(t) + "-own"
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(context.Background(), own, metav1.DeleteOptions{}) })
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "set.yaml"), fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: %[1]s\ndata:\n  k: v\n", own))
	r := gantry(t, "apply", "--path="+dir, "--inventory=own", "--inventory-namespace="+own, "--trace")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	reqs := requestsOf(t, r.stderr)
	created := slices.IndexFunc(reqs, func(q traced) bool {
		return q.method == "PATCH" && strings.HasPrefix(q.path, "/api/v1/namespaces/"+own+"?") && !strings.Contains(q.path, "dryRun")
	})
	lease := slices.IndexFunc(reqs, func(q traced) bool { return q.method == "POST" && strings.Contains(q.path, "/leases") })
	if created < 0 || lease < created {
		t.Fatalf("no write of the Namespace followed by the Lease's POST among %v", reqs)
	}
	for _, q := range reqs[created+1 : lease] {
		if q.method == "GET" && strings.HasPrefix(q.path, "/api/v1/namespaces?") {
			t.Errorf("after the Namespace was created, before the Lease, the run polled it: %s %s", q.method, q.path)
		}
	}
}

// Drift against the newest revision asks for discovery beside the version,
// and for the revision beside the look for stray revisions: its reads form
// a chain of four (the version, the inventory, the revision, the objects),
// not six. The cluster is reached through a proxy that adds 100 ms to each
// round trip, so that requests sent together are seen together, however
// fast the machine answers.
func TestDriftReadsInAChainOfFour(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.yaml"), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: %s\ndata:\n  k: v\n", ns))
	if r := gantry(t, "apply", "--path="+dir, "--inventory=chain", "--inventory-namespace="+ns); r.code != 0 {
		t.Fatalf("apply: exit %d", r.code)
	}
	proxy := &latency.Proxy{Target: strings.TrimPrefix(env.Cluster.RESTConfig.Host, "https://"), RTT: 100 * time.Millisecond}
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	far := filepath.Join(t.TempDir(), "kubeconfig")
	if err := latency.Kubeconfig(env.Cluster.Kubeconfig, proxy.Addr, far); err != nil {
		t.Fatal(err)
	}
	r := gantryWith(t, far, "drift", "--inventory=chain", "--inventory-namespace="+ns, "--trace")
	if r.code != 0 {
		t.Fatalf("drift: exit %d", r.code)
	}
	deepest := 0
	depth := map[string]int{}
	for _, q := range requestsOf(t, r.stderr) {
		deepest = max(deepest, q.depth)
		depth[strings.SplitN(q.path, "?", 2)[0]] = q.depth
	}
	if deepest > 4 {
		t.Errorf("drift's requests form a chain of %d, want at most 4:\n%s", deepest, r.stderr)
	}
	revision := depth["/api/v1/namespaces/"+ns+"/secrets/"+inventory.RevisionName("chain", 1)]
	if strays := depth["/api/v1/namespaces/"+ns+"/secrets"]; strays == 0 || strays != revision {
		t.Errorf("the look for stray revisions went at depth %d, the revision's read at %d: want them together", strays, revision)
	}
	if d := depth["/api"]; d != 1 {
		t.Errorf("discovery (/api) went at depth %d, want 1, beside the version", d)
	}
}

// Units on one cluster share its discovery, its schemas and its bound on
// requests in flight, never an identity: a run file's unit that names a
// service account of few rights, on the same kubeconfig as units that run
// as the workflow's identity, is refused what its account may not do, and
// the units after it are not held to its account. One unit at a time, in
// the file's order: the narrow unit first, so that what the others share
// was made by it.
func TestUnitsOnOneClusterShareNoIdentity(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	// It may keep its inventory (ConfigMaps, Secrets, a Lease), no more.
	bindServiceAccount(t, ns, "narrow", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"*"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}},
	})
	root := t.TempDir()
	kc := inWorkspace(t, root, env.Cluster.Kubeconfig, "kubeconfig")
	for _, u := range []string{"narrow", "first", "second"} {
		if err := os.MkdirAll(filepath.Join(root, u), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, u, "svc.yaml"), fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%s\n  namespace: %s\nspec:\n  ports:\n  - port: 80\n", u, ns))
	}
	runFile := filepath.Join(root, "gantry.yaml")
	writeFile(t, runFile, fmt.Sprintf(`defaults:
  inventory-namespace: %[1]s
  kubeconfig: %[2]s
units:
  - {name: narrow, path: narrow, inventory: narrow, service-account: %[1]s/narrow}
  - {name: first, path: first, inventory: first}
  - {name: second, path: second, inventory: second, depends-on: [first]}
`, ns, kc))
	r := gantryRunFile(t, context.Background(), "apply", "--run-file", runFile, "--units-concurrency=1")
	narrow := r.unit(t, "narrow")
	if narrow.Reason == result.ReasonSucceeded || !strings.Contains(r.stderr, "system:serviceaccount:"+ns+":narrow") {
		t.Errorf("unit narrow: %s %q, want it refused as its service account", narrow.Reason, narrow.Message)
	}
	if _, err := env.Client.CoreV1().Services(ns).Get(context.Background(), "svc-narrow", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the narrow unit's Service was written (err %v): it ran as another unit's identity", err)
	}
	for _, name := range []string{"first", "second"} {
		if u := r.unit(t, name); u.Reason != result.ReasonSucceeded {
			t.Errorf("unit %s: %s %q, want it applied as the workflow's identity, not held to the narrow account", name, u.Reason, u.Message)
		}
		if _, err := env.Client.CoreV1().Services(ns).Get(context.Background(), "svc-"+name, metav1.GetOptions{}); err != nil {
			t.Errorf("unit %s's Service: %v", name, err)
		}
	}
}
