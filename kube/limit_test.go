package kube

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// requests sends n GETs to srv through l from workers goroutines, as a
// stage's workers do, and returns the most the server had at once.
func requests(t *testing.T, l *inFlight, srv *slowServer, n, workers int) int {
	t.Helper()
	return mostDuring(srv, func() { send(t, &http.Client{Transport: l}, srv, n, workers) })
}

// send sends n GETs to srv with client from workers goroutines.
func send(t *testing.T, client *http.Client, srv *slowServer, n, workers int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				res, err := client.Get(srv.URL + "/work")
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
			}
		})
	}
	wg.Wait()
}

// mostDuring runs f and returns the most requests srv had at once.
func mostDuring(srv *slowServer, f func()) int {
	srv.mu.Lock()
	srv.most = 0
	srv.mu.Unlock()
	f()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.most
}

func newTransport() *http.Transport {
	return &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0}
}

// A far cluster: every answer takes the same round trip however many
// are in flight. The bound grows past its start, up to its most.
func TestInFlightGrowsWhereAnswersWaitOnTheWire(t *testing.T) {
	t.Parallel()
	srv := newSlowServer(t, 20*time.Millisecond, func(http.ResponseWriter, *http.Request, int) {})
	l := newInFlight(newTransport(), 4, 64)
	most := requests(t, l, srv, 600, 128)
	if b := l.bound(); b < 32 {
		t.Errorf("after 600 answers of 20 ms each the bound is %d, want it grown from 4 toward 64", b)
	}
	if b := l.bound(); b > 64 {
		t.Errorf("the bound is %d, past its most of 64", b)
	}
	if most <= 4 || most > 64 {
		t.Errorf("the server had %d requests at once, want more than the start (4) and at most 64", most)
	}
}

// A server that queues: it answers one request at a time, so that each
// answer takes longer the more are in flight (a cluster on the runner's
// own cores). The bound stays at its start. The answers' times are the
// limiter's only signal, and a machine busy with other work (the other
// packages' tests) can stretch them at random: up to three rounds are
// run, and the bound must stay at its start in one. A limiter that grows
// where the server queues grows in every round.
func TestInFlightDoesNotGrowWhereTheServerQueues(t *testing.T) {
	t.Parallel()
	var problems []string
	for round := range 3 {
		var one sync.Mutex
		var in, most atomic.Int64
		srv := newSlowServer(t, 0, func(http.ResponseWriter, *http.Request, int) {
			n := in.Add(1)
			defer in.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			one.Lock()
			time.Sleep(2 * time.Millisecond)
			one.Unlock()
		})
		l := newInFlight(newTransport(), 8, 256)
		requests(t, l, srv, 400, 128)
		m, b := most.Load(), l.bound()
		if m <= 8 && b == 8 {
			return
		}
		problems = append(problems, fmt.Sprintf("round %d: the server had %d requests at once and the bound is %d, want at most the start, 8, and the bound kept there", round+1, m, b))
	}
	t.Error(strings.Join(problems, "\n"))
}

// Grown far away, the bound comes back to its start once the server
// starts queueing, and not below it.
func TestInFlightShrinksBackWhenTheServerQueues(t *testing.T) {
	t.Parallel()
	var queueing atomic.Bool
	var one sync.Mutex
	srv := newSlowServer(t, 0, func(http.ResponseWriter, *http.Request, int) {
		if queueing.Load() {
			one.Lock()
			time.Sleep(2 * time.Millisecond)
			one.Unlock()
			return
		}
		time.Sleep(20 * time.Millisecond)
	})
	l := newInFlight(newTransport(), 8, 64)
	requests(t, l, srv, 600, 128)
	grown := l.bound()
	if grown <= 8 {
		t.Fatalf("the bound did not grow: %d", grown)
	}
	queueing.Store(true)
	requests(t, l, srv, 600, 128)
	if b := l.bound(); b != 8 {
		t.Errorf("after the server queued 600 answers the bound is %d (it had grown to %d), want its start, 8", b, grown)
	}
}

// A fixed bound (most no more than the start) never grows, however the
// answers come.
func TestInFlightFixedStaysFixed(t *testing.T) {
	t.Parallel()
	srv := newSlowServer(t, 20*time.Millisecond, func(http.ResponseWriter, *http.Request, int) {})
	l := newInFlight(newTransport(), 4, 4)
	if most := requests(t, l, srv, 200, 64); most > 4 {
		t.Errorf("the server had %d requests at once, want at most 4", most)
	}
	if b := l.bound(); b != 4 {
		t.Errorf("the bound is %d, want 4", b)
	}
}

// Runs given one Bound share it: two runs on one cluster with a bound of 3
// each have at most 3 requests in flight between them, not 6.
func TestRunsShareTheirBound(t *testing.T) {
	t.Parallel()
	srv := newSlowServer(t, 20*time.Millisecond, func(http.ResponseWriter, *http.Request, int) {})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(bound *Bound) func() {
		cfg, err := RESTConfig(Options{Kubeconfig: kubeconfig, Concurrency: 3, Bound: bound})
		if err != nil {
			t.Fatal(err)
		}
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return func() { send(t, client, srv, 30, 12) }
	}
	together := func(a, b func()) func() {
		return func() {
			var wg sync.WaitGroup
			wg.Go(a)
			wg.Go(b)
			wg.Wait()
		}
	}
	shared := &Bound{}
	if n := mostDuring(srv, together(run(shared), run(shared))); n > 3 {
		t.Errorf("two runs sharing a bound of 3 had %d requests in flight", n)
	}
	if n := mostDuring(srv, together(run(nil), run(nil))); n <= 3 {
		t.Errorf("two runs with bounds of their own had %d requests in flight, want more than 3 (the test would not see sharing)", n)
	}
}
