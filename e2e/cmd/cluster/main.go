// Command cluster starts a test cluster by hand, for a person (or make demo)
// to point kubectl and gantry at:
//
//	go run ./e2e/cmd/cluster up [-nodes N] [-kubeconfig PATH] [-profiling] [-rtt D] [-node real]
//
// With -rtt, the kubeconfig reaches the API server through a proxy that
// delays each direction by half of D: a cluster in another region.
//
// It prints `export KUBECONFIG=...` on stdout once the cluster is ready and
// runs until interrupted (Ctrl-C, SIGTERM), then tears everything down. The
// provider is chosen by GANTRY_TEST_CLUSTER (local, kind, existing).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/e2e/latency"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "up" {
		return errors.New("usage: cluster up [-nodes N] [-kubeconfig PATH] [-profiling] [-rtt D] [-node real]")
	}
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	nodes := fs.Int("nodes", 1, "number of kwok nodes (local provider)")
	out := fs.String("kubeconfig", "", "also write the kubeconfig to this path (removed again on exit)")
	profiling := fs.Bool("profiling", false, "serve the API server's /debug/pprof (local provider)")
	rtt := fs.Duration("rtt", 0, "reach the API server through a proxy that adds this round-trip time")
	node := fs.String("node", "", `"real": add a node run by a real kubelet, with containerd (local provider; make node-tools)`)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	provider, err := cluster.FromEnv()
	if err != nil {
		return err
	}
	start := time.Now()
	c, err := provider.Start(ctx, cluster.Options{
		Name:      "gantry",
		Nodes:     *nodes,
		Profiling: *profiling,
		RealNode:  *node == "real",
		Logf:      func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "stopping the cluster")
		if err := c.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
		}
	}()
	path := c.Kubeconfig
	if *rtt > 0 {
		proxy := &latency.Proxy{Target: hostPort(c.Kubeconfig), RTT: *rtt}
		if err := proxy.Start(); err != nil {
			return err
		}
		defer proxy.Close()
		path = filepath.Join(filepath.Dir(c.Kubeconfig), "kubeconfig-far")
		if err := latency.Kubeconfig(c.Kubeconfig, proxy.Addr, path); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "the API server is reached through a proxy at %s adding %s per round trip\n", proxy.Addr, *rtt)
	}
	if *out != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(*out, b, 0o600); err != nil {
			return err
		}
		defer os.Remove(*out)
		path = *out
	}
	fmt.Fprintf(os.Stderr, "%s cluster ready in %s; Ctrl-C stops it\n", provider.Name(), time.Since(start).Round(100*time.Millisecond))
	fmt.Printf("export KUBECONFIG=%s\n", path)
	<-ctx.Done()
	return nil
}

// hostPort is the API server's host:port in the kubeconfig at file.
func hostPort(file string) string {
	raw, err := clientcmd.LoadFromFile(file)
	if err != nil {
		return ""
	}
	for _, c := range raw.Clusters {
		if u, err := url.Parse(c.Server); err == nil {
			return u.Host
		}
	}
	return ""
}
