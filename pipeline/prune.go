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
