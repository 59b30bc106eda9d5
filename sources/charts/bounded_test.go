//go:build linux

package charts

import (
	"context"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// small are the bounds the tests render bombs within.
var small = Limits{Time: 3 * time.Second, MemoryBytes: 256 << 20}

// peakRSS is this process's peak resident memory so far.
func peakRSS(t *testing.T) uint64 {
	t.Helper()
	n, err := procStatus(os.Getpid(), "VmHWM:")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// renderBomb renders a chart of testdata/bombs within lim and checks the
// error names the chart and says all of want, in bounded time, and that
// the work was the renderer's: this process's memory did not grow.
func renderBomb(t *testing.T, chart string, lim Limits, within time.Duration, want ...string) {
	t.Helper()
	before := peakRSS(t)
	start := time.Now()
	r, err := RenderBounded(context.Background(), Options{Dir: "testdata/bombs/" + chart, ReleaseName: "x", Namespace: "x"}, lim)
	took := time.Since(start)
	t.Logf("%s: %s: %v", chart, took.Round(time.Millisecond), err)
	var ce *Error
	if !errors.As(err, &ce) || ce.Chart != chart {
		t.Fatalf("%s: got %v, %v; want an *Error naming the chart", chart, r, err)
	}
	for _, w := range append([]string{"chart " + chart + ": "}, want...) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: the error does not say %q: %v", chart, w, err)
		}
	}
	if took > within {
		t.Errorf("%s: failed after %s, more than %s", chart, took, within)
	}
	if grew := int64(peakRSS(t)) - int64(before); grew > 64<<20 {
		t.Errorf("%s: this process's peak memory grew by %d MiB", chart, grew>>20)
	}
}

// A chart renders bounded as it renders in-process: the same objects,
// CRDs, hooks and lookup report, and the same error, naming the chart,
// when its values do not match its schema.
func TestRenderBoundedIsRender(t *testing.T) {
	for _, opts := range []Options{
		{Dir: "testdata/shop", ReleaseName: "web", Namespace: "shop", KubeVersion: "v1.37.0", APIVersions: []string{"policy/v1/PodDisruptionBudget"},
			Values: []Values{{Name: "prod.yaml", Content: []byte("replicaCount: 3\nimage: {tag: '2.1'}\n")}}, Set: []string{"service.port=8443"}},
		{Dir: "testdata/platform", ReleaseName: "rel", Namespace: "ops", KubeVersion: "v1.37.0", Set: []string{"export.enabled=true"}},
	} {
		want, err := Render(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got, err := RenderBounded(context.Background(), opts, Limits{})
		t.Logf("%s bounded: %s", opts.Dir, time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: bounded:\n%+v\nin-process:\n%+v", opts.Dir, got, want)
		}
	}

	opts := Options{Dir: "testdata/shop", ReleaseName: "shop", Namespace: "prod", KubeVersion: "v1.37.0", Set: []string{"replicaCount=0"}}
	_, want := Render(context.Background(), opts)
	_, got := RenderBounded(context.Background(), opts, Limits{})
	var ce *Error
	if !errors.As(got, &ce) || ce.Chart != "shop" || got.Error() != want.Error() {
		t.Errorf("a value against the schema, bounded:\n%v\nin-process:\n%v", got, want)
	}
	// A folder that is no chart is named by its path, as Render names it.
	_, want = Render(context.Background(), Options{Dir: "testdata/none"})
	_, got = RenderBounded(context.Background(), Options{Dir: "testdata/none"}, Limits{})
	if !errors.As(got, &ce) || ce.Chart != "testdata/none" || got.Error() != want.Error() {
		t.Errorf("no chart, bounded:\n%v\nin-process:\n%v", got, want)
	}
}

// A loop of 400 million turns is killed at the time bound.
func TestRenderBoundedTime(t *testing.T) {
	renderBomb(t, "slow", Limits{Time: 2 * time.Second, MemoryBytes: 256 << 20}, 5*time.Second, "rendering took longer than 2s")
}

// A define that includes itself and writes what it gave twice, forty
// deep (16 TiB), is killed at the memory bound, well before the time
// bound; so is one repeat of four billion bytes with only the renderer's
// own bound on its address space (gantry not watching its memory).
func TestRenderBoundedMemory(t *testing.T) {
	lim := Limits{Time: 20 * time.Second, MemoryBytes: 256 << 20}
	renderBomb(t, "doubling", lim, 10*time.Second, "rendering used more than 256 MiB")
	renderBomb(t, "repeat", lim, 10*time.Second, "rendering used more than 256 MiB")

	watchMemory = false
	defer func() { watchMemory = true }()
	renderBomb(t, "repeat", lim, 10*time.Second, "rendering used more than 256 MiB")
	renderBomb(t, "doubling", lim, 10*time.Second, "rendering used more than 256 MiB")
}

// An include loop fails at once on Helm's own bound, naming the template;
// a tpl that renders itself, which Helm does not count, ends on the
// renderer's stack bound.
func TestRenderBoundedRecursion(t *testing.T) {
	// Helm builds its error of the thousand levels, one around the other:
	// seconds of work on a busy machine.
	renderBomb(t, "include-loop", Limits{Time: 30 * time.Second, MemoryBytes: 256 << 20}, 15*time.Second, "include-loop/templates/configmap.yaml", "include-loop.again", "nested reference", "(the same 1000 times more)")
	// Whichever bound comes first: the stack (64 MiB here), the memory
	// or the time.
	renderBomb(t, "tpl-loop", small, 8*time.Second, "rendering")
	_, err := RenderBounded(context.Background(), Options{Dir: "testdata/bombs/tpl-loop", ReleaseName: "x", Namespace: "x"}, small)
	if err == nil || !regexp.MustCompile(`rendering took longer than 3s|rendering used more than 256 MiB|a tpl or include that calls itself`).MatchString(err.Error()) {
		t.Errorf("tpl-loop: %v", err)
	}
}

// The caller's cancellation kills the renderer and says so.
func TestRenderBoundedCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := RenderBounded(ctx, Options{Dir: "testdata/bombs/slow", ReleaseName: "x", Namespace: "x"}, Limits{Time: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "rendering stopped") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancelled after %s", d)
	}
}

// The renderer's environment is its marker and its bound, nothing of
// gantry's: a variable set here is not in the running renderer's
// /proc/<pid>/environ.
func TestRenderBoundedEnvironment(t *testing.T) {
	t.Setenv("GANTRY_TEST_SECRET", "canary-secret")
	if got, want := childEnv(small), []string{"GANTRY_CHART_RENDER=1", "GANTRY_CHART_RENDER_MEMORY=" + strconv.Itoa(256<<20)}; !slices.Equal(got, want) {
		t.Errorf("the renderer's environment: %q, want %q", got, want)
	}
	var environ []byte
	var readErr error
	// Start returns once the exec has closed the parent's pipe, which the
	// kernel does before it lays out the new program's environment: until
	// then the file reads empty, so read until it does not.
	childStarted = func(pid int) {
		for deadline := time.Now().Add(500 * time.Millisecond); ; {
			environ, readErr = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if readErr != nil || len(environ) > 0 || time.Now().After(deadline) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	defer func() { childStarted = nil }()
	_, err := RenderBounded(context.Background(), Options{Dir: "testdata/bombs/slow", ReleaseName: "x", Namespace: "x"}, Limits{Time: time.Second, MemoryBytes: 256 << 20})
	if err == nil {
		t.Fatal("the slow chart rendered within a second")
	}
	if readErr != nil {
		t.Fatal(readErr)
	}
	vars := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	if !slices.Equal(vars, childEnv(Limits{MemoryBytes: 256 << 20})) {
		t.Errorf("the running renderer's environment: %q", vars)
	}
}
