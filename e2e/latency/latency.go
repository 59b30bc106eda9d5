// Package latency is a TCP proxy that delays every byte by half a round
// trip in each direction, with no bandwidth limit: a cluster in another
// region, in front of a local API server. What a client pays through it is
// round trips, not bytes: requests it sends one after another each cost a
// round trip, requests in flight together cost one.
package latency

import (
	"bytes"
	"net"

	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// Proxy forwards connections on Addr to Target, each direction delayed by
// RTT/2.
type Proxy struct {
	Target string
	RTT    time.Duration
	// Addr is where it listens, once started.
	Addr string

	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

// Start listens on a free loopback port and forwards until Close.
func (p *Proxy) Start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	p.ln, p.Addr, p.conns = ln, ln.Addr().String(), map[net.Conn]bool{}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
	return nil
}

// Close stops listening and cuts every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.Target)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer func() {
		p.track(client, false)
		p.track(server, false)
	}()
	var wg sync.WaitGroup
	wg.Go(func() { pipe(server, client, p.RTT/2) })
	wg.Go(func() { pipe(client, server, p.RTT/2) })
	wg.Wait()
}

// chunk is what was read at one time, due to be written at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies from src to dst, each chunk written delay after it was
// read; reading goes on meanwhile, so bandwidth is not limited. When src
// ends, dst's writing side is closed after the last chunk.
func pipe(dst, src net.Conn, delay time.Duration) {
	queue := make(chan chunk, 1024)
	go func() {
		defer close(queue)
		// One buffer to read into; each chunk keeps a copy of what was
		// read, not 64 KiB per read (the proxy's own CPU, spent on the
		// garbage of a buffer per read, was a tenth of a far bench's).
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				queue <- chunk{bytes.Clone(buf[:n]), time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.data); err != nil {
			src.Close()
			break
		}
	}
	for range queue { // the reader may still hold chunks
	}
	if tcp, ok := dst.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	} else {
		dst.Close()
	}
}

// Kubeconfig writes to file the kubeconfig at from with every cluster's
// server at addr (a proxy). The certificates stay: the API server's is
// valid for the loopback address the proxy listens on.
func Kubeconfig(from, addr, file string) error {
	raw, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return err
	}
	for _, c := range raw.Clusters {
		c.Server = "https://" + addr
	}
	return clientcmd.WriteToFile(*raw, file)
}
