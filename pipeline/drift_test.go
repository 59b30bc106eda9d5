package pipeline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/gantry-dev/gantry/sources"
)

func managed(manager, op, subresource, fields string, at *time.Time) metav1.ManagedFieldsEntry {
	e := metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), Subresource: subresource,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	if at != nil {
		e.Time = &metav1.Time{Time: *at}
	}
	return e
}

func TestFieldDrift(t *testing.T) {
	when := time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC)
	desired := decode(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 2
  template:
    spec:
      containers:
        - {name: web, image: web:1}
        - {name: sidecar, image: proxy:1}
`)
	// What gantry's apply would make of the live object below.
	dryRun := decode(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web, owner: someone}}
spec:
  replicas: 2
  template:
    spec:
      containers:
        - {name: web, image: web:1}
        - {name: sidecar, image: proxy:1}
status: {replicas: 2}
`)
	live := decode(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web, owner: someone}}
spec:
  replicas: 5
  template:
    spec:
      containers:
        - {name: web, image: web:1}
        - {name: sidecar, image: proxy:2}
status: {replicas: 5}
`)
	live.SetManagedFields([]metav1.ManagedFieldsEntry{
		managed("gantry", "Apply", "", `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`, &when),
		managed("kubectl", "Update", "scale", `{"f:spec":{"f:replicas":{}}}`, nil),
		managed("kubectl-label", "Update", "", `{"f:metadata":{"f:labels":{"f:owner":{}}}}`, &when),
		managed("kubectl-edit", "Update", "", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"sidecar\"}":{"f:image":{}}}}}}}`, &when),
		managed("kube-controller-manager", "Update", "status", `{"f:status":{"f:replicas":{}}}`, &when),
	})
	hand := (&run{}).hand
	pl := &plan{obj: &sources.Object{Unstructured: desired}, existing: live, dryRun: dryRun}
	got, _, _ := fieldDrift(live, dryRun, desired, hand, pl.driftValues())
	var lines []string
	for _, d := range got {
		at := "-"
		if d.Time != nil {
			at = d.Time.Format(time.RFC3339)
		}
		lines = append(lines, d.Field+" "+d.Change+" "+d.Manager+" "+at+" "+d.Values())
	}
	want := strings.Join([]string{
		`.metadata.labels.owner added kubectl-label 2026-11-24T09:30:00Z (none) → "someone"`,
		".spec.replicas changed kubectl - 2 → 5",
		`.spec.template.spec.containers[name="sidecar"].image changed kubectl-edit 2026-11-24T09:30:00Z "proxy:1" → "proxy:2"`,
	}, "\n")
	if g := strings.Join(lines, "\n"); g != want {
		t.Errorf("drift:\n%s\nwant:\n%s", g, want)
	}

	// An HPA's replicas (the controller manager, through scale) is the
	// cluster at work, not drift.
	scaled := decode(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 5
  template:
    spec:
      containers:
        - {name: web, image: web:1}
        - {name: sidecar, image: proxy:1}
`)
	scaled.SetManagedFields([]metav1.ManagedFieldsEntry{managed("kube-controller-manager", "Update", "scale", `{"f:spec":{"f:replicas":{}}}`, &when)})
	asApplied := desired.DeepCopy()
	d, m, paths := fieldDrift(scaled, asApplied, desired, hand, nil)
	if len(d) != 0 {
		t.Errorf("an HPA's scaling reported as drift: %+v", d)
	}
	// It is reported as the controller's, and a correction leaves it.
	if len(m) != 1 || m[0].Field != ".spec.replicas" || m[0].Manager != "kube-controller-manager" || len(paths) != 1 {
		t.Errorf("an HPA's scaling: managed %+v, paths %v", m, paths)
	}
	corrected := desired.DeepCopy()
	removeAt(corrected.Object, paths[0])
	if _, ok := corrected.Object["spec"].(map[string]any)["replicas"]; ok {
		t.Errorf("the correction still applies the replicas an HPA set")
	}
	// Without managed fields, a difference is still drift, by nobody known.
	bare := scaled.DeepCopy()
	bare.SetManagedFields(nil)
	if d, _, _ := fieldDrift(bare, asApplied, desired, hand, nil); len(d) != 1 || d[0].Field != "." || d[0].Manager != "" {
		t.Errorf("a difference nobody owns: %+v", d)
	}
	// As applied, and not dry-run (live held every value): no drift.
	if d, m, _ := fieldDrift(desired.DeepCopy(), nil, desired, hand, nil); len(d)+len(m) != 0 {
		t.Errorf("an object as applied: %+v %+v", d, m)
	}
}

// Fields an operator adds (cert-manager's cainjector sets a webhook's
// caBundle, a controller adds its finalizer) are the operator's: reported
// as managed by it, never drift, unless the workflow names the manager as
// one of people (hand-managers).
func TestFieldsOfOtherControllersAreNotDrift(t *testing.T) {
	desired := decode(t, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: hooks}
webhooks:
  - name: check.example.com
    clientConfig: {service: {name: hooks, namespace: shop}}
`)
	live := decode(t, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: hooks, finalizers: [example.com/cleanup]}
webhooks:
  - name: check.example.com
    clientConfig: {service: {name: hooks, namespace: shop}, caBundle: Q0EK}
`)
	live.SetManagedFields([]metav1.ManagedFieldsEntry{
		managed("cert-manager-cainjector", "Update", "", `{"f:webhooks":{"k:{\"name\":\"check.example.com\"}":{"f:clientConfig":{"f:caBundle":{}}}}}`, nil),
		managed("cleanup-operator", "Update", "", `{"f:metadata":{"f:finalizers":{".":{},"v:\"example.com/cleanup\"":{}}}}`, nil),
	})
	d, m, paths := fieldDrift(live, live.DeepCopy(), desired, (&run{}).hand, nil)
	if len(d) != 0 {
		t.Errorf("an operator's fields reported as drift: %+v", d)
	}
	var got []string
	for _, e := range m {
		got = append(got, e.Field+" "+e.Change+" "+e.Manager)
	}
	want := `.metadata.finalizers[="example.com/cleanup"] added cleanup-operator
.webhooks[name="check.example.com"].clientConfig.caBundle added cert-manager-cainjector`
	if g := strings.Join(got, "\n"); g != want {
		t.Errorf("managed:\n%s\nwant:\n%s", g, want)
	}
	if len(paths) != 0 {
		t.Errorf("fields the apply would not change are removed from it: %v", paths)
	}
	// Named by the workflow, a manager's changes are drift.
	r := &run{opts: Options{HandManagers: []string{"cleanup-operator"}}}
	if d, _, _ := fieldDrift(live, live.DeepCopy(), desired, r.hand, nil); len(d) != 1 || d[0].Manager != "cleanup-operator" {
		t.Errorf("a manager named in hand-managers: %+v", d)
	}
}

// Drift shows values as a diff does: a Secret's never, a field whose
// value came from an encrypted file masked, a global mask applied, and a
// long value cut.
func TestDriftValuesMasked(t *testing.T) {
	path := func(fields ...string) fieldpath.Path {
		var p fieldpath.Path
		for _, f := range fields {
			p = append(p, fieldpath.PathElement{FieldName: &f})
		}
		return p
	}
	secret := decode(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: shop}\nstringData: {password: hunter22}\n")
	if show := (&plan{obj: &sources.Object{Unstructured: secret}, existing: secret, dryRun: secret}).driftValues(); show != nil {
		t.Errorf("a Secret's drift shows values")
	}
	long := strings.Repeat("x", 200)
	live := decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\ndata: {token: live-value-1234567, mode: fast, note: "+long+", db: shopdb-password-x}\n")
	applied := decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\ndata: {token: decrypted-99, mode: slow, note: short, db: other}\n")
	pl := &plan{obj: &sources.Object{Unstructured: applied}, existing: live, dryRun: applied,
		hidden: func() []string { return []string{"/data/token"} },
		mask:   func(s string) string { return strings.ReplaceAll(s, "shopdb-password-x", "***") }}
	show := pl.driftValues()
	for field, want := range map[string][2]string{
		"token": {`"***"`, `"***"`},
		"mode":  {`"fast"`, `"slow"`},
		"db":    {`"***"`, `"other"`},
	} {
		if l, a := show(path("data", field)); l != want[0] || a != want[1] {
			t.Errorf(".data.%s: live %s, applied %s; want %s, %s", field, l, a, want[0], want[1])
		}
	}
	if l, _ := show(path("data", "note")); len([]rune(l)) != maxShownValue || !strings.HasSuffix(l, "…") {
		t.Errorf("a long value is not cut at %d characters: %s", maxShownValue, l)
	}
	if l, a := show(path("data", "absent")); l != "" || a != "" {
		t.Errorf("a field neither side has: %q %q", l, a)
	}
}

// A decrypted field is masked where it is in another version of the
// object: an env var added by hand before the encrypted one moved it, and
// the mask followed the index (the hand's value was masked, the secret's
// shown). Elements are found by their name; a list without names has the
// field masked in every element.
func TestMaskAlikeFollowsListElements(t *testing.T) {
	t.Parallel()
	built := decode(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
        - name: web
          args: [--pin, "739"]
          env:
            - {name: PIN, value: "739"}
            - {name: MODE, value: fast}
`)
	live := decode(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
        - name: sidecar
          env:
            - {name: PIN, value: "sidecar-own"}
        - name: web
          args: [--pin, "222"]
          env:
            - {name: DEBUG, value: "1"}
            - {name: PIN, value: "222"}
            - {name: MODE, value: fast}
`)
	hidden := []string{"/spec/template/spec/containers/0/env/0/value", "/spec/template/spec/containers/0/args/1"}
	masked := MaskAlike(live, built, hidden)
	containers := masked.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	web := containers[1].(map[string]any)
	env := web["env"].([]any)
	if v := env[1].(map[string]any)["value"]; v != hiddenValue {
		t.Errorf("the secret's value, moved by a var added by hand: %v", v)
	}
	if v := env[0].(map[string]any)["value"]; v != "1" {
		t.Errorf("the hand's own var was masked instead: %v", v)
	}
	if v := containers[0].(map[string]any)["env"].([]any)[0].(map[string]any)["value"]; v != "sidecar-own" {
		t.Errorf("another container's var of the same name: %v", v)
	}
	if args := web["args"].([]any); args[0] != hiddenValue || args[1] != hiddenValue {
		t.Errorf("a list without names: %v, want every element masked", args)
	}
	if !strings.Contains(fmt.Sprint(live.Object), "222") {
		t.Errorf("MaskAlike changed the object it was given")
	}
	// With no reference (a record's paths over a live object), every
	// element of a list is masked there.
	all := MaskAlike(live, nil, []string{"/spec/template/spec/containers/0/env/0/value"})
	for _, c := range all.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
		for _, e := range c.(map[string]any)["env"].([]any) {
			if v := e.(map[string]any)["value"]; v != hiddenValue {
				t.Errorf("without a reference, %v is shown", v)
			}
		}
	}
}
