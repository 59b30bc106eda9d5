package pipeline

import (
	"context"
	"errors"

	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxcd/pkg/ssa/utils"
	"github.com/gantry-dev/gantry/health"
)

// checkRuleSchemas checks the fields the health rules read against their
// kinds' schemas, before anything is written: the CRDs of the set, those
// the offline options give, and on a cluster, the cluster's CRD of each
// other kind a rule names. A CRD that cannot be read leaves its rule
// unchecked, as without a cluster.
func (r *run) checkRuleSchemas(ctx context.Context) error {
	if r.opts.Health == nil {
		return r.opts.HealthErr
	}
	var crds []*unstructured.Unstructured
	defined := map[schema.GroupKind]bool{}
	add := func(u *unstructured.Unstructured) {
		if gk, ok := object.GetCRDGroupKind(u); ok {
			crds = append(crds, u)
			defined[gk] = true
		}
	}
	for _, o := range r.objects {
		if utils.IsCRD(o.Unstructured) {
			add(o.Unstructured)
		}
	}
	if r.opts.Offline != nil {
		for _, u := range r.opts.Offline.CRDs {
			add(u)
		}
	}
	for _, rule := range r.opts.Health.Rules() {
		gk := schema.FromAPIVersionAndKind(rule.APIVersion, rule.Kind).GroupKind()
		if rule.Origin == health.BuiltIn || rule.Kind == "" || defined[gk] || r.opts.Offline != nil {
			continue
		}
		// A cluster that cannot be reached is reported by the stage
		// that needs it.
		if r.ensureClients() != nil {
			break
		}
		mapping, err := r.clients.Mapper.RESTMapping(gk)
		if err != nil {
			continue // not served here: nothing to check against
		}
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		if err := r.clients.Client.Get(ctx, client.ObjectKey{Name: mapping.Resource.Resource + "." + gk.Group}, crd); err == nil {
			add(crd)
		}
	}
	return errors.Join(append([]error{r.opts.HealthErr}, r.opts.Health.CheckSchemas(crds)...)...)
}
