//go:build linux

package sources

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// buildNameTemplate builds a workspace whose kustomization renders a tiny
// chart, its release named by tmpl, and fails the test rather than hang
// when the build does not return at all (a template run with no bound).
func buildNameTemplate(t *testing.T, tmpl string) ([]*Object, error) {
	t.Helper()
	ws := t.TempDir()
	for name, body := range map[string]string{
		"charts/app/Chart.yaml":        "apiVersion: v2\nname: app\nversion: 0.1.0\n",
		"charts/app/values.yaml":       "a: 1\n",
		"charts/app/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
		"kustomization.yaml":           "helmCharts:\n- name: app\n  nameTemplate: '" + tmpl + "'\n",
	} {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		objects []*Object
		err     error
	}
	done := make(chan result, 1)
	go func() {
		objects, err := Build(BuildOptions{Path: ws, WorkDir: ws})
		done <- result{objects, err}
	}()
	select {
	case r := <-done:
		return r.objects, r.err
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer after a minute: the name template ran unbounded", tmpl)
		return nil, nil
	}
}

// A helmCharts entry's nameTemplate runs in the chart renderer, within
// its bounds, as the chart's templates do: one that makes a string of
// 1.5 GB fails the build on the memory bound, naming the entry and its
// nameTemplate, and never reaches this process's heap.
func TestHelmChartsNameTemplateBounded(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := buildNameTemplate(t, `{{ repeat 300000000 "xxxxx" }}`)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("the build succeeded")
	}
	msg := err.Error()
	t.Logf("%.600s", msg)
	for _, w := range []string{"helmCharts[0]", "nameTemplate", "used more than 1 GiB"} {
		if !strings.Contains(msg, w) {
			t.Errorf("the error does not say %q: %.600s", w, msg)
		}
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 64<<20 {
		t.Errorf("this process's heap grew by %d MiB", grew>>20)
	}
	if after.TotalAlloc-before.TotalAlloc > 256<<20 {
		t.Errorf("this process allocated %d MiB", (after.TotalAlloc-before.TotalAlloc)>>20)
	}

	// Within bounds, it names the release, and the objects after it.
	objects, err := buildNameTemplate(t, `{{ "web" }}-{{ "release" }}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1 || objects[0].GetKind() != "ConfigMap" || objects[0].GetName() != "web-release" {
		t.Errorf("built %d objects; want the ConfigMap web-release", len(objects))
	}
}
