//go:build linux

package charts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// nameTemplateKustomization is a workspace with a tiny chart, whose
// ConfigMap is named for the release, and a kustomization whose one
// helmCharts entry names its release with tmpl.
func nameTemplateKustomization(t *testing.T, tmpl string) (ws, file string, content []byte) {
	t.Helper()
	ws = t.TempDir()
	chart := filepath.Join(ws, "charts", "app")
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: app\nversion: 0.1.0\n",
		"values.yaml":       "a: 1\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
	} {
		if err := os.WriteFile(filepath.Join(chart, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws, filepath.Join(ws, "kustomization.yaml"), []byte("helmCharts:\n- name: app\n  nameTemplate: '" + tmpl + "'\n")
}

// inflateNameTemplate inflates the kustomization of tmpl, rendering with
// render, and fails the test rather than hang when the call does not
// return at all (a template run with no bound).
func inflateNameTemplate(t *testing.T, tmpl string, render func(context.Context, Options) (*Rendered, error)) (map[string][]byte, *Inflated, error) {
	t.Helper()
	ws, file, content := nameTemplateKustomization(t, tmpl)
	type result struct {
		files map[string][]byte
		info  *Inflated
		err   error
	}
	done := make(chan result, 1)
	go func() {
		_, files, info, err := Kustomization(context.Background(), file, content, os.ReadFile, KustomizeOptions{Root: ws, Render: render})
		done <- result{files, info, err}
	}()
	select {
	case r := <-done:
		return r.files, r.info, r.err
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer after a minute: the name template ran unbounded", tmpl)
		return nil, nil, nil
	}
}

// wantNameTemplateError checks err is the entry's, names its nameTemplate
// and says all of want, and that it quotes nothing of the size of what the
// template made.
func wantNameTemplateError(t *testing.T, err error, want ...string) {
	t.Helper()
	var ke *KustomizeError
	if !errors.As(err, &ke) || ke.Entry != 0 || ke.Chart != "app" {
		t.Fatalf("got %.300v; want a KustomizeError naming helmCharts[0]", err)
	}
	msg := err.Error()
	t.Logf("%.600s", msg)
	for _, w := range append([]string{"helmCharts[0]", "nameTemplate"}, want...) {
		if !strings.Contains(msg, w) {
			t.Errorf("the error does not say %q: %.600s", w, msg)
		}
	}
	if len(msg) > 2048 {
		t.Errorf("the error is %d bytes long", len(msg))
	}
}

// A nameTemplate that loops without end (a thousand million million
// turns) is stopped at the renderer's time bound, named.
func TestKustomizeNameTemplateTimeBound(t *testing.T) {
	const loop = `{{ range until 100000 }}{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}{{ end }}x`
	_, _, err := inflateNameTemplate(t, loop, RenderIsolated(Limits{Time: 2 * time.Second, MemoryBytes: 256 << 20}))
	wantNameTemplateError(t, err, "took longer than 2s")
}

// A nameTemplate that makes a string of 1.5 GB is stopped at the
// renderer's memory bound, named; this process's heap does not hold it.
func TestKustomizeNameTemplateMemoryBound(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := inflateNameTemplate(t, `{{ repeat 300000000 "xxxxx" }}`, RenderIsolated(Limits{Time: 20 * time.Second, MemoryBytes: 256 << 20}))
	runtime.ReadMemStats(&after)
	wantNameTemplateError(t, err, "used more than 256 MiB")
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 64<<20 {
		t.Errorf("this process's heap grew by %d MiB", grew>>20)
	}
	if after.TotalAlloc-before.TotalAlloc > 256<<20 {
		t.Errorf("this process allocated %d MiB", (after.TotalAlloc-before.TotalAlloc)>>20)
	}
}

// A nameTemplate's output stops at a release name's length, bounded or
// not: what it would write past it is never made, nor quoted.
func TestKustomizeNameTemplateOutputBound(t *testing.T) {
	for name, render := range map[string]func(context.Context, Options) (*Rendered, error){
		"bounded":    RenderIsolated(small),
		"in-process": nil,
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := inflateNameTemplate(t, `{{ range until 10000 }}{{ range until 10000 }}x{{ end }}{{ end }}`, render)
			wantNameTemplateError(t, err, "over 53 characters")
			if strings.Contains(err.Error(), strings.Repeat("x", 54)) {
				t.Errorf("the error quotes the name")
			}
		})
	}
}

// A nameTemplate within bounds names the release, as helm's
// --name-template does, and the chart's objects are rendered with it.
func TestKustomizeNameTemplateNamesRelease(t *testing.T) {
	for name, render := range map[string]func(context.Context, Options) (*Rendered, error){
		"bounded":    RenderIsolated(small),
		"in-process": nil,
	} {
		t.Run(name, func(t *testing.T) {
			files, info, err := inflateNameTemplate(t, `{{ "web" }}-{{ "release" }}`, render)
			if err != nil {
				t.Fatal(err)
			}
			if len(info.Charts) != 1 || info.Charts[0].ReleaseName != "web-release" || info.Charts[0].GeneratedName {
				t.Fatalf("inflated %+v; want one chart of release web-release", info.Charts)
			}
			if out := string(files[info.Charts[0].File]); !strings.Contains(out, "kind: ConfigMap") || !strings.Contains(out, "name: web-release") {
				t.Errorf("rendered:\n%s", out)
			}
		})
	}
}

// A nameTemplate that does not parse, or makes no valid release name,
// fails naming the entry and its nameTemplate.
func TestKustomizeNameTemplateInvalid(t *testing.T) {
	for tmpl, want := range map[string]string{
		`{{ "web" `:           "nameTemplate: template: name-template",
		`{{ "" }}`:            "nameTemplate: release name",
		`{{ "Web_Release" }}`: "nameTemplate: release name",
		`{{ env "HOME" }}`:    `function "env" not defined`,
	} {
		_, _, err := inflateNameTemplate(t, tmpl, RenderIsolated(small))
		wantNameTemplateError(t, err, want)
	}
}
