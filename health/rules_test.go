package health

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// One read of a rules file names every mistake at its line: a syntax
// error (on the second line of a block), an unknown field with the one
// meant, a rule without current, a second rule for one kind; and warns of
// .all() over a list that may be empty, unless the same list is also
// required to hold something.
func TestRulesFileMistakesAtTheirLines(t *testing.T) {
	text := `- apiVersion: example.com/v1
  kind: Widget
  current: |
    status.?conditions.orValue([]).exists(c, c.type == 'Ready' &&
      c.status == 'True'
  failed: "false"
- apiVersion: example.com/v1
  kind: Gadget
  curent: "true"
- apiVersion: example.com/v1
  kind: Gizmo
  failed: "false"
- apiVersion: example.com/v1
  kind: Doohickey
  current: status.?conditions.orValue([]).all(c, c.status == 'True')
  failed: status.conditions.all(c, c.status == 'False') && size(status.conditions) > 0
- apiVersion: example.com/v1
  kind: Doohickey
  current: "true"
`
	rules, parseErr := ParseText([]byte(text), "health.yaml", 1)
	_, warnings, compileErr := Compile(rules, true)
	got := strings.Join([]string{errString(parseErr), errString(compileErr), strings.Join(warnings, "\n")}, "\n")
	for _, want := range []string{
		"health.yaml:5: health rule for Widget.example.com: current: Syntax error",
		`health.yaml:9: health rule: unknown field "curent"; did you mean current?`,
		"health.yaml:7: health rule for Gadget.example.com: no current",
		"health.yaml:10: health rule for Gizmo.example.com: no current",
		"health.yaml:17: health rule for Doohickey.example.com: a rule for it is already at health.yaml:13",
		"health.yaml:15: health rule for Doohickey.example.com: current: status.?conditions.orValue([]).all(...) is true when the list is empty or missing",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "health.yaml:16") {
		t.Errorf("a .all() whose list must also hold something is warned of:\n%s", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A user's rule replaces the built-in one for its kind, and a rule for a
// whole group every built-in one of the group; none leaves kstatus to
// decide every kind.
func TestUserRulesReplaceBuiltIns(t *testing.T) {
	rules, err := ParseText([]byte("- apiVersion: cert-manager.io/v1\n  kind: Certificate\n  current: \"true\"\n- apiVersion: keda.sh/v1alpha1\n  current: \"true\"\n"), "rules.yaml", 1)
	if err != nil {
		t.Fatal(err)
	}
	set, _, err := Compile(rules, true)
	if err != nil {
		t.Fatal(err)
	}
	for gk, want := range map[string]string{
		"Certificate.cert-manager.io":   "rules.yaml:1",
		"Issuer.cert-manager.io":        BuiltIn,
		"ScaledObject.keda.sh":          "rules.yaml:4",
		"ScaledJob.keda.sh":             "rules.yaml:4",
		"Rollout.argoproj.io":           BuiltIn,
		"Anything.keda.sh":              "rules.yaml:4",
		"Deployment.apps":               "",
		"Certificate.other.example.com": "",
	} {
		r := set.For(schema.ParseGroupKind(gk))
		switch {
		case want == "" && r != nil:
			t.Errorf("%s: decided by %s, want kstatus", gk, r.Origin)
		case want != "" && (r == nil || r.Origin != want):
			t.Errorf("%s: decided by %v, want %s", gk, r, want)
		}
	}
	none, _, err := Compile(nil, false)
	if err != nil || none.For(schema.ParseGroupKind("Certificate.cert-manager.io")) != nil {
		t.Errorf("without built-ins a Certificate has a rule: %v", err)
	}
}

// The guards around Flux's evaluator: a field the object lacks is "not
// yet", naming the expression and the field; an expression that cannot
// be evaluated otherwise fails the object at once, naming the rule; the
// generation check comes first, as in Flux.
func TestEvaluationGuards(t *testing.T) {
	rules, err := ParseText([]byte(`- apiVersion: example.com/v1
  kind: Widget
  current: status.replicas == status.readyReplicas
  failed: status.phase == 'Failed'
- apiVersion: example.com/v1
  kind: Gadget
  current: status.count > 'three'
`), "rules.yaml", 1)
	if err != nil {
		t.Fatal(err)
	}
	set, _, err := Compile(rules, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, kind, body string
		want             status.Status
		says             string
	}{
		{"ready", "Widget", "status:\n  phase: Running\n  replicas: 3\n  readyReplicas: 3\n", status.CurrentStatus, "rule for Widget.example.com at rules.yaml:1: current"},
		{"not yet", "Widget", "status:\n  phase: Running\n  replicas: 3\n  readyReplicas: 1\n", status.InProgressStatus, "in progress"},
		{"phase missing", "Widget", "status:\n  replicas: 3\n", status.InProgressStatus, "failed (status.phase == 'Failed') reads phase, which the object does not have yet"},
		{"failed", "Widget", "status:\n  phase: Failed\n  message: out of quota\n", status.FailedStatus, "rule for Widget.example.com at rules.yaml:1: failed: out of quota"},
		{"old generation", "Widget", "status:\n  observedGeneration: 1\n  phase: Failed\n", status.InProgressStatus, "has not observed generation 2 yet"},
		{"cannot be evaluated", "Gadget", "status:\n  count: 3\n", status.FailedStatus, "current (status.count > 'three') cannot be evaluated on this object: no such overload"},
	} {
		v, ok := set.Evaluate(context.Background(), obj(t, "example.com/v1", tc.kind, tc.body))
		if !ok || v.Result.Status != tc.want || !strings.Contains(v.Result.Message, tc.says) {
			t.Errorf("%s: %v %+v; want %s saying %q", tc.name, ok, v.Result, tc.want, tc.says)
		}
	}
}

// What a rule's evaluation prints never carries the object's values: a
// key computed from them, a pattern or number CEL could not use; and no
// rule decides a Secret.
func TestEvaluationMessagesCarryNoValues(t *testing.T) {
	const secret = "s3cr3t-(value"
	rules, err := ParseText([]byte(`- apiVersion: example.com/v1
  kind: Widget
  current: spec[spec.token] == 'x'
- apiVersion: example.com/v1
  kind: Gadget
  current: double(spec.token) > 1.0
- apiVersion: example.com/v1
  kind: Gizmo
  current: int(spec.token) > 1
`), "rules.yaml", 1)
	if err != nil {
		t.Fatal(err)
	}
	set, _, err := Compile(rules, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Widget", "Gadget", "Gizmo"} {
		v, ok := set.Evaluate(context.Background(), obj(t, "example.com/v1", kind, "spec:\n  name: n\n  token: \""+secret+"\"\n"))
		t.Logf("%s: %s %s", kind, v.Result.Status, v.Result.Message)
		if !ok || strings.Contains(v.Result.Message, "s3cr3t") {
			t.Errorf("%s: %v %q: the object's value is printed", kind, ok, v.Result)
		}
	}
	if _, ok := set.Evaluate(context.Background(), obj(t, "v1", "Secret", "data:\n  token: czNjcjN0\n")); ok {
		t.Error("a rule decides a Secret")
	}
	// Rules decide custom resources: Kubernetes' own groups (where the
	// kinds that hold secrets are) are kstatus's.
	for text, want := range map[string]string{
		"- apiVersion: v1\n  kind: Secret\n  current: \"true\"\n":                            "rules.yaml:1: health rule for Secret: Secrets are not decided by rules",
		"- apiVersion: v1\n  current: \"true\"\n":                                            "rules.yaml:1: health rule for every kind of the core group (v1): rules decide custom resources",
		"- apiVersion: v1\n  kind: ConfigMap\n  current: \"true\"\n":                         "rules.yaml:1: health rule for ConfigMap: rules decide custom resources; the core group (v1) is one of Kubernetes' own API groups",
		"- apiVersion: apps/v1\n  kind: Deployment\n  current: \"true\"\n":                   "rules.yaml:1: health rule for Deployment.apps: rules decide custom resources; apps is one of",
		"- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  current: \"true\"\n":         "networking.k8s.io is one of Kubernetes' own API groups",
		"- apiVersion: gateway.networking.k8s.io/v1\n  kind: Gateway\n  current: \"true\"\n": "",
	} {
		_, err := ParseText([]byte(text), "rules.yaml", 1)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", text, err, want)
		}
	}
}

// Each rule's evaluator is made once per run: a user's rule when it is
// compiled (to find its mistakes before any write), a built-in one on its
// first use; never per object or per poll.
func TestEvaluatorsAreMadeOnce(t *testing.T) {
	rules, err := ParseText([]byte("- apiVersion: example.com/v1\n  kind: Widget\n  current: \"true\"\n"), "rules.yaml", 1)
	if err != nil {
		t.Fatal(err)
	}
	before := evaluatorsMade.Load()
	set, _, err := Compile(rules, true)
	if err != nil {
		t.Fatal(err)
	}
	widget := obj(t, "example.com/v1", "Widget", "status: {}\n")
	cert := obj(t, "cert-manager.io/v1", "Certificate", "status: {}\n")
	for range 3 { // polls
		for range 100 { // objects
			set.Evaluate(context.Background(), widget)
			set.Evaluate(context.Background(), cert)
		}
	}
	if made := evaluatorsMade.Load() - before; made != 2 {
		t.Errorf("%d evaluators made for two kinds over 600 evaluations, want 2", made)
	}
}

// A verdict is kept by the object's UID and resourceVersion: the same
// version is not evaluated again, a new one is.
func TestVerdictsAreKeptByVersion(t *testing.T) {
	set, _, err := Compile(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	cert := obj(t, "cert-manager.io/v1", "Certificate", "status:\n  conditions:\n  - type: Ready\n    status: \"False\"\n    reason: Pending\n")
	cert.SetUID("u-1")
	cert.SetResourceVersion("10")
	if v, _ := set.Evaluate(context.Background(), cert); v.Result.Status != status.InProgressStatus {
		t.Fatalf("first: %v", v.Result)
	}
	ready := cert.DeepCopy()
	ready.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	if v, _ := set.Evaluate(context.Background(), ready); v.Result.Status != status.InProgressStatus {
		t.Errorf("the same version again: %v, want the verdict kept", v.Result)
	}
	ready.SetResourceVersion("11")
	if v, _ := set.Evaluate(context.Background(), ready); v.Result.Status != status.CurrentStatus {
		t.Errorf("a new version: %v, want it evaluated", v.Result)
	}
	// Only the newest version's verdict is kept: what a wait keeps grows
	// with its objects, not with its polls.
	for rv := 12; rv < 50; rv++ {
		ready.SetResourceVersion(fmt.Sprint(rv))
		set.Evaluate(context.Background(), ready)
	}
	if len(set.decided) != 1 {
		t.Errorf("%d verdicts kept of one object after 40 versions, want 1", len(set.decided))
	}
}
