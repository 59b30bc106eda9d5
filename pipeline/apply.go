package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources"
)

// validate prepares the set (namespaces, inventory labels), takes the
// inventory's lock, and validates every object before anything is written:
// a server-side dry-run of each object the cluster can check now, an
// offline check of the objects whose Namespace or CRD comes with the set,
// then, when everything passed, the creation of those Namespaces and CRDs
// and a dry-run of their dependents, undone when a dependent fails. Every
// failure is collected and reported at once.
func (r *run) validate(ctx context.Context) error {
	if err := r.prepare(); err != nil {
		return err
	}
	if r.opts.Inventory != "" && r.lease == nil {
		// Nothing is written under the inventory before its Lease is
		// held (hold opens the fence), whatever path the plan takes.
		r.clients.Fence.Hold(func() error { return errNoLease })
	}
	if err := r.checkRuleSchemas(ctx); err != nil {
		return err
	}
	// The revision is compressed while the cluster is asked.
	revision := r.prepareRevision()
	lockLater, err := r.readAndPlan(ctx, r.mayPlanUnlocked())
	if err != nil {
		return err
	}
	if err := revision(); err != nil {
		return err
	}
	if r.unlocked != nil {
		again, err := r.settleUnlocked(ctx)
		if err != nil {
			return err
		}
		if again {
			if lockLater, err = r.readAndPlan(ctx, false); err != nil {
				return err
			}
		}
	}
	needs := r.provisionNeeds(lockLater)
	if lockLater && len(needs) == 0 {
		// The inventory's namespace was not there when the run looked,
		// and was by the time it planned (another run created it): the
		// Lease can be taken now, and what was planned without it is
		// planned again under it.
		if err := r.lockAndLoad(ctx); err != nil {
			return err
		}
		if lockLater, err = r.readAndPlan(ctx, false); err != nil {
			return err
		}
		needs = r.provisionNeeds(lockLater)
	}
	if len(needs) > 0 {
		return r.provision(ctx, needs, lockLater)
	}
	return nil
}

// readAndPlan reads the cluster and plans every object. unlocked plans
// before the inventory's Lease is taken (see settleUnlocked); otherwise
// the Lease is taken first, unless the inventory's namespace is still to
// be created (lockLater).
func (r *run) readAndPlan(ctx context.Context, unlocked bool) (lockLater bool, err error) {
	r.planner = r.newPlanner()
	var pk *peeked
	if unlocked {
		r.planner.seen = map[objectKey]string{}
		pk = r.readUnlocked(ctx)
	} else {
		r.planner.findAbsent(ctx, r.opts.Concurrency)
	}
	if lockLater, err = r.lockUnlessNew(ctx, pk); err != nil {
		return false, err
	}
	// The fields the newest revision masked, now that it is read, before
	// any live object is: a value rotated since, or dropped from the set,
	// is masked in the diff as the apply that set it masked it.
	r.collectMasked()
	if err := r.refuseEmpty(); err != nil {
		return false, err
	}
	if err := r.refuseLargePrune(); err != nil {
		return false, err
	}
	if err := r.plan(ctx); err != nil {
		return false, err
	}
	// Again, with the orphans the plan's reads found.
	if err := r.refuseLargePrune(); err != nil {
		return false, err
	}
	return lockLater, r.validationFailures("validate")
}

// refuseEmpty refuses a build with no objects when prune would then delete
// everything the inventory holds, unless allow-empty.
func (r *run) refuseEmpty() error {
	if len(r.objects) == 0 && r.opts.Prune && len(r.prev.Entries) > 0 && !r.opts.AllowEmpty {
		return fmt.Errorf("the build produced no objects, so prune would delete all %d objects of inventory %s/%s; set allow-empty to allow that",
			len(r.prev.Entries), r.opts.InventoryNamespace, r.opts.Inventory)
	}
	return nil
}

// validationFailures records every failed plan, and when there is one,
// every other object as skipped (so that the report lists the whole set
// and its counts add up), and returns the failures joined.
func (r *run) validationFailures(stage string) error {
	var errs []error
	for _, pl := range r.plans {
		if pl.kind == planFailed {
			oe := r.objectError(pl.obj, pl.err)
			errs = append(errs, oe)
			o := failedObject(pl.obj, oe, stage)
			o.Conflicts = pl.conflicts
			r.record(o, true)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	for _, pl := range r.plans {
		if pl.kind != planFailed {
			o := resultObject(pl.obj.Unstructured, r.sourceOf(pl.obj), stage, result.Skipped)
			o.Error = "not applied: other objects failed validation"
			r.record(o, false)
		}
	}
	return fmt.Errorf("%d of %s failed validation, nothing was applied: %w", len(errs), nObjects(len(r.plans)), joinErrors(errs))
}

// lockUnlessNew takes the inventory's lock and loads it, unless the
// inventory's namespace is one the set brings and that does not exist yet
// (the planner found it absent): then there is nothing to load, and the
// lock is taken once that namespace has been created (lockLater). A plan
// made before the Lease (pk read) takes it later, in settleUnlocked.
func (r *run) lockUnlessNew(ctx context.Context, pk *peeked) (lockLater bool, err error) {
	if r.lease != nil {
		return false, nil // a rollback chose its revision under it
	}
	if ns := r.opts.InventoryNamespace; r.planner.absent[ns] {
		r.prev = &inventory.Inventory{Name: r.opts.Inventory, Namespace: ns}
		r.previous = nil
		return true, nil
	}
	if r.usePeeked(pk) {
		return false, nil
	}
	return false, r.lockAndLoad(ctx)
}

// prepare connects, completes namespaces and labels every object with its
// inventory.
func (r *run) prepare() error {
	if err := r.ensureClients(); err != nil {
		return err
	}
	r.collectMasked()
	if err := r.setNamespaces(); err != nil {
		return err
	}
	// Only now, with every namespace given, are two objects that name one
	// object (one without a namespace, one with the default) seen as one.
	if err := sources.RefuseDuplicates(r.objects, func(o *sources.Object) string { return r.objectError(o, nil).Source }); err != nil {
		r.res.Reason = result.ReasonBuildFailed
		return err
	}
	if r.opts.Inventory == "" {
		return nil // a diff without an inventory: nothing to label with
	}
	for _, o := range r.objects {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[inventory.NameLabel] = r.opts.Inventory
		labels[inventory.NamespaceLabel] = r.opts.InventoryNamespace
		o.SetLabels(labels)
	}
	return nil
}

// lockAndLoad takes the inventory's lease (waiting up to the deadline) and
// reads the previous inventory.
func (r *run) lockAndLoad(ctx context.Context) error {
	if r.lease != nil {
		return nil // taken already, to choose a revision under it
	}
	if held := r.opts.lease; held != nil {
		// Handed over by the atomic apply this rollback undoes.
		r.opts.lease = nil
		return r.hold(ctx, held)
	}
	held, err := r.takeLease(ctx)
	if err != nil {
		return err
	}
	return r.hold(ctx, held)
}

// takeLease takes the inventory's Lease, waiting while another run holds
// it, up to the deadline.
func (r *run) takeLease(ctx context.Context) (*inventory.Held, error) {
	held, err := r.store.Lock(ctx, r.opts.InventoryNamespace, r.opts.Inventory, r.opts.Holder, inventory.LockOptions{
		Duration: r.opts.LeaseDuration,
		OnWait: func(holder string) {
			r.obs.Info(fmt.Sprintf("inventory %s/%s is locked by %s; waiting", r.opts.InventoryNamespace, r.opts.Inventory, holder))
		},
	})
	if err != nil {
		var heldErr *inventory.HeldError
		if errors.As(err, &heldErr) {
			r.res.Reason = result.ReasonLocked
		}
		return nil, err
	}
	return held, nil
}

// hold makes held the run's Lease and reads the inventory under it. A
// correction that expects a revision stops when another run recorded one
// since.
func (r *run) hold(ctx context.Context, held *inventory.Held) error {
	// From here on every write asks the Lease first, and its loss stops
	// the run where it is: nothing new is sent, the inventory included.
	r.lease = held
	r.clients.Fence.Hold(held.Check)
	go func() {
		select {
		case <-held.Lost():
			r.stopRun(held.Check())
		case <-ctx.Done():
		}
	}()
	prev, err := r.store.Load(ctx, r.opts.InventoryNamespace, r.opts.Inventory)
	if err != nil {
		return err
	}
	r.prev = prev
	r.previous = append([]inventory.Entry(nil), prev.Entries...)
	if want := r.opts.expect; want != nil {
		if got := prev.Newest(); got == nil || got.Number != want.Number || got.Digest != want.Digest {
			r.res.Reason = result.ReasonLocked
			return fmt.Errorf("inventory %s/%s was applied by another run (%s) since its drift was read: nothing corrected; run drift again",
				r.opts.InventoryNamespace, r.opts.Inventory, describe(got))
		}
	}
	return nil
}

func describe(rv *inventory.Revision) string {
	if rv == nil {
		return "no revision recorded"
	}
	return fmt.Sprintf("revision %d, %s", rv.Number, rv.Outcome)
}

// apply writes the objects in stages: cluster definitions (CRDs,
// Namespaces, ClusterRoles), then *Class kinds, then everything else, each
// stage concurrently and established before the next. Only objects that
// changed are written. The inventory lists what is about to be written
// before it is, and whatever happens, it is saved again with every previous
// entry plus what was written (or may have been), so nothing is forgotten.
func (r *run) apply(ctx context.Context) error {
	r.wrote = true
	var defs, classes, rest []*plan
	for _, pl := range r.plans {
		switch {
		case utils.IsClusterDefinition(pl.obj.Unstructured):
			defs = append(defs, pl)
		case utils.IsClassDefinition(pl.obj.Unstructured):
			classes = append(classes, pl)
		default:
			rest = append(rest, pl)
		}
	}
	groups := [][]*plan{defs, classes, rest}

	// Write ahead: the inventory lists every object about to be written
	// before any is, so that a run that dies, or loses the API server, in
	// the middle of the apply leaves nothing carrying the inventory's
	// labels unlisted. What turns out not to be written is dropped again
	// when the inventory is saved below.
	ahead := map[string]inventory.Entry{}
	for _, e := range r.previous {
		ahead[e.ID] = e
	}
	adoptedAhead := false
	var prior []*unstructured.Unstructured
	for _, pl := range r.plans {
		if pl.kind != planSkip && pl.kind != planFailed && pl.kind != planUnchanged {
			e := inventory.EntryFor(pl.obj.Unstructured)
			if pl.adopts && pl.existing != nil {
				prior = append(prior, priorContent(pl.existing))
			}
			if pl.adopts {
				// It exists and does not carry this inventory's labels:
				// gantry did not make it, whatever the inventory's list
				// (which others may edit) says. Recorded as adopted in
				// the same write, before it is taken over, so that a run
				// killed after the write still leaves an undo that
				// releases it rather than deletes it.
				r.prev.Adopted = append(r.prev.Adopted, e.ID)
				adoptedAhead, r.recordsChanged = true, true
			}
			ahead[e.ID] = e
		}
	}
	// What the adopted objects held before is kept in the revision, so
	// that an undo gives it back; a run that adopts records a revision
	// even when its set is the newest one's.
	adopting := len(prior) > 0 && r.revision != nil && !r.begun
	if adopting {
		if err := r.revision.SetPrior(prior, r.liveMasked); err != nil {
			r.obs.Info(fmt.Sprintf("warning: the content of the %d objects this run takes over, as it was before, is not kept (%v): an undo releases them as they are then", len(prior), err))
		}
	}
	// The revision is recorded, Pending, in the same write.
	if r.beginRevision(ctx, adopting) || adoptedAhead || !sameEntries(ahead, r.prev.Entries) {
		if err := r.saveInventory(ctx, ahead); err != nil {
			return fmt.Errorf("listing the objects about to be written in the inventory, before writing any: %w", err)
		}
	}

	var applyErr error
	for gi, group := range groups {
		if len(group) == 0 {
			continue
		}
		if err := r.applyGroup(ctx, group); err != nil {
			applyErr = err
			break
		}
		// The next stages wait only for what their objects need: a CRD
		// of theirs established, their Namespace active. The wait stage
		// checks everything else.
		needed := neededBy(group, groups[gi+1:])
		if err := r.waitEstablished(ctx, needed, 200*time.Millisecond); err != nil {
			applyErr = err
			break
		}
		if gi == 0 && hasCreatedCRD(needed) {
			// The REST mapper remembers which kinds did not exist;
			// a fresh one learns the new CRDs.
			clients, err := r.clients.Reconnect()
			if err != nil {
				applyErr = err
				break
			}
			r.clients = clients
		}
	}

	entries := map[string]inventory.Entry{}
	for _, e := range r.previous {
		entries[e.ID] = e
	}
	for _, pl := range r.plans {
		i, ok := r.byID[object.UnstructuredToObjMetadata(pl.obj.Unstructured).String()]
		if !ok {
			continue
		}
		switch o := r.res.Objects[i]; {
		case o.Action != result.Failed:
			e := inventory.EntryFor(pl.obj.Unstructured)
			if _, listed := entries[e.ID]; !listed && o.Action != result.Created {
				// It was there before gantry applied it: an undo
				// releases it rather than delete it.
				r.prev.Adopted = append(r.prev.Adopted, e.ID)
				r.recordsChanged = true
			}
			entries[e.ID] = e
			r.applied = append(r.applied, e)
		case o.Unanswered && (writes(pl.kind) || pl.kind == planDeferred):
			// It may have been written: listed, a later run applies or
			// prunes it; a prune of an object that is not there is a
			// no-op. A deferred object was planned again, and perhaps
			// written, in its stage (applyGroup).
			e := inventory.EntryFor(pl.obj.Unstructured)
			entries[e.ID] = e
		}
	}
	// Prune saves the inventory next in any case; saving here as well only
	// matters when it records something new.
	if applyErr == nil && r.opts.Prune && sameEntries(entries, r.prev.Entries) && !r.recordsChanged {
		return nil
	}
	if err := r.saveInventory(ctx, entries); err != nil {
		return errors.Join(applyErr, err)
	}
	return applyErr
}

func sameEntries(m map[string]inventory.Entry, list []inventory.Entry) bool {
	if len(m) != len(list) {
		return false
	}
	for _, e := range list {
		if m[e.ID] != e {
			return false
		}
	}
	return true
}

// applyGroup plans the deferred objects of one stage now that what they
// depend on exists, then writes the changed ones concurrently.
func (r *run) applyGroup(ctx context.Context, group []*plan) error {
	p := r.newPlanner()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.opts.Concurrency, 1))
	for i, pl := range group {
		if pl.kind == planDeferred {
			g.Go(func() error {
				// Discovery can lag a moment behind an established CRD.
				_ = wait.PollUntilContextTimeout(gctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
					group[i] = p.plan(ctx, pl.obj)
					return group[i].kind != planDeferred, nil
				})
				return nil
			})
		}
	}
	_ = g.Wait()

	var errs errorList
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(max(r.opts.Concurrency, 1))
	for _, pl := range group {
		g.Go(func() error {
			action, err := r.write(gctx, pl)
			o := resultObject(pl.obj.Unstructured, r.sourceOf(pl.obj), "apply", action)
			o.Diff, o.Conflicts = pl.diff, pl.conflicts
			if err != nil {
				o.Action = result.Failed
				setError(&o, err, err.Error())
				oe := r.objectError(pl.obj, err)
				o.Source = oe.Source
				errs.add(oe)
			} else if action == result.Skipped {
				o.Error = pl.reason
			}
			r.recordLocked(o)
			return nil
		})
	}
	_ = g.Wait()
	return errs.err()
}

// writes reports whether carrying out a plan of this kind writes the
// object.
func writes(k planKind) bool {
	return k == planCreate || k == planConfigure || k == planRecreate || k == planProvisioned
}

// write carries out one plan.
func (r *run) write(ctx context.Context, pl *plan) (result.Action, error) {
	c := r.clients.Client
	switch pl.kind {
	case planUnchanged:
		return result.Unchanged, nil
	case planProvisioned:
		if pl.again {
			if err := applyObject(ctx, r.clients, pl); err != nil {
				return result.Failed, err
			}
		}
		return result.Created, nil
	case planSkip:
		return result.Skipped, nil
	case planFailed:
		return result.Failed, pl.err
	case planDeferred:
		return result.Failed, fmt.Errorf("still cannot be validated: %s", pl.reason)
	case planRecreate:
		uid := pl.existing.GetUID()
		err := c.Delete(ctx, pl.existing, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return result.Failed, fmt.Errorf("recreating (immutable field changed): delete: %w", err)
		}
		if err := waitGone(ctx, c, pl.existing); err != nil {
			return result.Failed, fmt.Errorf("recreating (immutable field changed): %w", err)
		}
		if err := applyObject(ctx, r.clients, pl); err != nil {
			return result.Failed, err
		}
		return result.Recreated, nil
	case planCreate:
		if err := applyObject(ctx, r.clients, pl); err != nil {
			return result.Failed, err
		}
		return result.Created, nil
	case planConfigure:
		if pl.cleanup {
			if err := takeOverFromKubectl(ctx, c, pl.existing, pl.takeOver...); err != nil {
				return result.Failed, err
			}
		}
		if err := applyObject(ctx, r.clients, pl); err != nil {
			return result.Failed, err
		}
		return result.Configured, nil
	}
	return result.Failed, fmt.Errorf("unknown plan %d", pl.kind)
}

// applyObject writes the plan's object with the request body its dry-run
// sent.
func applyObject(ctx context.Context, c *kube.Clients, pl *plan) error {
	body := pl.body
	if body == nil {
		var err error
		if body, err = applyBody(pl.obj.Unstructured); err != nil {
			return err
		}
	}
	if err := c.Apply(ctx, pl.obj.Unstructured, body, FieldManager, true, false, nil); err != nil {
		return withAPIMessage(err)
	}
	return nil
}

// applyBody is the apply request for u. A CRD's conversion webhook CA
// bundle that is not a valid certificate is dropped, as Flux does.
func applyBody(u *unstructured.Unstructured) ([]byte, error) {
	return kube.ApplyBody(appliedObject(u))
}

// appliedObject is u as gantry applies it: a CRD without the caBundle a
// conversion webhook's controller fills in.
func appliedObject(u *unstructured.Unstructured) *unstructured.Unstructured {
	if utils.IsCRD(u) {
		u = u.DeepCopy()
		utils.RemoveCABundleFromCRD(u)
	}
	return u
}

// priorContent is a live object as an undo gives it back: its content,
// without what the server keeps of its own (status, managed fields,
// versions). The uid stays, so that it is given back to this object
// only, never to one made since under its name.
func priorContent(live *unstructured.Unstructured) *unstructured.Unstructured {
	u := live.DeepCopy()
	for _, f := range []string{"managedFields", "resourceVersion", "creationTimestamp", "generation", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	return u
}

// takeOverFromKubectl removes kubectl's last-applied annotation and hands
// the fields of kubectl's managers, and of the extra ones, to gantry's.
func takeOverFromKubectl(ctx context.Context, c client.Client, live *unstructured.Unstructured, extra ...ssa.FieldManager) error {
	patches := ssa.PatchRemoveAnnotations(live, takeOver.annotations)
	mp, err := ssa.PatchReplaceFieldsManagers(live, append(slices.Clone(takeOver.managers), extra...), FieldManager)
	if err != nil {
		return err
	}
	patches = append(patches, mp...)
	if len(patches) == 0 {
		return nil
	}
	raw, err := json.Marshal(patches)
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, live.DeepCopy(), client.RawPatch(types.JSONPatchType, raw), client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("taking over from kubectl: %s", apiMessage(err))
	}
	return nil
}

func waitGone(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(u.GroupVersionKind())
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(u), probe)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil
	})
}

// neededBy returns the plans of group that objects of the later stages
// depend on: the CRDs of their kinds and the Namespaces they are in.
func neededBy(group []*plan, later [][]*plan) []*plan {
	kinds := map[schema.GroupKind]bool{}
	namespaces := map[string]bool{}
	for _, stage := range later {
		for _, pl := range stage {
			kinds[pl.obj.GroupVersionKind().GroupKind()] = true
			if ns := pl.obj.GetNamespace(); ns != "" {
				namespaces[ns] = true
			}
		}
	}
	var needed []*plan
	for _, pl := range group {
		u := pl.obj.Unstructured
		if gk, ok := object.GetCRDGroupKind(u); ok && kinds[gk] || utils.IsNamespace(u) && namespaces[u.GetName()] {
			needed = append(needed, pl)
		}
	}
	return needed
}

func hasCreatedCRD(group []*plan) bool {
	for _, pl := range group {
		// A provisioned CRD was learnt by the REST mapper in validate.
		if utils.IsCRD(pl.obj.Unstructured) && pl.kind != planUnchanged && pl.kind != planSkip && pl.kind != planProvisioned {
			return true
		}
	}
	return false
}

// waitEstablished waits until the objects of a definition stage are ready
// (CRDs established, Namespaces active), so the next stage can use them.
func (r *run) waitEstablished(ctx context.Context, group []*plan, interval time.Duration) error {
	var set object.ObjMetadataSet
	for _, pl := range group {
		if pl.kind == planCreate || pl.kind == planConfigure || pl.kind == planRecreate {
			set = append(set, object.UnstructuredToObjMetadata(pl.obj.Unstructured))
		}
	}
	if len(set) == 0 {
		return nil
	}
	poller := r.statusPoller()
	m := ssa.NewResourceManager(r.clients.Client, poller, ssa.Owner{Field: FieldManager, Group: "gantry.dev"})
	deadline, ok := ctx.Deadline()
	timeout := time.Minute
	if ok {
		timeout = time.Until(deadline)
	}
	err := m.WaitForSetWithContext(ctx, set, ssa.WaitOptions{Interval: interval, Timeout: timeout})
	if err != nil {
		return fmt.Errorf("waiting for definitions to be established: %w", err)
	}
	// The REST mapper learns the new kinds on its next miss.
	return nil
}

// inventoryAsSaved says whether inv, holding entries, is what this run
// would save: the same objects, source, revision and gantry.
func (r *run) inventoryAsSaved(inv *inventory.Inventory, entries map[string]inventory.Entry) bool {
	source, digest := r.opts.Source, ""
	if r.res.Artifact != nil {
		source, digest = r.res.Artifact.URL, r.res.Artifact.Digest
	}
	return inv.Exists() && sameEntries(entries, inv.Entries) && inv.Source == source && inv.ArtifactDigest == digest &&
		inv.Revision == r.res.Revision && inv.GantryVersion == r.opts.Version && !r.recordsChanged
}

func (r *run) saveInventory(ctx context.Context, entries map[string]inventory.Entry) error {
	inv := r.prev
	// A run that changes nothing leaves the inventory as it is: the same
	// objects, from the same revision, by the same gantry.
	// It is compared with the stored inventory, not with this run's copy:
	// another run may have written it meanwhile.
	if r.inventoryAsSaved(inv, entries) {
		if r.confirmed {
			return nil // confirmed when the plan was, with no Lease
		}
		sctx, cancel := graceContext(ctx, 5*time.Second)
		defer cancel()
		err := r.store.Confirm(sctx, inv)
		r.unsaved = err != nil
		return err
	}
	inv.Entries = inv.Entries[:0]
	for _, e := range entries {
		inv.Entries = append(inv.Entries, e)
	}
	inv.Source, inv.Revision, inv.GantryVersion = r.opts.Source, r.res.Revision, r.opts.Version
	inv.ArtifactDigest = ""
	if r.res.Artifact != nil {
		inv.Source, inv.ArtifactDigest = r.res.Artifact.URL, r.res.Artifact.Digest
	}
	inv.LastApplied = time.Now()
	inv.WrittenBy = r.opts.Holder
	// Saving must not fail because the run's deadline just passed: losing
	// the record of what was written is worse than a late write.
	sctx, cancel := graceContext(ctx, 5*time.Second)
	defer cancel()
	if err := r.store.Save(sctx, inv); err != nil {
		r.unsaved = true
		return err
	}
	r.recordsChanged, r.unsaved = false, false
	return nil
}
