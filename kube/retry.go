package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// RetryPolicy bounds how gantry retries a request that may be repeated
// safely when the connection to the API server breaks or the server is
// briefly unavailable.
type RetryPolicy struct {
	// Attempts is the most tries of one request, the first included.
	Attempts int
	// Backoff is the wait before the first retry; it doubles up to
	// MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// DefaultRetryPolicy rides out an API server restart of several seconds
// (about 10 s of waits in all), and no more: a server that stays away
// fails the run.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Attempts: 8, Backoff: 250 * time.Millisecond, MaxBackoff: 2 * time.Second}
}

// retryTransport retries idempotent requests on connection errors (also
// while the answer to a write is read: it reads those whole) and
// on 429, 502, 503 and 504 answers without Retry-After (client-go retries
// those with it itself).
//
// Once one request has used up its attempts on connection errors, the
// server is taken as unreachable: later requests fail at once with that
// error (an *UnreachableError), instead of each waiting out its own
// retries, except one every MaxBackoff, which tries once and, if it gets
// through, ends the outage.
type retryTransport struct {
	next   http.RoundTripper
	policy RetryPolicy

	// down is nil while the server answers: then a request costs one
	// atomic load here, no lock.
	down      atomic.Pointer[UnreachableError]
	lastProbe atomic.Int64 // unix nanoseconds
}

// UnreachableError says that the API server did not answer a request
// through all its retries; requests after it failed without being sent.
type UnreachableError struct {
	Host  string
	Since time.Time
	Err   error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the API server at %s is unreachable: %v", e.Host, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// WithRetries wraps rt so that idempotent requests are retried as policy
// says.
func WithRetries(rt http.RoundTripper, policy RetryPolicy) http.RoundTripper {
	return &retryTransport{next: rt, policy: policy}
}

// outage returns the outage in progress, unless this request is the one
// that may probe whether it has ended.
func (t *retryTransport) outage() (*UnreachableError, bool) {
	down := t.down.Load()
	if down == nil {
		return nil, false
	}
	now, last := time.Now().UnixNano(), t.lastProbe.Load()
	if now-last >= int64(t.policy.MaxBackoff) && t.lastProbe.CompareAndSwap(last, now) {
		return nil, true
	}
	return down, false
}

// observe records how a request to the server went.
func (t *retryTransport) observe(req *http.Request, answered bool, err error) {
	switch {
	case answered:
		if t.down.Load() != nil {
			t.down.Store(nil)
		}
	case req.Context().Err() == nil && !fenced(err):
		t.lastProbe.Store(time.Now().UnixNano())
		t.down.CompareAndSwap(nil, &UnreachableError{Host: req.URL.Scheme + "://" + req.URL.Host, Since: time.Now(), Err: err})
	}
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	down, probe := t.outage()
	if down != nil {
		return nil, down
	}
	if probe {
		resp, err := t.next.RoundTrip(req)
		t.observe(req, err == nil, err)
		return resp, err
	}
	if !idempotent(req) || req.URL.Query().Get("watch") != "" || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
		return t.next.RoundTrip(req)
	}
	wait := t.policy.Backoff
	for attempt := 1; ; attempt++ {
		resp, err := t.next.RoundTrip(req)
		if err == nil {
			t.observe(req, true, nil)
		}
		if err == nil && !retryable(resp, nil) && req.Method != http.MethodGet && req.Method != http.MethodHead {
			// A connection can also break while the answer is read:
			// read it here, where the request can still be sent again.
			// Only writes' answers (one object each): a LIST of
			// thousands of objects is megabytes, read once by
			// client-go, and a run has one per kind, not per object.
			var body []byte
			if body, err = readBody(resp); err == nil {
				resp.Body.Close()
				resp.Body = io.NopCloser(bytes.NewReader(body))
				return resp, nil
			}
			resp.Body.Close()
			resp = nil
		}
		if attempt >= t.policy.Attempts || req.Context().Err() != nil || !retryable(resp, err) {
			if err != nil && attempt >= t.policy.Attempts {
				t.observe(req, false, err)
			}
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if err := Sleep(req.Context(), wait); err != nil {
			return nil, err
		}
		wait = min(2*wait, t.policy.MaxBackoff)
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// idempotent reports whether sending req twice has the effect of sending
// it once: reads, server-side apply (the same configuration applied again
// changes nothing), dry-runs, and deletes (gantry deletes with a UID
// precondition; a second delete finds the object gone).
func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodDelete:
		return true
	case http.MethodPatch:
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			return true
		}
	}
	return req.URL.Query().Get("dryRun") == "All"
}

func retryable(resp *http.Response, err error) bool {
	if err != nil {
		// The connection broke or could not be made; a write the
		// fence refused was never sent, and will not be.
		return !fenced(err)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return resp.Header.Get("Retry-After") == ""
	}
	return false
}

// Sleep waits d, or until ctx ends (its error then).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// readBody reads an answer whole, in one allocation when its length is
// known (a LIST of thousands of objects is megabytes).
func readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n < 1<<30 {
		b := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(resp.Body)
}
