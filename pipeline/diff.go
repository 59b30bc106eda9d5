package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// diff reports what apply would do, prune included, without writing and
// without taking the inventory's lock.
func (r *run) diff(ctx context.Context) error {
	if err := r.prepare(); err != nil {
		return err
	}
	// What depends on a Namespace or CRD of the set cannot be dry-run
	// without creating those, which a diff never does: it is checked
	// offline, and apply dry-runs it on the server too. The inventory is
	// read with the namespaces and the LISTs.
	r.planner = r.newPlanner()
	var prev *inventory.Inventory
	var err error
	r.readAtOnce(ctx, func() { prev, err = r.store.Load(ctx, r.opts.InventoryNamespace, r.opts.Inventory) })
	if err != nil {
		return err
	}
	r.prev, r.previous = prev, prev.Entries
	r.collectMasked() // with the newest revision's fields, now read
	if r.opts.Inventory != "" {
		if err := r.refuseEmpty(); err != nil {
			return err
		}
		if err := r.refuseLargePrune(); err != nil {
			return err
		}
	}
	if err := r.plan(ctx); err != nil {
		return err
	}
	if r.opts.Inventory != "" {
		// Again, with the orphans the plan's reads found.
		if err := r.refuseLargePrune(); err != nil {
			return err
		}
	}
	offline := 0
	var errs []error
	for _, pl := range r.plans {
		o := resultObject(pl.obj.Unstructured, r.sourceOf(pl.obj), "diff", result.Unchanged)
		o.Diff, o.Conflicts = pl.diff, pl.conflicts
		switch pl.kind {
		case planDeferred:
			o.Action = result.Created
			o.Diff = pl.withDiff(nil, pl.obj.Unstructured).diff
			if pl.offline {
				offline++
			}
		case planCreate:
			o.Action = result.Created
		case planConfigure:
			o.Action = result.Configured
		case planRecreate:
			o.Action = result.Recreated
		case planSkip:
			o.Action, o.Error = result.Skipped, pl.reason
		case planFailed:
			o.Action, o.Error = result.Failed, pl.err.Error()
			errs = append(errs, r.objectError(pl.obj, pl.err))
		}
		r.record(o, o.Action != result.Unchanged)
	}
	if offline > 0 {
		r.obs.Info(fmt.Sprintf("%s need a Namespace or CRD that the set creates: validated offline against their schemas; apply also dry-runs them on the server", nObjects(offline)))
	}
	if r.opts.Prune {
		stale := r.staleEntries()
		r.readStale(ctx, stale)
		for _, e := range stale {
			v, err := r.judge(ctx, e, false)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if v.live == nil {
				continue
			}
			if v.skip != "" {
				v.result.Action, v.result.Error = result.Skipped, v.skip
			}
			v.result.Stage = "diff"
			r.record(v.result, true)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s failed validation: %w", nObjects(len(errs)), errors.Join(errs...))
	}
	return nil
}

// lockExisting connects, takes the inventory's lock and loads it, for
// commands that act on an inventory that must already exist.
func (r *run) lockExisting(ctx context.Context) error {
	if err := r.ensureClients(); err != nil {
		return err
	}
	if err := r.lockAndLoad(ctx); err != nil {
		return err
	}
	if !r.prev.Exists() {
		return fmt.Errorf("inventory %s/%s not found", r.opts.InventoryNamespace, r.opts.Inventory)
	}
	return nil
}

// Delete removes every object an inventory tracks (except those annotated
// prune: disabled, protected namespaces, and objects no longer labelled as
// the inventory's), waits for them to be gone, and then removes the
// inventory. Entries whose deletion failed are kept.
func Delete(ctx context.Context, opts Options, connect Connector, obs Observer) *result.Result {
	r := newRun("delete", opts, connect, obs)
	r.res.Inventory = &result.Inventory{Name: opts.Inventory, Namespace: opts.InventoryNamespace}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	return r.execute(ctx, []stage{{name: "delete", reason: result.ReasonPruneFailed, stopOnError: true, run: r.deleteAll}})
}

func (r *run) deleteAll(ctx context.Context) error {
	if err := r.lockExisting(ctx); err != nil {
		return err
	}
	// With an empty desired set every entry is stale.
	r.objects = nil
	deleted, remaining, err := r.deleteStale(ctx, r.staleEntries(), "delete")
	errs := []error{err}
	// Wait until the deleted objects are gone (finalizers run), so that a
	// following apply does not race their termination.
	for _, u := range deleted {
		if err := waitGone(ctx, r.clients.Client, u); err != nil {
			errs = append(errs, fmt.Errorf("waiting for %s/%s to be deleted: %w", u.GetKind(), u.GetName(), err))
			break
		}
	}
	if len(remaining) == 0 {
		dctx, cancel := graceContext(ctx, 5*time.Second)
		defer cancel()
		// The revisions go first: an inventory without them can be
		// deleted again, revisions without an inventory would stay.
		if err := r.store.DeleteRevisions(dctx, r.prev); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, r.store.Delete(dctx, r.prev))
		}
	} else {
		entries := map[string]inventory.Entry{}
		for _, e := range remaining {
			entries[e.ID] = e
		}
		errs = append(errs, r.saveInventory(ctx, entries))
	}
	return errors.Join(errs...)
}
