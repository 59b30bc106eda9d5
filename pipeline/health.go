package pipeline

import (
	"context"
	"errors"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
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

// ruleGuard keeps the health rules off the objects that hold secret values
// (fields SOPS decrypted, secret-named substitutions, values a revision
// recorded as secret): an expression over them could carry a value into
// a message, or spell it out one verdict at a time. kstatus decides them.
type ruleGuard struct {
	rules  *health.Set
	secret map[schema.GroupKind]map[string]bool // namespace/name by kind
}

func (r *run) ruleGuard() ruleGuard {
	g := ruleGuard{rules: r.opts.Health, secret: map[schema.GroupKind]map[string]bool{}}
	if g.rules == nil {
		return g
	}
	for _, o := range r.objects {
		if len(r.hiddenFields(o)) == 0 {
			continue
		}
		gk := o.GroupVersionKind().GroupKind()
		if g.secret[gk] == nil {
			g.secret[gk] = map[string]bool{}
		}
		g.secret[gk][o.GetNamespace()+"/"+o.GetName()] = true
	}
	return g
}

func (g ruleGuard) evaluate(ctx context.Context, u *unstructured.Unstructured) (health.Verdict, bool) {
	if g.secret[u.GroupVersionKind().GroupKind()][u.GetNamespace()+"/"+u.GetName()] {
		return health.Verdict{}, false
	}
	return g.rules.Evaluate(ctx, u)
}

// currentNow says whether u is ready as it is: by its rule, else kstatus.
func (g ruleGuard) currentNow(ctx context.Context, u *unstructured.Unstructured) bool {
	if v, ok := g.evaluate(ctx, u); ok {
		return v.Result.Status == status.CurrentStatus
	}
	return currentNow(u)
}

// ruleFor is the rule that decides the object id, if one does.
func (g ruleGuard) ruleFor(id object.ObjMetadata) *health.Rule {
	if g.secret[id.GroupKind][id.Namespace+"/"+id.Name] {
		return nil
	}
	return g.rules.For(id.GroupKind)
}

// waitGuard is the run's rule guard for its wait, made once: the wait
// asks it for every object on every poll and every explanation.
func (r *run) waitGuard() ruleGuard {
	r.guardOnce.Do(func() { r.guard = r.ruleGuard() })
	return r.guard
}
