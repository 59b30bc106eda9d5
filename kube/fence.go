package kube

import (
	"context"
	"errors"
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

func (f *WriteFence) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if isWrite(req) && req.Context().Value(unfencedKey{}) == nil {
			if err := f.Check(); err != nil {
				return nil, &FencedError{Err: err}
			}
		}
		return rt.RoundTrip(req)
	})
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
