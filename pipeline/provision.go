package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/schemas"
	"github.com/gantry-dev/gantry/sources"
)

// plan dry-runs every object the cluster can check now, defers those whose
// Namespace or CRD comes with the set (r.planner, from findAbsent, knows
// which), and checks these offline.
func (r *run) plan(ctx context.Context) error {
	if len(r.planner.absent) > 0 || len(r.planner.absentKinds) > 0 {
		// Objects will be deferred: make the validator while the
		// dry-runs are in flight. Otherwise validateOffline makes it
		// only if a dry-run defers something after all.
		r.prepareOffline()
	}
	r.planner.knowing(r.prev)
	objects, rest := r.objects, []*sources.Object(nil)
	if r.opts.only != nil {
		// A correction writes only what drifted; the rest is as applied.
		objects = nil
		for _, o := range r.objects {
			if r.opts.only[inventory.EntryFor(o.Unstructured).ID] {
				objects = append(objects, o)
			} else {
				rest = append(rest, o)
			}
		}
	}
	r.plans = r.planner.planAll(ctx, objects, r.opts.Concurrency)
	for _, o := range rest {
		r.plans = append(r.plans, &plan{obj: o, kind: planUnchanged})
	}
	// The objects that already hold every value gantry applies are not
	// dry-run (validate: all dry-runs them too); the summary counts them
	// unchanged, and nothing more is said of them, run after run.
	if slices.ContainsFunc(r.plans, func(pl *plan) bool { return pl.kind != planUnchanged }) {
		r.findSources() // something to name that no dry-run started
	}
	return r.validateOffline(ctx)
}

// validateOffline checks the deferred objects (those whose Namespace or CRD
// the set brings) without the API server: custom resources against the
// set's CRDs, built-in kinds against the cluster's published schemas. An
// object that fails becomes a failed plan; one that passes stays deferred,
// for the server's dry-run once what it needs exists.
func (r *run) validateOffline(ctx context.Context) error {
	var deferred []*plan
	for _, pl := range r.plans {
		if pl.kind == planDeferred {
			deferred = append(deferred, pl)
		}
	}
	if len(deferred) == 0 {
		return nil
	}
	if r.offline == nil {
		r.prepareOffline()
	}
	<-r.offline.ready
	v, err := r.offline.v, r.offline.err
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.opts.Concurrency, 1))
	for _, pl := range deferred {
		g.Go(func() error {
			err := v.Validate(gctx, pl.obj.Unstructured)
			switch {
			case err == nil, errors.Is(err, schemas.ErrNoSchema):
				pl.offline = err == nil
			default:
				pl.kind, pl.err = planFailed, err
			}
			return nil
		})
	}
	return g.Wait()
}

// offlineSchemas is the offline validator of a run, made while the dry-runs
// are in flight.
type offlineSchemas struct {
	ready chan struct{}
	v     *schemas.Validator
	err   error
}

// prepareOffline starts making the offline validator: it reads the set's
// CRDs and, for the built-in kinds bound for namespaces that do not exist
// yet, the cluster's schemas (a large document per group version, which
// would otherwise be fetched and parsed after the dry-runs).
func (r *run) prepareOffline() {
	o := &offlineSchemas{ready: make(chan struct{})}
	r.offline = o
	set := make([]*unstructured.Unstructured, len(r.objects))
	gvs := map[schema.GroupVersion]bool{}
	for i, obj := range r.objects {
		set[i] = obj.Unstructured
		if ns := obj.GetNamespace(); ns != "" && r.planner != nil && r.planner.absent[ns] {
			gvs[obj.GroupVersionKind().GroupVersion()] = true
		}
	}
	go func() {
		defer close(o.ready)
		if o.v, o.err = schemas.WithBuiltins(set, r.builtins()); o.err != nil {
			return
		}
		for gv := range gvs {
			o.v.Prepare(gv)
		}
	}()
}

// provisionNeeds lists the plans of the Namespaces and CRDs that must exist
// before the deferred objects can be dry-run on the server (and, with
// lockLater, the inventory's namespace), in the set's order.
func (r *run) provisionNeeds(lockLater bool) []*plan {
	namespaces := map[string]bool{}
	kinds := map[schema.GroupKind]bool{}
	if lockLater {
		namespaces[r.opts.InventoryNamespace] = true
	}
	for _, pl := range r.plans {
		if pl.kind != planDeferred {
			continue
		}
		if ns := pl.obj.GetNamespace(); ns != "" {
			namespaces[ns] = true
		}
		kinds[pl.obj.GroupVersionKind().GroupKind()] = true
	}
	var needs []*plan
	for _, pl := range r.plans {
		if pl.kind != planCreate {
			continue // exists already (or is to be left alone)
		}
		u := pl.obj.Unstructured
		if utils.IsNamespace(u) && namespaces[u.GetName()] {
			needs = append(needs, pl)
		}
		if gk, ok := object.GetCRDGroupKind(u); ok && kinds[gk] {
			needs = append(needs, pl)
		}
	}
	return needs
}

// provision creates the Namespaces and CRDs that deferred objects need,
// waits until they are established, takes the inventory's lock if it had to
// wait for its namespace, and dry-runs the deferred objects on the server.
// If any of them fails, what provision created is removed again (see
// rollback) and the run fails validation: nothing of the set stays.
func (r *run) provision(ctx context.Context, needs []*plan, lockLater bool) error {
	r.obs.Info(fmt.Sprintf("creating %s to validate the objects that depend on them", describePlans(needs)))
	var created []*unstructured.Unstructured
	var written []*plan
	var mu sync.Mutex
	var errs errorList
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.opts.Concurrency, 1))
	if lockLater {
		// The Lease lives in a namespace created here: these writes
		// alone go before it is held.
		gctx = kube.Unfenced(gctx)
	}
	for _, pl := range needs {
		g.Go(func() error {
			live := &unstructured.Unstructured{}
			err := r.clients.Apply(gctx, pl.obj.Unstructured, pl.body, FieldManager, true, false, live)
			if err != nil {
				pl.kind, pl.err = planFailed, withAPIMessage(err)
				errs.add(r.objectError(pl.obj, pl.err))
				return nil
			}
			mu.Lock()
			created = append(created, live)
			written = append(written, pl)
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	err := errs.err()
	// A new Namespace is ready in the answer to its write: no poll then,
	// a round trip saved. A CRD is established a moment after: a few
	// objects, soon ready, so poll often.
	if err == nil && slices.ContainsFunc(created, func(u *unstructured.Unstructured) bool { return !currentNow(u) }) {
		err = r.waitEstablished(ctx, written, 25*time.Millisecond)
	}
	for _, pl := range written {
		pl.kind = planProvisioned // apply reports it created, and writes it no more
	}
	if err == nil && slices.ContainsFunc(needs, func(pl *plan) bool { return utils.IsCRD(pl.obj.Unstructured) }) {
		// Discovery lists a new kind a moment after its CRD is
		// established; a fresh REST mapper then learns it.
		if err = r.waitDiscovered(ctx, needs); err == nil {
			var clients *kube.Clients
			if clients, err = r.clients.Reconnect(); err == nil {
				r.clients = clients
			}
		}
	}
	contended := false
	if err == nil && lockLater {
		err = r.lockAndLoad(ctx)
		if err == nil && r.prev.Exists() {
			// Another run wrote to the new namespace while this one
			// waited for the Lease: what this one read before is stale.
			contended = true
			r.planner = r.newPlanner()
			for _, pl := range written {
				pl.again = true // another run's version may have replaced it
			}
		}
	}
	if err == nil {
		r.replanDeferred(ctx, written, contended)
		if err = r.validationFailures("validate"); err != nil {
			return errors.Join(err, r.rollback(ctx, created))
		}
		return nil
	}
	rollbackErr := r.rollback(ctx, created)
	if failed := r.validationFailures("validate"); failed != nil {
		return errors.Join(failed, rollbackErr) // a Namespace or CRD the server refused
	}
	return errors.Join(fmt.Errorf("creating what the set's objects depend on: %w", err), rollbackErr)
}

// waitDiscovered waits until the API server's discovery lists the kinds of
// the provisioned CRDs, so that their custom resources are dry-run at once
// rather than retried one by one.
func (r *run) waitDiscovered(ctx context.Context, provisioned []*plan) error {
	want := map[schema.GroupVersionKind]bool{}
	for _, pl := range provisioned {
		u := pl.obj.Unstructured
		gk, ok := object.GetCRDGroupKind(u)
		if !ok {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		for _, v := range versions {
			m, _ := v.(map[string]any)
			name, _ := m["name"].(string)
			if served, _ := m["served"].(bool); served && name != "" {
				want[gk.WithVersion(name)] = true
			}
		}
	}
	disc := r.clients.Kube.Discovery()
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for gvk := range want {
			list, err := disc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
			if err != nil {
				return false, nil //nolint:nilerr // not listed yet: poll again
			}
			if !slices.ContainsFunc(list.APIResources, func(res metav1.APIResource) bool { return res.Kind == gvk.Kind }) {
				return false, nil
			}
			delete(want, gvk)
		}
		return true, nil
	})
}

// replanDeferred dry-runs the deferred objects now that their Namespaces
// and CRDs (provisioned) exist. Discovery can lag a moment behind an
// established CRD.
func (r *run) replanDeferred(ctx context.Context, provisioned []*plan, contended bool) {
	p := r.newPlanner()
	namespaces := map[string]bool{}
	kinds := map[schema.GroupKind]bool{}
	for _, pl := range provisioned {
		if gk, ok := object.GetCRDGroupKind(pl.obj.Unstructured); ok {
			kinds[gk] = true
		} else if utils.IsNamespace(pl.obj.Unstructured) {
			namespaces[pl.obj.GetName()] = true
		}
	}
	var idx []int
	var objects []*sources.Object
	for i, pl := range r.plans {
		if pl.kind == planDeferred {
			idx = append(idx, i)
			objects = append(objects, pl.obj)
			// This run just created the Namespace or CRD: nothing of the
			// kind lives there yet, and a LIST would only wait for the API
			// server to start caching a new kind.
			u := pl.obj.Unstructured
			if !contended && (namespaces[u.GetNamespace()] || kinds[u.GroupVersionKind().GroupKind()]) {
				p.listed[keyOf(u).group] = true
			}
		}
	}
	// All at once first, with LISTs for large groups; the few that
	// discovery has not caught up with are retried one by one.
	for j, pl := range p.planAll(ctx, objects, r.opts.Concurrency) {
		pl.offline = r.plans[idx[j]].offline
		r.plans[idx[j]] = pl
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.opts.Concurrency, 1))
	for _, i := range idx {
		pl := r.plans[i]
		if pl.kind != planDeferred {
			continue
		}
		g.Go(func() error {
			_ = wait.PollUntilContextTimeout(gctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
				r.plans[i] = p.plan(ctx, pl.obj)
				return r.plans[i].kind != planDeferred, nil
			})
			if r.plans[i].kind == planDeferred {
				r.plans[i].kind, r.plans[i].err = planFailed, fmt.Errorf("still cannot be validated: %s", r.plans[i].reason)
			}
			return nil
		})
	}
	_ = g.Wait()
}

// rollback deletes what provision created, each only while it holds
// nothing this run did not create (a CRD without custom resources, a
// Namespace without objects but the ones Kubernetes puts in every
// namespace), with a UID precondition, and waits until they are gone.
// What it must keep, or could not tell, is saved in the inventory first,
// so that it is not lost. It holds the inventory's Lease until its
// deletes are sent, and gives it back before waiting for them (the Lease
// may live in a namespace that is going).
func (r *run) rollback(ctx context.Context, created []*unstructured.Unstructured) error {
	if len(created) == 0 {
		return nil
	}
	ctx, cancel := graceContext(ctx, 30*time.Second)
	defer cancel()
	if r.lease != nil {
		if err := r.lease.Check(); err != nil {
			// Another run may stand on what this one created now.
			return fmt.Errorf("not deleting the %d objects this run created: %w", len(created), err)
		}
	} else {
		// What provision created before the Lease could be taken is
		// removed as it was created: each only while it holds nothing
		// of another's, with its UID as precondition.
		ctx = kube.Unfenced(ctx)
	}
	unlocked := r.lease == nil
	var errs errorList
	var mu sync.Mutex
	var kept, going []*unstructured.Unstructured
	keep := func(u *unstructured.Unstructured, err error) {
		mu.Lock()
		kept = append(kept, u)
		mu.Unlock()
		errs.add(err)
	}
	refOf := func(u *unstructured.Unstructured) string {
		return result.Ref(u.GroupVersionKind().Group, u.GetKind(), "", u.GetName())
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, u := range created {
		g.Go(func() error {
			switch reason, err := r.holdsOthers(gctx, u); {
			case err != nil:
				keep(u, fmt.Errorf("%s was created to validate its dependents and is kept: %w", refOf(u), err))
			case reason != "":
				keep(u, fmt.Errorf("%s was created to validate its dependents and is kept: %s", refOf(u), reason))
			default:
				mu.Lock()
				going = append(going, u)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	save := func() {
		entries := map[string]inventory.Entry{}
		for _, e := range r.prev.Entries {
			entries[e.ID] = e
		}
		for _, u := range kept {
			e := inventory.EntryFor(u)
			entries[e.ID] = e
		}
		if err := r.saveInventory(ctx, entries); err != nil {
			errs.add(err)
		}
	}
	// Without the Lease the inventory is not this run's to write: what
	// is kept then is said, not recorded.
	switch {
	case len(kept) > 0 && unlocked:
		errs.add(fmt.Errorf("what is kept is not recorded in inventory %s/%s, whose Lease this run does not hold: remove it by hand once it is empty",
			r.opts.InventoryNamespace, r.opts.Inventory))
	case len(kept) > 0:
		save()
	}
	var deleted []*unstructured.Unstructured
	failed := len(kept)
	for _, u := range going {
		uid := u.GetUID()
		err := r.clients.Client.Delete(ctx, u, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			keep(u, fmt.Errorf("%s was created to validate its dependents and could not be removed again: %w", refOf(u), withAPIMessage(err)))
			continue
		}
		deleted = append(deleted, u)
	}
	if len(kept) > failed && !unlocked {
		save()
	}
	if r.lease != nil {
		r.lease.Release()
		r.clients.Fence.Hold(func() error { return errNoLease })
		r.lease = nil
	}
	for _, u := range deleted {
		if err := waitGone(ctx, r.clients.Client, u); err != nil {
			errs.add(fmt.Errorf("%s was created to validate its dependents and is still being removed: %w", refOf(u), err))
			continue
		}
		r.obs.Info(fmt.Sprintf("removed %s again", refOf(u)))
	}
	return errs.err()
}

// holdsOthers says why u must not be removed: a CRD with custom resources,
// or a Namespace with objects in it, that this run did not create.
func (r *run) holdsOthers(ctx context.Context, u *unstructured.Unstructured) (string, error) {
	if gk, ok := object.GetCRDGroupKind(u); ok {
		listErr := errors.New("it serves no version")
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		for _, v := range versions {
			name, _, _ := unstructured.NestedString(v.(map[string]any), "name")
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: gk.Group, Version: name, Kind: gk.Kind + "List"})
			err := r.clients.Client.List(ctx, list, client.Limit(1))
			if err != nil {
				// Not served at this version: another may tell.
				listErr = err
				continue
			}
			if len(list.Items) > 0 {
				return fmt.Sprintf("it holds custom resources (%s)", list.Items[0].GetName()), nil
			}
			return "", nil
		}
		return "", fmt.Errorf("cannot tell whether it holds custom resources: %w", listErr)
	}
	if !utils.IsNamespace(u) {
		return "", nil
	}
	resources, err := r.clients.Kube.Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		// A group whose kinds are unknown may hold anything.
		return "", fmt.Errorf("cannot tell what it holds: listing the kinds a namespace can hold: %w", err)
	}
	var mu sync.Mutex
	var found, unread []string
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.opts.Concurrency, 1))
	for _, rl := range resources {
		gv, err := schema.ParseGroupVersion(rl.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range rl.APIResources {
			if !slices.Contains(res.Verbs, "list") || res.Kind == "Event" || res.Kind == "Endpoints" || strings.Contains(res.Name, "/") {
				continue
			}
			g.Go(func() error {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(gv.WithKind(res.Kind + "List"))
				err := r.clients.Client.List(gctx, list, client.InNamespace(u.GetName()), client.Limit(5))
				if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
					// The kind went away since discovery (a CRD deleted
					// meanwhile): its objects were removed before it
					// stopped being served, so none are left here.
					return nil
				}
				if err != nil {
					// What cannot be listed may hold anything: said
					// once, for all kinds, after the others are read.
					mu.Lock()
					unread = append(unread, res.Kind)
					mu.Unlock()
					return nil //nolint:nilerr // collected in unread
				}
				for _, item := range list.Items {
					if !everyNamespaceHas(res.Kind, item.GetName(), r.opts.Inventory) {
						mu.Lock()
						found = append(found, res.Kind+"/"+item.GetName())
						mu.Unlock()
					}
				}
				return nil
			})
		}
	}
	_ = g.Wait()
	if len(found) > 0 {
		slices.Sort(found)
		return "it holds " + strings.Join(found, ", "), nil
	}
	if len(unread) > 0 {
		slices.Sort(unread)
		return "", fmt.Errorf("cannot tell what it holds: listing %s in it failed", strings.Join(unread, ", "))
	}
	return "", nil
}

// everyNamespaceHas recognises what Kubernetes (and gantry's own lock)
// put in a new namespace.
func everyNamespaceHas(kind, name, inventoryName string) bool {
	switch kind {
	case "ServiceAccount":
		return name == "default"
	case "ConfigMap":
		return name == "kube-root-ca.crt"
	case "Lease":
		return name == inventory.ConfigMapName(inventoryName)
	}
	return false
}

// describePlans names a few plans' objects for a progress line.
func describePlans(plans []*plan) string {
	names := make([]string, 0, len(plans))
	for _, pl := range plans {
		names = append(names, pl.obj.Ref())
	}
	if len(names) > 5 {
		names = append(names[:5], fmt.Sprintf("and %d more", len(names)-5))
	}
	return strings.Join(names, ", ")
}

// builtins are the schemas of built-in kinds of the cluster the run
// talks to: the session's (Options.Builtins), shared by its runs on that
// cluster, else the run's own.
func (r *run) builtins() *schemas.Builtins {
	if r.opts.Builtins != nil {
		return r.opts.Builtins(r.clients)
	}
	return schemas.NewBuiltins(r.clients)
}
