package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/inventory"
)

// traced is one request of a --trace: its method and its path.
type traced struct{ method, path string }

var traceLine = regexp.MustCompile(`^\s+\S+\s+\S+\s+\d+\s+(GET|POST|PUT|PATCH|DELETE) [^/\s]+(/\S*) ->`)

// requestsOf reads the requests a --trace printed.
func requestsOf(t *testing.T, stderr string) []traced {
	t.Helper()
	var out []traced
	for line := range strings.SplitSeq(stderr, "\n") {
		if m := traceLine.FindStringSubmatch(line); m != nil {
			out = append(out, traced{m[1], m[2]})
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

// Units on one cluster read its discovery and its version once between
// them, not once each.
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
		writeFile(t, filepath.Join(root, fmt.Sprint("app", i), "cm.yaml"),
			fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  namespace: %s\ndata:\n  k: v\n", i, ns))
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
	for _, p := range []string{"/api", "/apis", "/version"} {
		if count[p] != 1 {
			t.Errorf("GET %s sent %d times by 3 units on one cluster, want once", p, count[p])
		}
	}
	if n := count["/api/v1/namespaces/"+ns+"/configmaps/"+inventory.ConfigMapName("app1")]; n == 0 {
		t.Errorf("the trace misses the units' own reads: %v", count)
	}
}
