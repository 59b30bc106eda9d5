package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gantry-dev/gantry/inventory"
)

// undoObjects is the size of the sets the undo commands are broken in:
// 300 ConfigMaps, of which the second set changes 50, adds 50 and
// removes 50.
const (
	undoObjects = 300
	undoChanged = 50
)

// undoSets writes the first set (a) and the second (b) of an undo case,
// and returns what a wants, by name.
func undoSets(t *testing.T, ns, extraB string) (a, b string, wantA map[string]string) {
	t.Helper()
	var sa, sb strings.Builder
	wantA = map[string]string{}
	for i := range undoObjects + undoChanged {
		name := fmt.Sprintf("cm-%04d", i)
		switch {
		case i < undoChanged:
			configMapTo(&sa, ns, name, "a")
			configMapTo(&sb, ns, name, "b")
			wantA[name] = "a"
		case i < undoObjects-undoChanged:
			configMapTo(&sa, ns, name, "a")
			configMapTo(&sb, ns, name, "a")
			wantA[name] = "a"
		case i < undoObjects:
			configMapTo(&sa, ns, name, "a") // removed by b
			wantA[name] = "a"
		default:
			configMapTo(&sb, ns, name, "b") // added by b
		}
	}
	sb.WriteString(extraB)
	a, b = t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(a, "set.yaml"), sa.String())
	writeFile(t, filepath.Join(b, "set.yaml"), sb.String())
	return a, b, wantA
}

func configMapTo(w *strings.Builder, ns, name, value string) {
	fmt.Fprintf(w, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: %s\n", name, ns, value)
}

// revisionsConsistent checks an inventory's revisions against it: each it
// records reads back whole (its Secrets there, of gantry's type, their
// payloads matching the digests recorded), and no Secret labelled as one
// of its revisions is left at a number it has recorded or passed.
func revisionsConsistent(t *testing.T, client kubernetes.Interface, ns, name string) []string {
	t.Helper()
	ctx := context.Background()
	store := &inventory.Store{Client: client}
	inv, err := store.Load(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	newest := 0
	for _, rv := range inv.Revisions {
		newest = max(newest, rv.Number)
		if !rv.HoldsObjects() {
			continue
		}
		read, err := store.Revision(ctx, inv, rv.Number)
		if err == nil {
			_, err = read.ObjectsOf()
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("revision %d: %v", rv.Number, err))
		}
	}
	strays, err := store.Strays(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range strays {
		var n int
		if _, err := fmt.Sscanf(s[strings.LastIndex(s, ".v")+2:], "%d", &n); err != nil || n <= newest {
			problems = append(problems, "stray "+s)
		}
	}
	return problems
}

// undoKillPoint is one request of an undo run at which kube-apiserver is
// killed: the command, the class of request and its number.
type undoKillPoint struct {
	command string
	killPoint
}

func (k undoKillPoint) String() string { return k.command + "-" + k.killPoint.String() }

// undoKillPoints are the seeded kill points of the undo commands: one
// per command, in its writes (the objects, their deletion, the
// inventory, the revision, the Lease); all of them under soak.
func undoKillPoints(seed uint64) []undoKillPoint {
	rng := rand.New(rand.NewPCG(seed, 0x0b5e))
	var out []undoKillPoint
	for _, command := range []string{"rollback", "atomic", "drift-correct"} {
		points := []killPoint{
			{"apply", 1 + rng.IntN(2*undoChanged), proxyWhen(1 + rng.IntN(2)), 0},
			{"inventory-write", 1 + rng.IntN(2), proxyWhen(1 + rng.IntN(2)), 0},
			{"revision-write", 1, proxyWhen(1 + rng.IntN(2)), 0},
			{"lease-write", 1 + rng.IntN(2), proxyWhen(1 + rng.IntN(2)), 0},
		}
		if command != "drift-correct" {
			points = append(points, killPoint{"delete", 1 + rng.IntN(undoChanged), proxyWhen(1 + rng.IntN(2)), 0})
		} else {
			// A correction records no revision of its own.
			points = points[:2]
		}
		if soak() {
			for _, p := range points {
				out = append(out, undoKillPoint{command, p})
			}
			continue
		}
		out = append(out, undoKillPoint{command, points[rng.IntN(len(points))]})
	}
	return out
}

// kube-apiserver is killed (SIGKILL) at a seeded request of a rollback, of
// an atomic apply's rollback, and of drift --correct, each over 300
// objects, and started again at once. Whatever the broken run does, the
// next one converges: no object lost, every object that carries the
// inventory's labels listed in it, nothing listed that is not there, the
// Lease given back, and every revision the inventory records readable,
// with no Secret posing as one.
func TestAPIServerKilledMidUndo(t *testing.T) {
	c := ownControlPlane(t)
	proxy := newAPIProxy(t, c)
	client, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	seed := faultSeed(t)
	for i, kp := range undoKillPoints(seed) {
		figures.killPoints.Add(1)
		t.Run(kp.String(), func(t *testing.T) {
			ctx := context.Background()
			ns := fmt.Sprintf("undo-%d-%02d", seed, i)
			if _, err := client.CoreV1().Namespaces().Create(ctx, namespaceObject(ns), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			run := func(kubeconfig string, args ...string) gantryRun {
				args = append(args, "--inventory=undo", "--inventory-namespace="+ns)
				if args[0] != "drift" {
					args = append(args, "--max-prune=100%")
				}
				return gantryWith(t, kubeconfig, args...)
			}
			extra := ""
			if kp.command == "atomic" {
				// The second set cannot roll out: its apply fails in
				// its wait, and rolls back.
				extra = "---\n" + unschedulableDeployment(ns)
			}
			a, b, want := undoSets(t, ns, extra)
			if r := run(c.Kubeconfig, "apply", "--path="+a, "--timeout=2m"); r.code != 0 {
				t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
			}
			var broken []string
			converge := []string{"rollback", "--to=1", "--timeout=2m"}
			switch kp.command {
			case "rollback":
				if r := run(c.Kubeconfig, "apply", "--path="+b, "--timeout=2m"); r.code != 0 {
					t.Fatalf("second apply: exit %d\n%s", r.code, r.stderr)
				}
				broken = []string{"rollback", "--timeout=2m"}
			case "atomic":
				broken = []string{"apply", "--path=" + b, "--atomic", "--timeout=15s"}
				converge = []string{"apply", "--path=" + a, "--timeout=2m"}
			case "drift-correct":
				for n := range undoChanged {
					name := fmt.Sprintf("cm-%04d", n)
					if n%2 == 0 {
						_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
						continue
					}
					if _, err := client.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"value":"by-hand"}}`),
						metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
						t.Fatal(err)
					}
				}
				broken = []string{"drift", "--correct", "--timeout=2m"}
				converge = []string{"drift", "--correct", "--timeout=2m"}
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
						if err := c.StartAPIServer(context.Background()); err != nil {
							t.Error(err)
						}
					}()
				}}
			})
			r := run(proxy.kubeconfig, broken...)
			reached := proxy.count(kp.class)
			proxy.setHook(nil)
			restarted.Wait()
			if !fired.Load() {
				t.Fatalf("the run never reached %s (%d requests of that class)", kp, reached)
			}
			after := readFaultState(t, client, ns, "undo", want)
			t.Logf("after the broken run (exit %d): %s", r.code, after)
			if len(after.orphans) > 0 {
				t.Errorf("objects that carry the inventory's labels and are not listed in it after the broken run: %v", after.orphans)
			}
			if p := revisionsConsistent(t, client, ns, "undo"); len(p) > 0 {
				t.Errorf("revisions after the broken run: %v", p)
			}

			if again := run(c.Kubeconfig, converge...); again.code != 0 && !(kp.command == "drift-correct" && again.code == 3) {
				t.Fatalf("the next run did not converge: exit %d\n%s", again.code, again.stderr)
			}
			if kp.command == "drift-correct" {
				if check := run(c.Kubeconfig, "drift", "--timeout=2m"); check.code != 0 {
					t.Errorf("drift after the correction: exit %d\n%s", check.code, check.stderr)
				}
			}
			end := readFaultState(t, client, ns, "undo", want)
			figures.lost.Add(int32(len(end.lost)))
			figures.orphans.Add(int32(len(end.orphans)))
			if !end.clean() {
				t.Fatalf("after the next run: %s", end)
			}
			if p := revisionsConsistent(t, client, ns, "undo"); len(p) > 0 {
				t.Fatalf("revisions after the next run: %v", p)
			}
			figures.killSurvived.Add(1)
		})
	}
}

// namespaceObject is a Namespace named ns.
func namespaceObject(ns string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
}
