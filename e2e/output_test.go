package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/result"
)

// Every command that reports prints, with --output json, the result as
// its report holds it: the same JSON on stdout as in the report file, for
// validate, diff, apply, drift, rollback, release and delete; history
// prints its revisions. Text goes to stderr only.
func TestJSONOnEveryReportingCommand(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	inv := []string{"--inventory=out", "--inventory-namespace=" + ns}
	writeFile(t, filepath.Join(dir, "a.yaml"), configMapYAML(ns, "a", "v1"))
	check := func(command string, args ...string) {
		t.Helper()
		r := gantry(t, append(append([]string{command}, args...), "--output", "json")...)
		var printed result.Result
		if err := json.Unmarshal([]byte(r.stdout), &printed); err != nil {
			t.Fatalf("%s -o json: stdout is not a result (%v):\n%s", command, err, r.stdout)
		}
		if printed.Schema != result.SchemaVersion || printed.Command != command || r.res == nil || printed.Reason != r.res.Reason || len(printed.Objects) != len(r.res.Objects) {
			t.Errorf("%s -o json: printed %s %s %s with %d objects; the report says %+v", command, printed.Schema, printed.Command, printed.Reason, len(printed.Objects), r.res)
		}
		if strings.Contains(r.stdout, "▸") || !strings.Contains(r.stderr, "gantry "+command+":") {
			t.Errorf("%s -o json: progress on stdout, or no summary on stderr", command)
		}
	}
	check("validate", dir)
	check("diff", append([]string{dir}, inv...)...)
	check("apply", append([]string{dir, "--timeout=60s"}, inv...)...)
	writeFile(t, filepath.Join(dir, "a.yaml"), configMapYAML(ns, "a", "v2"))
	check("apply", append([]string{dir, "--timeout=60s"}, inv...)...)
	check("drift", inv...)
	check("rollback", append([]string{"--timeout=60s"}, inv...)...)

	r := gantry(t, append([]string{"history", "--output", "json"}, inv...)...)
	var revisions []struct {
		Number  int
		Outcome string
	}
	if err := json.Unmarshal([]byte(r.stdout), &revisions); err != nil || len(revisions) != 3 || revisions[0].Number != 3 || revisions[0].Outcome != string(result.ReasonRolledBack) {
		t.Errorf("history -o json: %v %+v\n%s", err, revisions, r.stdout)
	}
	check("release", inv...)
	writeFile(t, filepath.Join(dir, "a.yaml"), configMapYAML(ns, "a", "v3"))
	check("apply", append([]string{dir, "--timeout=60s"}, inv...)...)
	check("delete", inv...)
}
