package kube

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// discoveryTogether sends the request for /apis as soon as the one for
// /api goes out. client-go reads the cluster's kinds from the two, one
// after the other; against a cluster far away the second costs a round
// trip of its own, which this takes out: its answer is waiting when
// client-go asks for it. Only the first /apis after an /api is answered
// so, and only within a few seconds; any other request goes as it came.
type discoveryTogether struct {
	next http.RoundTripper

	mu      sync.Mutex
	pending *prefetched
}

type prefetched struct {
	accept string
	sent   time.Time
	done   chan struct{}
	res    *http.Response
	body   []byte
	err    error
}

// prefetchWindow bounds how old a prefetched answer may be when it is
// used.
const prefetchWindow = 5 * time.Second

func (d *discoveryTogether) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.RawQuery != "" {
		return d.next.RoundTrip(req)
	}
	switch req.URL.Path {
	case "/api":
		p := d.prefetch(req)
		res, err := d.next.RoundTrip(req)
		if err != nil || res.StatusCode != http.StatusOK {
			// client-go does not go on to /apis: the answer is
			// not kept for a later request.
			d.drop(p)
		}
		return res, err
	case "/apis":
		if res, ok := d.take(req); ok {
			return res, nil
		}
	}
	return d.next.RoundTrip(req)
}

// prefetch sends the request for /apis that client-go sends next, with
// the same headers.
func (d *discoveryTogether) prefetch(apiReq *http.Request) *prefetched {
	req := apiReq.Clone(apiReq.Context())
	req.URL.Path = "/apis"
	req.Body, req.GetBody, req.ContentLength = nil, nil, 0
	p := &prefetched{accept: req.Header.Get("Accept"), sent: time.Now(), done: make(chan struct{})}
	d.mu.Lock()
	d.pending = p
	d.mu.Unlock()
	go func() {
		defer close(p.done)
		res, err := d.next.RoundTrip(req)
		if err != nil {
			p.err = err
			return
		}
		defer res.Body.Close()
		p.body, p.err = io.ReadAll(res.Body)
		p.res = res
	}()
	return p
}

// drop forgets p, unless a later prefetch replaced it.
func (d *discoveryTogether) drop(p *prefetched) {
	d.mu.Lock()
	if d.pending == p {
		d.pending = nil
	}
	d.mu.Unlock()
}

// take answers req with the prefetched /apis, when there is one, asked
// with the same Accept header, recently, and answered.
func (d *discoveryTogether) take(req *http.Request) (*http.Response, bool) {
	d.mu.Lock()
	p := d.pending
	d.pending = nil
	d.mu.Unlock()
	if p == nil || p.accept != req.Header.Get("Accept") || time.Since(p.sent) > prefetchWindow {
		return nil, false
	}
	select {
	case <-p.done:
	case <-req.Context().Done():
		return nil, false
	}
	if p.err != nil {
		return nil, false
	}
	res := *p.res
	res.Request = req
	res.Body = io.NopCloser(bytes.NewReader(p.body))
	res.ContentLength = int64(len(p.body))
	return &res, true
}
