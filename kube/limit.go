package kube

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"
)

// minInFlight is the fewest requests a run keeps in flight however
// overloaded the server says it is.
const minInFlight = 2

// inFlight bounds the requests a run has in flight to its API server. It
// starts at start and follows what the server says:
//
//   - an answer that it is overloaded (429 Too Many Requests, which API
//     Priority and Fairness sends when a priority level's queues are full,
//     or 503 with Retry-After) halves the bound, down to minInFlight; each
//     run of as many answers as the bound, none of them such, raises it by
//     one, back up to start. The request that was refused is sent again by
//     the retries above, after its Retry-After;
//   - when most may be more than start, the time answers take moves it
//     between the two. A far cluster's answers take a round trip however
//     few are in flight: while requests wait for room and the median
//     answer of a bound's worth takes at most twice the fastest answer
//     seen (the wire, not the server's queues), the bound grows by half,
//     up to most. When the median takes more than four times the fastest
//     (the server queues them: a cluster on the runner's own cores, or
//     one that is busy), it shrinks by a quarter, never below start.
//
// The Lease's own requests (Unfenced) are never held: its renewal must not
// wait behind the objects' writes.
type inFlight struct {
	next        http.RoundTripper
	start, most int

	mu      sync.Mutex
	limit   int
	n       int // in flight
	ok      int // answers since the bound last changed, while below start
	waited  bool
	fastest time.Duration
	window  []time.Duration // answers' times since the bound was last weighed
	// waiting are the requests waiting for room, first come first
	// served: a room given is a channel closed.
	waiting []chan struct{}
}

// Bound is a bound on requests in flight that runs share: those of one
// invocation on one cluster, as one identity, with the same concurrency,
// so that units running at once ask no more of the server than one run
// would, and learn its latency together. Its zero value is ready; the
// first run to connect sets it up.
type Bound struct {
	mu sync.Mutex
	l  *inFlight
}

func (b *Bound) wrap(rt http.RoundTripper, concurrency, most int) http.RoundTripper {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.l == nil {
		b.l = newInFlight(rt, concurrency, most)
	}
	return b.l
}

// newInFlight bounds next at concurrency requests in flight, adapting to
// the time answers take up to most when most is more.
func newInFlight(next http.RoundTripper, concurrency, most int) *inFlight {
	start := max(concurrency, minInFlight)
	return &inFlight{next: next, start: start, most: max(most, start), limit: start}
}

func (l *inFlight) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Context().Value(unfencedKey{}) != nil {
		return l.next.RoundTrip(req)
	}
	if err := l.acquire(req.Context()); err != nil {
		return nil, err
	}
	sent := time.Now()
	res, err := l.next.RoundTrip(req)
	l.release(time.Since(sent), err == nil && overloaded(res), err == nil)
	return res, err
}

// overloaded says whether res is the server saying it has too much to do.
func overloaded(res *http.Response) bool {
	return res.StatusCode == http.StatusTooManyRequests ||
		res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != ""
}

func (l *inFlight) acquire(ctx context.Context) error {
	l.mu.Lock()
	if l.n < l.limit && len(l.waiting) == 0 {
		l.n++
		l.mu.Unlock()
		return nil
	}
	l.waited = true
	room := make(chan struct{})
	l.waiting = append(l.waiting, room)
	l.mu.Unlock()
	select {
	case <-room:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		if i := slices.Index(l.waiting, room); i >= 0 {
			l.waiting = slices.Delete(l.waiting, i, i+1)
		} else {
			// Given room as ctx ended: give it on.
			l.n--
			l.admit()
		}
		return ctx.Err()
	}
}

// admit gives room to the requests waiting, first come first served, as
// far as the bound allows.
func (l *inFlight) admit() {
	for l.n < l.limit && len(l.waiting) > 0 {
		l.n++
		close(l.waiting[0])
		l.waiting = l.waiting[1:]
	}
}

// release gives back a request's room; took is the time its answer took
// (answered: it came, with no error).
func (l *inFlight) release(took time.Duration, overloaded, answered bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	switch {
	case overloaded:
		l.limit, l.ok = max(minInFlight, l.limit/2), 0
		l.window, l.waited = l.window[:0], false
	case l.limit < l.start:
		if l.ok++; l.ok >= l.limit {
			l.limit, l.ok = l.limit+1, 0
		}
	case l.most > l.start && answered:
		l.weigh(took)
	}
	l.admit()
}

// weigh records an answer's time and, once a bound's worth of answers
// came, moves the bound as their median says.
func (l *inFlight) weigh(took time.Duration) {
	if l.fastest == 0 || took < l.fastest {
		l.fastest = took
	}
	l.window = append(l.window, took)
	if len(l.window) < l.limit {
		return
	}
	slices.Sort(l.window)
	median := l.window[len(l.window)/2]
	switch {
	case l.waited && median <= 2*l.fastest:
		l.limit = min(l.most, l.limit+l.limit/2)
	case median > 4*l.fastest:
		l.limit = max(l.start, l.limit-l.limit/4)
	}
	l.window, l.waited = l.window[:0], false
}

// bound is the number of requests allowed in flight now.
func (l *inFlight) bound() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}
