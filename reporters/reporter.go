// Package reporters publishes the result of a run where people look: the
// JSON report and diff file everywhere; on GitHub the job summary, one
// sticky pull-request comment, step outputs and annotations; on GitLab one
// sticky merge-request note and a dotenv report; on Tekton the step results.
// Reporters see only the typed result.Result. A reporter that fails warns;
// it never turns a good deploy red.
package reporters

import (
	"context"
	"fmt"

	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/safefile"
)

// Reporter publishes one run's result in one place.
type Reporter interface {
	Name() string
	Report(ctx context.Context, res *result.Result) error
}

// Multi fans a result out to several reporters.
type Multi []Reporter

// Report runs every reporter, in order, and returns their failures as
// warnings, each naming its reporter.
func (m Multi) Report(ctx context.Context, res *result.Result) []error {
	var warnings []error
	for _, r := range m {
		if err := r.Report(ctx, res); err != nil {
			warnings = append(warnings, fmt.Errorf("%s: %w", r.Name(), err))
		}
	}
	return warnings
}

// writeFile writes content to path through safefile: confined to the
// workspace, never through a link, owned as the folder it is in.
func writeFile(path string, content []byte) error { return safefile.Write(path, content) }

// GiveTree gives dir and everything under it to the owner of the folder
// dir is in, as writeFile does for one file: for what pull writes into a
// workspace.
func GiveTree(dir string) error { return safefile.GiveTree(dir) }
