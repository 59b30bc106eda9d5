package kube

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
