// Command gantry ships Kubernetes configuration from CI: build, validate,
// apply, prune, wait, report. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gantry-dev/gantry/entrypoint"
)

func main() {
	// CI runners cancel a job with SIGTERM; a person with Ctrl-C.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := entrypoint.Run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
