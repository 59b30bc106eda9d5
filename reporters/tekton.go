package reporters

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// TektonResults writes the scalar outputs as step results, one file each
// under the results directory, within Tekton's budget of about 4 KB for all
// results of a task together.
type TektonResults struct {
	Dir    string
	Redact *redact.Redactor
}

var _ Reporter = (*TektonResults)(nil)

// TektonBudget is what gantry's results may take together.
const TektonBudget = 3 * 1024

// TektonResultNames are the results a Task must declare.
var TektonResultNames = []string{"created", "configured", "unchanged", "deleted", "skipped", "failed", "changed", "reason", "revision", "inventory", "artifact-url", "artifact-digest", "history-revision", "rolled-back-to", "cause", "drifted", "drifted-objects"}

// Name implements Reporter.
func (*TektonResults) Name() string { return "Tekton results" }

// Report implements Reporter.
func (t *TektonResults) Report(_ context.Context, res *result.Result) error {
	outputs := Outputs(res, "", "")
	total := 0
	var errs []error
	for _, name := range TektonResultNames {
		v := singleLine(outputValue(name, outputs[name], t.Redact))
		if len(v) > 256 {
			v = v[:256]
		}
		total += len(v)
		if total > TektonBudget {
			return errors.Join(append(errs, fmt.Errorf("results over %d bytes; %s and later not written", TektonBudget, name))...)
		}
		if err := writeFile(t.Dir+"/"+name, []byte(v)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
