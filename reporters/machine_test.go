package reporters

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/owenrumney/go-sarif/v3/pkg/report/v210/sarif"
	"github.com/xeipuuv/gojsonschema"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// validateSample is validate's result for a set with two invalid objects,
// one valid and one not checked, every field at its line.
func validateSample() *result.Result {
	start := time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC)
	return &result.Result{Schema: result.SchemaVersion, Command: "validate", Version: "v1.4.0", Source: "deploy/app",
		Started: start, Finished: start.Add(1500 * time.Millisecond), Reason: result.ReasonValidationFailed,
		Objects: []result.Object{
			{ID: "shop_web_apps_Deployment", APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Action: result.Failed, Stage: "validate",
				Source: "deploy/app/web.yaml", Line: 1, Error: `Deployment "web" is invalid: [...]`,
				Problems: []result.Problem{
					{Field: "spec.replicas", Message: "Invalid value: -1: must be greater than or equal to 0", Line: 7},
					{Field: "spec.template.spec.containers[0].image", Message: "Required value", Line: 15},
				}},
			{ID: "shop_api_apps_Deployment", APIVersion: "app/v1", Kind: "Deployment", Namespace: "shop", Name: "api", Action: result.Failed, Stage: "validate",
				Source: "/work/repo/deploy/app/api.yaml", Line: 3, Error: "the cluster has no kind Deployment in app/v1; did you mean apiVersion: apps/v1?"},
			{ID: "shop_web__Service", APIVersion: "v1", Kind: "Service", Namespace: "shop", Name: "web", Action: result.Valid, Stage: "validate", Source: "deploy/app/web.yaml", Line: 30},
			{ID: "shop_db__Secret", APIVersion: "v1", Kind: "Secret", Namespace: "shop", Name: "db", Action: result.Skipped, Stage: "validate", Error: "not applied: other objects failed validation"},
		}}
}

func buildFailed() *result.Result {
	start := time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC)
	return &result.Result{Command: "diff", Source: "deploy/app/all.yaml", Started: start, Finished: start.Add(time.Second),
		Reason: result.ReasonBuildFailed, Message: "deploy/app/all.yaml: yaml: line 4: mapping values are not allowed in this context",
		Stages: []result.Stage{{Name: "build", Error: "yaml: line 4"}}}
}

func TestJUnitGolden(t *testing.T) {
	b, err := JUnit([]Suite{{Result: validateSample()}, {Name: "infra", Result: buildFailed()}}, redact.New())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "validate.junit.xml", string(b))

	// It is XML a reader takes, and its counts add up.
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Line    int    `xml:"line,attr"`
				Failure *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Tests != 5 || doc.Failures != 3 || doc.Skipped != 1 || len(doc.Suites) != 2 {
		t.Errorf("tests %d failures %d skipped %d suites %d", doc.Tests, doc.Failures, doc.Skipped, len(doc.Suites))
	}
	web := doc.Suites[0].Cases[0]
	if web.Line != 7 || web.Failure == nil || !strings.Contains(web.Failure.Text, "deploy/app/web.yaml:15: spec.template.spec.containers[0].image: Required value") {
		t.Errorf("first case: %+v", web)
	}
}

// The SARIF log is valid against the SARIF 2.1.0 schema, read strictly
// (no field the format does not define), and puts each field at fault at
// its file and line, relative to the workspace.
func TestSARIFIsValidAndPointsAtTheField(t *testing.T) {
	b, err := SARIF([]Suite{{Result: validateSample()}, {Name: "infra", Result: buildFailed()}}, "v1.4.0", "/work/repo", redact.New())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "validate.sarif.json", string(b))
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var log sarif.Report
	if err := dec.Decode(&log); err != nil {
		t.Fatalf("not SARIF as the library reads it: %v", err)
	}
	res, err := gojsonschema.Validate(gojsonschema.NewStringLoader(sarifSchema(t)), gojsonschema.NewBytesLoader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid() {
		t.Fatalf("against the SARIF 2.1.0 schema: %v", res.Errors())
	}
	got := map[string]int{}
	for _, r := range log.Runs[0].Results {
		if len(r.Locations) == 0 {
			got[*r.Message.Text] = -1
			continue
		}
		loc := r.Locations[0].PhysicalLocation
		line := 0
		if loc.Region != nil {
			line = *loc.Region.StartLine
		}
		got[*loc.ArtifactLocation.URI+":"+*r.Message.Text] = line
	}
	for want, line := range map[string]int{
		"deploy/app/web.yaml:Deployment.apps/shop/web: spec.replicas: Invalid value: -1: must be greater than or equal to 0":           7,
		"deploy/app/web.yaml:Deployment.apps/shop/web: spec.template.spec.containers[0].image: Required value":                         15,
		"deploy/app/api.yaml:Deployment.app/shop/api: the cluster has no kind Deployment in app/v1; did you mean apiVersion: apps/v1?": 3,
		"deploy/app/all.yaml:[infra] BuildFailed: deploy/app/all.yaml: yaml: line 4: mapping values are not allowed in this context":   0,
	} {
		if l, ok := got[want]; !ok || l != line {
			t.Errorf("want %q at line %d; got %v", want, line, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d results, want 4: %v", len(got), got)
	}
}

// A known secret is masked in JUnit and SARIF whatever form their
// escaping would give it, and a control character cannot break the XML.
func TestMachineOutputsMaskSecrets(t *testing.T) {
	const secret = `s3<cr&t"pa'ss` + "\x01"
	res := validateSample()
	res.Objects[0].Problems[0].Message = "Invalid value: " + secret
	res.Objects[1].Error = "bad: " + secret
	res.Message = secret
	redact := redact.New(secret)
	j, err := JUnit([]Suite{{Result: res}}, redact)
	if err != nil {
		t.Fatal(err)
	}
	s, err := SARIF([]Suite{{Result: res}}, "v1", "", redact)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string][]byte{"junit": j, "sarif": s} {
		for _, form := range []string{"s3<cr", "s3&lt;cr", `s3\u003ccr`, "cr&amp;t", "pa'ss", "pa&#39;ss"} {
			if bytes.Contains(out, []byte(form)) {
				t.Errorf("%s holds %q:\n%s", name, form, out)
			}
		}
	}
	if err := xml.Unmarshal(j, new(struct{})); err != nil {
		t.Errorf("JUnit does not parse: %v", err)
	}
}

// sarifSchema is the SARIF 2.1.0 JSON schema as OASIS publishes it, which
// the go-sarif module carries (as the source of a constant it keeps to
// itself): read from the module's folder, pinned by go.mod.
func sarifSchema(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/owenrumney/go-sarif/v3").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "pkg", "report", "v210", "sarif", "schema.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(src), "const schema = `")
	schema, _, ok2 := strings.Cut(rest, "`")
	if !ok || !ok2 || !strings.Contains(schema, `"Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"`) {
		t.Fatal("no SARIF 2.1.0 schema in go-sarif's source")
	}
	return schema
}
