package sources

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/e2e/sopsfixture"
)

// The decrypted value of the encrypted values file in these tests.
const chartAtkSecret = "hunter2-pass"

// chartAtkWorkspace writes a chart whose config template is given, and an
// encrypted values file holding chartAtkSecret, and returns the chart.
func chartAtkWorkspace(t *testing.T, c *sopsfixture.CLI, tmpl string) (ws string, chart *Chart) {
	t.Helper()
	return chartAtkWorkspaceWith(t, c, tmpl, chartAtkSecret)
}

func chartAtkWorkspaceWith(t *testing.T, c *sopsfixture.CLI, tmpl, secret string) (ws string, chart *Chart) {
	t.Helper()
	ws = t.TempDir()
	write(t, ws, map[string]string{
		"chart/Chart.yaml":            "apiVersion: v2\nname: atk\nversion: 0.1.0\n",
		"chart/templates/config.yaml": tmpl,
		"values/secrets.yaml":         "password: " + secret + "\n",
	})
	c.Encrypt(t, filepath.Join(ws, "values/secrets.yaml"), "--encrypted-regex", "^password$")
	return ws, &Chart{Dir: filepath.Join(ws, "chart"), ReleaseName: "v", Values: []string{filepath.Join(ws, "values/secrets.yaml")}}
}

// pieces of chartAtkSecret, as a chart can transform it.
var chartAtkForms = []string{
	chartAtkSecret,
	strings.ToUpper(chartAtkSecret),
	base64.StdEncoding.EncodeToString([]byte(chartAtkSecret)),
	"hunter2",
	"HUNTER2",
	"pass",
}

func chartAtkLeaks(s string) []string {
	var found []string
	for _, f := range chartAtkForms {
		if strings.Contains(s, f) {
			found = append(found, f)
		}
	}
	return found
}

// A chart's fail, given a decrypted value whole, is masked in the error.
func TestChartAttackFailWholeDecryptedValueMasked(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	ws, chart := chartAtkWorkspace(t, c, `{{ fail .Values.password }}`)
	_, err := Build(BuildOptions{WorkDir: ws, Chart: chart, SOPSIdentities: c.Identities(t)})
	t.Logf("error: %v", err)
	if err == nil {
		t.Fatal("fail did not fail")
	}
	if l := chartAtkLeaks(err.Error()); len(l) > 0 {
		t.Errorf("the error shows the decrypted value %q: %v", l, err)
	}
}

// A chart's fail, given a decrypted value transformed (upper-cased,
// base64-encoded, cut), prints it in the build's error: the error is
// masked by whole decrypted values only, and the provenance check never
// runs, since the first rendering already failed.
func TestChartAttackFailTransformedDecryptedValue(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	for _, expr := range []string{
		`{{ fail (upper .Values.password) }}`,
		`{{ fail (b64enc .Values.password) }}`,
		`{{ fail (printf "x%sx" .Values.password) }}`,
		`{{ required (trunc 7 .Values.password) .Values.nothing }}`,
	} {
		t.Run(expr, func(t *testing.T) {
			ws, chart := chartAtkWorkspace(t, c, expr)
			_, err := Build(BuildOptions{WorkDir: ws, Chart: chart, SOPSIdentities: c.Identities(t)})
			t.Logf("error: %v", err)
			if err == nil {
				t.Fatal("no error")
			}
			if l := chartAtkLeaks(err.Error()); len(l) > 0 {
				t.Errorf("the error shows the decrypted value as %q", l)
			}
		})
	}
}

// A decrypted value used as a key of a map (a ConfigMap's data key) is
// refused by provenance, but the refusal names the fields that differ,
// by their JSON pointers: the key itself, from the real build and from
// the build with changed values, which undoes to the real value one
// character back. Masking only hides the value whole.
func TestChartAttackDecryptedValueAsKeyInProvenanceError(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	for _, expr := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  {{ .Values.password | upper }}: x\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k{{ .Values.password }}: x\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  {{ .Values.password }}: x\n",
	} {
		t.Run(expr, func(t *testing.T) {
			ws, chart := chartAtkWorkspace(t, c, expr)
			_, err := Build(BuildOptions{WorkDir: ws, Chart: chart, SOPSIdentities: c.Identities(t)})
			t.Logf("error: %v", err)
			if err == nil {
				t.Fatal("a decrypted value as a key was not refused")
			}
			msg := err.Error()
			if l := chartAtkLeaks(msg); len(l) > 0 {
				t.Errorf("the refusal shows the decrypted value as %q", l)
			}
			if tainted := taintString(chartAtkSecret); strings.Contains(msg, tainted[:7]) {
				t.Errorf("the refusal shows the value changed one character on (%s), which undoes to it", tainted)
			}
		})
	}
}

// The provenance check changes every character of a decrypted value to
// the next of its class and looks for fields that differ. A template can
// compute what that change leaves as it is: the distance from each letter
// to the next (modulo 26), each digit to the next (modulo 10). The field
// holding it is the same in both renderings, so it is neither refused
// nor masked, and it gives the value up to its first character.
func TestChartAttackTaintInvariantDifferences(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	var idx []string
	for r := 'a'; r <= 'z'; r++ {
		idx = append(idx, fmt.Sprintf("%q %d", string(r), r-'a'))
	}
	var dig []string
	for r := '0'; r <= '9'; r++ {
		dig = append(dig, fmt.Sprintf("%q %d", string(r), r-'0'))
	}
	tmpl := `{{- $l := dict ` + strings.Join(idx, " ") + ` }}
{{- $d := dict ` + strings.Join(dig, " ") + ` }}
{{- $s := .Values.password }}
{{- $out := list }}
{{- range $i := until (sub (len $s) 1 | int) }}
{{- $a := substr $i (add $i 1 | int) $s }}
{{- $b := substr (add $i 1 | int) (add $i 2 | int) $s }}
{{- if and (hasKey $l $a) (hasKey $l $b) }}
{{- $out = append $out (mod (add 26 (sub (get $l $b) (get $l $a))) 26) }}
{{- else if and (hasKey $d $a) (hasKey $d $b) }}
{{- $out = append $out (mod (add 10 (sub (get $d $b) (get $d $a))) 10) }}
{{- else }}
{{- $out = append $out "_" }}
{{- end }}
{{- end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
data:
  shape: {{ join "." $out | quote }}
`
	// A password of letters and digits (a generated token, say).
	const secret = "hunterwasstaying9"
	ws, chart := chartAtkWorkspaceWith(t, c, tmpl, secret)
	objects, err := Build(BuildOptions{WorkDir: ws, Chart: chart, SOPSIdentities: c.Identities(t)})
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	for _, o := range objects {
		if o.GetKind() != "ConfigMap" {
			continue
		}
		shape, _, _ := unstructuredString(o.Object, "data", "shape")
		t.Logf("ConfigMap data.shape = %q, decrypted fields %v", shape, o.DecryptedFields)
		// Undo it: 26 candidates, one is the secret.
		for first := 'a'; first <= 'z'; first++ {
			if cand := undoDifferences(first, shape); strings.HasPrefix(secret, cand) && len(cand) >= 7 {
				t.Errorf("a ConfigMap holds, unrefused and unmasked, what gives back the decrypted value: from %q and first letter %q, %q", shape, first, cand)
				return
			}
		}
	}
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	var v any = obj
	for _, f := range fields {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false, nil
		}
		v = m[f]
	}
	s, ok := v.(string)
	return s, ok, nil
}

// undoDifferences rebuilds the letters before the first non-letter step.
func undoDifferences(first rune, shape string) string {
	out := []rune{first}
	cur := first
	for _, p := range strings.Split(shape, ".") {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil {
			break
		}
		cur = 'a' + (cur-'a'+rune(n))%26
		out = append(out, cur)
	}
	return string(out)
}

// A set line whose key names a secret (PASSWORD) is masked in output by
// its whole value only; a chart can place it transformed into any object,
// which a diff then prints. Nothing in the build refuses that: it knows
// nothing of which set values are secret.
func TestChartAttackSecretSetValueTransformed(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	write(t, ws, map[string]string{
		"chart/Chart.yaml": "apiVersion: v2\nname: atk\nversion: 0.1.0\n",
		"chart/templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n" +
			"  annotations:\n    a: {{ .Values.db.PASSWORD | b64enc | quote }}\ndata:\n  up: {{ .Values.db.PASSWORD | upper | quote }}\n",
	})
	secret := "wf-secret-value-77"
	objects, err := Build(BuildOptions{WorkDir: ws, Chart: &Chart{Dir: filepath.Join(ws, "chart"), Set: []string{"db.PASSWORD=" + secret}}})
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	for _, o := range objects {
		if o.GetKind() == "ConfigMap" {
			up, _, _ := unstructuredString(o.Object, "data", "up")
			t.Logf("ConfigMap data.up=%q annotations=%v decrypted fields=%v", up, o.GetAnnotations(), o.DecryptedFields)
			if up == strings.ToUpper(secret) {
				t.Errorf("a secret-named set value reached a ConfigMap transformed, unrefused, unmarked: %q", up)
			}
		}
	}
}

// What the build refuses after rendering (a document it cannot read as an
// object, two objects of one name, an object with no kind) does not show
// a decrypted value transformed by the chart.
func TestChartAttackRenderedDocumentErrors(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	for _, tmpl := range []string{
		"metadata:\n  name: x\ndata:\n  a: {{ upper .Values.password }}\n",
		"apiVersion: v1\nmetadata:\n  name: x\ndata:\n  a: {{ upper .Values.password }}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: {{ upper .Values.password }}\n  b: [\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: {{ upper .Values.password }}\n",
		"- {{ upper .Values.password }}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: {{ upper .Values.password }}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    helm.sh/hook: {{ upper .Values.password }}\n",
	} {
		t.Run(tmpl, func(t *testing.T) {
			ws, chart := chartAtkWorkspace(t, c, tmpl)
			chart.Hooks = HooksAsObjects
			_, err := Build(BuildOptions{WorkDir: ws, Chart: chart, SOPSIdentities: c.Identities(t)})
			t.Logf("error: %v", err)
			if err != nil {
				if l := chartAtkLeaks(err.Error()); len(l) > 0 {
					t.Errorf("the error shows the decrypted value as %q", l)
				}
			}
		})
	}
}

// A document whose helm.sh/hook names an event Helm does not know is
// dropped by Helm's sorting, which logs the annotation's value through the
// process's default logger (to stderr, past the output's masks and
// past any guard on the streams gantry writes to): a chart can print any
// decrypted value, transformed, there. The provenance check never sees
// the document, dropped from both renderings; and the chart's notice does
// not say it was dropped.
func TestChartAttackUnknownHookLogsValue(t *testing.T) {
	c := sopsfixture.New(t)
	var logged bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	defer slog.SetDefault(old)
	ws, chart := chartAtkWorkspace(t, c, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    helm.sh/hook: {{ .Values.password | upper }}\n")
	for _, mode := range []string{HooksRefuse, HooksAsObjects, HooksLeaveOut} {
		logged.Reset()
		chart.Hooks = mode
		var notices []ChartNotice
		objects, err := Build(BuildOptions{WorkDir: ws, Chart: chart, SOPSIdentities: c.Identities(t), ChartNotice: func(n ChartNotice) { notices = append(notices, n) }})
		t.Logf("%s: objects %v, notices %+v, error %v, logged: %s", mode, ids(objects), notices, err, logged.String())
		if l := chartAtkLeaks(logged.String()); len(l) > 0 {
			t.Errorf("%s: the process's log shows the decrypted value as %q", mode, l)
		}
		if err == nil && len(objects) == 0 && (len(notices) == 0 || len(notices[0].LeftOut) == 0) {
			t.Errorf("%s: the chart's only object was dropped, unsaid", mode)
		}
	}
}

// A chart whose folder is the workspace itself (Chart.yaml at the root,
// chart: .) reads the checkout's .git/config through .Files, where
// actions/checkout keeps the job's token; every other read of a build
// refuses a .git folder. A chart's .helmignore is the pull request's.
func TestChartAttackReadsGitConfig(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	write(t, ws, map[string]string{
		".git/config": "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX2NhbmFyeQ==\n",
		"Chart.yaml":  "apiVersion: v2\nname: root\nversion: 0.1.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n" +
			"  git: {{ .Files.Get \".git/config\" | quote }}\n  up: {{ .Files.Get \".git/config\" | upper | quote }}\n",
	})
	objects, err := Build(BuildOptions{WorkDir: ws, Chart: &Chart{Dir: ws}})
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	for _, o := range objects {
		git, _, _ := unstructuredString(o.Object, "data", "git")
		if strings.Contains(git, "extraheader") {
			t.Errorf("a chart read the checkout's .git/config: %q", git)
		}
	}
}

// Hooks left out (test hooks always, others with leave-out) are not
// objects of the set, so the provenance check never compares them; but
// the chart's notice, which reports show, names each hook left out, one
// line per hook document. A template that makes as many test hooks as a
// decrypted character's place in the alphabet spells the value out in
// the notice.
func TestChartAttackLeftOutHooksCountSpellsValue(t *testing.T) {
	t.Parallel()
	c := sopsfixture.New(t)
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-"
	var idx []string
	for i, r := range alphabet {
		idx = append(idx, fmt.Sprintf("%q %d", string(r), i+1))
	}
	files := map[string]string{}
	for i := range len(chartAtkSecret) {
		files[fmt.Sprintf("chart/templates/tests/c%02d.yaml", i)] = `{{- $l := dict ` + strings.Join(idx, " ") + ` }}
{{- $c := substr ` + fmt.Sprint(i) + ` ` + fmt.Sprint(i+1) + ` .Values.password }}
{{- range $n := until (get $l $c | int) }}
---
apiVersion: v1
kind: Pod
metadata:
  name: t` + fmt.Sprint(i) + `-{{ $n }}
  annotations:
    helm.sh/hook: test
{{- end }}
`
	}
	ws, chart := chartAtkWorkspace(t, c, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	write(t, ws, files)
	var notices []ChartNotice
	_, err := Build(BuildOptions{WorkDir: ws, Chart: chart, SOPSIdentities: c.Identities(t), ChartNotice: func(n ChartNotice) { notices = append(notices, n) }})
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	if len(notices) == 0 {
		t.Fatal("no notice")
	}
	t.Logf("%d notices; the first lists %d hooks left out", len(notices), len(notices[0].LeftOut))
	var spelled strings.Builder
	for i := range len(chartAtkSecret) {
		n := 0
		for _, l := range notices[0].LeftOut {
			if strings.Contains(l, fmt.Sprintf("/c%02d.yaml", i)) {
				n++
			}
		}
		if n > 0 && n <= len(alphabet) {
			spelled.WriteByte(alphabet[n-1])
		}
	}
	t.Logf("spelled from the notice: %q", spelled.String())
	if spelled.String() == chartAtkSecret {
		t.Errorf("the chart's notice spells the decrypted value: %q", spelled.String())
	}
}
