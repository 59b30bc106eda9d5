package kube

import (
	"context"
	"net/http"
	"sync"
)

// minInFlight is the fewest requests a run keeps in flight however
// overloaded the server says it is.
const minInFlight = 2

// inFlight bounds the requests a run has in flight to its API server. It
// starts at the concurrency asked for and follows what the server says:
// an answer that it is overloaded (429 Too Many Requests, which API
// Priority and Fairness sends when a priority level's queues are full, or
// 503 with Retry-After) halves the bound, down to minInFlight; each run of
// as many answers as the bound, none of them such, raises it by one, back
// up to the concurrency asked for. The request that was refused is sent
// again by the retries above, after its Retry-After.
//
// The Lease's own requests (Unfenced) are never held: its renewal must not
// wait behind the objects' writes.
type inFlight struct {
	next http.RoundTripper
	max  int

	mu    sync.Mutex
	limit int
	n     int // in flight
	ok    int // answers since the bound last changed
	wake  chan struct{}
}

func newInFlight(next http.RoundTripper, concurrency int) *inFlight {
	concurrency = max(concurrency, minInFlight)
	return &inFlight{next: next, max: concurrency, limit: concurrency, wake: make(chan struct{})}
}

func (l *inFlight) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Context().Value(unfencedKey{}) != nil {
		return l.next.RoundTrip(req)
	}
	if err := l.acquire(req.Context()); err != nil {
		return nil, err
	}
	res, err := l.next.RoundTrip(req)
	l.release(err == nil && overloaded(res))
	return res, err
}

// overloaded says whether res is the server saying it has too much to do.
func overloaded(res *http.Response) bool {
	return res.StatusCode == http.StatusTooManyRequests ||
		res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != ""
}

func (l *inFlight) acquire(ctx context.Context) error {
	for {
		l.mu.Lock()
		if l.n < l.limit {
			l.n++
			l.mu.Unlock()
			return nil
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *inFlight) release(overloaded bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	switch {
	case overloaded:
		l.limit, l.ok = max(minInFlight, l.limit/2), 0
	case l.limit < l.max:
		if l.ok++; l.ok >= l.limit {
			l.limit, l.ok = l.limit+1, 0
		}
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// bound is the number of requests allowed in flight now.
func (l *inFlight) bound() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}
