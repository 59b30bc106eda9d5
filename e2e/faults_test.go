package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/inventory"
)

// faultSeed chooses the kill points and interleavings; GANTRY_FAULT_SEED
// sets it, so that a failure can be replayed.
func faultSeed(t *testing.T) uint64 {
	if s := os.Getenv("GANTRY_FAULT_SEED"); s != "" {
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("GANTRY_FAULT_SEED=%q: %v", s, err)
		}
	}
	return faultSeedFromEnv()
}

func faultSeedFromEnv() uint64 {
	if v, err := strconv.ParseUint(os.Getenv("GANTRY_FAULT_SEED"), 10, 64); err == nil {
		return v
	}
	return 1
}

// soak reports whether the whole fault suite runs (make soak), not its
// short seeded subset.
func soak() bool { return os.Getenv("GANTRY_SOAK") != "" }

var (
	faultOnce    sync.Once
	faultCluster *cluster.Cluster
	faultErr     error
)

// ownControlPlane starts, once per test binary, a control plane of its
// own (etcd and kube-apiserver) that tests may kill and restart without
// disturbing the tests that share the main cluster.
func ownControlPlane(t *testing.T) *cluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (not under -short)")
	}
	faultOnce.Do(func() {
		faultCluster, faultErr = (&cluster.Local{}).Start(context.Background(), cluster.Options{Name: "faults", ControlPlaneOnly: true})
	})
	if faultErr != nil {
		t.Fatalf("starting a control plane of its own: %v", faultErr)
	}
	return faultCluster
}

// killPoint is one request at which the API server is killed: the n-th
// of its class, before the server sees it or after it carried it out.
type killPoint struct {
	class string
	n     int
	when  proxyWhen
	// down is how long the API server stays down before it is started
	// again: 0 for at once (gantry's retries ride that out), longer than
	// the retries last for a run that must fail.
	down time.Duration
}

func (k killPoint) String() string {
	w := "before"
	if k.when == breakAfter {
		w = "after"
	}
	if k.down > 0 {
		w += fmt.Sprintf("-down-%s", k.down)
	}
	return fmt.Sprintf("%s-%d-%s", k.class, k.n, w)
}

// The run that is broken re-applies a set of 1000 ConfigMaps and their
// Namespace: 100 changed, 100 new, 100 removed (pruned), 800 as they
// were. It sends about 1000 dry-runs, 200 applies, 100 deletes, two
// inventory writes (before the apply, listing what it is about to write,
// and after prune) and two Lease writes (take and give back).
const (
	faultObjects = 1000
	faultChanged = 100
)

// killPoints returns the seeded kill points: all 24 under soak, one in
// each of validation, apply, prune and the inventory write otherwise.
func killPoints(seed uint64) []killPoint {
	rng := rand.New(rand.NewPCG(seed, 0x9a17))
	pick := func(n int) int { return 1 + rng.IntN(n) }
	var all []killPoint
	// The objects that stay unchanged need no dry-run: the changed and
	// the new ones get one each.
	for range 5 {
		all = append(all, killPoint{"dry-run", pick(2 * faultChanged), breakBefore, 0})
	}
	all = append(all, killPoint{"dry-run", pick(2 * faultChanged), breakAfter, 0})
	for i := range 6 {
		all = append(all, killPoint{"apply", pick(2 * faultChanged), proxyWhen(1 + i%2), 0})
	}
	for i := range 5 {
		all = append(all, killPoint{"delete", pick(faultChanged), proxyWhen(1 + i%2), 0})
	}
	all = append(all,
		killPoint{"inventory-write", 1, breakBefore, 0},
		killPoint{"inventory-write", 1, breakAfter, 0},
		killPoint{"inventory-write", 2, breakAfter, 0},
		killPoint{"lease-write", 1, breakAfter, 0},
		killPoint{"lease-write", 2, breakBefore, 0},
		// The server stays away longer than the retries last: the run
		// fails, and lists what it may have written.
		killPoint{"apply", pick(2 * faultChanged), breakAfter, 15 * time.Second},
		killPoint{"delete", pick(faultChanged), breakAfter, 15 * time.Second},
	)
	if soak() {
		return all
	}
	return []killPoint{all[rng.IntN(6)], all[6+rng.IntN(6)], all[12+rng.IntN(5)], all[17+rng.IntN(3)]}
}

// faultSets writes the set the first run applies (a) and the one the
// broken run applies (b), and returns the ConfigMaps b wants, by name,
// with the value each must hold.
func faultSets(t *testing.T, ns string) (a, b string, want map[string]string) {
	t.Helper()
	var sa, sb strings.Builder
	namespace := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns)
	sa.WriteString(namespace)
	sb.WriteString(namespace)
	want = map[string]string{}
	cm := func(w *strings.Builder, i int, value string) {
		fmt.Fprintf(w, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%04d\n  namespace: %s\ndata:\n  value: %s\n", i, ns, value)
	}
	for i := range faultObjects {
		cm(&sa, i, "a")
	}
	for i := range faultObjects + faultChanged {
		switch {
		case i < faultChanged:
			cm(&sb, i, "b")
			want[fmt.Sprintf("cm-%04d", i)] = "b"
		case i >= faultObjects-faultChanged && i < faultObjects:
			// removed: pruned by the broken run
		default:
			cm(&sb, i, "a")
			want[fmt.Sprintf("cm-%04d", i)] = "a"
		}
	}
	a, b = t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(a, "set.yaml"), sa.String())
	writeFile(t, filepath.Join(b, "set.yaml"), sb.String())
	return a, b, want
}

// faultState compares the cluster with what the set wants and with what
// the inventory lists.
type faultState struct {
	lost     []string // wanted, missing or not as configured
	left     []string // removed from the set, still there
	orphans  []string // labelled for the inventory, not listed in it
	phantoms []string // listed in the inventory, not in the cluster
	lease    string   // holder of the inventory's Lease, if any
}

func (s faultState) clean() bool {
	return len(s.lost)+len(s.left)+len(s.orphans)+len(s.phantoms) == 0 && s.lease == ""
}

func (s faultState) String() string {
	return fmt.Sprintf("lost %v, left behind %v, orphans %v, listed but absent %v, lease held by %q", s.lost, s.left, s.orphans, s.phantoms, s.lease)
}

func readFaultState(t *testing.T, client kubernetes.Interface, ns, inv string, want map[string]string) faultState {
	t.Helper()
	ctx := context.Background()
	var s faultState
	list, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: inventory.NameLabel + "=" + inv})
	if err != nil {
		t.Fatal(err)
	}
	labelled := map[string]string{}
	for _, cm := range list.Items {
		labelled[cm.Name] = cm.Data["value"]
	}
	if n, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil && n.Labels[inventory.NameLabel] == inv {
		labelled["Namespace/"+ns] = ""
	}
	for name, v := range want {
		if got, ok := labelled[name]; !ok || got != v {
			s.lost = append(s.lost, name)
		}
	}
	stored, err := (&inventory.Store{Client: client}).Load(ctx, ns, inv)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, e := range stored.Entries {
		m, err := e.Parse()
		if err != nil {
			t.Fatal(err)
		}
		name := m.Name
		if m.GroupKind.Kind == "Namespace" {
			name = "Namespace/" + m.Name
		}
		listed[name] = true
		if _, ok := labelled[name]; !ok {
			s.phantoms = append(s.phantoms, name)
		}
	}
	for name := range labelled {
		if !listed[name] {
			s.orphans = append(s.orphans, name)
		}
		if _, ok := want[name]; !ok && !strings.HasPrefix(name, "Namespace/") {
			s.left = append(s.left, name)
		}
	}
	lease, err := client.CoordinationV1().Leases(ns).Get(ctx, inventory.ConfigMapName(inv), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case lease.Spec.HolderIdentity != nil:
		s.lease = *lease.Spec.HolderIdentity
	}
	for _, l := range [][]string{s.lost, s.left, s.orphans, s.phantoms} {
		sort.Strings(l)
	}
	return s
}

// kube-apiserver is killed (SIGKILL) at a seeded request of a run that
// re-applies and prunes 1000 objects: in validation, apply, prune, the
// inventory write or the Lease. It is restarted with the same flags at
// once. Whatever that run does, a second run converges: every object as
// configured, nothing removed from the set left behind, every object that
// carries the inventory's labels listed in it and nothing listed that is
// not there, the Lease given back.
func TestAPIServerKilledMidRun(t *testing.T) {
	c := ownControlPlane(t)
	proxy := newAPIProxy(t, c)
	client, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	seed := faultSeed(t)
	points := killPoints(seed)
	var survived, lost, orphans, failedRuns atomic.Int32
	for i, kp := range points {
		figures.killPoints.Add(1)
		t.Run(kp.String(), func(t *testing.T) {
			ns := fmt.Sprintf("kill-%d-%02d", seed, i)
			a, b, want := faultSets(t, ns)
			args := func(dir string) []string {
				return []string{"apply", "--path=" + dir, "--inventory=faults", "--inventory-namespace=" + ns, "--timeout=2m"}
			}
			if r := gantryWith(t, c.Kubeconfig, args(a)...); r.code != 0 {
				t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
			}
			var restarted sync.WaitGroup
			var fired atomic.Bool
			proxy.setHook(func(class string, n int, _ *http.Request) proxyAction {
				if class != kp.class || n != kp.n || !fired.CompareAndSwap(false, true) {
					return proxyAction{}
				}
				return proxyAction{when: kp.when, do: func() {
					if err := c.KillAPIServer(); err != nil {
						t.Error(err)
						return
					}
					restarted.Add(1)
					go func() {
						defer restarted.Done()
						time.Sleep(kp.down)
						if err := c.StartAPIServer(context.Background()); err != nil {
							t.Error(err)
						}
					}()
				}}
			})
			broken := gantryWith(t, proxy.kubeconfig, args(b)...)
			reached := proxy.count(kp.class)
			proxy.setHook(nil)
			restarted.Wait()
			if !fired.Load() {
				t.Fatalf("the run never reached %s (%d requests of that class)", kp, reached)
			}
			if broken.code != 0 {
				failedRuns.Add(1)
			}
			after := readFaultState(t, client, ns, "faults", want)
			t.Logf("after the broken run (exit %d): %s", broken.code, after)
			orphans.Add(int32(len(after.orphans)))
			figures.orphans.Add(int32(len(after.orphans)))
			if len(after.orphans) > 0 {
				t.Errorf("objects that carry the inventory's labels and are not listed in it after the broken run: %v", after.orphans)
			}
			if kp.down > 0 {
				if broken.code == 0 {
					t.Errorf("the run succeeded although the API server was away for %s", kp.down)
				}
				if n := lostLines(broken.stderr); n > 2 {
					t.Errorf("the unreachable server is reported %d times, want once:\n%s", n, broken.stderr)
				}
			}

			again := gantryWith(t, c.Kubeconfig, args(b)...)
			if again.code != 0 {
				t.Fatalf("the next run did not converge: exit %d\n%s", again.code, again.stderr)
			}
			end := readFaultState(t, client, ns, "faults", want)
			lost.Add(int32(len(end.lost)))
			orphans.Add(int32(len(end.orphans)))
			figures.lost.Add(int32(len(end.lost)))
			figures.orphans.Add(int32(len(end.orphans)))
			if !end.clean() {
				t.Fatalf("after the next run: %s", end)
			}
			survived.Add(1)
			figures.killSurvived.Add(1)
		})
	}
	t.Logf("seed %d: kill points survived %d of %d (%d broken runs failed, then converged); objects lost %d; orphans %d",
		seed, survived.Load(), len(points), failedRuns.Load(), lost.Load(), orphans.Load())
}

// lostLines counts the lines that say the API server did not answer.
func lostLines(out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		for _, s := range []string{": EOF", "connection refused", "connection reset", "unreachable", "did not answer"} {
			if strings.Contains(l, s) {
				n++
				break
			}
		}
	}
	return n
}
