// Package entrypoint turns command-line flags, GitHub Actions inputs
// (INPUT_*) and GANTRY_* environment variables into one validated
// configuration and runs the chosen command.
package entrypoint

import (
	"context"
	"fmt"
	"io"
)

// Version is stamped at build time (-ldflags -X).
var Version = "dev"

// Exit codes, documented in the README.
const (
	ExitOK      = 0 // success
	ExitFailed  = 1 // the deployment failed
	ExitInvalid = 2 // invalid input or configuration
	ExitChanges = 3 // changes pending (diff with detailed-exitcode)
)

// Run executes gantry with the given arguments and environment (as
// os.Environ returns it) and returns the process exit code.
func Run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "version" || args[0] == "--version") {
		fmt.Fprintf(stdout, "gantry %s\n", Version)
		return ExitOK
	}
	fmt.Fprintln(stderr, "gantry: usage: gantry version")
	return ExitInvalid
}
