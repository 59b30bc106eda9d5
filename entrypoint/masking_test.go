package entrypoint

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/diffs"
	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/reporters"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources"
)

// randomSecret is a value as people's secrets are: quotes, colons, a
// leading dash or star, YAML's and JSON's special characters, HTML's,
// backslashes, unicode, long lines with spaces that YAML folds, several
// lines.
func randomSecret(rng *rand.Rand) string {
	pieces := []string{"it's", `say "hi"`, "a: b", "- x", "*ref", "&anchor", "<tag>", "x&y", `c:\path`, "naïve", "日本語", "tab\there",
		"#hash", "100%", "{json}", "[list]", "@user", "`tick`", "key=value", "!tag", "|pipe", ">gt", "  padded  "}
	var b strings.Builder
	b.WriteString("s3cr3t-")
	for n := 2 + rng.IntN(12); n > 0; n-- {
		b.WriteString(pieces[rng.IntN(len(pieces))])
		switch rng.IntN(6) {
		case 0:
			b.WriteString("\n")
		case 1:
			b.WriteString(strings.Repeat("word ", 20))
		default:
			b.WriteString(" ")
		}
	}
	b.WriteString(base64.RawURLEncoding.EncodeToString([]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}))
	return b.String()
}

// leaks says which forms of secret text holds: any of its lines (of 4
// characters or more, as the masker takes them) as they are, escaped as
// JSON or YAML writes them, or the value base64-encoded.
func leaks(text, secret string) []string {
	var found []string
	check := func(form, what string) {
		if len(form) >= 8 && strings.Contains(text, form) {
			found = append(found, what+" "+form)
		}
	}
	for _, line := range strings.Split(secret, "\n") {
		line = strings.TrimSpace(line)
		if len(line) < 4 {
			continue // too short to mask anywhere: "abc" would mask every such word
		}
		check(line, "line")
		j, _ := json.Marshal(line)
		check(string(j[1:len(j)-1]), "JSON-escaped")
		check(strings.ReplaceAll(line, "'", "''"), "YAML-quoted")
	}
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		check(e.EncodeToString([]byte(secret)), "base64")
	}
	return found
}

// stringsOf are the strings a YAML or JSON document holds, as a reader
// of it gets them back.
func stringsOf(v any, out *[]string) {
	switch t := v.(type) {
	case string:
		*out = append(*out, t)
	case map[string]any:
		for k, e := range t {
			*out = append(*out, k)
			stringsOf(e, out)
		}
	case []any:
		for _, e := range t {
			stringsOf(e, out)
		}
	}
}

// Random secret values go through every output gantry writes: the built
// objects, a diff, the JSON report, the job summary, the pull request
// comment and note, the drift issue, the outputs, dotenv and Tekton
// results. None holds the value, in any form, and what a reader parses
// back from the YAML and the JSON holds none of it either.
func TestRandomSecretsAreMaskedInEveryOutput(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 34))
	for i := range 200 {
		secret := randomSecret(rng)
		redact := redact.New(secret)
		b64 := base64.StdEncoding.EncodeToString([]byte(secret))
		cm := func(v string) *unstructured.Unstructured {
			return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "app", "namespace": "shop"},
				"data":     map[string]any{"value": v, "url": "postgres://app:" + secret + "@db/x", "copied": b64, "plain": "visible"}}}
		}
		outputs := map[string]string{}

		var built bytes.Buffer
		if err := writeObjects(&built, []*sources.Object{{Unstructured: cm(secret)}}, false, redact); err != nil {
			t.Fatal(err)
		}
		outputs["build"] = built.String()
		var parsed map[string]any
		if err := yaml.Unmarshal(built.Bytes(), &parsed); err != nil {
			t.Fatalf("build output is not YAML: %v\n%s", err, built.String())
		}
		var back []string
		stringsOf(parsed, &back)
		if !strings.Contains(outputs["build"], "visible") {
			t.Fatalf("the build masked what is not secret:\n%s", outputs["build"])
		}

		d, err := diffs.ObjectMasked("ConfigMap/shop/app", cm("old "+secret), cm(secret), redact.String)
		if err != nil {
			t.Fatal(err)
		}
		outputs["diff"] = d

		res := &result.Result{Schema: result.SchemaVersion, Command: "drift", Reason: result.ReasonDriftDetected, Message: "failed: " + secret,
			Inventory: &result.Inventory{Name: "shop", Namespace: "deploy"}, Stages: []result.Stage{},
			Objects: []result.Object{{ID: "shop_app__ConfigMap", APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "app",
				Action: result.Drifted, Diff: d, Error: secret, Drift: []result.Drift{{Field: ".data.value", Change: "changed", Manager: "kubectl-edit"}}}}}
		dir := t.TempDir()
		report := filepath.Join(dir, "report.json")
		sinks := []reporters.Reporter{
			&reporters.JSONReport{Path: report, Redact: redact},
			&reporters.DiffFile{Path: filepath.Join(dir, "report.diff"), Redact: redact},
			&reporters.GitHubOutputs{Path: filepath.Join(dir, "outputs"), ReportPath: report, Redact: redact},
			&reporters.Dotenv{Path: filepath.Join(dir, "gantry.env"), ReportPath: report, Redact: redact},
			&reporters.TektonResults{Dir: filepath.Join(dir, "tekton"), Redact: redact},
		}
		for _, r := range sinks {
			if err := r.Report(t.Context(), res); err != nil {
				t.Fatalf("%s: %v", r.Name(), err)
			}
		}
		_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				b, _ := os.ReadFile(p)
				outputs[filepath.Base(p)] = string(b)
			}
			return nil
		})
		var rep any
		if err := json.Unmarshal([]byte(outputs["report.json"]), &rep); err != nil {
			t.Fatal(err)
		}
		stringsOf(rep, &back)
		page := reporters.Page{Marker: reporters.CommentMarker(res)}
		outputs["summary"] = redact.String(reporters.Markdown(res, page, reporters.FullDiffs))
		outputs["comment"] = reporters.StickyBody(res, page, reporters.CommentLimit, redact)

		for name, text := range outputs {
			for _, l := range leaks(text, secret) {
				t.Errorf("value %d: %s holds its %s\nvalue: %q", i, name, l, secret)
			}
		}
		for _, s := range back {
			if len(leaks(s, secret)) > 0 {
				t.Errorf("value %d: a string read back from the YAML or JSON holds it: %q", i, s)
			}
		}
		if t.Failed() {
			return
		}
	}
}
