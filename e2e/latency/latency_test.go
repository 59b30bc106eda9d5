package latency

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// Through the proxy, an echo server's answer comes back intact, one round
// trip later at the least, and a stream of 4 MiB comes back whole and in
// order.
func TestProxyDelaysEachDirection(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	const rtt = 60 * time.Millisecond
	p := &Proxy{Target: ln.Addr().String(), RTT: rtt}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	start := time.Now()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo %q, %v", got, err)
	}
	if took := time.Since(start); took < rtt {
		t.Errorf("a round trip took %s, less than the %s the proxy adds", took, rtt)
	}

	// 4 MiB written at once: the echo streams back whole, in order.
	payload := bytes.Repeat([]byte("0123456789abcdef"), 256<<10)
	go func() { _, _ = c.Write(payload) }()
	back := make([]byte, len(payload))
	if _, err := io.ReadFull(c, back); err != nil || !bytes.Equal(back, payload) {
		t.Fatalf("4 MiB echoed: %v, equal %v", err, bytes.Equal(back, payload))
	}
}
