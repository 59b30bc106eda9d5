package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/inventory"
)

// lockSet writes a set of one Namespace, 300 ConfigMaps holding value and
// 30 that only this value's set has, and returns its folder and what it
// wants.
func lockSet(t *testing.T, ns, value string) (string, map[string]string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    set: %s\n", ns, value)
	want := map[string]string{}
	cm := func(name string) {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: %s\n", name, ns, value)
		want[name] = value
	}
	for i := range 300 {
		cm(fmt.Sprintf("cm-%03d", i))
	}
	for i := range 30 {
		cm(fmt.Sprintf("only-%s-%02d", value, i))
	}
	dir := t.TempDir()
	writeFile(t, dir+"/set.yaml", b.String())
	return dir, want
}

// Two runs on one inventory, each applying its own version of the set with
// prune, start at seeded offsets between 0 and 1.5 s apart, each through a
// proxy of its own that notes when its writes go out and come back. Both
// succeed, and the cluster and the inventory hold exactly the set of the
// run that wrote last, its Namespace included, with nothing of the other's
// left. When the inventory's namespace exists, their writes never overlap:
// the second waits for the first's Lease. In every other try it does not
// exist yet: the Lease cannot be taken before its namespace is, so both
// runs create it, and the run that gets the Lease writes it again.
func TestTwoRunsNeverInterleave(t *testing.T) {
	c := ownControlPlane(t)
	first, second := newAPIProxy(t, c), newAPIProxy(t, c)
	client, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	seed := faultSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x10c4))
	tries := 4
	if soak() {
		tries = 24
	}
	var waited, clean, overlaps int
	for i := range tries {
		offset := time.Duration(rng.IntN(1500)) * time.Millisecond
		figures.interleavings.Add(1)
		t.Run(fmt.Sprintf("%02d-offset-%s", i, offset), func(t *testing.T) {
			ns := fmt.Sprintf("lock-%d-%02d", seed, i)
			exists := i%2 == 0
			if exists {
				if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			a, wantA := lockSet(t, ns, "a")
			b, wantB := lockSet(t, ns, "b")
			args := func(dir string) []string {
				return []string{"apply", "--path=" + dir, "--inventory=locks", "--inventory-namespace=" + ns, "--timeout=2m"}
			}
			first.setHook(nil)
			second.setHook(nil)
			var wg sync.WaitGroup
			var ra, rb gantryRun
			wg.Go(func() { ra = gantryWith(t, first.kubeconfig, args(a)...) })
			time.Sleep(offset)
			wg.Go(func() { rb = gantryWith(t, second.kubeconfig, args(b)...) })
			wg.Wait()
			if ra.code != 0 || rb.code != 0 {
				t.Fatalf("exits %d and %d, want both 0 (the later one waits)", ra.code, rb.code)
			}
			sa, na := first.writeSpan()
			sb, nb := second.writeSpan()
			if na == 0 || nb == 0 {
				t.Fatalf("%d and %d writes: each run must write", na, nb)
			}
			if exists && sa.from.Before(sb.to) && sb.from.Before(sa.to) {
				overlaps++
				figures.interleaved.Add(1)
				t.Fatalf("the runs' writes overlap: %s–%s and %s–%s", sa.from.Format(time.StampMicro), sa.to.Format(time.StampMicro), sb.from.Format(time.StampMicro), sb.to.Format(time.StampMicro))
			}
			want, later, value := wantA, ra, "a"
			if sb.to.After(sa.to) {
				want, later, value = wantB, rb, "b"
			}
			if n, err := client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err != nil || n.Labels["set"] != value {
				t.Errorf("the Namespace is not the last run's (set=%s): %v %v", value, n.GetLabels(), err)
			}
			if strings.Contains(later.stderr, "is locked by") {
				waited++
			}
			s := readFaultState(t, client, ns, "locks", want)
			figures.lost.Add(int32(len(s.lost)))
			figures.orphans.Add(int32(len(s.orphans)))
			if !s.clean() {
				t.Fatalf("after both runs: %s", s)
			}
			clean++
		})
	}
	t.Logf("seed %d: interleavings tried %d, clean %d; the later run waited for the Lease in %d; overlapping writes %d", seed, tries, clean, waited, overlaps)
}

// A run killed outright (SIGKILL: a runner that loses its machine) in the
// middle of its apply leaves its Lease behind. The next run says whom it
// waits for, takes the Lease over once it has expired, and converges.
func TestDeadHolderLeaseIsTakenOver(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir, want := lockSet(t, ns, "a")
	args := []string{"apply", "--path=" + dir, "--inventory=dead", "--inventory-namespace=" + ns, "--timeout=2m"}
	cmd := exec.Command(gantryBinary(t), append(args, "--kubeconfig="+env.Cluster.Kubeconfig)...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: inventory.NameLabel + "=dead"})
		if err == nil && len(list.Items) >= 20 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the first run never got to its apply:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	lease, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, inventory.ConfigMapName("dead"), metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("the killed run left no Lease (%v): nothing to take over", err)
	}
	t.Logf("killed run held the Lease as %q", *lease.Spec.HolderIdentity)
	// The inventory lists what a run is about to write before it writes:
	// even a run killed outright leaves nothing untracked.
	if s := readFaultState(t, env.Client, ns, "dead", want); figures.orphans.Add(int32(len(s.orphans))) > 0 {
		t.Errorf("the killed run left objects with the inventory's labels that it does not list: %v", s.orphans)
	}

	r := gantry(t, args...)
	if r.code != 0 {
		t.Fatalf("the next run: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "is locked by "+*lease.Spec.HolderIdentity) {
		t.Errorf("the next run does not say whom it waited for:\n%s", r.stderr)
	}
	if s := readFaultState(t, env.Client, ns, "dead", want); !s.clean() {
		t.Fatalf("after the next run: %s", s)
	}
}

// The inventory's namespace is absent when a run looks (so its Lease
// cannot be taken yet), and another run creates it, and takes its Lease,
// before this run plans: the Namespace is then no longer one this run
// creates. The run still takes the Lease before its first write: it says
// whom it waits for, and writes nothing until the other's Lease expired.
func TestNamespaceThatAppearsWhileThePlanIsMadeStillTakesTheLease(t *testing.T) {
	// Its namespace is its own, made absent: not one env.Namespace gives.
	env.Require(t)
	t.Parallel()
	ns := fmt.Sprintf("appears-%d", time.Now().UnixNano()%1_000_000_000)
	ctx := context.Background()
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	dir, want := lockSet(t, ns, "a")
	proxy := newAPIProxy(t, env.Cluster)
	const other = "other-run"
	const leaseFor = 3 * time.Second
	path := "/api/v1/namespaces/" + ns
	var looked atomic.Bool
	var once sync.Once
	var taken time.Time
	proxy.setHook(func(class string, n int, r *http.Request) proxyAction {
		if r.Method != http.MethodGet || (r.URL.Path != path && r.URL.Path != "/api/v1/namespaces") {
			return proxyAction{}
		}
		if r.URL.Path == path && looked.CompareAndSwap(false, true) {
			return proxyAction{} // the look that finds it absent
		}
		// Any later read of it: the other run got there first.
		return proxyAction{when: delay, do: func() {
			once.Do(func() {
				for deadline := time.Now().Add(10 * time.Second); !looked.Load() && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				time.Sleep(150 * time.Millisecond) // its answer is back
				if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
				now := metav1.NewMicroTime(time.Now())
				_, err := env.Client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: inventory.ConfigMapName("appears"), Namespace: ns},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(other), LeaseDurationSeconds: ptr.To(int32(leaseFor / time.Second)),
						AcquireTime: &now, RenewTime: &now},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Error(err)
				}
				taken = now.Time
			})
		}}
	})
	r := gantryWith(t, proxy.kubeconfig, "apply", "--path="+dir, "--inventory=appears", "--inventory-namespace="+ns, "--timeout=2m")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", r.code, r.stderr)
	}
	if taken.IsZero() {
		t.Fatal("the run never read the namespace again after finding it absent: the case was not made")
	}
	if !strings.Contains(r.stderr, "is locked by "+other) {
		t.Errorf("the run does not say it waited for the Lease %s took:\n%s", other, r.stderr)
	}
	if first, n := proxy.writeSpan(); n == 0 || first.from.Before(taken.Add(leaseFor)) {
		t.Errorf("%d writes, the first at %s: want none before the other run's Lease expired at %s",
			n, first.from.Format(time.StampMilli), taken.Add(leaseFor).Format(time.StampMilli))
	}
	if s := readFaultState(t, env.Client, ns, "appears", want); !s.clean() {
		t.Fatalf("after the run: %s", s)
	}
}
