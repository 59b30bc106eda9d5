package pipeline

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	got := fieldDrift(live, dryRun, desired)
	var lines []string
	for _, d := range got {
		at := "-"
		if d.Time != nil {
			at = d.Time.Format(time.RFC3339)
		}
		lines = append(lines, d.Field+" "+d.Change+" "+d.Manager+" "+at)
	}
	want := strings.Join([]string{
		".metadata.labels.owner added kubectl-label 2026-11-24T09:30:00Z",
		".spec.replicas changed kubectl -",
		`.spec.template.spec.containers[name="sidecar"].image changed kubectl-edit 2026-11-24T09:30:00Z`,
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
	if d := fieldDrift(scaled, asApplied, desired); len(d) != 0 {
		t.Errorf("an HPA's scaling reported as drift: %+v", d)
	}
	// Without managed fields, a difference is still drift, by nobody known.
	bare := scaled.DeepCopy()
	bare.SetManagedFields(nil)
	if d := fieldDrift(bare, asApplied, desired); len(d) != 1 || d[0].Field != "." || d[0].Manager != "" {
		t.Errorf("a difference nobody owns: %+v", d)
	}
	// As applied, and not dry-run (live held every value): no drift.
	if d := fieldDrift(desired.DeepCopy(), nil, desired); len(d) != 0 {
		t.Errorf("an object as applied: %+v", d)
	}
}
