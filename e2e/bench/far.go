package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gantry-dev/gantry/e2e/latency"
)

// farScenario times the apply scenarios (and the operator's bundle and
// drift, as -far-scenarios says) against the cluster as if it were
// in another region: behind a proxy that delays each direction by half
// of each round-trip time given, with no bandwidth limit. What a tool pays
// there is the requests it sends one after another, so each time is also
// given as round trips (time over the RTT). The floor, kubectl and kapp go
// through the same proxy.
func (b *bench) farScenario(ctx context.Context, rtts []time.Duration) []row {
	var rows []row
	for _, rtt := range rtts {
		p := &latency.Proxy{Target: hostPort(b.servers[0]), RTT: rtt}
		b.must(p.Start())
		restore := b.through(p.Addr)
		b.logf("far: %s round trip, through %s", rtt, p.Addr)
		var applied []row
		if b.farScenarios["apply"] {
			applied = append(applied, b.applyScenarios(ctx)...)
		}
		if b.farScenarios["operator"] {
			applied = append(applied, b.operatorScenario(ctx)...)
		}
		if b.farScenarios["drift"] {
			applied = append(applied, b.driftScenario(ctx)...)
		}
		restore()
		_ = p.Close()
		for _, r := range applied {
			r.name = fmt.Sprintf("%s ms RTT: %s", fmt.Sprint(rtt.Milliseconds()), r.name)
			r.target = fmt.Sprintf("round trips: gantry %s, floor %s, kubectl %s, kapp %s", trips(r.gantry, rtt), trips(r.flr, rtt), trips(r.kubectl, rtt), trips(r.kapp, rtt))
			rows = append(rows, r)
		}
	}
	return rows
}

// trips is d in round trips of rtt.
func trips(d, rtt time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", float64(d)/float64(rtt))
}

// hostPort is the host:port of an API server's URL.
func hostPort(server string) string {
	u, _, err := rest.DefaultServerUrlFor(&rest.Config{Host: server})
	if err != nil {
		return server
	}
	return u.Host
}

// through points the bench's kubeconfig and its floor client at addr (the
// proxy) until the returned function puts them back.
func (b *bench) through(addr string) (restore func()) {
	file := filepath.Join(b.work, "far-kubeconfig-"+strings.NewReplacer(":", "-", ".", "-").Replace(addr)) // KUBECONFIG is a list: no colon
	b.must(latency.Kubeconfig(b.kubeconfig, addr, file))
	cfg, err := clientcmd.BuildConfigFromFlags("", file)
	b.must(err)
	cfg.QPS, cfg.Burst = -1, 0
	httpClient, err := rest.HTTPClientFor(cfg)
	b.must(err)
	client, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	b.must(err)
	kubeconfig, oldClient, oldHTTP := b.kubeconfig, b.client, b.http
	b.kubeconfig, b.client, b.http = file, client, httpClient
	return func() {
		b.kubeconfig, b.client, b.http = kubeconfig, oldClient, oldHTTP
		_ = os.Remove(file)
	}
}
