package reporters

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// SARIF rules: what each result reports.
var sarifRules = []sarifRule{
	{ID: "invalid-field", Name: "InvalidField", Short: sarifText{"A field of an object is not valid"},
		Full: sarifText{"The object would be refused by the API server: a field has the wrong type, is not declared in its schema, breaks a rule of its kind, or is missing."}},
	{ID: "invalid-object", Name: "InvalidObject", Short: sarifText{"An object cannot be applied"},
		Full: sarifText{"The object failed validation or its dry-run as a whole: its kind is not served, its namespace does not exist, or another reason the message gives."}},
	{ID: "run-failed", Name: "RunFailed", Short: sarifText{"The configuration could not be built or read"},
		Full: sarifText{"gantry stopped before it could check objects: the build failed, or an input was refused."}},
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID    string    `json:"id"`
	Name  string    `json:"name"`
	Short sarifText `json:"shortDescription"`
	Full  sarifText `json:"fullDescription"`
	Help  sarifText `json:"help"`
}

type sarifLocation struct {
	Physical struct {
		Artifact struct {
			URI string `json:"uri"`
		} `json:"artifactLocation"`
		Region *struct {
			StartLine int `json:"startLine"`
		} `json:"region,omitempty"`
	} `json:"physicalLocation"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations,omitempty"`
}

// SARIF renders validate's and diff's failures as a SARIF 2.1.0 log, the
// form GitHub code scanning reads (upload it with
// github/codeql-action/upload-sarif): one result per field at fault, at
// its file and line, or per object that failed as a whole, at the line it
// starts on. Paths are made relative to base (the workspace) when they
// are inside it. Every string passes through redact first.
func SARIF(suites []Suite, version, base string, redact *redact.Redactor) ([]byte, error) {
	rules := make([]sarifRule, len(sarifRules))
	copy(rules, sarifRules)
	for i := range rules {
		rules[i].Help = sarifText{"Run gantry validate --offline on the path to see every problem of the set with its line, before a cluster is involved."}
	}
	results := []sarifResult{}
	add := func(rule int, msg, source string, line int) {
		r := sarifResult{RuleID: rules[rule].ID, RuleIndex: rule, Level: "error", Message: sarifText{redact.String(msg)}}
		if source != "" {
			var loc sarifLocation
			loc.Physical.Artifact.URI = sarifURI(redact.String(source), base)
			if line > 0 {
				loc.Physical.Region = &struct {
					StartLine int `json:"startLine"`
				}{line}
			}
			r.Locations = []sarifLocation{loc}
		}
		results = append(results, r)
	}
	for _, s := range suites {
		res := s.Result
		prefix := ""
		if s.Name != "" {
			prefix = "[" + s.Name + "] "
		}
		failed := 0
		for _, o := range res.Objects {
			if o.Action != result.Failed {
				continue
			}
			failed++
			if len(o.Problems) == 0 {
				add(1, prefix+o.Ref()+": "+o.Error, o.Source, o.Line)
				continue
			}
			for _, p := range o.Problems {
				line, source := p.Line, o.Source
				if p.Source != "" {
					source = p.Source // the patch that set the field
				}
				if line == 0 {
					line = o.Line
				}
				add(0, prefix+o.Ref()+": "+p.String(), source, line)
			}
		}
		if res.Failed() && failed == 0 {
			add(2, prefix+string(res.Reason)+": "+res.Message, fileOnly(res.Source), 0)
		}
	}
	type driver struct {
		Name           string      `json:"name"`
		Version        string      `json:"version"`
		InformationURI string      `json:"informationUri"`
		Rules          []sarifRule `json:"rules"`
	}
	type run struct {
		Tool struct {
			Driver driver `json:"driver"`
		} `json:"tool"`
		Results []sarifResult `json:"results"`
	}
	r := run{Results: results}
	r.Tool.Driver = driver{Name: "gantry", Version: version, InformationURI: "https://github.com/gantry-dev/gantry", Rules: rules}
	log := struct {
		Schema  string `json:"$schema"`
		Version string `json:"version"`
		Runs    []run  `json:"runs"`
	}{"https://json.schemastore.org/sarif-2.1.0.json", "2.1.0", []run{r}}
	b, err := json.MarshalIndent(log, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// sarifURI is p as a URI reference: relative to base when inside it (as
// code scanning wants paths from the repository's root), with slashes and
// percent-encoding.
func sarifURI(p, base string) string {
	if filepath.IsAbs(p) && base != "" {
		if rel, err := filepath.Rel(base, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			p = rel
		}
	}
	u := url.URL{Path: filepath.ToSlash(p)}
	if filepath.IsAbs(p) {
		u.Scheme = "file"
	}
	return u.String()
}

// fileOnly is source when it names a file (a run's source may be a
// folder, an artifact or a run file's unit), else "".
func fileOnly(source string) string {
	switch strings.ToLower(filepath.Ext(source)) {
	case ".yaml", ".yml", ".json":
		return source
	}
	return ""
}
