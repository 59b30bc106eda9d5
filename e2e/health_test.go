package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/result"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// healthSet writes a CRD of the test's own group, with a status
// subresource, and one custom resource of it; the test's own writes of
// its status stand for a controller here (the rules' proof against a
// real controller is TestCertManager*).
func healthSet(t *testing.T, ns string) (dir, group string) {
	t.Helper()
	group = ns + ".health.gantry.test"
	dir = t.TempDir()
	writeFile(t, dir+"/crd.yaml", fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group))
	writeFile(t, dir+"/gizmo.yaml", fmt.Sprintf("apiVersion: %s/v1\nkind: Gizmo\nmetadata:\n  name: g\n  namespace: %s\nspec:\n  size: 1\n", group, ns))
	t.Cleanup(func() {
		crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		_ = env.Dynamic.Resource(crds).Delete(context.Background(), "gizmos."+group, metav1.DeleteOptions{})
	})
	return dir, group
}

// setStatusWhenCreated writes status onto the Gizmo once it exists, after
// delay: what its controller would write.
func setStatusWhenCreated(t *testing.T, group, ns string, delay time.Duration, st map[string]any) chan error {
	done := make(chan error, 1)
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			u, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, "g", metav1.GetOptions{})
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			time.Sleep(delay)
			if u, err = env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, "g", metav1.GetOptions{}); err != nil {
				done <- err
				return
			}
			st["observedGeneration"] = u.GetGeneration()
			_ = unstructured.SetNestedField(u.Object, st, "status")
			_, err = env.Dynamic.Resource(gvr).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{})
			done <- err
			return
		}
		done <- ctx.Err()
	}()
	return done
}

const gizmoRules = `- apiVersion: %s/v1
  kind: Gizmo
  current: status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True')
  failed: status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'False' && c.reason == 'Broken')
`

// A custom resource that reports through Ready: kstatus calls it Current
// the moment it exists; with a rule the wait holds until Ready is True,
// and the report names the rule that decided.
func TestHealthRuleWaitsForReady(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir, group := healthSet(t, ns)
	rules := dir + "/../rules.yaml"
	writeFile(t, rules, fmt.Sprintf(gizmoRules, group))
	done := setStatusWhenCreated(t, group, ns, 3*time.Second, map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Done", "message": "all parts in place"}}})
	start := time.Now()
	r := gantry(t, "apply", "--path="+dir, "--inventory=rules", "--inventory-namespace="+ns, "--timeout=60s", "--health-rules="+rules)
	took := time.Since(start)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	if took < 3*time.Second {
		t.Errorf("the run ended after %s, before the Gizmo was Ready (3 s): the rule did not hold the wait", took)
	}
	h := healthOf(t, r, "Gizmo")
	if h == nil || h.Status != "Current" || !strings.Contains(h.Rule, "rule for Gizmo."+group+" at "+rules+":1") {
		t.Errorf("health in the report: %+v; want Current, decided by the rule at %s:1", h, rules)
	}

	// Without rules (none turns the built-in ones off too), kstatus
	// calls a new Gizmo Current at once: what the rule changes.
	ns2 := env.Namespace(t)
	dir2, _ := healthSet(t, ns2)
	writeFile(t, dir2+"/gizmo.yaml", fmt.Sprintf("apiVersion: %s/v1\nkind: Gizmo\nmetadata:\n  name: g2\n  namespace: %s\nspec:\n  size: 1\n", group, ns2))
	_ = dir2
	r = gantry(t, "apply", "--path="+dir2+"/gizmo.yaml", "--inventory=rules", "--inventory-namespace="+ns2, "--timeout=60s", "--health-rules=none")
	if r.code != 0 {
		t.Fatalf("without rules: exit %d:\n%s", r.code, r.stderr)
	}
	if h := healthOf(t, r, "Gizmo"); h == nil || h.Status != "Current" || h.Rule != "" {
		t.Errorf("without rules: %+v; want kstatus's Current", h)
	}
}

// failed ends the wait at once, long before the timeout, with the rule and
// the object's own message.
func TestHealthRuleFailedEndsTheWait(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir, group := healthSet(t, ns)
	done := setStatusWhenCreated(t, group, ns, time.Second, map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "Broken", "message": "the widget part is missing"}}})
	start := time.Now()
	r := gantry(t, "apply", "--path="+dir, "--inventory=rules", "--inventory-namespace="+ns, "--timeout=3m", "--health-rules="+fmt.Sprintf(gizmoRules, group))
	took := time.Since(start)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.code == 0 {
		t.Fatalf("exit 0, want the wait to fail:\n%s", r.stderr)
	}
	if took > 60*time.Second {
		t.Errorf("the run took %s: a failed rule must end the wait at once, not at the timeout", took)
	}
	for _, want := range []string{"rule for Gizmo." + group + " at --health-rules:1: failed: Broken: the widget part is missing"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the run does not say %q:\n%s", want, r.stderr)
		}
	}
	if h := healthOf(t, r, "Gizmo"); h == nil || h.Status != "Failed" || !strings.Contains(h.Message, "the widget part is missing") {
		t.Errorf("health in the report: %+v", h)
	}
}

// One pass finds every mistake of a run file's rules, each at its line of
// the run file, before anything is written, live and offline: a syntax
// error, a field the kind's schema (its CRD in the set) does not have, and
// .all() over a list that may be empty; an unknown field of a rule too.
func TestHealthRulesMistakesInOnePass(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir, group := healthSet(t, ns)
	// The CRD with a schema of its fields, for the field check.
	writeFile(t, dir+"/crd.yaml", fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
          status:
            type: object
            properties:
              phase: {type: string}
              conditions:
                type: array
                items: {type: object, properties: {type: {type: string}, status: {type: string}}}
`, group))
	runFile := dir + "/../gantry.yaml"
	writeFile(t, runFile, fmt.Sprintf(`units:
- name: gizmos
  path: %[2]s
  inventory: rules
  inventory-namespace: %[3]s
  health-rules:
  - apiVersion: %[1]s/v1
    kind: Gizmo
    current: status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True')
    failed: status.phaze == 'Failed'
  - apiVersion: %[1]s/v1
    kind: Gadget
    current: status.conditions.exists(c, c.type == 'Ready'
  - apiVersion: %[1]s/v1
    kind: Doohickey
    current: status.?conditions.orValue([]).all(c, c.status == 'True')
    failde: "false"
`, group, filepath.Base(dir), ns))
	want := []string{
		runFile + ":10: health rule for Gizmo." + group + ": failed reads status.phaze, but the schema of Gizmo." + group + " has no field status.phaze",
		runFile + ":13: health rule for Gadget." + group + ": current: Syntax error",
		runFile + ":16: health rule for Doohickey." + group + ": current: status.?conditions.orValue([]).all(...) is true when the list is empty or missing",
		runFile + `:17: health rule: unknown field "failde"; did you mean failed?`,
	}
	for _, mode := range [][]string{{"apply"}, {"validate", "--offline"}} {
		r := gantry(t, append(mode, "--run-file="+runFile, "--workspace="+filepath.Dir(runFile))...)
		if r.code != 1 {
			t.Fatalf("%v: exit %d, want 1 (validation failed):\n%s", mode, r.code, r.stderr)
		}
		for _, w := range want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: missing %q:\n%s", mode, w, r.stderr)
			}
		}
		if exists(t, schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, "", "gizmos."+group) {
			t.Fatalf("%v: the CRD was applied although the rules are wrong", mode)
		}
	}
}

// healthOf is the reported health of the run's object of kind.
func healthOf(t *testing.T, r gantryRun, kind string) *result.Health {
	t.Helper()
	if r.res == nil {
		t.Fatalf("no report:\n%s", r.stderr)
	}
	for _, o := range r.res.Objects {
		if o.Kind == kind {
			return o.Health
		}
	}
	return nil
}
