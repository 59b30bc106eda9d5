package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A server that fails the first fails requests: with 503, or by dropping
// the connection before answering.
func flaky(t *testing.T, fails int32, how string, bodies chan<- string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bodies != nil {
			bodies <- string(b)
		}
		if n.Add(1) <= fails {
			switch how {
			case "drop":
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
			case "truncate":
				// Headers and part of the answer, then the connection
				// breaks.
				w.Header().Set("Content-Length", "100")
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, "partial")
				w.(http.Flusher).Flush()
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
			case "retry-after":
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
			default:
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func fast() RetryPolicy {
	return RetryPolicy{Attempts: 4, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}
}

func TestRetriesIdempotentRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, method, query, contentType, how string
		fails                                 int32
		wantRequests                          int32
		wantOK                                bool
	}{
		{"GET after 503s", http.MethodGet, "", "", "503", 2, 3, true},
		{"server-side apply after dropped connections", http.MethodPatch, "", "application/apply-patch+yaml", "drop", 2, 3, true},
		{"apply whose answer breaks off", http.MethodPatch, "", "application/apply-patch+yaml", "truncate", 1, 2, true},
		{"dry-run create after 503", http.MethodPost, "dryRun=All", "application/json", "503", 1, 2, true},
		{"DELETE after 503", http.MethodDelete, "", "application/json", "503", 1, 2, true},
		{"create is not retried", http.MethodPost, "", "application/json", "503", 1, 1, false},
		{"JSON patch is not retried", http.MethodPatch, "", "application/json-patch+json", "503", 1, 1, false},
		{"Retry-After is client-go's to honour", http.MethodGet, "", "", "retry-after", 1, 1, false},
		{"bounded", http.MethodGet, "", "", "503", 100, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bodies := make(chan string, 100)
			srv, n := flaky(t, tc.fails, tc.how, bodies)
			client := &http.Client{Transport: WithRetries(http.DefaultTransport.(*http.Transport).Clone(), fast())}
			req, err := http.NewRequest(tc.method, srv.URL+"/api/v1/namespaces/x/configmaps/y?"+tc.query, strings.NewReader("the-body"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := client.Do(req)
			ok := err == nil && resp.StatusCode == http.StatusOK
			if resp != nil {
				resp.Body.Close()
			}
			if ok != tc.wantOK || n.Load() != tc.wantRequests {
				t.Errorf("ok %v (%v), %d requests; want ok %v, %d requests", ok, err, n.Load(), tc.wantOK, tc.wantRequests)
			}
			close(bodies)
			for b := range bodies {
				if tc.method != http.MethodGet && b != "the-body" {
					t.Errorf("a retry sent the body %q", b)
				}
			}
		})
	}
}

// A cancelled run does not wait out the backoff.
func TestRetryStopsWithTheContext(t *testing.T) {
	t.Parallel()
	srv, _ := flaky(t, 1000, "503", nil)
	client := &http.Client{Transport: WithRetries(http.DefaultTransport, RetryPolicy{Attempts: 100, Backoff: time.Hour, MaxBackoff: time.Hour})}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	start := time.Now()
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("no error")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s", took)
	}
}

func TestUnanswered(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/api", Err: syscall.ECONNRESET}, true},
		{fmt.Errorf("delete failed: %w", io.EOF), true},
		{&UnreachableError{Host: "https://127.0.0.1:6443", Err: syscall.ECONNREFUSED}, true},
		{errors.New("namespace shop does not exist and is not in the set"), false},
		{apierrors.NewInternalError(errors.New("etcd timeout")), true},
		{apierrors.NewTimeoutError("request did not complete", 1), true},
		{apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("changed")), false},
		{apierrors.NewBadRequest("invalid"), false},
		{fmt.Errorf("writing: %w", context.DeadlineExceeded), true},
		{context.Canceled, true},
	} {
		if got := Unanswered(c.err); got != c.want {
			t.Errorf("Unanswered(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// Once a request has used up its retries on a server that does not
// answer, the requests after it fail at once with an *UnreachableError,
// not each after its own retries; one request every MaxBackoff tries
// again, and once it gets through the outage is over.
func TestUnreachableServerFailsFastThenRecovers(t *testing.T) {
	t.Parallel()
	srv, served := flaky(t, 4, "drop", nil)
	policy := RetryPolicy{Attempts: 4, Backoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	client := &http.Client{Transport: WithRetries(http.DefaultTransport, policy)}
	get := func() error {
		resp, err := client.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err == nil {
		t.Fatal("the first request got through a server that drops every connection")
	}
	if n := served.Load(); n != 4 {
		t.Fatalf("the first request was sent %d times, want 4", n)
	}
	for range 10 {
		err := get()
		var down *UnreachableError
		if !errors.As(err, &down) {
			t.Fatalf("a request during the outage: %v, want an *UnreachableError", err)
		}
		if !strings.Contains(err.Error(), srv.URL) {
			t.Errorf("%q does not name the server", err)
		}
	}
	if n := served.Load(); n != 4 {
		t.Errorf("requests during the outage reached the server: %d in all, want 4", n)
	}
	time.Sleep(policy.MaxBackoff)
	if err := get(); err != nil {
		t.Fatalf("the probe after the outage: %v", err)
	}
	if err := get(); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
}
