package reporters

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sethvargo/go-githubactions"

	"github.com/gantry-dev/gantry/result"
)

func TestJSONReportGolden(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "report.json")
	if err := (&JSONReport{Path: path}).Report(t.Context(), sample()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", string(b))
}

func TestAnnotationsBeyondTheCapAreSummarised(t *testing.T) {
	t.Parallel()
	res := sample()
	res.Objects = nil
	for i := range 15 {
		res.Objects = append(res.Objects, result.Object{Kind: "ConfigMap", Namespace: "shop", Name: fmt.Sprintf("cm-%02d", i),
			Action: result.Failed, Source: fmt.Sprintf("deploy/cm-%02d.yaml", i), Error: "rejected: 100% wrong\nsecond line"})
	}
	var out strings.Builder
	gha := githubactions.New(githubactions.WithWriter(&out))
	if err := (&GitHubAnnotations{Action: gha}).Report(t.Context(), res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != maxAnnotations {
		t.Fatalf("%d annotations, want %d:\n%s", len(lines), maxAnnotations, out.String())
	}
	if want := "::error file=deploy/cm-00.yaml,title=ConfigMap/shop/cm-00 failed::rejected: 100%25 wrong%0Asecond line"; lines[0] != want {
		t.Errorf("first annotation\n%s\nwant\n%s", lines[0], want)
	}
	if !strings.Contains(lines[9], "6 more objects failed") {
		t.Errorf("last annotation %q does not summarise the rest", lines[9])
	}
}

func TestOutputsNeverEndEarly(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := writeOutput(&b, "revision", "a\nghadelimiter_x\nb"); err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(b.String(), "\n")
	delim := strings.TrimPrefix(first, "revision<<")
	if !strings.HasPrefix(delim, "ghadelimiter_") || len(delim) < 20 || !strings.HasSuffix(rest, "\n"+delim+"\n") || strings.Count(rest, delim) != 1 {
		t.Errorf("output:\n%s", b.String())
	}
	var other strings.Builder
	_ = writeOutput(&other, "revision", "x")
	if strings.Contains(other.String(), delim) {
		t.Error("two outputs share a delimiter")
	}
	if got := OutputNames(); strings.Join(got, ",") != "created,configured,recreated,unchanged,deleted,skipped,failed,changed,reason,revision,inventory,report,diff,artifact-url,artifact-digest,artifact-tags,history-revision,rolled-back-to,cause,drifted,drifted-objects" {
		t.Errorf("outputs %v", got)
	}
}

// A fetched chart's object is annotated without a file: its source
// (oci://…) is no file of the workspace, and read as one it would point
// at oci:/… there, which a pull request may write.
func TestAFetchedChartsObjectIsAnnotatedWithoutAFile(t *testing.T) {
	t.Parallel()
	res := sample()
	res.Objects = []result.Object{{Kind: "Deployment", Namespace: "default", Name: "web-shop", Action: result.Failed,
		Source: "oci://ghcr.io/acme/shop:1.2.0/templates/deployment.yaml", Line: 8, Error: "rejected"}}
	var out strings.Builder
	if err := (&GitHubAnnotations{Action: githubactions.New(githubactions.WithWriter(&out)), Workspace: t.TempDir()}).Report(t.Context(), res); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); strings.Contains(got, "file=") || !strings.HasPrefix(got, "::error title=Deployment/default/web-shop failed::") {
		t.Errorf("annotation %q, want one with no file", got)
	}
}
