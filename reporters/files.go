package reporters

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// JSONReport writes the whole result, in its versioned schema, to Path: the
// one machine-readable output every platform gets.
type JSONReport struct {
	// Path is the file; "-" writes to Out (standard output).
	Path   string
	Out    io.Writer
	Redact *redact.Redactor
}

var _ Reporter = (*JSONReport)(nil)

// Name implements Reporter.
func (*JSONReport) Name() string { return "JSON report" }

// Report implements Reporter.
func (j *JSONReport) Report(_ context.Context, res *result.Result) error {
	return j.write(res)
}

// write writes v, redacted, to Path, or to Out for "-" (standard output:
// never a file named "-").
func (j *JSONReport) write(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	out := []byte(j.Redact.String(string(b)) + "\n")
	if j.Path == "-" {
		if j.Out == nil {
			return fmt.Errorf("--report -: no standard output to write the report to")
		}
		_, err := j.Out.Write(out)
		return err
	}
	return writeFile(j.Path, out)
}

// DiffFile writes every object's diff, in order, to Path as one patch; the
// `diff` output points at it, since diffs do not belong in outputs.
type DiffFile struct {
	Path   string
	Redact *redact.Redactor
}

var _ Reporter = (*DiffFile)(nil)

// Name implements Reporter.
func (*DiffFile) Name() string { return "diff file" }

// Report implements Reporter.
func (d *DiffFile) Report(_ context.Context, res *result.Result) error {
	return writeFile(d.Path, []byte(d.Redact.String(FullDiff(res))))
}

// FullDiff concatenates the diffs of every changed object.
func FullDiff(res *result.Result) string {
	var b strings.Builder
	for _, o := range res.Objects {
		if o.Diff != "" {
			b.WriteString(o.Diff)
			if !strings.HasSuffix(o.Diff, "\n") {
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}
