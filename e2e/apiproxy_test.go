package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/inventory"
)

// apiProxy stands between gantry and kube-apiserver, terminating TLS with
// the API server's own certificate, so that a test sees every request
// (method, path, query) and can break the run at a chosen one: kill the
// API server before the request reaches it, or after it was carried out
// and before its answer comes back, or hold the request unanswered.
type apiProxy struct {
	srv        *httptest.Server
	kubeconfig string

	mu     sync.Mutex
	counts map[string]int
	hook   func(class string, n int, r *http.Request) proxyAction
	// writes holds when each write (apply, delete, inventory write)
	// went out and when its answer came back.
	writes []span
	// closing ends the requests the proxy holds.
	closing chan struct{}
}

type span struct{ from, to time.Time }

// proxyAction is what the proxy does with one request: forward it (the
// zero value), break it before or after the API server carried it out,
// or hold it unanswered. do, when set, runs at that point (a test kills
// the API server there).
type proxyAction struct {
	when proxyWhen
	do   func()
}

type proxyWhen int

const (
	forward     proxyWhen = iota
	breakBefore           // the request never reaches the API server
	breakAfter            // it is carried out; its answer is lost
	hold                  // never answered while the client waits
	delay                 // do runs (it sleeps), then the request goes on
)

type afterKey struct{}

var errBroken = errors.New("connection broken by the test proxy")

// newAPIProxy starts a proxy in front of c's API server and writes a
// kubeconfig that reaches the cluster through it.
func newAPIProxy(t *testing.T, c *cluster.Cluster) *apiProxy {
	t.Helper()
	if c == nil { // under -short, env.Cluster
		t.Skip("needs a cluster; skipped under -short")
	}
	if c.ServingCert == "" {
		t.Skipf("the %s cluster provider gives no serving certificate for a proxy", c.Provider)
	}
	upstream, err := url.Parse(c.RESTConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	p := &apiProxy{counts: map[string]int{}, closing: make(chan struct{})}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Host = upstream.Host
		},
		Transport:     transport,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if a, ok := resp.Request.Context().Value(afterKey{}).(proxyAction); ok {
				if a.do != nil {
					a.do()
				}
				return errBroken
			}
			return nil
		},
		// A broken upstream connection reaches the client as a broken
		// connection, as it would without the proxy, not as a 502.
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) },
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		class := classify(r)
		p.mu.Lock()
		p.counts[class]++
		n := p.counts[class]
		hook := p.hook
		p.mu.Unlock()
		var action proxyAction
		if hook != nil {
			action = hook(class, n, r)
		}
		switch action.when {
		case breakBefore:
			if action.do != nil {
				action.do()
			}
			panic(http.ErrAbortHandler)
		case hold:
			if action.do != nil {
				action.do()
			}
			select {
			case <-r.Context().Done():
			case <-p.closing:
			}
			panic(http.ErrAbortHandler)
		case delay:
			if action.do != nil {
				action.do()
			}
		case breakAfter:
			r = r.WithContext(context.WithValue(r.Context(), afterKey{}, action))
		}
		from := time.Now()
		rp.ServeHTTP(w, r)
		if class == "apply" || class == "delete" || class == "inventory-write" {
			p.mu.Lock()
			p.writes = append(p.writes, span{from, time.Now()})
			p.mu.Unlock()
		}
	}))
	cert, err := tls.LoadX509KeyPair(c.ServingCert, c.ServingKey)
	if err != nil {
		t.Fatal(err)
	}
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	p.srv.StartTLS()
	t.Cleanup(func() {
		close(p.closing)
		p.srv.CloseClientConnections()
		p.srv.Close()
	})

	kc, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, p.kubeconfig, strings.ReplaceAll(string(kc), upstream.Host, strings.TrimPrefix(p.srv.URL, "https://")))
	return p
}

// setHook sets what the proxy does with each request (nil: forward all)
// and resets the request counts.
func (p *apiProxy) setHook(hook func(class string, n int, r *http.Request) proxyAction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = hook
	p.counts = map[string]int{}
	p.writes = nil
}

// writeSpan returns the time from the first write's request to the last
// write's answer since the last setHook, and how many writes there were.
func (p *apiProxy) writeSpan() (span, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var all span
	for i, w := range p.writes {
		if i == 0 || w.from.Before(all.from) {
			all.from = w.from
		}
		if w.to.After(all.to) {
			all.to = w.to
		}
	}
	return all, len(p.writes)
}

// count returns how many requests of a class the proxy has seen since
// the last setHook.
func (p *apiProxy) count(class string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[class]
}

// classify names what a request does in gantry's run.
func classify(r *http.Request) string {
	path, q := r.URL.Path, r.URL.Query()
	switch {
	case strings.Contains(path, "/leases"):
		if r.Method == http.MethodGet {
			return "lease-read"
		}
		return "lease-write"
	case q.Get("dryRun") == "All":
		return "dry-run"
	case strings.HasSuffix(path, "/configmaps") && r.Method == http.MethodPost,
		strings.Contains(path, "/configmaps/"+inventory.ConfigMapPrefix) && r.Method == http.MethodPut:
		return "inventory-write"
	case strings.HasSuffix(path, "/secrets") && r.Method == http.MethodPost,
		strings.Contains(path, "/secrets/"+inventory.ConfigMapPrefix) && r.Method == http.MethodPut:
		return "revision-write"
	case r.Method == http.MethodPatch:
		return "apply"
	case r.Method == http.MethodDelete:
		return "delete"
	case r.Method == http.MethodGet && q.Get("watch") != "":
		return "watch"
	case r.Method == http.MethodGet:
		return "read"
	}
	return "other"
}

// seenRequest is one request the proxy saw, as record keeps it.
type seenRequest struct{ class, method, path, query, accept string }

// record resets the proxy's counts and keeps every request from now on,
// in the order they arrive; seen returns them so far.
func (p *apiProxy) record() (seen func() []seenRequest) {
	var mu sync.Mutex
	var requests []seenRequest
	p.setHook(func(class string, _ int, r *http.Request) proxyAction {
		mu.Lock()
		requests = append(requests, seenRequest{class, r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept")})
		mu.Unlock()
		return proxyAction{}
	})
	return func() []seenRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]seenRequest(nil), requests...)
	}
}
