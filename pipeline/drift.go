package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fluxcd/pkg/ssa"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources"
)

// Drift compares what is live with what gantry applied: the inventory's
// last revision, or the configuration given (a path or an artifact). Each
// object is reported in sync, drifted (with every field that differs and
// the field manager that changed it) or missing (deleted by hand). With
// correct, the set is applied again, taking back the fields set by hand.
// Nothing is written otherwise.
func Drift(ctx context.Context, opts Options, connect Connector, obs Observer) *result.Result {
	// Objects the inventory lists and the set lacks are for apply's
	// prune, not drift.
	opts.Prune = false
	r := newRun("drift", opts, connect, obs)
	r.res.Inventory = &result.Inventory{Name: opts.Inventory, Namespace: opts.InventoryNamespace}
	first := r.buildStage()
	if opts.Build.Path == "" && opts.Artifact == nil {
		inv := opts.InventoryNamespace + "/" + opts.Inventory
		first = r.revisionStage(false, func(list []*inventory.Revision) (*inventory.Revision, error) {
			if len(list) == 0 {
				return nil, fmt.Errorf("inventory %s has no revisions to compare with: give the configuration (path or artifact) instead", inv)
			}
			return list[0], nil
		})
	}
	dctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	res := r.execute(dctx, r.withArtifact([]stage{first,
		// Nothing is written: a failure is one of reading.
		{name: "drift", reason: result.ReasonValidationFailed, stopOnError: true, run: r.drift},
	}))
	if !res.Succeeded() {
		return res
	}
	c := res.Counts()
	n := c[result.Drifted] + c[result.Missing]
	if n == 0 {
		res.Message = fmt.Sprintf("all %d objects as applied", c[result.InSync])
		return res
	}
	res.Reason = result.ReasonDriftDetected
	res.Message = fmt.Sprintf("%d %s drifted (%d changed, %d missing)", n, plural(n, "object", "objects"), c[result.Drifted], c[result.Missing])
	if opts.Correct {
		if r.compared != nil {
			// The set is the cluster's record: written only when this
			// workflow recorded it.
			if err := r.store.Authenticate(r.prev, r.compared.Number); err != nil {
				res.Reason = result.ReasonInvalidInput
				res.Message += "; not corrected: " + err.Error()
				return res
			}
		}
		res.Correction = r.correct(ctx)
		if !res.Correction.Succeeded() {
			res.Reason = res.Correction.Reason
			res.Message += "; correcting it failed: " + res.Correction.Message
		} else {
			res.Message += "; corrected"
		}
	}
	return res
}

// nObjects is n objects, in words: "1 object", "2 objects".
func nObjects(n int) string {
	return fmt.Sprintf("%d %s", n, plural(n, "object", "objects"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// drift plans the set as an apply would (dry-runs, nothing written) and
// reports each object's drift.
func (r *run) drift(ctx context.Context) error {
	if err := r.prepare(); err != nil {
		return err
	}
	if err := r.loadInventory(ctx); err != nil {
		return err
	}
	r.collectMasked() // with the newest revision's fields, now read
	listed := map[string]bool{}
	for _, e := range r.prev.Entries {
		listed[e.ID] = true
	}
	r.planner = r.newPlanner()
	r.planner.keepLive = true
	r.readAtOnce(ctx) // the namespaces and the LISTs together
	if err := r.plan(ctx); err != nil {
		return err
	}
	var failed []error
	for _, pl := range r.plans {
		o := resultObject(pl.obj.Unstructured, r.sourceOf(pl.obj), "drift", result.InSync)
		switch {
		case pl.kind == planFailed:
			o.Action, o.Error = result.Failed, pl.err.Error()
			failed = append(failed, r.objectError(pl.obj, pl.err))
		case pl.kind == planSkip:
			o.Action, o.Error = result.Skipped, pl.reason
		case pl.existing == nil && listed[o.ID]:
			o.Action = result.Missing
			o.Drift = []result.Drift{{Field: ".", Change: "removed"}}
			o.Diff = pl.diff
		case pl.existing == nil:
			o.Action, o.Error = result.Skipped, "not applied yet: gantry has not applied it, so it cannot have drifted"
		default:
			var managed []fieldpath.Path
			o.Drift, o.ManagedBy, managed = fieldDrift(pl.existing, pl.dryRun, appliedObject(pl.obj.Unstructured), r.hand, pl.driftValues())
			if len(o.Drift) > 0 {
				o.Action, o.Diff = result.Drifted, pl.diff
			}
			if len(managed) > 0 {
				r.mu.Lock()
				if r.managed == nil {
					r.managed = map[string][]fieldpath.Path{}
				}
				r.managed[o.ID] = managed
				r.mu.Unlock()
			}
		}
		r.record(o, o.Action != result.InSync)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d objects could not be compared: %w", len(failed), joinErrors(failed))
	}
	return nil
}

// correct applies again the objects that drifted, as an apply does
// (validated, written, waited for), first taking the fields set by hand,
// so that what the set does not have is removed. What other controllers
// changed is left to them: those fields are not applied. It runs under
// the inventory's Lease, and stops with nothing written when another run
// recorded a revision since the drift was read.
func (r *run) correct(ctx context.Context) *result.Result {
	opts := r.opts
	// A correction writes objects, nothing else: what was pulled is not
	// pushed back, no tag or signature is made, no undo follows it, and
	// nothing is pruned.
	opts.Artifact, opts.Atomic, opts.Prune = nil, false, false
	opts.takeOver = map[string][]ssa.FieldManager{}
	opts.only = map[string]bool{}
	opts.expect = &inventory.Revision{}
	if newest := r.prev.Newest(); newest != nil {
		opts.expect = newest
	}
	for _, o := range r.res.Objects {
		if o.Action == result.Drifted || o.Action == result.Missing {
			opts.only[o.ID] = true
		}
		for _, d := range o.Drift {
			if d.Manager != "" && d.Manager != FieldManager {
				opts.takeOver[o.ID] = append(opts.takeOver[o.ID], ssa.FieldManager{Name: d.Manager, ExactMatch: true, OperationType: metav1.ManagedFieldsOperationUpdate},
					ssa.FieldManager{Name: d.Manager, ExactMatch: true, OperationType: metav1.ManagedFieldsOperationApply})
			}
		}
	}
	c := newRun("apply", opts, r.connect, r.obs)
	c.res.Source, c.res.Revision = r.res.Source, r.res.Revision
	c.res.Artifact = r.res.Artifact
	objects := make([]*sources.Object, len(r.objects))
	for i, o := range r.objects {
		objects[i] = o
		if paths := r.managed[inventory.EntryFor(o.Unstructured).ID]; len(paths) > 0 {
			// Fields a controller changed stay the controller's: the
			// correction does not apply them.
			cp := *o
			cp.Unstructured = o.DeepCopy()
			for _, p := range paths {
				removeAt(cp.Object, p)
			}
			objects[i] = &cp
		}
	}
	// The correction restores what was applied: it records no revision
	// of its own (the one it restores stays the newest).
	c.noRevision = true
	r.obs.Info(fmt.Sprintf("correcting the drift: applying the %d objects that drifted again", len(opts.only)))
	return c.deploy(ctx, stage{name: "build", reason: result.ReasonBuildFailed, stopOnError: true, run: func(context.Context) error {
		c.objects = objects
		return nil
	}})
}

// handManagers are the field managers of people: kubectl's (kubectl,
// kubectl-edit, kubectl-scale, kubectl-client-side-apply, ...) and
// before-first-apply, which holds what was set before any apply.
func (r *run) hand(manager string) bool {
	return strings.HasPrefix(manager, "kubectl") || manager == "before-first-apply" || slices.Contains(r.opts.HandManagers, manager)
}

// controllers are the field managers of the cluster's own components:
// what they add (a Deployment's revision annotation, a PVC's binding) is
// the cluster at work, not worth a report; what they change of a field
// gantry applies (an HPA's replicas, through scale) is reported.
var controllers = map[string]bool{
	"kube-controller-manager": true,
	"kube-scheduler":          true,
	"kubelet":                 true,
	"kube-apiserver":          true,
}

// fieldDrift lists the fields of live that are not as gantry applied
// them: those the apply would set back (dryRun, what it would make of the
// object, differs from live) and those another manager added that the
// configuration (desired) does not have. Each is named with the field
// manager that owns it in live (who changed it) and when that manager
// last wrote. Fields changed by hand (hand) are drift; those of other
// managers (controllers, operators) are returned apart, as managed, with
// the paths of those the apply would set back. Status is never drift.
// dryRun may be nil: live already held every value gantry applies. show,
// when not nil, gives the values a field holds live and as applied, as
// reports may show them.
func fieldDrift(live, dryRun, desired *unstructured.Unstructured, hand func(string) bool, show func(fieldpath.Path) (live, applied string)) (drift, managed []result.Drift, managedPaths []fieldpath.Path) {
	seen := map[string]bool{}
	explained := false
	for _, mf := range live.GetManagedFields() {
		if mf.Manager == FieldManager || mf.Subresource == "status" || mf.FieldsV1 == nil {
			continue
		}
		byHand := hand(mf.Manager)
		set := &fieldpath.Set{}
		if err := set.FromJSON(strings.NewReader(mf.FieldsV1.GetRawString())); err != nil {
			continue
		}
		var when *time.Time
		if mf.Time != nil {
			t := mf.Time.UTC()
			when = &t
		}
		set.Leaves().Iterate(func(p fieldpath.Path) {
			if len(p) > 0 && p[0].FieldName != nil && *p[0].FieldName == "status" {
				return
			}
			field := p.String()
			if seen[field] {
				return
			}
			lv, inLive := resolve(live.Object, p)
			change := ""
			if dryRun != nil {
				if dv, inDry := resolve(dryRun.Object, p); inDry != inLive || !apiequality.Semantic.DeepEqual(lv, dv) {
					change = "changed"
				}
			}
			if _, inDesired := resolve(desired.Object, p); change == "" && !inDesired && inLive {
				change = "added"
			}
			if change == "" {
				return
			}
			seen[field] = true
			d := result.Drift{Field: field, Change: change, Manager: mf.Manager, Time: when}
			if show != nil {
				d.Live, d.Applied = show(p)
				if change == "added" {
					d.Applied = "" // a field gantry does not apply
				}
			}
			switch {
			case byHand:
				drift = append(drift, d)
			case controllers[mf.Manager] && change == "added":
				// The cluster at work.
			default:
				explained = explained || change == "changed"
				managed = append(managed, d)
				if change == "changed" {
					managedPaths = append(managedPaths, p.Copy())
				}
			}
		})
	}
	if len(drift) == 0 && !explained && dryRun != nil && drifted(live, dryRun) {
		// The apply would change the object, yet no manager owns what
		// differs: its managed fields were removed or replaced.
		drift = append(drift, result.Drift{Field: ".", Change: "changed"})
	}
	sort.Slice(drift, func(i, j int) bool { return drift[i].Field < drift[j].Field })
	sort.Slice(managed, func(i, j int) bool { return managed[i].Field < managed[j].Field })
	return drift, managed, managedPaths
}

// maxShownValue bounds a value drift shows, in characters.
const maxShownValue = 80

// driftValues gives the values a drifted field holds live and as the
// apply would set it back, for reports: as JSON, masked as the object's
// diff is, and cut at maxShownValue characters. A Secret's values are
// never shown (nil), nor are the fields whose values came from an
// encrypted file.
func (pl *plan) driftValues() func(fieldpath.Path) (live, applied string) {
	if pl.obj.GetKind() == "Secret" && pl.obj.GroupVersionKind().Group == "" {
		return nil
	}
	var hidden []string
	if pl.hidden != nil {
		hidden = pl.hidden()
	}
	live, applied := MaskAlike(pl.existing, pl.obj.Unstructured, hidden), MaskAlike(pl.dryRun, pl.obj.Unstructured, hidden)
	return func(p fieldpath.Path) (string, string) {
		return shownValue(live, p, pl.mask), shownValue(applied, p, pl.mask)
	}
}

// shownValue is the value at p in u as JSON, masked and bounded; empty
// when u does not have the field.
func shownValue(u *unstructured.Unstructured, p fieldpath.Path, mask func(string) string) string {
	if u == nil {
		return ""
	}
	v, ok := resolve(u.Object, p)
	if !ok {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	s := string(b)
	if mask != nil {
		s = mask(s)
	}
	if r := []rune(s); len(r) > maxShownValue {
		s = string(r[:maxShownValue-1]) + "…"
	}
	return s
}

// removeAt removes the field at p from an object as unstructured holds
// it, when it is there.
func removeAt(obj map[string]any, p fieldpath.Path) {
	if len(p) == 0 {
		return
	}
	parent, ok := resolve(obj, p[:len(p)-1])
	if !ok {
		return
	}
	// Only a field of a map: removing a list element would shift the
	// others.
	if m, ok := parent.(map[string]any); ok && p[len(p)-1].FieldName != nil {
		delete(m, *p[len(p)-1].FieldName)
	}
}

// resolve finds the value at p in an object as unstructured holds it.
func resolve(obj any, p fieldpath.Path) (any, bool) {
	cur := obj
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[*pe.FieldName]; !ok {
				return nil, false
			}
		case pe.Key != nil:
			list, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			found := false
			for _, e := range list {
				m, ok := e.(map[string]any)
				if !ok {
					continue
				}
				match := true
				for _, f := range *pe.Key {
					v, ok := m[f.Name]
					if !ok || !value.Equals(value.NewValueInterface(v), f.Value) {
						match = false
						break
					}
				}
				if match {
					cur, found = e, true
					break
				}
			}
			if !found {
				return nil, false
			}
		case pe.Value != nil:
			list, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			found := false
			for _, e := range list {
				if value.Equals(value.NewValueInterface(e), *pe.Value) {
					cur, found = e, true
					break
				}
			}
			if !found {
				return nil, false
			}
		case pe.Index != nil:
			list, ok := cur.([]any)
			if !ok || *pe.Index >= len(list) {
				return nil, false
			}
			cur = list[*pe.Index]
		}
	}
	return cur, true
}
