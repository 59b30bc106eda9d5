package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// diff reports what apply would do, prune included, without writing and
// without taking the inventory's lock.
func (r *run) diff(ctx context.Context) error {
	if err := r.prepare(); err != nil {
		return err
	}
	prev, err := r.store.Load(ctx, r.opts.InventoryNamespace, r.opts.Inventory)
	if err != nil {
		return err
	}
	r.prev, r.previous = prev, prev.Entries
	p := newPlanner(r.clients.Client, r.clients.Mapper, r.objects, r.opts.Force)
	r.plans = p.planAll(ctx, r.objects, r.opts.Concurrency)
	var errs []error
	for _, pl := range r.plans {
		o := resultObject(pl.obj.Unstructured, pl.obj.Source, "diff", result.Unchanged)
		switch pl.kind {
		case planCreate, planDeferred:
			o.Action = result.Created
		case planConfigure, planRecreate:
			o.Action = result.Configured
		case planSkip:
			o.Action, o.Error = result.Skipped, pl.reason
		case planFailed:
			o.Action, o.Error = result.Failed, pl.err.Error()
			errs = append(errs, &ObjectError{Ref: ref(pl.obj), Source: pl.obj.Source, Err: pl.err})
		}
		r.record(o, o.Action != result.Unchanged)
	}
	if r.opts.Prune {
		for _, e := range r.staleEntries() {
			v, err := r.judge(ctx, e)
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
		return fmt.Errorf("%d objects failed validation: %w", len(errs), errors.Join(errs...))
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
	if err := r.ensureClients(); err != nil {
		return err
	}
	if err := r.lockAndLoad(ctx); err != nil {
		return err
	}
	if !r.prev.Exists() {
		return fmt.Errorf("inventory %s/%s not found", r.opts.InventoryNamespace, r.opts.Inventory)
	}
	// With an empty desired set every entry is stale.
	r.objects = nil
	stale := r.staleEntries()
	var errs errorList
	var deleted []*unstructured.Unstructured
	kept := make([]*inventory.Entry, len(stale))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.opts.Concurrency, 1))
	for i, e := range stale {
		g.Go(func() error {
			v, err := r.judge(gctx, e)
			if err != nil {
				kept[i] = &stale[i]
				errs.add(err)
				return nil
			}
			if v.live == nil {
				return nil
			}
			v.result.Stage = "delete"
			if v.skip != "" {
				v.result.Action, v.result.Error = result.Skipped, v.skip
				r.recordLocked(v.result)
				return nil
			}
			uid := v.live.GetUID()
			err = r.clients.Client.Delete(gctx, v.live, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
			if err != nil && !apierrors.IsNotFound(err) {
				kept[i] = &stale[i]
				v.result.Action, v.result.Error = result.Failed, apiMessage(err)
				errs.add(&ObjectError{Ref: v.result.Ref(), Err: fmt.Errorf("delete failed: %s", apiMessage(err))})
			} else {
				r.mu.Lock()
				deleted = append(deleted, v.live)
				r.mu.Unlock()
			}
			r.recordLocked(v.result)
			return nil
		})
	}
	_ = g.Wait()
	// Wait until the deleted objects are gone (finalizers run), so that a
	// following apply does not race their termination.
	for _, u := range deleted {
		if err := waitGone(ctx, r.clients.Client, u); err != nil {
			errs.add(fmt.Errorf("waiting for %s/%s to be deleted: %w", u.GetKind(), u.GetName(), err))
			break
		}
	}
	var remaining []inventory.Entry
	for _, k := range kept {
		if k != nil {
			remaining = append(remaining, *k)
		}
	}
	if len(remaining) == 0 {
		if err := r.store.Delete(context.WithoutCancel(ctx), r.prev); err != nil {
			errs.add(err)
		}
	} else {
		entries := map[string]inventory.Entry{}
		for _, e := range remaining {
			entries[e.ID] = e
		}
		if err := r.saveInventory(ctx, entries); err != nil {
			errs.add(err)
		}
	}
	return errs.err()
}

var _ = wait.PollUntilContextCancel
var _ = time.Second
