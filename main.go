// Command gantry ships Kubernetes configuration from CI: build, validate,
// apply, prune, wait, report. See README.md.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/sources/charts"
)

func main() {
	// gantry renders a chart in a process of its own, bounded in time and
	// memory: this executable, started again as the renderer.
	if child, code := charts.ChildMain(); child {
		os.Exit(code)
	}
	// Libraries that log through slog's default logger (Helm's packages
	// do) would write past gantry's log guard and masks, quoting what a
	// chart rendered: they write nowhere; gantry's own output has its
	// own writers.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	// CI runners cancel a job with SIGTERM; a person with Ctrl-C.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	tuneGC()
	// GANTRY_CPUPROFILE writes a CPU profile of the run (see BENCHMARKS.md).
	stopProfile := cpuProfile(os.Getenv("GANTRY_CPUPROFILE"))
	code := entrypoint.Run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stopProfile()
	stop()
	os.Exit(code)
}

// tuneGC trades memory the run has for CPU it lacks: a run's heap is
// mostly short-lived request and response objects, and on a two-core CI
// machine every cycle the collector spends is taken from the API server
// being deployed to. The collector runs at 5x the live heap instead of 2x
// (about 60 ms less CPU for a no-op of 1000 objects) and harder as the
// heap nears 150 MiB (10,000 objects stay near 230 MB resident); see
// BENCHMARKS.md. GOGC and GOMEMLIMIT override both.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(150 << 20)
	}
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
