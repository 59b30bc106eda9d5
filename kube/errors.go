package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Unanswered reports whether err leaves open whether the API server
// carried out the request: the connection broke before the answer came
// back, the caller stopped waiting (its deadline passed, it was
// cancelled), or the server answered with a 5xx, which it may send after
// the write was stored. A 4xx is a refusal: nothing was written. An error
// of gantry's own is neither.
func Unanswered(err error) bool {
	var status apierrors.APIStatus
	if err != nil && errors.As(err, &status) {
		return status.Status().Code >= 500
	}
	return ConnectionLost(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// ConnectionLost reports whether err is a request that got no answer at
// all: the connection could not be made or broke, or the server was
// already known to be unreachable.
func ConnectionLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || fenced(err) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	var (
		down *UnreachableError
		ue   *url.Error
		ne   net.Error
	)
	return errors.As(err, &down) || errors.As(err, &ue) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// DescribeLost says in one line which API server stopped answering and
// how, without the path of the one request that found out.
func DescribeLost(err error) string {
	var down *UnreachableError
	if errors.As(err, &down) {
		return down.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			return fmt.Sprintf("the API server at %s://%s did not answer: %v", u.Scheme, u.Host, ue.Err)
		}
	}
	return "the API server did not answer: " + err.Error()
}
