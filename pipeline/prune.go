package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/diffs"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/kube"
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
	unlisted := ""
	if n := stale - len(r.staleListed()); n > 0 {
		unlisted = fmt.Sprintf(" (%d of them labelled for it but listed nowhere)", n)
	}
	return fmt.Errorf("prune would delete %d of the %d objects inventory %s/%s lists%s (%d%%), more than %s allows; nothing was written. "+
		"If that is meant (the set moved, or was renamed), set max-prune to %d or more, or to a percentage (100%% allows any prune)",
		stale, listed, r.opts.InventoryNamespace, r.opts.Inventory, unlisted, 100*stale/max(listed, 1), r.opts.MaxPrune, stale)
}

// staleEntries are the previous inventory's entries that this run's set no
// longer has, and the orphans validate's reads found.
func (r *run) staleEntries() []inventory.Entry {
	known := map[string]bool{}
	for _, o := range r.objects {
		known[inventory.EntryFor(o.Unstructured).ID] = true
	}
	for _, e := range r.previous {
		known[e.ID] = true
	}
	return append(r.staleListed(), r.orphans(known)...)
}

// staleListed are the previous inventory's entries that this run's set no
// longer has.
func (r *run) staleListed() []inventory.Entry {
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

// orphans are objects validate's reads found that carry this inventory's
// labels and gantry's apply, but that neither the set nor the inventory
// (known) lists. A run that lost its Lease can leave one: a write it had
// sent before it was stopped may land after the run that took over saved
// its inventory. They are pruned as stale entries are, behind the same
// guards, so they do not outlive the next run. An object a controller
// owns is never one: it may have copied its owner's labels.
func (r *run) orphans(known map[string]bool) []inventory.Entry {
	p := r.planner
	if p == nil {
		return nil
	}
	<-p.ready // the reads end with the run's context, if not before
	var out []inventory.Entry
	for _, u := range p.live {
		l := u.GetLabels()
		if l[inventory.NameLabel] != r.opts.Inventory || l[inventory.NamespaceLabel] != r.opts.InventoryNamespace ||
			metav1.GetControllerOfNoCopy(u) != nil || !appliedByGantry(u) {
			continue
		}
		if e := inventory.EntryFor(u); !known[e.ID] {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b inventory.Entry) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// appliedByGantry says whether gantry's server-side apply wrote u.
func appliedByGantry(u *unstructured.Unstructured) bool {
	for _, m := range u.GetManagedFields() {
		if m.Manager == FieldManager && m.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// pruneVerdict is what prune will do with one stale entry.
type pruneVerdict struct {
	entry inventory.Entry
	live  *unstructured.Unstructured // nil: already gone
	skip  string                     // why it is kept, when it is
	// stay keeps a skipped entry in the inventory: the object is still
	// gantry's until it is released.
	stay bool
	// refused: kept because another inventory stands on it; the run
	// fails naming it.
	refused bool
	result  result.Object
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

// judge reads a stale entry's object and decides whether it may be
// deleted: from what validate read, or, fresh, from the cluster now.
func (r *run) judge(ctx context.Context, e inventory.Entry, fresh bool) (*pruneVerdict, error) {
	v := &pruneVerdict{entry: e}
	id, err := e.Parse()
	if err != nil {
		return nil, fmt.Errorf("inventory entry %q: %w", e.ID, err)
	}
	gvk, _ := e.GroupVersionKind()
	live := &unstructured.Unstructured{}
	read := func(gvk schema.GroupVersionKind) error {
		if fresh {
			live.SetGroupVersionKind(gvk)
			return r.clients.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, live)
		}
		return r.planner.get(ctx, objectKey{groupKey{gvk, id.Namespace}, id.Name}, live)
	}
	err = read(gvk)
	if meta.IsNoMatchError(err) {
		// The version it was applied at is no longer served (an
		// upgraded cluster, a CRD version no longer served): the
		// object lives on at the versions that are.
		m, merr := r.clients.Mapper.RESTMapping(gvk.GroupKind())
		switch {
		case meta.IsNoMatchError(merr):
			return v, nil // the kind is served at no version: nothing of it exists
		case merr != nil:
			return nil, &ObjectError{Ref: fmtID(id), Err: fmt.Errorf("not read: looking up the versions of %s: %w", gvk.GroupKind(), merr)}
		}
		err = read(m.GroupVersionKind)
	}
	if apierrors.IsNotFound(err) {
		return v, nil
	}
	if err != nil {
		return nil, &ObjectError{Ref: fmtID(id), Err: fmt.Errorf("not read: %w", err)}
	}
	v.live = live
	r.maskLive(live)
	v.result = resultObject(live, "", "prune", result.Deleted)
	if d, err := diffs.ObjectMasked(v.result.Ref(), MaskAlike(live, nil, r.liveMasked[inventory.EntryFor(live).ID]), nil, r.opts.Mask); err == nil {
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
	case !r.opts.DeleteFluxApplied && appliedByFlux(live) != "":
		// Deleting it would be an outage: Flux recreates it, new UID.
		v.skip = fmt.Sprintf("now applied by %s; left alone (gantry release hands an inventory over; delete-flux-applied deletes it anyway)", appliedByFlux(live))
		v.stay = true
	case r.res.Command != "delete":
		// A set that still stands on it keeps it, listed, until it
		// no longer does.
		why, err := r.standsOn(ctx, live)
		if err != nil {
			return nil, &ObjectError{Ref: v.result.Ref(), Err: err}
		}
		v.skip, v.stay = why, why != ""
	}
	if v.skip == "" {
		// Ground another inventory stands on: kept, and the run fails
		// naming it, for prune and delete alike.
		why, err := r.othersGround(ctx, live)
		if err != nil {
			return nil, &ObjectError{Ref: v.result.Ref(), Err: err}
		}
		v.skip, v.stay, v.refused = why, why != "", why != ""
	}
	if v.skip != "" {
		v.result.Diff = "" // kept: nothing changes
	}
	return v, nil
}

// standsOn says why deleting live would pull the ground from under the
// set, or "" when it would not: a Namespace that holds objects of this
// set or the inventory itself (deleting it deletes them too), a CRD whose
// kind this set still applies, or whose custom resources the cluster
// still holds (deleting it deletes every one of them).
func (r *run) standsOn(ctx context.Context, live *unstructured.Unstructured) (string, error) {
	if utils.IsNamespace(live) {
		name := live.GetName()
		n := 0
		for _, o := range r.objects {
			if o.GetNamespace() == name {
				n++
			}
		}
		switch {
		case n > 0:
			return fmt.Sprintf("kept: it holds %d objects of this set, which deleting it would delete; the Namespace stays in the inventory", n), nil
		case name == r.opts.InventoryNamespace:
			return "kept: it holds this inventory and its Lease; the Namespace stays in the inventory", nil
		}
		return "", nil
	}
	gk, ok := object.GetCRDGroupKind(live)
	if !ok {
		return "", nil
	}
	for _, o := range r.objects {
		if o.GroupVersionKind().GroupKind() == gk {
			return fmt.Sprintf("kept: this set still applies %s resources, which deleting the CRD would delete; it stays in the inventory", gk.Kind), nil
		}
	}
	if r.opts.PruneCRDsWithResources {
		return "", nil
	}
	cr, err := anyCustomResource(ctx, r.clients.Client, live)
	if err != nil {
		return "", fmt.Errorf("not deleted: cannot tell whether %s resources exist (deleting the CRD would delete them): %w", gk.Kind, err)
	}
	if cr != "" {
		return fmt.Sprintf("kept: %s resources still exist in the cluster (such as %s), and deleting the CRD would delete every one; it stays in the inventory (prune-crds-with-resources allows it)", gk.Kind, cr), nil
	}
	return "", nil
}

// anyCustomResource names one custom resource of the live CRD crd, read
// at a version it serves; "" when there is none.
func anyCustomResource(ctx context.Context, c client.Client, crd *unstructured.Unstructured) (string, error) {
	return customResource(ctx, c, crd, nil)
}

// customResource names one custom resource of the live CRD crd, read at
// a version it serves, that skip (when given) does not pass over; ""
// when there is none. Without skip, one LIST of one item answers.
func customResource(ctx context.Context, c client.Client, crd *unstructured.Unstructured, skip func(*unstructured.Unstructured) bool) (string, error) {
	gk, _ := object.GetCRDGroupKind(crd)
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		version, _ := v.(map[string]any)
		name, _ := version["name"].(string)
		if served, _ := version["served"].(bool); !served || name == "" {
			continue
		}
		limit := int64(500)
		if skip == nil {
			limit = 1
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gk.WithVersion(name).GroupVersion().WithKind(gk.Kind + "List"))
		opts := []client.ListOption{client.Limit(limit)}
		for {
			if err := c.List(ctx, list, opts...); err != nil {
				return "", err
			}
			for i := range list.Items {
				if u := &list.Items[i]; skip == nil || !skip(u) {
					return result.Ref(gk.Group, gk.Kind, u.GetNamespace(), u.GetName()), nil
				}
			}
			if list.GetContinue() == "" {
				return "", nil
			}
			opts = []client.ListOption{client.Limit(limit), client.Continue(list.GetContinue())}
		}
	}
	return "", nil
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
			// What was read may be stale by now (relabelled for another
			// inventory, annotated prune: disabled, taken over): the
			// delete holds only while the object is as judged, and one
			// that changed is read and judged again.
			var (
				v   *pruneVerdict
				err error
			)
			for attempt := 0; ; attempt++ {
				v, err = r.judge(gctx, e, attempt > 0)
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
					switch {
					case v.refused:
						keep(&ObjectError{Ref: v.result.Ref(), Err: errors.New("not deleted: " + v.skip)})
					case v.stay:
						keep(nil)
					}
					return nil
				}
				uid, rv := v.live.GetUID(), v.live.GetResourceVersion()
				err = r.clients.Client.Delete(gctx, v.live, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationBackground))
				if !apierrors.IsConflict(err) || attempt == 4 {
					break
				}
			}
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
	stale := r.staleEntries()
	if n := len(stale) - len(r.staleListed()); n > 0 {
		r.obs.Info(fmt.Sprintf("%s carry this inventory's labels but were listed nowhere (written by a run after it lost the inventory's Lease, say): pruned as its own", nObjects(n)))
	}
	var releaseErr error
	if r.from != nil {
		var keptAdopted []inventory.Entry
		stale, keptAdopted, releaseErr = r.releaseAdopted(ctx, stale)
		r.applied = append(r.applied, keptAdopted...)
	}
	_, kept, pruneErr := r.deleteStale(ctx, stale, "prune")
	pruneErr = errors.Join(releaseErr, pruneErr)
	entries := map[string]inventory.Entry{}
	for _, e := range append(append([]inventory.Entry(nil), r.applied...), kept...) {
		entries[e.ID] = e
	}
	if err := r.saveInventory(ctx, entries); err != nil {
		return errors.Join(pruneErr, err)
	}
	return pruneErr
}

// releaseAdopted releases, rather than deletes, the stale entries of a
// rollback whose objects existed before gantry applied them (made by
// hand, or taken over): an undo deletes only what a gantry run created.
// It returns the entries left to delete, and those whose release failed
// (kept in the inventory, for a retry).
func (r *run) releaseAdopted(ctx context.Context, stale []inventory.Entry) (rest, kept []inventory.Entry, err error) {
	adopted := map[string]bool{}
	for _, id := range r.prev.Adopted {
		adopted[id] = true
	}
	var errs []error
	for _, e := range stale {
		if !adopted[e.ID] {
			rest = append(rest, e)
			continue
		}
		note, err := r.giveBack(ctx, e)
		if err != nil {
			o := result.Object{ID: e.ID, Stage: "prune", Action: result.Failed}
			if gvk, perr := e.GroupVersionKind(); perr == nil {
				id, _ := e.Parse()
				o.APIVersion, o.Kind, o.Namespace, o.Name = gvk.GroupVersion().String(), gvk.Kind, id.Namespace, id.Name
			}
			setError(&o, err, err.Error())
			r.record(o, true)
			kept = append(kept, e)
			errs = append(errs, err)
			continue
		}
		o, err := r.releaseOne(ctx, e)
		if o != nil {
			o.Stage = "prune"
			if err == nil && o.Action == result.Released {
				o.Error = "released, not deleted: it existed before gantry applied it" + note
			}
			r.record(*o, err != nil)
		}
		if err != nil {
			kept = append(kept, e)
			errs = append(errs, err)
		}
	}
	return rest, kept, errors.Join(errs...)
}

// giveBack restores the content an adopted object had before gantry took
// it over, as the newest authentic revision keeping it recorded it, and
// says so in a note for its release. An object made again since gantry
// took it over, or no longer labelled as this inventory's, is left as it
// is; an object whose earlier content no revision keeps is released as
// it is.
func (r *run) giveBack(ctx context.Context, e inventory.Entry) (note string, err error) {
	prior, err := r.priorFor(ctx, e.ID)
	if err != nil {
		return "", fmt.Errorf("%s: its content from before gantry cannot be read, so it is neither restored nor released (kept in the inventory): %w", e.ID, err)
	}
	if prior == nil {
		return "", nil
	}
	id, err := e.Parse()
	if err != nil {
		return "", fmt.Errorf("inventory entry %q: %w", e.ID, err)
	}
	gvk, _ := e.GroupVersionKind()
	live := &unstructured.Unstructured{}
	err = r.planner.get(ctx, objectKey{groupKey{gvk, id.Namespace}, id.Name}, live)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", &ObjectError{Ref: fmtID(id), Err: fmt.Errorf("not read: %w", err)}
	}
	labels := live.GetLabels()
	if labels[inventory.NameLabel] != r.opts.Inventory || labels[inventory.NamespaceLabel] != r.opts.InventoryNamespace {
		return "", nil
	}
	if live.GetUID() != prior.GetUID() {
		return "; it was made again since gantry took it over, so its earlier content is not put back", nil
	}
	body := prior.DeepCopy()
	unstructured.RemoveNestedField(body.Object, "metadata", "uid")
	// Still this inventory's until releaseOne takes the labels off.
	l := body.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[inventory.NameLabel], l[inventory.NamespaceLabel] = r.opts.Inventory, r.opts.InventoryNamespace
	body.SetLabels(l)
	raw, err := kube.ApplyBody(body)
	if err != nil {
		return "", err
	}
	if err := r.clients.Apply(ctx, body, raw, FieldManager, true, false, nil); err != nil {
		return "", &ObjectError{Ref: fmtID(id), Err: fmt.Errorf("putting back its content from before gantry: %s", apiMessage(err))}
	}
	return "; its content from before gantry took it over is put back", nil
}

// priorFor returns the content object id had before gantry adopted it,
// from the revision the newest one says keeps it (PriorAt, signed); both
// must be authentic (the workflow's record-key). nil when none keeps it.
func (r *run) priorFor(ctx context.Context, id string) (*unstructured.Unstructured, error) {
	if r.prev == nil || r.prev.Newest() == nil {
		return nil, nil
	}
	n, ok := r.prev.Newest().PriorAt[id]
	if !ok {
		return nil, nil
	}
	priors, ok := r.priors[n]
	if !ok {
		if err := r.store.Authenticate(r.prev, n); err != nil {
			return nil, err
		}
		read, err := r.store.Revision(ctx, r.prev, n)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(read.Prior, id) {
			return nil, fmt.Errorf("revision %d does not keep it, though the newest revision says it does", n)
		}
		if priors, err = read.PriorOf(); err != nil {
			return nil, err
		}
		if r.priors == nil {
			r.priors = map[int]map[string]*unstructured.Unstructured{}
		}
		r.priors[n] = priors
	}
	return priors[id], nil
}
