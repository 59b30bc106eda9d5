package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/inventory"
)

// adoptKillPoints are the seeded points at which the gantry process of an
// apply that adopts is killed (SIGKILL): its write-ahead record (the
// revision's Secret, the inventory), each of its object writes, and the
// inventory written after them; all of them under soak, three otherwise.
func adoptKillPoints(seed uint64, applies int) []killPoint {
	rng := rand.New(rand.NewPCG(seed, 0xad07))
	var all []killPoint
	for _, w := range []proxyWhen{breakBefore, breakAfter} {
		all = append(all,
			killPoint{"revision-write", 1, w, 0},
			killPoint{"inventory-write", 1, w, 0},
			killPoint{"inventory-write", 2, w, 0},
		)
		for n := 1; n <= applies; n++ {
			all = append(all, killPoint{"apply", n, w, 0})
		}
	}
	if soak() {
		return all
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:3]
}

// An apply that adopts what existed before gantry (a Namespace made by
// hand with a ConfigMap in it, a ConfigMap made with kubectl create whose
// keys the apply takes away, a Secret whose value it changes) is killed
// at a seeded point; then the next apply of the same set runs, then a
// rollback to the set before. Nothing that existed before gantry is lost
// at any point: after the kill every object is still there, and after
// the rollback each is released with the content it had before.
func TestKilledAdoptionLosesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the gantry binary")
	}
	bin := gantryBinary(t)
	proxy := newAPIProxy(t, env.Cluster)
	const applies = 4 // the Namespace, the two adopted objects and the new one
	seed := faultSeed(t)
	for i, kp := range adoptKillPoints(seed, applies) {
		figures.killPoints.Add(1)
		t.Run(kp.String(), func(t *testing.T) {
			ctx := context.Background()
			ns := env.Namespace(t)
			team := fmt.Sprintf("%s-team%d", ns, i)
			if _, err := env.Client.CoreV1().Namespaces().Create(ctx, namespaceObject(team), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(ctx, team, metav1.DeleteOptions{}) })
			createByHand(t, team, "handmade", map[string]string{"k": "v"})
			createByHand(t, ns, "db", map[string]string{"dbhost": "db.internal", "dbport": "5432"})
			if _, err := env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": "made-by-hand-0123"},
			}, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
				t.Fatal(err)
			}
			inv := []string{"--inventory=adopt", "--inventory-namespace=" + ns, "--lease-duration=" + pauseLease, "--max-prune=100%", "--timeout=60s"}
			base := writeSet(t, configMap(ns, "base"))
			if r := gantry(t, append([]string{"apply", "--path=" + base}, inv...)...); r.code != 0 {
				t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
			}
			adopting := writeSet(t, configMap(ns, "base"), namespaceYAML(team),
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n  namespace: "+ns+"\ndata:\n  feature: \"on\"\n",
				"apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: "+ns+"\nstringData:\n  password: set-by-gantry-4567\n",
				configMap(ns, "brand-new"))

			var mu sync.Mutex
			var cmd *exec.Cmd
			var fired atomic.Bool
			proxy.setHook(func(class string, n int, _ *http.Request) proxyAction {
				if class != kp.class || n != kp.n || !fired.CompareAndSwap(false, true) {
					return proxyAction{}
				}
				return proxyAction{when: kp.when, do: func() {
					mu.Lock()
					defer mu.Unlock()
					_ = cmd.Process.Kill()
				}}
			})
			mu.Lock()
			cmd = exec.Command(bin, append([]string{"apply", "--path=" + adopting, "--kubeconfig=" + proxy.kubeconfig}, inv...)...)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			cmd.Env = []string{"HOME=" + os.Getenv("HOME"), recordKeyEnv}
			if err := cmd.Start(); err != nil {
				mu.Unlock()
				t.Fatal(err)
			}
			mu.Unlock()
			err := cmd.Wait()
			proxy.setHook(nil)
			if !fired.Load() {
				t.Fatalf("the run never reached %s (exit %v)\n%s", kp, err, stderr.String())
			}

			before := func(when string) {
				t.Helper()
				if _, err := env.Client.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{}); err != nil {
					t.Errorf("%s: the Namespace made by hand: %v", when, err)
				}
				if _, err := env.Client.CoreV1().ConfigMaps(team).Get(ctx, "handmade", metav1.GetOptions{}); err != nil {
					t.Errorf("%s: the ConfigMap in the Namespace made by hand: %v", when, err)
				}
				if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "db", metav1.GetOptions{}); err != nil {
					t.Errorf("%s: the ConfigMap made with kubectl create: %v", when, err)
				}
				if _, err := env.Client.CoreV1().Secrets(ns).Get(ctx, "creds", metav1.GetOptions{}); err != nil {
					t.Errorf("%s: the Secret made by hand: %v", when, err)
				}
			}
			before("after the kill")

			if r := gantry(t, append([]string{"apply", "--path=" + adopting}, inv...)...); r.code != 0 {
				t.Fatalf("the next apply: exit %d\n%s", r.code, r.stderr)
			}
			before("after the next apply")
			out := t.TempDir()
			back := gantry(t, append([]string{"rollback", "--to=1", "--report=" + filepath.Join(out, "report.json")}, inv...)...)
			if back.code != 0 {
				t.Fatalf("rollback: exit %d\n%s", back.code, back.stderr)
			}
			before("after the rollback")
			released := func(m metav1.Object, what string) {
				t.Helper()
				if m.GetLabels()[inventory.NameLabel] != "" {
					t.Errorf("%s is not released: labels %v", what, m.GetLabels())
				}
			}
			if live, err := env.Client.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{}); err == nil {
				released(live, "the Namespace")
				if live.DeletionTimestamp != nil {
					t.Errorf("the rollback deletes the Namespace made by hand")
				}
			}
			if cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "db", metav1.GetOptions{}); err == nil {
				released(cm, "the ConfigMap")
				if cm.Data["dbhost"] != "db.internal" || cm.Data["dbport"] != "5432" || cm.Data["feature"] != "" {
					t.Errorf("the ConfigMap holds %v after the rollback, want its keys from before gantry", cm.Data)
				}
			}
			if s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, "creds", metav1.GetOptions{}); err == nil {
				released(s, "the Secret")
				if string(s.Data["password"]) != "made-by-hand-0123" {
					t.Errorf("the Secret does not hold its value from before gantry after the rollback")
				}
			}
			printed := back.stdout + back.stderr
			for _, f := range []string{"report.json", "report.diff"} {
				b, _ := os.ReadFile(filepath.Join(out, f))
				printed += string(b)
			}
			for _, leak := range scanForSecrets(printed, "made-by-hand-0123", "set-by-gantry-4567") {
				t.Errorf("the rollback prints %q", leak)
			}
			if !t.Failed() {
				figures.killSurvived.Add(1)
			}
			t.Logf("killed at %s after: %s", kp, lastLine(stderr.String()))
		})
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[i+1:])
	}
	return s
}
