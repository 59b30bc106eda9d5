package charts

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func renderAtk(t *testing.T, dir string, opts Options) (*Rendered, error) {
	t.Helper()
	opts.Dir = dir
	if opts.ReleaseName == "" {
		opts.ReleaseName = "x"
	}
	if opts.Namespace == "" {
		opts.Namespace = "x"
	}
	return Render(context.Background(), opts)
}

func allContent(r *Rendered) string {
	var b strings.Builder
	for _, d := range append(append([]Document{}, r.CRDs...), r.Manifests...) {
		b.WriteString(d.Content + "\n")
	}
	for _, h := range r.Hooks {
		b.WriteString(h.Content + "\n")
	}
	return b.String()
}

// lookup answers empty whatever is asked, and its use is said; env and
// expandenv are not functions of a template (the process holds the run's
// tokens); getHostByName answers empty and asks no DNS.
func TestAttackOutsideFunctions(t *testing.T) {
	t.Setenv("GANTRY_ATK_TOKEN", "tok-canary-3141")
	dir := writeChart(t, map[string]string{
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data:
  secret: {{ lookup "v1" "Secret" "kube-system" "" | toJson | quote }}
  one: {{ (lookup "v1" "Secret" "default" "db").data | toJson | quote }}
  dns: {{ getHostByName "localhost" | quote }}
  caps: {{ .Capabilities | toJson | quote }}
`,
	})
	r, err := renderAtk(t, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := allContent(r)
	t.Logf("%s", out)
	if !r.Lookup {
		t.Error("lookup not said")
	}
	if !strings.Contains(out, `secret: "{}"`) || !strings.Contains(out, `dns: ""`) {
		t.Errorf("lookup or getHostByName answered something:\n%s", out)
	}
	for _, fn := range []string{`{{ env "GANTRY_ATK_TOKEN" }}`, `{{ expandenv "$GANTRY_ATK_TOKEN" }}`} {
		dir := writeChart(t, map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: \"" + fn + "\"}\n"})
		_, err := renderAtk(t, dir, Options{})
		t.Logf("%s: %v", fn, err)
		if err == nil || strings.Contains(err.Error(), "tok-canary") {
			t.Errorf("%s: %v", fn, err)
		}
	}
}

// A subchart folder (charts/db) that is a link to a chart outside the
// workspace, and a templates folder that is a link out, are not read.
func TestAttackLinkedSubchartFolder(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "Chart.yaml"), []byte("apiVersion: v2\nname: db\nversion: 0.1.0\n"), 0o644)
	os.MkdirAll(filepath.Join(outside, "templates"), 0o755)
	os.WriteFile(filepath.Join(outside, "templates", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: outside-canary}\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside-file-canary"), 0o644)
	dir := writeChart(t, map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  f: {{ .Files.Get \"charts/db/secret.txt\" | quote }}\n  g: {{ .Files.Get \"linked/secret.txt\" | quote }}\n",
	})
	os.MkdirAll(filepath.Join(dir, "charts"), 0o755)
	if err := os.Symlink(outside, filepath.Join(dir, "charts", "db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	r, err := renderAtk(t, dir, Options{})
	if err != nil {
		t.Logf("refused: %v", err)
		if strings.Contains(err.Error(), "canary") {
			t.Errorf("the error shows what is outside: %v", err)
		}
		return
	}
	if out := allContent(r); strings.Contains(out, "canary") {
		t.Errorf("read outside the chart:\n%s", out)
	}
}

// tgzEntries is a chart archive of the given entries, as written.
func tgzEntries(t *testing.T, entries []*tar.Header, content map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		c := content[h.Name]
		if h.Typeflag == tar.TypeReg || h.Typeflag == 0 {
			h.Size = int64(len(c))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if c != "" {
			tw.Write([]byte(c))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// A subchart archive with entries that climb out (../), are absolute,
// or are links is never expanded onto disk nor read through a link: what
// the archive holds stays in memory, and a link entry reads nothing.
func TestAttackArchiveEntries(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, []byte("linked-outside-canary"), 0o644)
	cases := map[string][]*tar.Header{
		"dotdot": {{Name: "db/Chart.yaml"}, {Name: "db/templates/cm.yaml"}, {Name: "db/../../../../../tmp/gantry-atk-escape"}},
		"abs":    {{Name: "db/Chart.yaml"}, {Name: "db/templates/cm.yaml"}, {Name: "/tmp/gantry-atk-abs"}},
		"link":   {{Name: "db/Chart.yaml"}, {Name: "db/templates/cm.yaml"}, {Name: "db/files/secret", Typeflag: tar.TypeSymlink, Linkname: outside}},
		"hard":   {{Name: "db/Chart.yaml"}, {Name: "db/templates/cm.yaml"}, {Name: "db/files/secret", Typeflag: tar.TypeLink, Linkname: outside}},
	}
	content := map[string]string{
		"db/Chart.yaml":                           "apiVersion: v2\nname: db\nversion: 0.1.0\n",
		"db/templates/cm.yaml":                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db}\ndata: {f: {{ .Files.Get \"files/secret\" | quote }}}\n",
		"db/../../../../../tmp/gantry-atk-escape": "escaped",
		"/tmp/gantry-atk-abs":                     "escaped",
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writeChart(t, map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
			os.MkdirAll(filepath.Join(dir, "charts"), 0o755)
			os.WriteFile(filepath.Join(dir, "charts", "db-0.1.0.tgz"), tgzEntries(t, entries, content), 0o644)
			r, err := renderAtk(t, dir, Options{})
			t.Logf("err: %v", err)
			if r != nil {
				if out := allContent(r); strings.Contains(out, "canary") {
					t.Errorf("an archive's link read outside:\n%s", out)
				}
			}
			for _, p := range []string{"/tmp/gantry-atk-escape", "/tmp/gantry-atk-abs"} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s written", p)
				}
			}
		})
	}
}

// The run's credential file inside the chart's folder, reached through
// a linked folder, is refused.
func TestAttackCredentialThroughLinkedFolder(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	cred := filepath.Join(ws, ".kube", "config")
	os.MkdirAll(filepath.Dir(cred), 0o755)
	os.WriteFile(cred, []byte("token: kube-cred-canary\n"), 0o600)
	dir := filepath.Join(ws, "chart")
	os.MkdirAll(filepath.Join(dir, "templates"), 0o755)
	os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "templates", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {f: {{ .Files.Get \"k/config\" | quote }}, g: {{ .Files.Get \"kc\" | quote }}}\n"), 0o644)
	os.Symlink("../.kube/config", filepath.Join(dir, "kc"))
	r, err := renderAtk(t, dir, Options{Deny: []string{cred}})
	t.Logf("err: %v", err)
	if r != nil && strings.Contains(allContent(r), "kube-cred-canary") {
		t.Errorf("the kubeconfig was read:\n%s", allContent(r))
	}
	// The chart within the credential's folder.
	os.Symlink("../.kube", filepath.Join(dir, "k"))
	r, err = renderAtk(t, dir, Options{Deny: []string{filepath.Dir(cred)}})
	t.Logf("err: %v", err)
	if r != nil && strings.Contains(allContent(r), "kube-cred-canary") {
		t.Errorf("the kubeconfig was read:\n%s", allContent(r))
	}
}

// A set line that fails to parse is quoted whole in the error: a value
// whose key names a secret is printed, and masking the whole value does
// not hide a piece of it (the part after a comma, which helm's --set
// reads as another key) nor its quoted form (a value with a quote or a
// backslash in it).
func TestAttackSetLineInError(t *testing.T) {
	t.Parallel()
	dir := writeChart(t, map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
	for _, secret := range []string{`s3cr3t,tail-canary`, `pa"ss\wd,more`} {
		_, err := renderAtk(t, dir, Options{Set: []string{"db.PASSWORD=" + secret}})
		t.Logf("set PASSWORD=%s: %v", secret, err)
		if err == nil {
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "tail-canary") || strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "more") || strings.Contains(msg, `ss\\wd`) {
			t.Errorf("the error shows a secret set value or a piece of it: %v", err)
		}
	}
}

// A values file of YAML aliases that expand exponentially is refused by
// the YAML reader's own bound.
func TestAttackValuesYAMLBomb(t *testing.T) {
	t.Parallel()
	bomb := `a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`
	dir := writeChart(t, map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
	_, err := renderAtk(t, dir, Options{Values: []Values{{Name: "bomb.yaml", Content: []byte(bomb)}}})
	t.Logf("values: %v", err)
	if err == nil {
		t.Error("a YAML bomb in a values file was read")
	}
	dir = writeChart(t, map[string]string{"values.yaml": bomb, "templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
	_, err = renderAtk(t, dir, Options{})
	t.Logf("chart values.yaml: %v", err)
	if err == nil {
		t.Error("a YAML bomb in the chart's values.yaml was read")
	}
}
