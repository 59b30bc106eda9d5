package kube

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// apiStub answers every request with an empty ConfigMap and records what
// reached it; its hook runs before the answer.
type apiStub struct {
	mu   sync.Mutex
	seen []string
	hook func(r *http.Request) (drop bool)
}

func (s *apiStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seen = append(s.seen, r.Method+" "+r.URL.RequestURI())
	hook := s.hook
	s.mu.Unlock()
	if hook != nil && hook(r) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`))
}

func (s *apiStub) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

var errFenced = errors.New("the lease is lost")

// While the fence holds, no write leaves the process: not a create, not a
// server-side apply, not a delete, and not the retry of a write that was
// let through before the fence came down. Reads, dry-runs and the
// requests marked Unfenced still go.
func TestFenceStopsEveryWriteAndNothingElse(t *testing.T) {
	stub := &apiStub{}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	c, err := Connect(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	cms := c.Kube.CoreV1().ConfigMaps("ns")
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}}
	apply := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`)

	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a write before the fence is held: %v", err)
	}
	c.Fence.Hold(func() error { return errFenced })
	writes := map[string]func() error{
		"create": func() error { _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); return err },
		"update": func() error { _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); return err },
		"apply": func() error {
			_, err := cms.Patch(ctx, "x", types.ApplyPatchType, apply, metav1.PatchOptions{FieldManager: "gantry"})
			return err
		},
		"delete": func() error { return cms.Delete(ctx, "x", metav1.DeleteOptions{}) },
	}
	before := len(stub.requests())
	for name, write := range writes {
		err := write()
		if !errors.Is(err, errFenced) {
			t.Errorf("%s while fenced: %v, want the fence's error", name, err)
		}
		if Unanswered(err) {
			t.Errorf("%s while fenced is taken as unanswered (maybe written), but it was never sent: %v", name, err)
		}
	}
	if got := stub.requests()[before:]; len(got) != 0 {
		t.Errorf("fenced writes reached the server: %v", got)
	}
	if _, err := cms.Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Errorf("a read while fenced: %v", err)
	}
	if _, err := cms.Patch(ctx, "x", types.ApplyPatchType, apply, metav1.PatchOptions{FieldManager: "gantry", DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("a dry-run while fenced: %v", err)
	}
	if _, err := cms.Update(Unfenced(ctx), cm, metav1.UpdateOptions{}); err != nil {
		t.Errorf("an Unfenced write: %v", err)
	}

	// A write that passed the fence and whose connection broke is not
	// sent again once the fence holds.
	c.Fence.Lift()
	stub.hook = func(r *http.Request) bool {
		if r.Method != http.MethodPatch {
			return false
		}
		c.Fence.Hold(func() error { return errFenced })
		return true
	}
	before = len(stub.requests())
	_, err = cms.Patch(ctx, "x", types.ApplyPatchType, apply, metav1.PatchOptions{FieldManager: "gantry"})
	if !errors.Is(err, errFenced) {
		t.Errorf("the retried apply: %v, want the fence's error", err)
	}
	if got := stub.requests()[before:]; len(got) != 1 {
		t.Errorf("the apply reached the server %d times, want once (no retry past the fence): %v", len(got), got)
	}
	c.Fence.Lift()
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Errorf("a write after the fence was lifted: %v", err)
	}
}

// A run stopped after its write passed the fence and before the write's
// body went out (a paused runner) finds out as the body is read: the
// request never arrives whole, and the write fails as fenced.
func TestFenceCheckedAgainAsTheBodyGoesOut(t *testing.T) {
	var mu sync.Mutex
	var whole []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err == nil {
			mu.Lock()
			whole = append(whole, r.Method)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`))
	}))
	defer srv.Close()
	c, err := Connect(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var checks sync.Map
	for _, name := range []string{"create", "apply"} {
		// The first check passes; the lease is lost by the next.
		n := 0
		c.Fence.Hold(func() error {
			n++
			checks.Store(name, n)
			if n > 1 {
				return errFenced
			}
			return nil
		})
		cms := c.Kube.CoreV1().ConfigMaps("ns")
		ctx := context.Background()
		if name == "create" {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}}, metav1.CreateOptions{})
		} else {
			_, err = cms.Patch(ctx, "x", types.ApplyPatchType, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`), metav1.PatchOptions{FieldManager: "gantry"})
		}
		var fe *FencedError
		if !errors.As(err, &fe) || !errors.Is(err, errFenced) {
			t.Errorf("%s fenced as its body went out: %v, want a FencedError", name, err)
		}
		if n, _ := checks.Load(name); n != 2 {
			t.Errorf("%s: the fence was asked %v times, want 2 (before sending, and as the body went out)", name, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(whole) != 0 {
		t.Errorf("writes arrived whole after the fence came down: %v", whole)
	}
}
