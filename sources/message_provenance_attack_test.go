package sources

import (
	"encoding/hex"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The secret a chart is given on a set line in these tests.
const setSecret = "Hunter2pass9Zq-xkw"

// setSecretChart writes a chart with the given templates, and returns it
// given setSecret as a secret-named set line.
func setSecretChart(t *testing.T, templates map[string]string) (ws string, chart *Chart) {
	t.Helper()
	ws = t.TempDir()
	files := map[string]string{"chart/Chart.yaml": "apiVersion: v2\nname: atk\nversion: 0.1.0\n"}
	for name, content := range templates {
		files["chart/templates/"+name] = content
	}
	write(t, ws, files)
	return ws, &Chart{Dir: filepath.Join(ws, "chart"), ReleaseName: "v", Set: []string{"password=" + setSecret}}
}

// setSecretForms are what a message may not hold of setSecret: the value,
// its encodings, and its shape.
func setSecretForms() []string {
	return []string{
		setSecret,
		hex.EncodeToString([]byte(setSecret)),
		hex.EncodeToString([]byte(setSecret))[:12],
		strings.ToLower(setSecret),
		classMap(setSecret),
	}
}

// classMap is s with digits as 9, capitals as A and the rest as a.
func classMap(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			b.WriteByte('9')
		case r >= 'A' && r <= 'Z':
			b.WriteByte('A')
		default:
			b.WriteByte('a')
		}
	}
	return b.String()
}

// A check that quotes rendered content before the provenance check (two
// objects of one name) quoted what a template made of a secret in
// another encoding: the hex of a set line's value in a name. What a build
// says when it fails is checked as its output is: it changes with the
// secret, so it is not shown.
func TestMessageOfAFailedBuildIsCheckedByProvenance(t *testing.T) {
	t.Parallel()
	for name, expr := range map[string]string{
		"hex":    `{{ printf "%x" .Values.password }}`,
		"lower":  `{{ lower .Values.password }}`,
		"sha":    `{{ sha256sum .Values.password | trunc 20 }}`,
		"length": `n{{ len .Values.password }}`,
	} {
		t.Run(name, func(t *testing.T) {
			cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak-" + expr + "\n"
			ws, chart := setSecretChart(t, map[string]string{"a.yaml": cm, "b.yaml": cm})
			_, err := Build(BuildOptions{WorkDir: ws, Chart: chart})
			if err == nil {
				t.Fatal("two objects of one name were not refused")
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			for _, f := range setSecretForms() {
				if strings.Contains(msg, f) {
					t.Errorf("the error shows %q, a form of the secret", f)
				}
			}
			if strings.Contains(msg, "n"+strconv.Itoa(len(setSecret))) {
				t.Errorf("the error shows the secret's length")
			}
			if !strings.Contains(msg, "depends on what it was given as secrets") || !strings.Contains(msg, "set password") {
				t.Errorf("the refusal does not say why, naming the set line: %s", msg)
			}
		})
	}
}

// A failure that does not depend on the secret is said as it is, secrets
// or not.
func TestMessageOfAFailedBuildIndependentOfSecretsIsShown(t *testing.T) {
	t.Parallel()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\ndata:\n  p: {{ .Values.password | quote }}\n"
	ws, chart := setSecretChart(t, map[string]string{"a.yaml": cm, "b.yaml": cm})
	_, err := Build(BuildOptions{WorkDir: ws, Chart: chart})
	if err == nil {
		t.Fatal("two objects of one name were not refused")
	}
	if msg := err.Error(); !strings.Contains(msg, "ConfigMap/same") || !strings.Contains(msg, "defined twice") || strings.Contains(msg, setSecret) {
		t.Errorf("the error does not name the object, or shows the secret: %s", msg)
	}
}

// The build with other values kept each character's class and the
// value's length, so that any function of those (a map of the classes,
// len) rendered the same in both builds and passed the check unmasked.
// The second build with other values changes both.
func TestProvenanceCatchesTheShapeOfASecret(t *testing.T) {
	t.Parallel()
	for name, expr := range map[string]string{
		"classes": `{{ regexReplaceAll "[a-z-]" (regexReplaceAll "[A-Z]" (regexReplaceAll "[0-9]" .Values.password "9") "A") "a" }}`,
		"length":  `{{ len .Values.password }}`,
		"digits":  `{{ .Values.password | regexFind "[0-9]+" }}`,
		"parity":  `{{ mod (len .Values.password) 2 }}`,
	} {
		t.Run(name, func(t *testing.T) {
			cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shape\ndata:\n  v: \"" + expr + "\"\n"
			ws, chart := setSecretChart(t, map[string]string{"cm.yaml": cm})
			objects, err := Build(BuildOptions{WorkDir: ws, Chart: chart})
			if err == nil {
				t.Fatalf("a value computed from the secret's shape passed: %v", objects[0].Object["data"])
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			if !strings.Contains(msg, "ConfigMap shape") || !strings.Contains(msg, "/data/v") {
				t.Errorf("the refusal does not name the object and field: %s", msg)
			}
			for _, f := range setSecretForms() {
				if strings.Contains(msg, f) {
					t.Errorf("the refusal shows %q", f)
				}
			}
		})
	}
}

// A chart that takes nothing of the secret's shape builds, and one that
// puts the value whole into a ConfigMap still does (masked as any).
func TestProvenanceLetsWholeValuesAndUnrelatedFieldsThrough(t *testing.T) {
	t.Parallel()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\ndata:\n  whole: {{ .Values.password | quote }}\n  other: \"{{ len .Release.Name }}\"\n"
	ws, chart := setSecretChart(t, map[string]string{"cm.yaml": cm})
	objects, err := Build(BuildOptions{WorkDir: ws, Chart: chart})
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1 || len(objects[0].DecryptedFields) != 1 || objects[0].DecryptedFields[0] != "/data/whole" {
		t.Errorf("want the whole value's field marked once, got %v", objects[0].DecryptedFields)
	}
}

// Which objects a set holds, and their order, are printed: a template
// that decides by a secret what to make, or in what order, spelled it
// with no field of any object taking a piece of it. The build with
// other values was compared only where it had an object, never for one
// the real build alone made, nor for the order.
func TestProvenanceCatchesObjectsMadeByASecret(t *testing.T) {
	t.Parallel()
	for name, tmpl := range map[string]string{
		// One object per character, made only when a known value (a
		// second secret-named set line, changed too in the other
		// builds) is what the pull request wrote: the real build alone
		// makes them.
		"anchor": `{{- if eq .Values.anchorpass "ANCHOR-known" }}{{ range $i, $c := splitList "" .Values.password }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c{{ $i }}-{{ printf "%x" $c }}}
{{- end }}{{ end }}`,
		// Made only when the length is one number: the build with the
		// same shape makes it too.
		"length": `{{- range $l := until 65 }}{{ if eq (len $.Values.password) $l }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: len-{{ $l }}}
{{- end }}{{ end }}`,
		// Made only when a guess is right.
		"guess": `{{- range $i, $g := list "password123" "` + setSecret + `" }}{{ if eq (sha256sum $.Values.password) (sha256sum $g) }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: guess-{{ $i }}}
{{- end }}{{ end }}`,
		// The same objects in both builds, the one of each position
		// that is the secret's hex digit made last.
		"order": `{{- $h := splitList "" (printf "%x" .Values.password) }}
{{- range $i := until 8 }}{{ $c := index $h $i }}
{{- range $v := list "0" "1" "2" "3" "4" "5" "6" "7" "8" "9" "a" "b" "c" "d" "e" "f" }}{{ if ne $v $c }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: p{{ $i }}-{{ $v }}}
{{- end }}{{ end }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: p{{ $i }}-{{ $c }}}
{{- end }}`,
	} {
		t.Run(name, func(t *testing.T) {
			ws, chart := setSecretChart(t, map[string]string{"o.yaml": tmpl})
			chart.Set = append(chart.Set, "anchorpass=ANCHOR-known")
			objects, err := Build(BuildOptions{WorkDir: ws, Chart: chart})
			if err == nil {
				var names []string
				for _, o := range objects {
					names = append(names, o.GetName())
				}
				t.Fatalf("a set whose objects depend on the secret passed: %v", names)
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			if !strings.Contains(msg, "chart/templates/o.yaml") {
				t.Errorf("the refusal does not name the template: %s", msg)
			}
			for _, f := range setSecretForms() {
				if strings.Contains(msg, f) {
					t.Errorf("the refusal shows %q", f)
				}
			}
		})
	}
}

// A template that makes the same objects whatever the secret, in the
// same order, builds.
func TestProvenanceLetsObjectsMadeWhateverTheSecretThrough(t *testing.T) {
	t.Parallel()
	tmpl := `{{- range $i := until 3 }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-{{ $i }}}
data: {n: "{{ $i }}"}
{{- end }}
---
apiVersion: v1
kind: Secret
metadata: {name: s}
stringData: {password: {{ .Values.password | quote }}}`
	ws, chart := setSecretChart(t, map[string]string{"o.yaml": tmpl})
	objects, err := Build(BuildOptions{WorkDir: ws, Chart: chart})
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 4 {
		t.Errorf("want 4 objects, got %d", len(objects))
	}
}

// A build that keeps SOPS files encrypted (an offline validation, a
// push) took a chart's secret-named set line for an encrypted file that
// no object packs, and refused it as a patch or generator source.
func TestSetSecretWithKeepEncryptedBuilds(t *testing.T) {
	t.Parallel()
	ws, chart := setSecretChart(t, map[string]string{"s.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {p: {{ .Values.password | quote }}}\n"})
	if _, err := Build(BuildOptions{WorkDir: ws, Chart: chart, KeepSOPSEncrypted: true}); err != nil {
		t.Fatal(err)
	}
}

// A field may hold a secret whole (masked), but which secret it holds may
// not depend on another: a template chose, by a bit of one secret, which
// of two others (whose values the pull request knew) went into a
// Service's type, and the validation of each Service told the bit.
func TestProvenanceCatchesAChoiceBetweenWholeSecrets(t *testing.T) {
	t.Parallel()
	tmpl := `{{- $h := splitList "" (printf "%x" .Values.password) }}{{ range $i := until 16 }}{{ $c := index $h $i }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b{{ $i }}}
data:
  type: {{ if eq $c "6" }}{{ $.Values.okpass | quote }}{{ else }}{{ $.Values.badpass | quote }}{{ end }}
{{- end }}`
	ws, chart := setSecretChart(t, map[string]string{"o.yaml": tmpl})
	chart.Set = append(chart.Set, "okpass=ClusterIPvalue", "badpass=NotATypeValue")
	if _, err := Build(BuildOptions{WorkDir: ws, Chart: chart}); err == nil || !strings.Contains(err.Error(), "/data/type") {
		t.Fatalf("want the field refused, got %v", err)
	}
}

// A Secret may hold anything of a secret in its data, but whether that
// data is valid was told for each Secret by validation: a template made
// one Secret a bit of the secret, its data base64 for a 1 and not for a
// 0. A set with such a Secret that is not valid is refused without
// saying which.
func TestInvalidSecretDataTakenFromASecretIsNotNamed(t *testing.T) {
	t.Parallel()
	tmpl := `{{- $h := splitList "" (printf "%x" .Values.password) }}{{ range $i := until 16 }}{{ $c := index $h $i }}
---
apiVersion: v1
kind: Secret
metadata: {name: b{{ $i }}}
data:
  k: {{ if lt $c "8" }}"aGk="{{ else }}"!!not-base64!!"{{ end }}
{{- end }}`
	ws, chart := setSecretChart(t, map[string]string{"s.yaml": tmpl})
	_, err := Build(BuildOptions{WorkDir: ws, Chart: chart})
	if err == nil {
		t.Fatal("a set with Secrets made valid or not by a secret's bits built")
	}
	msg := err.Error()
	if !strings.Contains(msg, "which Secret, and why, is not said") || strings.Contains(msg, "Secret/b") || strings.Contains(msg, "b1") {
		t.Errorf("want a refusal naming no Secret, got %s", msg)
	}
	// A valid Secret built from a secret builds.
	ok := "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: {{ .Values.password | b64enc | quote }}}\n"
	ws, chart = setSecretChart(t, map[string]string{"s.yaml": ok})
	if _, err := Build(BuildOptions{WorkDir: ws, Chart: chart}); err != nil {
		t.Fatal(err)
	}
}
