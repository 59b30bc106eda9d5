// Command gantry ships Kubernetes configuration from CI: build, validate,
// apply, prune, wait, report. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/gantry-dev/gantry/entrypoint"
)

func main() {
	// CI runners cancel a job with SIGTERM; a person with Ctrl-C.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// GANTRY_CPUPROFILE writes a CPU profile of the run (see BENCHMARKS.md).
	stopProfile := cpuProfile(os.Getenv("GANTRY_CPUPROFILE"))
	code := entrypoint.Run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stopProfile()
	stop()
	os.Exit(code)
}

func cpuProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gantry: GANTRY_CPUPROFILE:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
