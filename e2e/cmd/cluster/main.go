// Command cluster starts a test cluster by hand, for a person (or make demo)
// to point kubectl and gantry at:
//
//	go run ./e2e/cmd/cluster up [-nodes N] [-kubeconfig PATH] [-profiling]
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
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gantry-dev/gantry/e2e/cluster"
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
		return errors.New("usage: cluster up [-nodes N] [-kubeconfig PATH] [-profiling]")
	}
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	nodes := fs.Int("nodes", 1, "number of kwok nodes (local provider)")
	out := fs.String("kubeconfig", "", "also write the kubeconfig to this path (removed again on exit)")
	profiling := fs.Bool("profiling", false, "serve the API server's /debug/pprof (local provider)")
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
	if *out != "" {
		b, err := os.ReadFile(c.Kubeconfig)
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
