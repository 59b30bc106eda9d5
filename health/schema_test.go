package health

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  names: {kind: Gizmo, plural: gizmos}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              labels: {type: object, additionalProperties: {type: string}}
          status:
            type: object
            properties:
              readyReplicas: {type: integer}
              phase: {type: string}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
                    reason: {type: string}
`

// A field the kind's schema does not have is named at its rule's line,
// through optional selections, indexes and the elements a macro ranges
// over; fields the schema has, metadata, and fields under one that keeps
// unknown fields are not.
func TestFieldsMissingFromTheSchema(t *testing.T) {
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(gizmoCRD), &crd.Object); err != nil {
		t.Fatal(err)
	}
	rules, err := ParseText([]byte(`- apiVersion: example.com/v1
  kind: Gizmo
  current: >-
    status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.statu == 'True')
    && status.readyReplica == spec.size
  inProgress: status.?phase.orValue('') == 'Pending' || status.extra.anything == 1 || metadata.generation > 1
  failed: status.conditions[0].reasn == 'Broken' || spec.labels.team == 'x' || status.?phaze.hasValue()
`), "rules.yaml", 1)
	if err != nil {
		t.Fatal(err)
	}
	set, _, err := Compile(rules, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range set.CheckSchemas([]*unstructured.Unstructured{crd}) {
		got = append(got, e.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"rules.yaml:4: health rule for Gizmo.example.com: current reads status.conditions[].statu, but the schema of Gizmo.example.com has no field status.conditions[].statu",
		"rules.yaml:4: health rule for Gizmo.example.com: current reads status.readyReplica, but the schema of Gizmo.example.com has no field status.readyReplica",
		"rules.yaml:7: health rule for Gizmo.example.com: failed reads status.conditions[].reasn",
		"rules.yaml:7: health rule for Gizmo.example.com: failed reads status.phaze",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d problems, want 4:\n%s", len(got), all)
	}
	// No CRD for the kind: nothing to check against.
	if errs := set.CheckSchemas(nil); len(errs) != 0 {
		t.Errorf("without the CRD: %v", errs)
	}
}
