package reporters

import (
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// Suite is one result under the name a JUnit test suite (or a SARIF
// result's prefix) gives it: a unit's name in a run of units, else empty.
type Suite struct {
	Name   string
	Result *result.Result
}

// JUnit renders validate's and diff's results as JUnit XML, the form CI
// systems show as test reports (GitLab's artifacts:reports:junit, Jenkins,
// Tekton dashboards): a test suite per result, a test case per object, a
// failure for each object that failed with every problem and its line, a
// skipped case for each object not checked. A result that failed before
// any object (a build error) is one failed case named after its stage.
// Every string passes through redact before it is escaped, so that a
// known secret is masked in whatever form XML escaping gives it.
func JUnit(suites []Suite, redact *redact.Redactor) ([]byte, error) {
	type failure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	type skipped struct {
		Message string `xml:"message,attr,omitempty"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		File      string   `xml:"file,attr,omitempty"`
		Line      int      `xml:"line,attr,omitempty"`
		Time      string   `xml:"time,attr"`
		Failure   *failure `xml:"failure,omitempty"`
		Skipped   *skipped `xml:"skipped,omitempty"`
		SystemOut string   `xml:"system-out,omitempty"`
	}
	type testsuite struct {
		Name      string     `xml:"name,attr"`
		Tests     int        `xml:"tests,attr"`
		Failures  int        `xml:"failures,attr"`
		Errors    int        `xml:"errors,attr"`
		Skipped   int        `xml:"skipped,attr"`
		Time      string     `xml:"time,attr"`
		Timestamp string     `xml:"timestamp,attr,omitempty"`
		Cases     []testcase `xml:"testcase"`
	}
	type testsuites struct {
		XMLName  xml.Name    `xml:"testsuites"`
		Name     string      `xml:"name,attr"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Errors   int         `xml:"errors,attr"`
		Skipped  int         `xml:"skipped,attr"`
		Time     string      `xml:"time,attr"`
		Suites   []testsuite `xml:"testsuite"`
	}
	mask := func(s string) string { return xmlSafe(redact.String(s)) }
	var out testsuites
	for _, s := range suites {
		res := s.Result
		if out.Name == "" {
			out.Name = "gantry " + res.Command
		}
		name := res.Command + " " + res.Source
		if s.Name != "" {
			name = s.Name
		}
		ts := testsuite{Name: mask(name), Time: seconds(res), Timestamp: timestamp(res)}
		for _, o := range res.Objects {
			tc := testcase{Name: mask(o.Ref()), Classname: mask(classname(o, s.Name)), File: mask(o.Source), Line: o.Line, Time: "0"}
			switch {
			case o.Action == result.Failed:
				tc.Failure = &failure{Message: mask(firstLine(o)), Type: string(failedReason(res)), Text: mask(problemLines(o))}
				if len(o.Problems) > 0 && o.Problems[0].Line > 0 {
					tc.Line = o.Problems[0].Line
				}
				ts.Failures++
			case o.Action == result.Skipped:
				tc.Skipped = &skipped{Message: mask(o.Error)}
				ts.Skipped++
			case o.Diff != "":
				tc.SystemOut = mask(string(o.Action) + "\n" + o.Diff)
			}
			ts.Cases = append(ts.Cases, tc)
		}
		if res.Failed() && ts.Failures == 0 {
			stage := "run"
			for _, st := range res.Stages {
				if st.Error != "" {
					stage = st.Name
				}
			}
			ts.Cases = append(ts.Cases, testcase{Name: stage, Classname: "gantry", Time: seconds(res),
				Failure: &failure{Message: mask(string(res.Reason)), Type: string(res.Reason), Text: mask(res.Message)}})
			ts.Failures++
		}
		ts.Tests = len(ts.Cases)
		out.Tests += ts.Tests
		out.Failures += ts.Failures
		out.Skipped += ts.Skipped
		out.Suites = append(out.Suites, ts)
	}
	var total float64
	for _, s := range suites {
		total += s.Result.Finished.Sub(s.Result.Started).Seconds()
	}
	out.Time = fmt.Sprintf("%.3f", max(total, 0))
	b, err := xml.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

// classname groups an object's case by its file, as test reports group
// cases by class.
func classname(o result.Object, unit string) string {
	c := o.Source
	if c == "" {
		c = o.Kind
	}
	if unit != "" {
		c = unit + "/" + c
	}
	return c
}

// firstLine is what an object's failure says in one line: its first
// problem, or its error's first line.
func firstLine(o result.Object) string {
	if len(o.Problems) > 0 {
		return o.Problems[0].String()
	}
	line, _, _ := strings.Cut(o.Error, "\n")
	return line
}

// problemLines lists an object's problems, each with its line, or its
// error when it names no field.
func problemLines(o result.Object) string {
	if len(o.Problems) == 0 {
		return o.Error
	}
	var b strings.Builder
	for _, p := range o.Problems {
		b.WriteString(p.At(o.Source) + "\n")
	}
	return b.String()
}

// failedReason is the reason an object's failure carries: the result's,
// or ValidationFailed when the result succeeded otherwise.
func failedReason(res *result.Result) result.Reason {
	if res.Failed() {
		return res.Reason
	}
	return result.ReasonValidationFailed
}

func seconds(res *result.Result) string {
	return fmt.Sprintf("%.3f", max(res.Finished.Sub(res.Started).Seconds(), 0))
}

func timestamp(res *result.Result) string {
	if res.Started.IsZero() {
		return ""
	}
	return res.Started.UTC().Format("2006-01-02T15:04:05")
}

// xmlSafe drops what XML 1.0 cannot hold at all (control characters but
// tab and line breaks); encoding/xml escapes the rest.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20 || r == 0xFFFE || r == 0xFFFF:
			return '\uFFFD'
		}
		return r
	}, s)
}
