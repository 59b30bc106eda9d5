package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// slowServer answers every request after delay, recording when each
// arrived and how many were in flight at most.
type slowServer struct {
	*httptest.Server
	mu       sync.Mutex
	arrived  map[string][]time.Time
	inFlight int
	most     int
}

func newSlowServer(t *testing.T, delay time.Duration, answer func(w http.ResponseWriter, r *http.Request, n int)) *slowServer {
	s := &slowServer{arrived: map[string][]time.Time{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.arrived[r.URL.Path] = append(s.arrived[r.URL.Path], time.Now())
		n := len(s.arrived[r.URL.Path])
		s.inFlight++
		s.most = max(s.most, s.inFlight)
		s.mu.Unlock()
		time.Sleep(delay)
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
		answer(w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

func discoveryAnswer(w http.ResponseWriter, r *http.Request, _ int) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api":
		fmt.Fprint(w, `{"kind":"APIVersions","versions":["v1"]}`)
	case "/apis":
		fmt.Fprint(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}}]}`)
	default:
		http.NotFound(w, r)
	}
}

// client-go reads /api, then /apis: gantry asks for both at once, so
// that a cluster far away costs one round trip for them, not two, and
// each is still asked once.
func TestDiscoveryAsksForBothDocumentsAtOnce(t *testing.T) {
	t.Parallel()
	srv := newSlowServer(t, 200*time.Millisecond, discoveryAnswer)
	c, err := Connect(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	groups, err := c.Kube.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups.Groups {
		names = append(names, g.Name)
	}
	if got := strings.Join(names, ","); got != ",apps" {
		t.Errorf("groups = %q, want the core group and apps", got)
	}
	srv.mu.Lock()
	apis, apiss, most := len(srv.arrived["/api"]), len(srv.arrived["/apis"]), srv.most
	srv.mu.Unlock()
	if apis != 1 || apiss != 1 {
		t.Fatalf("asked /api %d times and /apis %d times, want once each", apis, apiss)
	}
	if most != 2 {
		t.Errorf("at most %d requests were in flight, want /api and /apis together", most)
	}
	// A later /apis (the groups read again) goes to the server.
	if _, err := c.Kube.Discovery().ServerGroups(); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if n := len(srv.arrived["/apis"]); n != 2 {
		t.Errorf("a second discovery asked /apis %d times in all, want 2", n)
	}
}

// A 429 with Retry-After is waited for, then sent again; not sent again at
// once, and not given up.
func TestTooManyRequestsWaitsForRetryAfter(t *testing.T) {
	t.Parallel()
	srv := newSlowServer(t, 0, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`)
			return
		}
		fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"default"}}`)
	})
	c, err := Connect(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := c.Kube.CoreV1().ConfigMaps("default").Get(context.Background(), "x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Name != "x" {
		t.Errorf("read %q", cm.Name)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	at := srv.arrived["/api/v1/namespaces/default/configmaps/x"]
	if len(at) != 2 {
		t.Fatalf("the request was sent %d times, want twice", len(at))
	}
	if waited := at[1].Sub(at[0]); waited < time.Second {
		t.Errorf("sent again after %s, before the Retry-After of 1s", waited)
	}
}

// The trace lists each request once, in the order sent, with the depth of
// the chain of answers it waited for.
func TestTraceDepth(t *testing.T) {
	t.Parallel()
	srv := newSlowServer(t, 30*time.Millisecond, func(w http.ResponseWriter, r *http.Request, _ int) {})
	trace := NewTrace()
	client := &http.Client{Transport: trace.wrap(http.DefaultTransport)}
	get := func(path string) {
		res, err := client.Get(srv.URL + path)
		if err != nil {
			t.Error(err)
			return
		}
		res.Body.Close()
	}
	get("/a")
	var wg sync.WaitGroup
	wg.Go(func() { get("/b") })
	wg.Go(func() { get("/c") })
	wg.Wait()
	get("/d")
	depths := map[string]int{}
	for _, r := range trace.Requests() {
		depths[r.Path] = r.Depth
	}
	want := map[string]int{"/a": 1, "/b": 2, "/c": 2, "/d": 3}
	for p, d := range want {
		if depths[p] != d {
			t.Errorf("%s: depth %d, want %d (all: %v)", p, depths[p], d, depths)
		}
	}
	var b strings.Builder
	trace.Write(&b)
	if !strings.Contains(b.String(), "4 requests over") || !strings.Contains(b.String(), "is 3\n") {
		t.Errorf("trace:\n%s", b.String())
	}
}

// When /api fails, client-go does not go on to /apis: the /apis read
// beside it is dropped, and a later /apis is asked afresh, never answered
// with the older one.
func TestDiscoveryDropsWhatFollowsAFailure(t *testing.T) {
	t.Parallel()
	srv := newSlowServer(t, 0, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/api" && n == 1 {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "%s answer %d", r.URL.Path, n)
	})
	client := &http.Client{Transport: &discoveryTogether{next: http.DefaultTransport}}
	get := func(path string) string {
		res, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	get("/api") // fails; /apis 1 went beside it
	// Wait until the server has seen /apis 1, so that it cannot be
	// taken for a later one.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		srv.mu.Lock()
		n := len(srv.arrived["/apis"])
		srv.mu.Unlock()
		if n == 1 || time.Now().After(deadline) {
			break
		}
	}
	if got := get("/apis"); got != "/apis answer 2" {
		t.Errorf("/apis after a failed /api: %q, want the server's second answer", got)
	}
	if got := get("/api"); got != "/api answer 2" {
		t.Fatalf("/api: %q", got)
	}
	if got := get("/apis"); got != "/apis answer 3" {
		t.Errorf("/apis after /api: %q, want the one read beside it", got)
	}
}

// An overloaded server's 429s halve the requests in flight; answers
// without one raise the bound again, back to the concurrency asked for.
// The Lease's requests pass however many are in flight.
func TestInFlightFollowsTheServersLoad(t *testing.T) {
	t.Parallel()
	var overloadedNow atomic.Bool
	overloadedNow.Store(true)
	srv := newSlowServer(t, 20*time.Millisecond, func(w http.ResponseWriter, r *http.Request, _ int) {
		if overloadedNow.Load() && r.URL.Path == "/work" {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	l := newInFlight(http.DefaultTransport, 16, 0)
	client := &http.Client{Transport: l}
	get := func(ctx context.Context, path string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		res, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		res.Body.Close()
	}
	burst := func(n int) int {
		srv.mu.Lock()
		srv.most = 0
		srv.mu.Unlock()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { get(context.Background(), "/work") })
		}
		wg.Wait()
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.most
	}
	burst(32)
	if b := l.bound(); b != minInFlight {
		t.Fatalf("after 32 answers of 429 the bound is %d, want %d", b, minInFlight)
	}
	if most := burst(32); most > minInFlight {
		t.Errorf("%d requests in flight at once while the bound is %d", most, minInFlight)
	}
	// Full, with requests the server holds: a Lease request passes.
	release := make(chan struct{})
	held := newSlowServer(t, 0, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/held" {
			<-release
		}
	})
	var wg sync.WaitGroup
	for range minInFlight {
		wg.Go(func() {
			res, err := client.Get(held.URL + "/held")
			if err == nil {
				res.Body.Close()
			}
		})
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		held.mu.Lock()
		n := len(held.arrived["/held"])
		held.mu.Unlock()
		if n == minInFlight || time.Now().After(deadline) {
			break
		}
	}
	ctx, cancel := context.WithTimeout(Unfenced(context.Background()), 2*time.Second)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, held.URL+"/lease", nil)
	if res, err := client.Do(req); err != nil {
		t.Errorf("a Lease request while the bound is full: %v", err)
	} else {
		res.Body.Close()
	}
	cancel()
	close(release)
	wg.Wait()

	overloadedNow.Store(false)
	for range 20 {
		burst(64)
	}
	if b := l.bound(); b != 16 {
		t.Errorf("after answers without 429 the bound is %d, want it back at 16", b)
	}
	if most := burst(64); most > 16 {
		t.Errorf("%d requests in flight at once, over the concurrency of 16", most)
	}
}
