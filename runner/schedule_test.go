package runner

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/result"
)

// fakeUnits makes units from name -> dependencies.
func fakeUnits(graph [][2]any) []*config.Unit {
	var units []*config.Unit
	for _, g := range graph {
		units = append(units, &config.Unit{Name: g[0].(string), DependsOn: g[1].([]string), Config: &config.Config{Command: "apply"}})
	}
	return units
}

// recorder runs fake units: each sleeps, then ends with the reason its
// name is given in fail (or succeeds), and records what it was called with.
type recorder struct {
	mu         sync.Mutex
	called     []string
	dependedOn map[string]bool
	fail       map[string]result.Reason
	sleep      time.Duration
	now, most  atomic.Int32
}

func (r *recorder) run(ctx context.Context, u *config.Unit, dependedOn bool) *result.Result {
	cur := r.now.Add(1)
	for {
		m := r.most.Load()
		if cur <= m || r.most.CompareAndSwap(m, cur) {
			break
		}
	}
	defer r.now.Add(-1)
	r.mu.Lock()
	r.called = append(r.called, u.Name)
	if r.dependedOn == nil {
		r.dependedOn = map[string]bool{}
	}
	r.dependedOn[u.Name] = dependedOn
	r.mu.Unlock()
	select {
	case <-time.After(r.sleep):
	case <-ctx.Done():
		return &result.Result{Reason: result.ReasonCancelled}
	}
	if reason, ok := r.fail[u.Name]; ok {
		return &result.Result{Reason: reason}
	}
	return &result.Result{Reason: result.ReasonSucceeded}
}

func byName(runs []Run) map[string]Run {
	m := map[string]Run{}
	for _, r := range runs {
		m[r.Unit.Name] = r
	}
	return m
}

// Three levels: independent units overlap; a unit starts only after
// every unit it depends on has ended; a unit that is depended on is told
// so (it must then be healthy, whatever its own wait says).
func TestRunUnitsFollowsTheGraph(t *testing.T) {
	t.Parallel()
	units := fakeUnits([][2]any{
		{"crds", []string(nil)},
		{"app-a", []string{"crds"}},
		{"app-b", []string{"crds"}},
		{"last", []string{"app-a", "app-b"}},
	})
	r := &recorder{sleep: 150 * time.Millisecond}
	runs := byName((&Session{Version: "test"}).Units(context.Background(), units, 4, false, r.run))
	for name, u := range runs {
		if u.Result.Reason != result.ReasonSucceeded {
			t.Errorf("%s: %s", name, u.Result.Reason)
		}
	}
	a, b := runs["app-a"], runs["app-b"]
	if !a.Start.Before(b.End) || !b.Start.Before(a.End) {
		t.Errorf("app-a (%s..%s) and app-b (%s..%s) did not overlap", a.Start, a.End, b.Start, b.End)
	}
	for _, app := range []Run{a, b} {
		if app.Start.Before(runs["crds"].End) {
			t.Errorf("%s started before crds ended", app.Unit.Name)
		}
	}
	if last := runs["last"]; last.Start.Before(a.End) || last.Start.Before(b.End) {
		t.Errorf("last started before both apps ended")
	}
	want := map[string]bool{"crds": true, "app-a": true, "app-b": true, "last": false}
	for name, w := range want {
		if r.dependedOn[name] != w {
			t.Errorf("%s: told depended on %v, want %v", name, r.dependedOn[name], w)
		}
	}
}

// A failed unit's dependents are not run and are DependencyNotReady,
// down the whole chain; its siblings run. A suspended unit is not run,
// and its dependents go on.
func TestRunUnitsStopsAtAFailureAndSkipsSuspended(t *testing.T) {
	t.Parallel()
	units := fakeUnits([][2]any{
		{"crds", []string(nil)},
		{"broken", []string{"crds"}},
		{"sibling", []string{"crds"}},
		{"needs-broken", []string{"broken"}},
		{"needs-needs", []string{"needs-broken"}},
		{"paused", []string(nil)},
		{"after-paused", []string{"paused"}},
	})
	units[5].Suspend = true
	r := &recorder{sleep: 10 * time.Millisecond, fail: map[string]result.Reason{"broken": result.ReasonHealthCheckFailed}}
	runs := byName((&Session{Version: "test"}).Units(context.Background(), units, 2, false, r.run))
	want := map[string]result.Reason{
		"crds": result.ReasonSucceeded, "broken": result.ReasonHealthCheckFailed, "sibling": result.ReasonSucceeded,
		"needs-broken": result.ReasonDependencyNotReady, "needs-needs": result.ReasonDependencyNotReady,
		"paused": result.ReasonSuspended, "after-paused": result.ReasonSucceeded,
	}
	for name, w := range want {
		if got := runs[name].Result.Reason; got != w {
			t.Errorf("%s: %s, want %s (%s)", name, got, w, runs[name].Result.Message)
		}
	}
	for _, never := range []string{"needs-broken", "needs-needs", "paused"} {
		if slices.Contains(r.called, never) {
			t.Errorf("%s was run", never)
		}
	}
	if msg := runs["needs-broken"].Result.Message; msg != "not run: it depends on broken, which did not succeed" {
		t.Errorf("message %q", msg)
	}
}

// A preview writes nothing: a unit whose dependency failed still runs
// its diff or validation, and so do its own dependents, each with its
// outcome; a unit that writes (apply, delete, a drift that corrects) is
// still not run after a failed dependency.
func TestPreviewsRunAfterAFailedDependency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		command string
		correct bool
		runs    bool
	}{
		{"diff", false, true},
		{"validate", false, true},
		{"drift", false, true},
		{"drift", true, false},
		{"apply", false, false},
	} {
		units := fakeUnits([][2]any{
			{"crds", []string(nil)},
			{"app", []string{"crds"}},
			{"after-app", []string{"app"}},
		})
		for _, u := range units {
			u.Config.Command, u.Config.Correct = tc.command, tc.correct
		}
		r := &recorder{fail: map[string]result.Reason{"crds": result.ReasonValidationFailed, "after-app": result.ReasonProgressing}}
		runs := byName((&Session{Version: "test"}).Units(context.Background(), units, 4, false, r.run))
		want := map[string]result.Reason{"crds": result.ReasonValidationFailed,
			"app": result.ReasonDependencyNotReady, "after-app": result.ReasonDependencyNotReady}
		if tc.runs {
			want["app"], want["after-app"] = result.ReasonSucceeded, result.ReasonProgressing
		}
		for name, w := range want {
			if got := runs[name].Result.Reason; got != w {
				t.Errorf("%s (correct %v): %s is %s, want %s (%s)", tc.command, tc.correct, name, got, w, runs[name].Result.Message)
			}
		}
		if got := slices.Contains(r.called, "app"); got != tc.runs {
			t.Errorf("%s (correct %v): app run %v, want %v", tc.command, tc.correct, got, tc.runs)
		}
		if app, crds := runs["app"], runs["crds"]; tc.runs && app.Start.Before(crds.End) {
			t.Errorf("%s: app started before crds ended", tc.command)
		}
	}
}

// At most concurrency units run at once.
func TestRunUnitsBoundsConcurrency(t *testing.T) {
	t.Parallel()
	var graph [][2]any
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		graph = append(graph, [2]any{n, []string(nil)})
	}
	r := &recorder{sleep: 30 * time.Millisecond}
	(&Session{Version: "test"}).Units(context.Background(), fakeUnits(graph), 3, false, r.run)
	if m := r.most.Load(); m != 3 {
		t.Errorf("at most %d at once, want 3", m)
	}
}

// Delete goes the other way: a unit after every unit that depends on it.
func TestRunUnitsReversedForDelete(t *testing.T) {
	t.Parallel()
	units := fakeUnits([][2]any{{"crds", []string(nil)}, {"app", []string{"crds"}}})
	r := &recorder{sleep: 5 * time.Millisecond, fail: map[string]result.Reason{"app": result.ReasonPruneFailed}}
	runs := byName((&Session{Version: "test"}).Units(context.Background(), units, 4, true, r.run))
	if !slices.Equal(r.called, []string{"app"}) || runs["crds"].Result.Reason != result.ReasonDependencyNotReady {
		t.Errorf("called %v; crds %s, want only app deleted and crds kept", r.called, runs["crds"].Result.Reason)
	}
}

// Cancelled (a runner's SIGTERM): running units stop as a single run
// does; units not started are Cancelled, never started.
func TestRunUnitsCancelled(t *testing.T) {
	t.Parallel()
	units := fakeUnits([][2]any{{"first", []string(nil)}, {"second", []string{"first"}}})
	r := &recorder{sleep: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	runs := byName((&Session{Version: "test"}).Units(ctx, units, 4, false, r.run))
	if runs["first"].Result.Reason != result.ReasonCancelled || runs["second"].Result.Reason != result.ReasonDependencyNotReady {
		t.Errorf("first %s, second %s", runs["first"].Result.Reason, runs["second"].Result.Reason)
	}
	if slices.Contains(r.called, "second") {
		t.Errorf("second was started after the cancel")
	}
}

// Units on one cluster, as one identity, with the same concurrency share a
// bound on requests in flight; another concurrency, context or identity
// has one of its own.
func TestUnitsShareABoundWhereTheirSettingsMatch(t *testing.T) {
	t.Parallel()
	s := &Session{}
	bound := func(o kube.Options) *kube.Bound { return s.cluster(o).Bound(o.Concurrency, o.MaxConcurrency) }
	base := kube.Options{Kubeconfig: "kc", Context: "a", Concurrency: 64, MaxConcurrency: 1024}
	if bound(base) != bound(base) {
		t.Error("two units with the same settings have bounds of their own")
	}
	for _, other := range []kube.Options{
		{Kubeconfig: "kc", Context: "a", Concurrency: 8, MaxConcurrency: 8},
		{Kubeconfig: "kc", Context: "b", Concurrency: 64, MaxConcurrency: 1024},
		{Kubeconfig: "kc", Context: "a", ServiceAccount: "ns/deployer", Concurrency: 64, MaxConcurrency: 1024},
	} {
		if bound(other) == bound(base) {
			t.Errorf("%+v shares the bound of %+v", other, base)
		}
	}
}
