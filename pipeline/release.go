package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// FluxManager is the field manager of Flux's kustomize-controller, the
// default next owner of what gantry releases.
const FluxManager = "kustomize-controller"

// gantryManagers are the managed-fields entries gantry's writes leave.
var gantryManagers = []ssa.FieldManager{
	{Name: FieldManager, ExactMatch: true, OperationType: metav1.ManagedFieldsOperationApply},
	{Name: FieldManager, ExactMatch: true, OperationType: metav1.ManagedFieldsOperationUpdate},
}

// Release stops gantry managing an inventory's objects without deleting
// any of them: gantry's inventory labels come off, the fields gantry's
// field manager owns are handed to opts.ReleaseTo (or left unowned when it
// is empty), so that the next owner's apply can drop fields; then the
// inventory and its lock are deleted. Objects no longer labelled as the
// inventory's are left as they are.
func Release(ctx context.Context, opts Options, connect Connector, obs Observer) *result.Result {
	r := newRun("release", opts, connect, obs)
	r.res.Inventory = &result.Inventory{Name: opts.Inventory, Namespace: opts.InventoryNamespace}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	return r.execute(ctx, []stage{{name: "release", reason: result.ReasonApplyFailed, stopOnError: true, run: r.releaseAll}})
}

func (r *run) releaseAll(ctx context.Context) error {
	if err := r.lockExisting(ctx); err != nil {
		return err
	}
	r.readStale(ctx, r.previous)
	var errs errorList
	var failed []inventory.Entry
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.opts.Concurrency, 1))
	for _, e := range r.previous {
		g.Go(func() error {
			o, err := r.releaseOne(gctx, e)
			if o != nil {
				r.recordLocked(*o)
			}
			if err != nil {
				r.mu.Lock()
				failed = append(failed, e)
				r.mu.Unlock()
				errs.add(err)
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := errs.err(); err != nil {
		// What was not released stays in the inventory, for a retry.
		entries := map[string]inventory.Entry{}
		for _, e := range failed {
			entries[e.ID] = e
		}
		if serr := r.saveInventory(ctx, entries); serr != nil {
			return errors.Join(err, serr)
		}
		return fmt.Errorf("%w (the inventory keeps the %d objects not released)", err, len(failed))
	}
	to := r.opts.ReleaseTo
	if to == "" {
		to = "no field manager"
	}
	r.obs.Info(fmt.Sprintf("fields gantry owned now belong to %s; inventory %s/%s deleted", to, r.opts.InventoryNamespace, r.opts.Inventory))
	dctx, cancel := graceContext(ctx, 5*time.Second)
	defer cancel()
	if err := r.store.DeleteRevisions(dctx, r.prev); err != nil {
		return err
	}
	return r.store.Delete(dctx, r.prev)
}

// releaseOne removes gantry's labels from one object and hands its
// fields over. It returns the object's outcome, nil when it is gone.
func (r *run) releaseOne(ctx context.Context, e inventory.Entry) (*result.Object, error) {
	id, err := e.Parse()
	if err != nil {
		return nil, fmt.Errorf("inventory entry %q: %w", e.ID, err)
	}
	gvk, _ := e.GroupVersionKind()
	live := &unstructured.Unstructured{}
	err = r.planner.get(ctx, objectKey{groupKey{gvk, id.Namespace}, id.Name}, live)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, &ObjectError{Ref: fmtID(id), Err: fmt.Errorf("not read: %w", err)}
	}
	o := resultObject(live, "", "release", result.Released)
	labels := live.GetLabels()
	ours := labels[inventory.NameLabel] == r.opts.Inventory && labels[inventory.NamespaceLabel] == r.opts.InventoryNamespace
	// A release that failed half-way took the labels off and kept the
	// entry: a retry finds the object unlabelled, its fields still
	// gantry's, and finishes handing them over.
	halfReleased := labels[inventory.NameLabel] == "" && labels[inventory.NamespaceLabel] == "" && ownedByGantry(live)
	if !ours && !halfReleased {
		o.Action, o.Error = result.Skipped, "not labelled as this inventory's (another inventory's, or never gantry's); left alone"
		return &o, nil
	}
	// Each patch is for this object only: a UID test keeps it off an
	// object of the same name created since.
	patch := func(p []ssa.JSONPatch, what string) error {
		if len(p) == 0 {
			return nil
		}
		ops := []any{map[string]string{"op": "test", "path": "/metadata/uid", "value": string(live.GetUID())}}
		for _, op := range p {
			ops = append(ops, op)
		}
		raw, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		// The patch answers with the object as it is now, for the next.
		if err := r.clients.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, raw), client.FieldOwner(FieldManager)); err != nil {
			o.Action, o.Error = result.Failed, fmt.Sprintf("%s: %s", what, apiMessage(err))
			return &ObjectError{Ref: o.Ref(), Err: fmt.Errorf("%s: %s", what, apiMessage(err))}
		}
		return nil
	}
	if err := patch(ssa.PatchRemoveLabels(live, []string{inventory.NameLabel, inventory.NamespaceLabel}), "removing gantry's labels"); err != nil {
		return &o, err
	}
	var managers []ssa.JSONPatch
	if r.opts.ReleaseTo != "" {
		if managers, err = ssa.PatchReplaceFieldsManagers(live, gantryManagers, r.opts.ReleaseTo); err != nil {
			return &o, err
		}
	} else {
		managers = ssa.PatchRemoveFieldsManagers(live, gantryManagers)
	}
	if err := patch(managers, "handing over gantry's fields"); err != nil {
		return &o, err
	}
	return &o, nil
}

// ownedByGantry says whether gantry's field manager still owns fields of u.
func ownedByGantry(u *unstructured.Unstructured) bool {
	for _, m := range u.GetManagedFields() {
		if m.Manager == FieldManager {
			return true
		}
	}
	return false
}

// appliedByFlux names the Flux controller that now applies an object, or
// "" when none does: Flux's ownership labels, or a field manager of its
// controllers with apply operations.
func appliedByFlux(u *unstructured.Unstructured) string {
	l := u.GetLabels()
	if n := l["kustomize.toolkit.fluxcd.io/name"]; n != "" {
		return fmt.Sprintf("Flux Kustomization %s/%s", l["kustomize.toolkit.fluxcd.io/namespace"], n)
	}
	if n := l["helm.toolkit.fluxcd.io/name"]; n != "" {
		return fmt.Sprintf("Flux HelmRelease %s/%s", l["helm.toolkit.fluxcd.io/namespace"], n)
	}
	for _, m := range u.GetManagedFields() {
		if m.Operation == metav1.ManagedFieldsOperationApply && (m.Manager == FluxManager || m.Manager == "helm-controller") {
			return "Flux's " + m.Manager
		}
	}
	return ""
}
