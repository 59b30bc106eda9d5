package pipeline

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/e2e/cluster/clustertest"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/result"
)

var env = clustertest.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

type quiet struct{}

func (quiet) StageStarted(string)        {}
func (quiet) StageFinished(result.Stage) {}
func (quiet) ObjectDone(result.Object)   {}
func (quiet) Info(string)                {}

// testRun is a run connected to the test cluster, for inventory inv in ns.
func testRun(t *testing.T, ns, inv string) *run {
	t.Helper()
	c, err := kube.Connect(env.Cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	r := newRun("apply", Options{Inventory: inv, InventoryNamespace: ns, Concurrency: 8}, nil, quiet{})
	r.clients, r.store = c, &inventory.Store{Client: c.Kube}
	r.prev = &inventory.Inventory{Name: inv, Namespace: ns}
	return r
}

func live(t *testing.T, r *run, gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.clients.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// Rollback removes a Namespace it created that holds only what Kubernetes
// puts in every namespace, and keeps one that holds anything else: it
// names what it holds and records it in the inventory.
func TestRollbackKeepsWhatHoldsOthers(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	nsGVK := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	empty, busy := ns+"-empty", ns+"-busy"
	for _, name := range []string{empty, busy} {
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	if _, err := env.Client.CoreV1().ConfigMaps(busy).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := testRun(t, ns, "rollback")
	if err := r.lockAndLoad(ctx); err != nil {
		t.Fatal(err)
	}

	reason, err := r.holdsOthers(ctx, live(t, r, nsGVK, "", empty))
	if err != nil || reason != "" {
		t.Errorf("holdsOthers(empty namespace) = %q, %v; want nothing", reason, err)
	}
	reason, err = r.holdsOthers(ctx, live(t, r, nsGVK, "", busy))
	if err != nil || !strings.Contains(reason, "ConfigMap/someone-elses") {
		t.Errorf("holdsOthers(namespace with a ConfigMap) = %q, %v; want it named", reason, err)
	}

	err = r.rollback(ctx, []*unstructured.Unstructured{live(t, r, nsGVK, "", empty), live(t, r, nsGVK, "", busy)})
	if err == nil || !strings.Contains(err.Error(), "Namespace/"+busy+" was created to validate its dependents and is kept") {
		t.Errorf("rollback: %v; want it to say that %s is kept", err, busy)
	}
	if _, err := env.Client.CoreV1().Namespaces().Get(ctx, empty, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v, want it removed", empty, err)
	}
	if _, err := env.Client.CoreV1().Namespaces().Get(ctx, busy, metav1.GetOptions{}); err != nil {
		t.Errorf("namespace %s: %v, want it kept", busy, err)
	}
	inv, err := r.store.Load(ctx, ns, "rollback")
	if err != nil || len(inv.Entries) != 1 || !strings.Contains(inv.Entries[0].ID, busy) {
		t.Errorf("inventory after the rollback: %+v, %v; want the kept namespace", inv, err)
	}
}

// A Namespace whose objects of one kind cannot be listed (a Role that
// may not list Secrets, a group whose server is down) may hold anything:
// rollback keeps it, says why, and lists it in the inventory. A run that
// does not hold the inventory's Lease (it created the namespace the Lease
// lives in, and then could not take it) says so, and writes no inventory.
func TestRollbackKeepsWhatItCannotList(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	created := ns + "-unread"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: created}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), created, metav1.DeleteOptions{})
	})
	for _, locked := range []bool{false, true} {
		r := testRun(t, ns, "unread")
		r.clients = answering(t, "/namespaces/"+created+"/secrets", http.StatusForbidden, "Forbidden")
		if locked {
			if err := r.lockAndLoad(ctx); err != nil {
				t.Fatal(err)
			}
		}
		err := r.rollback(ctx, []*unstructured.Unstructured{live(t, r, schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "", created)})
		if err == nil || !strings.Contains(err.Error(), "cannot tell what it holds: listing Secret in it failed") {
			t.Errorf("locked %v: rollback: %v; want it to keep what it could not list, saying so", locked, err)
		}
		if n, err := env.Client.CoreV1().Namespaces().Get(ctx, created, metav1.GetOptions{}); err != nil || n.DeletionTimestamp != nil {
			t.Errorf("locked %v: namespace %s: %v, want it kept", locked, created, err)
		}
		inv, loadErr := r.store.Load(ctx, ns, "unread")
		switch {
		case !locked && (loadErr != nil || inv.Exists() || !strings.Contains(fmt.Sprint(err), "not recorded in inventory "+ns+"/unread, whose Lease this run does not hold")):
			t.Errorf("without the Lease: rollback says %v; inventory %+v, %v; want none written, and that said", err, inv, loadErr)
		case locked && (loadErr != nil || len(inv.Entries) != 1 || !strings.Contains(inv.Entries[0].ID, created)):
			t.Errorf("inventory after the rollback: %+v, %v; want the kept namespace", inv, loadErr)
		}
	}
}

// A kind that discovery listed but whose LIST answers 404 has gone away
// meanwhile (a CRD deleted by someone else): its objects went first, so
// it holds none in the namespace, and the namespace can be removed.
func TestHoldsOthersSkipsAKindGoneSinceDiscovery(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	created := ns + "-gone"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: created}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), created, metav1.DeleteOptions{})
	})
	r := testRun(t, ns, "gone")
	r.clients = answering(t, "/namespaces/"+created+"/secrets", http.StatusNotFound, "NotFound")
	reason, err := r.holdsOthers(ctx, live(t, r, schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "", created))
	if err != nil || reason != "" {
		t.Errorf("holdsOthers = %q, %v; want nothing held, as a kind no longer served holds no objects", reason, err)
	}
}

// answering connects to the test cluster through a transport that
// answers every GET of a path ending in suffix with a Status of code.
func answering(t *testing.T, suffix string, code int, reason string) *kube.Clients {
	t.Helper()
	cfg := rest.CopyConfig(env.Cluster.RESTConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, suffix) {
				body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`, reason, code)
				return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader(body)),
					Header: http.Header{"Content-Type": []string{"application/json"}}, Request: req}, nil
			}
			return rt.RoundTrip(req)
		})
	})
	c, err := kube.Connect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
