package entrypoint

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/reporters"
	"github.com/gantry-dev/gantry/result"
)

// writeDiff prints what diff (or drift) found on stdout. As text: the
// unified diff of every object that would change (for drift, what a
// correction would change), by kind, namespace and name, then one
// summary line, as kubectl, flux and kapp print theirs. As json or yaml:
// the result, as the report holds it. Secret values are masked in the
// diffs already; redact masks the rest (decrypted and substituted values).
// On GitHub the output is fenced so that no line of it runs as a workflow
// command.
func writeDiff(w io.Writer, res *result.Result, format, base string, fenced, color bool, redact *redact.Redactor) error {
	if fenced {
		end, err := fence(w)
		if err != nil {
			return err
		}
		defer end()
	}
	switch format {
	case "junit", "sarif":
		return writeMachine(w, format, base, []reporters.Suite{{Result: res}}, redact)
	case "json", "yaml":
		b, err := marshalAs(format, res)
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, redact.String(b))
		return err
	}
	var changed []result.Object
	for _, o := range res.Objects {
		if o.Diff != "" {
			changed = append(changed, o)
		}
	}
	sort.SliceStable(changed, func(i, j int) bool {
		a, b := changed[i], changed[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	var b strings.Builder
	for _, o := range changed {
		b.WriteString(paintDiff(o.Diff, color))
	}
	c := res.Counts()
	if res.Command == "drift" {
		fmt.Fprintf(&b, "%d drifted, %d missing, %d in sync\n", c[result.Drifted], c[result.Missing], c[result.InSync])
	} else {
		fmt.Fprintf(&b, "%d to create, %d to change, %d to recreate, %d to delete, %d unchanged\n",
			c[result.Created], c[result.Configured], c[result.Recreated], c[result.Deleted], c[result.Unchanged])
	}
	_, err := io.WriteString(w, redact.String(b.String()))
	return err
}

// paintDiff colours a unified diff for a terminal: headers bold, hunks
// cyan, additions green, removals red.
func paintDiff(diff string, color bool) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(strings.TrimRight(diff, "\n")+"\n", "\n") {
		if line != "" {
			b.WriteString(paintDiffLine(line, color))
		}
	}
	return b.String()
}

func paintDiffLine(line string, color bool) string {
	if !color {
		return line
	}
	code := ""
	switch {
	case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
		code = "1"
	case strings.HasPrefix(line, "@@"):
		code = "36"
	case strings.HasPrefix(line, "+"):
		code = "32"
	case strings.HasPrefix(line, "-"):
		code = "31"
	default:
		return line
	}
	return "\x1b[" + code + "m" + strings.TrimSuffix(line, "\n") + "\x1b[0m\n"
}

// marshalAs renders v as indented JSON or as YAML, ending in one newline.
func marshalAs(format string, v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return "", err
		}
	}
	return strings.TrimRight(string(b), "\n") + "\n", nil
}

// writeMachine prints validate's or diff's results as JUnit XML or SARIF.
// Both mask every string they carry before encoding it.
func writeMachine(w io.Writer, format, base string, suites []reporters.Suite, redact *redact.Redactor) error {
	var b []byte
	var err error
	if format == "junit" {
		b, err = reporters.JUnit(suites, redact)
	} else {
		b, err = reporters.SARIF(suites, Version, base, redact)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// workspace is the folder a CI job checked the repository out in, which
// SARIF's paths are relative to; "" outside CI (paths stay as reported,
// relative to the working directory).
func workspace(env map[string]string) string {
	for _, k := range []string{"GITHUB_WORKSPACE", "CI_PROJECT_DIR"} {
		if env[k] != "" {
			return env[k]
		}
	}
	return ""
}
