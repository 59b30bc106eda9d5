package pipeline

import (
	"testing"

	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/health"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/sources"
)

// The planner is made before the fields a revision recorded as secret
// are read; the rules it uses to call an unchanged object ready must
// still keep off an object that held a secret in that revision, as the
// wait's do.
func TestPlannerRulesKeepOffFieldsARevisionRecordedAsSecret(t *testing.T) {
	rules, _, err := health.Compile(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	es := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": "db", "namespace": "shop"},
		"spec":     map[string]any{"target": map[string]any{"template": map[string]any{"data": map[string]any{"url": "postgres://app:S3cret-for-orders@db"}}}},
	}}
	id := object.UnstructuredToObjMetadata(es)
	r := newRun("apply", Options{Health: rules, Wait: true}, nil, &infos{})
	r.objects = []*sources.Object{{Unstructured: es}}
	r.planner = r.newPlanner()
	if r.planner.health.ruleFor(id) == nil {
		t.Fatal("no rule for the ExternalSecret before any field is known to be secret")
	}
	// The revision this run compares with recorded the field as secret.
	r.compared = &inventory.Revision{Masked: map[string][]string{
		inventory.EntryFor(es).ID: {"/spec/target/template/data/url"},
	}}
	r.collectMasked()
	if rule := r.planner.health.ruleFor(id); rule != nil {
		t.Errorf("the planner decides the ExternalSecret by %s, though a revision recorded a secret in it", rule.Name())
	}
	if rule := r.waitGuard().ruleFor(id); rule != nil {
		t.Errorf("the wait decides the ExternalSecret by %s, though a revision recorded a secret in it", rule.Name())
	}
}
