package kube

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
)

// WriteFence refuses every write request of a run while a check says the
// run may no longer write: the inventory's Lease was taken by another run,
// or could not be renewed in time. It sits below the retries, so that a
// write sent again after a broken connection is checked again, and it
// never holds up a read or a dry-run.
type WriteFence struct {
	check atomic.Pointer[func() error]
}

// Hold makes every later write ask check first; a write it refuses fails
// with check's error, unsent.
func (f *WriteFence) Hold(check func() error) { f.check.Store(&check) }

// Lift lets writes through unchecked again.
func (f *WriteFence) Lift() { f.check.Store(nil) }

// Check returns what the fence says of a write now: nil when it may go.
func (f *WriteFence) Check() error {
	if c := f.check.Load(); c != nil {
		return (*c)()
	}
	return nil
}

// FencedError is a write the fence refused: it was not sent.
type FencedError struct{ Err error }

func (e *FencedError) Error() string { return e.Err.Error() }
func (e *FencedError) Unwrap() error { return e.Err }

// fenced says whether err is a write the fence refused, which is neither a
// sign of a broken connection nor worth sending again.
func fenced(err error) bool {
	var f *FencedError
	return errors.As(err, &f)
}

type unfencedKey struct{}

// Unfenced marks the requests made with ctx as exempt from the fence: the
// Lease's own renewal and release, which decide what the fence says.
func Unfenced(ctx context.Context) context.Context {
	return context.WithValue(ctx, unfencedKey{}, true)
}

// wrap checks a write twice: before it is handed to the transport, and
// again when the transport reads its body, after the request's headers
// went out and just before the body that completes it does. A run stopped
// in between (a paused runner) finds out there, and the transport resets
// the request: the API server never acts on a request whose body did not
// arrive whole.
func (f *WriteFence) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if !isWrite(req) || req.Context().Value(unfencedKey{}) != nil {
			return rt.RoundTrip(req)
		}
		if err := f.Check(); err != nil {
			return nil, &FencedError{Err: err}
		}
		if req.Body == nil || req.Body == http.NoBody {
			return rt.RoundTrip(req)
		}
		refused := &atomic.Pointer[FencedError]{}
		req = req.Clone(req.Context())
		req.Body = &fencedBody{ReadCloser: req.Body, fence: f, refused: refused}
		if getBody := req.GetBody; getBody != nil {
			req.GetBody = func() (io.ReadCloser, error) {
				rc, err := getBody()
				if err != nil {
					return nil, err
				}
				return &fencedBody{ReadCloser: rc, fence: f, refused: refused}, nil
			}
		}
		res, err := rt.RoundTrip(req)
		if fe := refused.Load(); err != nil && fe != nil {
			return nil, fe
		}
		return res, err
	})
}

// fencedBody asks the fence before its first read, and records a refusal
// for the round trip to return as such.
type fencedBody struct {
	io.ReadCloser
	fence   *WriteFence
	asked   bool
	refused *atomic.Pointer[FencedError]
}

func (b *fencedBody) Read(p []byte) (int, error) {
	if !b.asked {
		b.asked = true
		if err := b.fence.Check(); err != nil {
			fe := &FencedError{Err: err}
			b.refused.Store(fe)
			return 0, fe
		}
	}
	return b.ReadCloser.Read(p)
}

// isWrite says whether req may change what the cluster stores: a dry-run
// never does.
func isWrite(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return req.URL.Query().Get("dryRun") == ""
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
