package result

import (
	"encoding/json"
	"testing"
)

// A unit's JSON holds its name, cluster and dependencies beside
// everything a single run's report holds.
func TestUnitJSONHoldsASingleReport(t *testing.T) {
	t.Parallel()
	run := Run{Schema: RunSchemaVersion, Command: "apply", Units: []Unit{{
		Name: "web", Cluster: Cluster{Context: "prod", Server: "https://10.0.0.1:6443"}, DependsOn: []string{"crds"},
		Result: &Result{Schema: SchemaVersion, Command: "apply", Reason: ReasonSucceeded, Objects: []Object{{Kind: "ConfigMap", Name: "a", Action: Created}}},
	}}}
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Units []struct {
			Name      string
			Cluster   Cluster
			DependsOn []string
			Reason    Reason
			Objects   []Object
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	u := got.Units[0]
	if u.Name != "web" || u.Cluster.Server != "https://10.0.0.1:6443" || len(u.DependsOn) != 1 || u.Reason != ReasonSucceeded || len(u.Objects) != 1 {
		t.Errorf("unit as JSON: %s", b)
	}
}

// A run takes its worst unit's reason: bad input, then a failure, then a
// unit not run, then pending changes.
func TestConcludeTakesTheWorstUnit(t *testing.T) {
	t.Parallel()
	unit := func(r Reason) Unit { return Unit{Name: string(r), Result: &Result{Reason: r}} }
	for _, tc := range []struct {
		reasons []Reason
		want    Reason
	}{
		{[]Reason{ReasonSucceeded, ReasonSuspended}, ReasonSucceeded},
		{[]Reason{ReasonSucceeded, ReasonProgressing}, ReasonProgressing},
		{[]Reason{ReasonProgressing, ReasonDependencyNotReady, ReasonApplyFailed}, ReasonApplyFailed},
		{[]Reason{ReasonHealthCheckFailed, ReasonBuildFailed, ReasonProgressing}, ReasonBuildFailed},
		{[]Reason{ReasonLeaseLost, ReasonHealthCheckFailed}, ReasonLeaseLost},
	} {
		run := Run{}
		for _, r := range tc.reasons {
			run.Units = append(run.Units, unit(r))
		}
		run.Conclude()
		if run.Reason != tc.want {
			t.Errorf("%v: %s, want %s (%s)", tc.reasons, run.Reason, tc.want, run.Message)
		}
	}
}

func TestReachedGoalAndFailed(t *testing.T) {
	for _, tc := range []struct {
		command       string
		reason        Reason
		goal, failure bool
	}{
		{"apply", ReasonSucceeded, true, false},
		{"apply", ReasonRolledBack, false, true}, // atomic: the deploy failed
		{"rollback", ReasonRolledBack, true, false},
		{"diff", ReasonProgressing, false, false},
		{"drift", ReasonDriftDetected, false, false},
		{"drift", ReasonValidationFailed, false, true},
	} {
		r := &Result{Command: tc.command, Reason: tc.reason}
		if r.ReachedGoal() != tc.goal || r.Failed() != tc.failure {
			t.Errorf("%s %s: reached its goal %v, failed %v; want %v, %v", tc.command, tc.reason, r.ReachedGoal(), r.Failed(), tc.goal, tc.failure)
		}
	}
}
