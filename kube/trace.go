package kube

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"time"
)

// Trace records every request a run sends to its clusters, as it goes on
// the wire (each retry is a request of its own), so that a user can see
// where the time of a run went: which requests waited for which.
type Trace struct {
	start time.Time
	mu    sync.Mutex
	reqs  []TracedRequest
}

// TracedRequest is one request: when it was sent, relative to the
// trace's start, how long its answer took, and what it was.
type TracedRequest struct {
	Host   string
	Method string
	// Path is the request's path and query: resource names, label
	// selectors, dry-run; never a header or a body.
	Path     string
	Start    time.Duration
	Duration time.Duration
	Status   int
	Err      string
	// Connected: the request opened a new connection (TCP, then TLS)
	// before it was sent, and waited for that.
	Connected bool
	// Depth is how many requests, this one included, were answered one
	// after the other before it could be sent: the length of the longest
	// chain of requests, each sent after the previous one's answer, that
	// ends with it.
	Depth int
}

// NewTrace starts a trace now.
func NewTrace() *Trace { return &Trace{start: time.Now()} }

// wrap records each request that goes through rt.
func (t *Trace) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		tr := TracedRequest{Host: req.URL.Host, Method: req.Method, Path: req.URL.RequestURI()}
		var connected bool
		var mu sync.Mutex
		ct := &httptrace.ClientTrace{ConnectStart: func(string, string) { mu.Lock(); connected = true; mu.Unlock() }}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), ct))
		sent := time.Now()
		res, err := rt.RoundTrip(req)
		tr.Start, tr.Duration = sent.Sub(t.start), time.Since(sent)
		mu.Lock()
		tr.Connected = connected
		mu.Unlock()
		if err != nil {
			tr.Err = err.Error()
		} else {
			tr.Status = res.StatusCode
		}
		t.mu.Lock()
		t.reqs = append(t.reqs, tr)
		t.mu.Unlock()
		return res, err
	})
}

// Requests returns the requests recorded so far in the order they were
// sent, each with its depth.
func (t *Trace) Requests() []TracedRequest {
	t.mu.Lock()
	reqs := slices.Clone(t.reqs)
	t.mu.Unlock()
	slices.SortStableFunc(reqs, func(a, b TracedRequest) int { return cmp.Compare(a.Start, b.Start) })
	// A request's depth is one more than the deepest request answered
	// before it was sent. Sorted by when they were answered, the answered
	// ones are a prefix, and their deepest is kept as it grows.
	byEnd := make([]int, len(reqs))
	for i := range byEnd {
		byEnd[i] = i
	}
	slices.SortStableFunc(byEnd, func(a, b int) int {
		return cmp.Compare(reqs[a].Start+reqs[a].Duration, reqs[b].Start+reqs[b].Duration)
	})
	deepest, next := 0, 0
	for i := range reqs {
		for next < len(byEnd) && reqs[byEnd[next]].Start+reqs[byEnd[next]].Duration <= reqs[i].Start {
			// Every request answered before this one was sent came
			// earlier in sending order too, so its depth is known.
			deepest = max(deepest, reqs[byEnd[next]].Depth)
			next++
		}
		reqs[i].Depth = deepest + 1
	}
	return reqs
}

// Write prints the requests in the order they were sent, then how many
// there were and how deep their longest chain is.
func (t *Trace) Write(w io.Writer) {
	reqs := t.Requests()
	depth, conns := 0, 0
	for _, r := range reqs {
		depth = max(depth, r.Depth)
		if r.Connected {
			conns++
		}
	}
	fmt.Fprintf(w, "requests sent, in order (sent at, took, chain depth):\n")
	for _, r := range reqs {
		answer := fmt.Sprint(r.Status)
		if r.Err != "" {
			answer = "error: " + r.Err
		}
		conn := ""
		if r.Connected {
			conn = " (new connection)"
		}
		fmt.Fprintf(w, "  %8s %8s %3d  %s %s%s -> %s%s\n", round(r.Start), round(r.Duration), r.Depth, r.Method, r.Host, r.Path, answer, conn)
	}
	fmt.Fprintf(w, "%d requests over %d connections; the longest chain of requests sent one after another's answer is %d\n", len(reqs), conns, depth)
}

func round(d time.Duration) time.Duration {
	if d > 10*time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}
