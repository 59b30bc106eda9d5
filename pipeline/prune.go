package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/diffs"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// protectedNamespaces are never deleted, whatever an inventory says.
var protectedNamespaces = map[string]bool{
	"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true,
}

// PruneLimit bounds how many of an inventory's objects one prune may
// delete: at most Count objects, or at most Percent of what the
// inventory lists. The zero value is the default guard against the
// mistakes that silently shrink a set (a folder renamed, a path mistyped,
// a manifest moved to another repository): no more than half of the
// inventory, when that is more than 10 objects.
type PruneLimit struct {
	Count   int
	Percent int
	// Given says Count or Percent was set.
	Given bool
}

// defaultPruneFloor: a prune of this many objects or fewer is never
// refused by the default guard.
const defaultPruneFloor = 10

func (l PruneLimit) String() string {
	switch {
	case !l.Given:
		return "max-prune's default (half of them)"
	case l.Percent > 0:
		return fmt.Sprintf("max-prune %d%%", l.Percent)
	}
	return fmt.Sprintf("max-prune %d", l.Count)
}

// allows says whether deleting stale of the listed objects is within the
// limit.
func (l PruneLimit) allows(stale, listed int) bool {
	switch {
	case !l.Given:
		return stale <= defaultPruneFloor || 2*stale <= listed
	case l.Percent > 0:
		return 100*stale <= l.Percent*listed
	}
	return stale <= l.Count
}

// refuseLargePrune refuses, before anything is written, a prune that
// would delete more of the inventory than MaxPrune allows.
func (r *run) refuseLargePrune() error {
	if !r.opts.Prune || len(r.objects) == 0 && r.opts.AllowEmpty {
		return nil
	}
	stale, listed := len(r.staleEntries()), len(r.previous)
	if r.opts.MaxPrune.allows(stale, listed) {
		return nil
	}
	return fmt.Errorf("prune would delete %d of the %d objects inventory %s/%s lists (%d%%), more than %s allows; nothing was written. "+
		"If that is meant (the set moved, or was renamed), set max-prune to %d or more, or to a percentage (100%% allows any prune)",
		stale, listed, r.opts.InventoryNamespace, r.opts.Inventory, 100*stale/max(listed, 1), r.opts.MaxPrune, stale)
}

// staleEntries are the previous inventory's entries that this run's set no
// longer has.
func (r *run) staleEntries() []inventory.Entry {
	current := map[string]bool{}
	for _, o := range r.objects {
		current[inventory.EntryFor(o.Unstructured).ID] = true
	}
	var stale []inventory.Entry
	for _, e := range r.previous {
		if !current[e.ID] {
			stale = append(stale, e)
		}
	}
	return stale
}

// pruneVerdict is what prune will do with one stale entry.
type pruneVerdict struct {
	entry inventory.Entry
	live  *unstructured.Unstructured // nil: already gone
	skip  string                     // why it is kept, when it is
	// stay keeps a skipped entry in the inventory: the object is still
	// gantry's until it is released.
	stay   bool
	result result.Object
}

// readStale reads many stale objects of one kind with one LIST, for judge
// (validate has usually listed their group already).
func (r *run) readStale(ctx context.Context, stale []inventory.Entry) {
	if r.planner == nil {
		r.planner = newPlanner(r.clients, nil, false)
	}
	var keys []objectKey
	for _, e := range stale {
		id, err := e.Parse()
		gvk, gerr := e.GroupVersionKind()
		if err == nil && gerr == nil {
			keys = append(keys, objectKey{groupKey{gvk, id.Namespace}, id.Name})
		}
	}
	r.planner.prefetch(ctx, keys, r.opts.Concurrency)
}

// judge reads a stale entry's object and decides whether it may be deleted.
func (r *run) judge(ctx context.Context, e inventory.Entry) (*pruneVerdict, error) {
	v := &pruneVerdict{entry: e}
	id, err := e.Parse()
	if err != nil {
		return nil, fmt.Errorf("inventory entry %q: %w", e.ID, err)
	}
	gvk, _ := e.GroupVersionKind()
	live := &unstructured.Unstructured{}
	err = r.planner.get(ctx, objectKey{groupKey{gvk, id.Namespace}, id.Name}, live)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return v, nil
	}
	if err != nil {
		return nil, &ObjectError{Ref: fmtID(id), Err: fmt.Errorf("not read: %w", err)}
	}
	v.live = live
	v.result = resultObject(live, "", "prune", result.Deleted)
	if d, err := diffs.Object(v.result.Ref(), live, nil); err == nil {
		v.result.Diff = d
	}
	labels := live.GetLabels()
	switch {
	case labels[inventory.NameLabel] != r.opts.Inventory || labels[inventory.NamespaceLabel] != r.opts.InventoryNamespace:
		v.skip = "not labelled as this inventory's (another inventory's, or never gantry's); left alone"
	case utils.AnyInMetadata(live, pruneDisabledSelector):
		v.skip = "annotated prune: disabled"
	case live.GetKind() == "Namespace" && live.GroupVersionKind().Group == "" && protectedNamespaces[live.GetName()]:
		v.skip = "a protected namespace is never deleted"
	case !r.opts.Force && appliedByFlux(live) != "":
		// Deleting it would be an outage: Flux recreates it, new UID.
		v.skip = fmt.Sprintf("now applied by %s; left alone (gantry release hands an inventory over; force deletes it anyway)", appliedByFlux(live))
		v.stay = true
	}
	if v.skip != "" {
		v.result.Diff = "" // kept: nothing changes
	}
	return v, nil
}

// deleteStale deletes the objects of stale entries concurrently, unless
// judge keeps them. It returns what it deleted and the entries whose
// deletion failed (to keep in the inventory for a retry).
func (r *run) deleteStale(ctx context.Context, stale []inventory.Entry, stage string) (deleted []*unstructured.Unstructured, kept []inventory.Entry, err error) {
	r.readStale(ctx, stale)
	var errs errorList
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.opts.Concurrency, 1))
	for _, e := range stale {
		g.Go(func() error {
			keep := func(err error) {
				r.mu.Lock()
				kept = append(kept, e)
				r.mu.Unlock()
				errs.add(err)
			}
			v, err := r.judge(gctx, e)
			if err != nil {
				keep(err)
				return nil
			}
			if v.live == nil {
				return nil // already gone
			}
			v.result.Stage = stage
			if v.skip != "" {
				v.result.Action, v.result.Error = result.Skipped, v.skip
				r.recordLocked(v.result)
				if v.stay {
					keep(nil)
				}
				return nil
			}
			uid := v.live.GetUID()
			err = r.clients.Client.Delete(gctx, v.live, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
			switch {
			case err != nil && !apierrors.IsNotFound(err):
				v.result.Action = result.Failed
				setError(&v.result, err, apiMessage(err))
				keep(&ObjectError{Ref: v.result.Ref(), Err: fmt.Errorf("delete failed: %w", err)})
			default:
				r.mu.Lock()
				deleted = append(deleted, v.live)
				r.mu.Unlock()
			}
			r.recordLocked(v.result)
			return nil
		})
	}
	_ = g.Wait()
	return deleted, kept, errs.err()
}

// prune deletes what the previous run applied and this one no longer has.
// A delete that fails keeps its entry, so the next run retries it.
func (r *run) prune(ctx context.Context) error {
	_, kept, pruneErr := r.deleteStale(ctx, r.staleEntries(), "prune")
	entries := map[string]inventory.Entry{}
	for _, e := range append(append([]inventory.Entry(nil), r.applied...), kept...) {
		entries[e.ID] = e
	}
	if err := r.saveInventory(ctx, entries); err != nil {
		return errors.Join(pruneErr, err)
	}
	return pruneErr
}
