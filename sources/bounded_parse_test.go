package sources

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/sources/charts"
)

// heapGrowth runs f and returns by how much the heap grew at most while
// it ran. A bomb being expanded takes gigabytes within seconds: past
// 1 GiB the test binary stops at once, rather than take the machine's
// memory, naming what it ran.
func heapGrowth(t *testing.T, what string, f func()) uint64 {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before, peak := ms.HeapAlloc, ms.HeapAlloc
	var mu sync.Mutex
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapAlloc)
			mu.Unlock()
			if ms.HeapAlloc > before+1<<30 {
				panic(fmt.Sprintf("%s: the heap grew past 1 GiB: a YAML bomb is being expanded", what))
			}
		}
	}()
	f()
	close(done)
	<-stopped
	runtime.ReadMemStats(&ms)
	mu.Lock()
	defer mu.Unlock()
	return max(peak, ms.HeapAlloc) - before
}

// A chart's YAML bomb is refused before gantry's process expands it,
// naming the chart's file: a CRD (Helm hands CRDs back as they are
// written, and gantry parses them) and a template's output. Not
// parallel: the heap measured is the process's.
func TestChartYAMLBombRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		// helm: Helm's own reader, in the renderer, may refuse it
		// first, in its words.
		helm bool
	}{
		{"crd", "crds/bomb.yaml", billionLaughs, false},
		{"template", "templates/bomb.yaml", billionLaughs, true},
		{"template among others", "templates/bomb.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\n---\n" + billionLaughs, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := writeFiles(t, map[string]string{
				"chart/Chart.yaml":        "apiVersion: v2\nname: bombs\nversion: 0.1.0\n",
				"chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n",
				"chart/" + tc.file:        tc.content,
			})
			var err error
			grew := heapGrowth(t, tc.name, func() {
				_, err = Build(BuildOptions{Chart: &Chart{Dir: ws + "/chart", ReleaseName: "x"}, WorkDir: ws})
			})
			var limit *LimitError
			switch {
			case err == nil || !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), "alias"):
				t.Errorf("got %v, want a refusal naming %s and its aliases", err, tc.file)
			case !tc.helm && (!errors.As(err, &limit) || !strings.Contains(err.Error(), tc.file+": its YAML aliases expand out of proportion")):
				t.Errorf("got %v, want the bounded parser's refusal naming %s", err, tc.file)
			}
			if grew > 64<<20 {
				t.Errorf("the heap grew by %d MiB while the build refused the bomb", grew>>20)
			}
		})
	}
}

// Whatever a renderer hands back (a template's output Helm read only the
// head of, a hook, a CRD), gantry's process parses it through the
// bounded parser, and a refusal names the chart's file.
func TestRenderedYAMLBombRefused(t *testing.T) {
	doc := func(file string) charts.Document {
		return charts.Document{Source: "bombs/" + file, Content: billionLaughs}
	}
	fine := charts.Document{Source: "bombs/templates/cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n"}
	for _, tc := range []struct {
		name, file string
		rendered   charts.Rendered
	}{
		{"crd", "crds/bomb.yaml", charts.Rendered{CRDs: []charts.Document{doc("crds/bomb.yaml")}, Manifests: []charts.Document{fine}}},
		{"template", "templates/bomb.yaml", charts.Rendered{Manifests: []charts.Document{fine, doc("templates/bomb.yaml")}}},
		{"hook", "templates/hook.yaml", charts.Rendered{Manifests: []charts.Document{fine}, Hooks: []charts.Hook{{Document: doc("templates/hook.yaml"), Events: []string{"pre-install"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := writeFiles(t, map[string]string{"chart/Chart.yaml": "apiVersion: v2\nname: bombs\nversion: 0.1.0\n"})
			render := func(context.Context, charts.Options) (*charts.Rendered, error) {
				r := tc.rendered
				return &r, nil
			}
			var err error
			grew := heapGrowth(t, tc.name, func() {
				_, err = Build(BuildOptions{Chart: &Chart{Dir: ws + "/chart", ReleaseName: "x", Render: render, Hooks: HooksAsObjects}, WorkDir: ws})
			})
			var limit *LimitError
			if !errors.As(err, &limit) || !strings.Contains(err.Error(), "chart/"+tc.file+": its YAML aliases expand out of proportion") {
				t.Errorf("got %v, want the bounded parser's refusal naming chart/%s", err, tc.file)
			}
			if grew > 64<<20 {
				t.Errorf("the heap grew by %d MiB while the build refused the bomb", grew>>20)
			}
		})
	}
}

// An encrypted file inside an object (a Secret's data, as an artifact
// holds it) has passed no reader's check: SOPS' YAML store follows the
// aliases of every document but the first as it reads it, so it is
// judged before SOPS reads it.
func TestSOPSDataYAMLBombRefused(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	encrypted := "a: ENC[AES256_GCM,data:x,iv:x,tag:x,type:str]\nsops:\n    mac: ENC[AES256_GCM,data:x,iv:x,tag:x,type:str]\n    version: 3.9.0\n---\n" + billionLaughs
	o := &Object{Unstructured: &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"},
		"data": map[string]any{"app.yaml": base64.StdEncoding.EncodeToString([]byte(encrypted))}}}}
	grew := heapGrowth(t, "sops", func() {
		err = decryptSecretData(o, []age.Identity{id}, false, nil)
	})
	if err == nil || !strings.Contains(err.Error(), `data key "app.yaml": its YAML aliases expand out of proportion`) {
		t.Errorf("got %v", err)
	}
	if grew > 64<<20 {
		t.Errorf("the heap grew by %d MiB while the bomb was refused", grew>>20)
	}
}
