package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"github.com/fluxcd/pkg/ssa/normalize"
	"github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/diffs"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/schemas"
	"github.com/gantry-dev/gantry/sources"
	"github.com/gantry-dev/gantry/suggest"
)

// FieldManager is the server-side apply field manager gantry writes with.
const FieldManager = "gantry"

// Per-object annotations, under gantry's prefix and, for users coming from
// Flux, under kustomize-controller's: both are honoured.
var (
	annotationPrefixes = []string{"gantry.dev/", "kustomize.toolkit.fluxcd.io/"}

	// ssa: Ignore and reconcile: disabled leave the object alone.
	ignoreSelector = selector(map[string]string{"ssa": "Ignore", "reconcile": "disabled"})
	// ssa: IfNotPresent creates the object but never updates it.
	ifNotPresentSelector = selector(map[string]string{"ssa": "IfNotPresent"})
	// ssa: Merge keeps fields other managers own (no kubectl take-over).
	mergeSelector = selector(map[string]string{"ssa": "Merge"})
	// force: enabled recreates the object when an immutable field changed.
	forceSelector = selector(map[string]string{"force": "enabled"})
	// prune: disabled keeps the object when it leaves the set.
	pruneDisabledSelector = selector(map[string]string{"prune": "disabled"})
)

// selector expands keys under every annotation prefix. ssa's AnyInMetadata
// matches any one of them.
func selector(kv map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range kv {
		for _, p := range annotationPrefixes {
			out[p+k] = v
		}
	}
	return out
}

// takeOver lists what kubectl (and the helm CLI) leave on objects they
// applied, removed when gantry takes them over so that its field manager
// owns their fields.
var takeOver = struct {
	annotations []string
	managers    []ssa.FieldManager
}{
	annotations: []string{corev1.LastAppliedConfigAnnotation},
	managers: []ssa.FieldManager{
		{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationApply},
		{Name: "kubectl-client-side-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
		{Name: "kubectl-create", OperationType: metav1.ManagedFieldsOperationUpdate},
		{Name: "kubectl-edit", OperationType: metav1.ManagedFieldsOperationUpdate},
		{Name: "kubectl-patch", OperationType: metav1.ManagedFieldsOperationUpdate},
		{Name: "kubectl-replace", OperationType: metav1.ManagedFieldsOperationUpdate},
		{Name: "kubectl-scale", OperationType: metav1.ManagedFieldsOperationUpdate},
		{Name: "before-first-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
		// The helm CLI names its field manager after itself: helm 4
		// applies server-side, helm 3 updated.
		{Name: "helm", OperationType: metav1.ManagedFieldsOperationApply},
		{Name: "helm", OperationType: metav1.ManagedFieldsOperationUpdate},
	},
}

// planKind is what a dry-run decided for one object.
type planKind int

const (
	planUnchanged planKind = iota
	planCreate
	planConfigure
	planRecreate // an immutable field changed and force allows recreation
	planSkip
	planDeferred // depends on a CRD or Namespace in the same set
	planFailed
	// planProvisioned: created during validation, for the objects that
	// depend on it; apply reports it created and writes nothing more.
	planProvisioned
)

// plan is the dry-run verdict for one object.
type plan struct {
	obj      *sources.Object
	kind     planKind
	existing *unstructured.Unstructured // for a recreation or a take-over
	body     []byte                     // the apply request, sent for the dry-run and the write
	cleanup  bool                       // kubectl's annotation or managers must go first
	reason   string                     // why skipped or deferred
	err      error
	diff     string // what changes, for reports
	// offline: a deferred object that passed offline validation (diff
	// reports it so; apply dry-runs it on the server as well).
	offline bool
	// conflicts are the fields other field managers own that the apply
	// takes (kubectl's, taken as Flux takes them, are not listed).
	conflicts []result.Conflict
	// again: a provisioned object written before the inventory's lock
	// could be taken (it is the lock's own namespace); apply writes it
	// once more under the lock, so that a run that raced for the lock
	// cannot leave its version behind.
	again bool
	// current: an unchanged object whose live state, as read for the
	// plan, was already ready (kstatus Current); the wait does not poll
	// it again.
	current bool
	// dryRun is what the apply would make of the object, kept (with
	// existing) only for drift.
	dryRun *unstructured.Unstructured
	// takeOver are field managers besides kubectl's whose fields the
	// write takes first (drift's correction of fields set by hand).
	takeOver []ssa.FieldManager
	// mask masks the secrets a value holds, in its diff.
	mask func(string) string
	// hidden are the fields its diff hides, whatever their values.
	hidden func() []string
	// adopts: the object exists and does not carry this inventory's
	// labels, so the apply takes over an object gantry did not make.
	adopts bool
}

// planner dry-runs objects against the cluster.
type planner struct {
	// onLive sees each live object read for a plan before its diff is
	// made (its secret fields are masked from then on).
	onLive  func(*unstructured.Unstructured)
	clients *kube.Clients
	force   bool
	// mask masks the secrets a value holds, in diffs.
	mask func(string) string
	// hidden are the fields of an object that its diff hides.
	hidden func(*sources.Object) []string
	// crdsWithResources lets force recreate a CRD whose custom
	// resources exist (prune-crds-with-resources).
	crdsWithResources bool
	// refuseConflicts fails an object whose apply would take fields
	// from another field manager than kubectl's.
	refuseConflicts bool
	// validateAll dry-runs every object; without it, an object whose
	// live state shows the apply would change nothing is not dry-run
	// (unchangedOnServer).
	validateAll bool
	// onDryRun is called before the dry-run of an object that is likely
	// to change: one the inventory does not list, or one whose live state
	// did not show it unchanged.
	onDryRun func()
	// known are the inventory's entries: an object it does not list is
	// most likely new, and its dry-run goes out at once, beside the LIST,
	// rather than after it.
	known map[string]bool
	// live holds objects read by LIST; listed says which kinds and
	// namespaces were listed whole (an object of a listed group that is
	// not in live does not exist).
	live   map[objectKey]*unstructured.Unstructured
	listed map[groupKey]bool
	// ready is closed when live and listed may be read.
	ready chan struct{}
	// forgotten are objects dropped from live after planAll: get reads
	// them from the cluster again.
	forgotten map[objectKey]bool
	// inSet says which CRD group-kinds and namespaces the set itself
	// creates, so objects depending on them are deferred, not failed.
	crdKinds   map[schema.GroupKind]bool
	namespaces map[string]bool
	// absent are the set's namespaces known not to exist yet, and
	// absentKinds the kinds of its CRDs the cluster does not serve yet:
	// their objects are deferred without a dry-run that can only fail.
	absent      map[string]bool
	absentKinds map[schema.GroupKind]bool
	// owner is the inventory this run applies for; a live object labelled
	// with another fails, unless takeOwnership.
	owner         inventoryRef
	takeOwnership bool
	// keepOwnerLabels: the run names no inventory (a diff), so the live
	// object's inventory labels are not reported as removed.
	keepOwnerLabels bool
	// keepLive keeps every plan's live object and dry-run result, which
	// drift compares.
	keepLive bool
	// readiness: a wait follows, which an unchanged object's readiness,
	// read with it, spares a poll.
	readiness bool
	// health decides the readiness of the kinds its rules name.
	health ruleGuard
	// takeOver are, by inventory id, field managers whose fields an
	// object's write takes first, so that the apply can remove them.
	takeOver map[string][]ssa.FieldManager
	// prefetching: the LISTs were sent before the plan (startPrefetch).
	prefetching bool
	// metadataOnly: the LISTs read the objects' metadata alone.
	metadataOnly bool
	// seen, made for a plan made before the Lease was taken, is the
	// resourceVersion of each live object the plan read ("" for one it
	// found absent): that plan holds only while they are unchanged
	// (changedSince). Nil: not recorded.
	seenMu sync.Mutex
	seen   map[objectKey]string
}

// inventoryRef names an inventory: its ConfigMap's namespace and name.
type inventoryRef struct{ namespace, name string }

func (i inventoryRef) String() string { return i.namespace + "/" + i.name }

// labelled selects the objects labelled with inventory i; nil when i
// names none.
func (i inventoryRef) labelled() client.MatchingLabels {
	if i.name == "" {
		return nil
	}
	return client.MatchingLabels{inventory.NameLabel: i.name, inventory.NamespaceLabel: i.namespace}
}

// ownerOf reads the inventory labels of a live object; ok is false when it
// has none.
func ownerOf(u *unstructured.Unstructured) (ref inventoryRef, ok bool) {
	l := u.GetLabels()
	name, hasName := l[inventory.NameLabel]
	ns := l[inventory.NamespaceLabel]
	return inventoryRef{namespace: ns, name: name}, hasName && name != ""
}

// newPlanner returns the run's planner for its set.
func (r *run) newPlanner() *planner {
	p := newPlanner(r.clients, r.objects, r.opts.Force)
	p.crdsWithResources = r.opts.PruneCRDsWithResources
	p.owner = inventoryRef{namespace: r.opts.InventoryNamespace, name: r.opts.Inventory}
	p.takeOwnership = r.opts.TakeOwnership
	p.keepOwnerLabels = r.opts.Inventory == ""
	p.validateAll = r.opts.ValidateAll
	p.refuseConflicts = r.opts.RefuseConflicts
	p.takeOver = r.opts.takeOver
	p.onDryRun = r.findSources
	p.mask = r.opts.Mask
	p.hidden = func(o *sources.Object) []string { return r.hiddenFields(o) }
	p.onLive = r.maskLive
	p.readiness = r.opts.Wait
	p.health = r.ruleGuard()
	return p
}

func newPlanner(c *kube.Clients, objects []*sources.Object, force bool) *planner {
	p := &planner{clients: c, force: force, crdKinds: map[schema.GroupKind]bool{}, namespaces: map[string]bool{},
		live: map[objectKey]*unstructured.Unstructured{}, listed: map[groupKey]bool{}, ready: make(chan struct{}),
		onDryRun: func() {}}
	close(p.ready)
	for _, o := range objects {
		if gk, ok := object.GetCRDGroupKind(o.Unstructured); ok {
			p.crdKinds[gk] = true
		}
		if utils.IsNamespace(o.Unstructured) {
			p.namespaces[o.GetName()] = true
		}
	}
	return p
}

type groupKey struct {
	gvk       schema.GroupVersionKind
	namespace string
}

type objectKey struct {
	group groupKey
	name  string
}

func keyOf(o *unstructured.Unstructured) objectKey {
	return objectKey{groupKey{o.GroupVersionKind(), o.GetNamespace()}, o.GetName()}
}

// findAbsent reads which of the set's namespaces do not exist yet (a GET
// each, concurrently) and which of its CRDs' kinds the cluster does not
// serve; a namespace it may not read counts as present, and its objects'
// dry-runs say what is wrong.
func (p *planner) findAbsent(ctx context.Context, concurrency int) {
	p.absentKinds = p.unservedKinds()
	p.findAbsentNamespaces(ctx, concurrency)
}

// findAbsentNamespaces reads which of the set's namespaces do not exist.
func (p *planner) findAbsentNamespaces(ctx context.Context, concurrency int) {
	var mu sync.Mutex
	p.absent = map[string]bool{}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for ns := range p.namespaces {
		g.Go(func() error {
			_, err := p.clients.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				mu.Lock()
				p.absent[ns] = true
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
}

// unservedKinds is which kinds of the set's CRDs the cluster does not
// serve yet. The REST mapper answers for the kinds it knows, but asks the
// server for all its API groups again for each kind it does not: for a
// set of 200 new CRDs, 200 discoveries one after the other, each as large
// as everything the cluster serves. After the first kind it does not
// know, the others are looked up in one discovery of every served kind;
// only a kind of a group whose discovery failed goes back to the mapper.
func (p *planner) unservedKinds() map[schema.GroupKind]bool {
	absent := map[schema.GroupKind]bool{}
	var served map[schema.GroupKind]bool
	var failed map[string]bool
	for gk := range p.crdKinds {
		if served != nil && !failed[gk.Group] {
			if !served[gk] {
				absent[gk] = true
			}
			continue
		}
		if _, err := p.clients.Mapper.RESTMapping(gk); meta.IsNoMatchError(err) {
			absent[gk] = true
			if served == nil {
				served, failed = servedKinds(p.clients.Kube.Discovery())
			}
		}
	}
	return absent
}

// servedKinds is every kind the cluster serves, from one discovery, and
// the groups whose discovery failed (an aggregated API server that is
// down, say); both nil when discovery failed as a whole.
func servedKinds(d discovery.DiscoveryInterface) (map[schema.GroupKind]bool, map[string]bool) {
	_, lists, err := d.ServerGroupsAndResources()
	failed := map[string]bool{}
	if err != nil {
		var partial *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &partial) {
			return nil, nil
		}
		for gv := range partial.Groups {
			failed[gv.Group] = true
		}
	}
	kinds := map[schema.GroupKind]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") { // not a subresource
				kinds[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] = true
			}
		}
	}
	return kinds, failed
}

// prefetch reads the live objects of the keys' groups by the read policy
// (listGroups): groups of many objects with a LIST each, a kind spread
// over many namespaces, a few objects in each (a set of tenants'
// namespaces, say), with one LIST in all namespaces of the objects that
// carry this run's inventory labels. Groups listed before are not listed
// again. Whatever the LISTs did not find is read with a GET by get.
func (p *planner) prefetch(ctx context.Context, keys []objectKey, concurrency int) {
	groups := map[groupKey]int{}
	for _, k := range keys {
		if !p.listed[k.group] {
			groups[k.group]++
		}
	}
	var selector client.MatchingLabels
	if !p.keepOwnerLabels {
		selector = p.owner.labelled()
	}
	found := listGroupsBy(ctx, p.clients.Client, groups, selector, concurrency, p.metadataOnly)
	for k, items := range found.whole {
		p.listed[k] = true
		for i := range items {
			p.live[keyOf(&items[i])] = &items[i]
		}
	}
	maps.Copy(p.live, found.labelled)
}

// get reads the live object of k from what a LIST found, else (and when
// its group was listed whole, the object does not exist) from the cluster.
func (p *planner) get(ctx context.Context, k objectKey, into *unstructured.Unstructured) error {
	err := p.read(ctx, k, into)
	if p.seen != nil && (err == nil || apierrors.IsNotFound(err)) {
		p.seenMu.Lock()
		p.seen[k] = into.GetResourceVersion() // "" when absent
		p.seenMu.Unlock()
	}
	return err
}

func (p *planner) read(ctx context.Context, k objectKey, into *unstructured.Unstructured) error {
	if !p.forgotten[k] {
		if live, ok := p.live[k]; ok {
			live.DeepCopyInto(into)
			return nil
		}
		if p.listed[k.group] {
			return apierrors.NewNotFound(schema.GroupResource{Group: k.group.gvk.Group, Resource: k.group.gvk.Kind}, k.name)
		}
	}
	into.SetGroupVersionKind(k.group.gvk)
	return p.clients.Client.Get(ctx, client.ObjectKey{Namespace: k.group.namespace, Name: k.name}, into)
}

// knowing records the inventory's entries (see known); the inventory is
// read after the planner is made, once its lock is held.
func (p *planner) knowing(inv *inventory.Inventory) {
	if inv == nil {
		return
	}
	p.known = make(map[string]bool, len(inv.Entries))
	for _, e := range inv.Entries {
		p.known[e.ID] = true
	}
}

// planAll dry-runs every object concurrently and returns the plans in the
// objects' order.
func (p *planner) planAll(ctx context.Context, objects []*sources.Object, concurrency int) []*plan {
	keys := make([]objectKey, len(objects))
	for i, o := range objects {
		keys[i] = keyOf(o.Unstructured)
	}
	// The LISTs run beside the dry-runs (unless they were sent before);
	// plan waits for them before it reads a live object.
	if !p.prefetching {
		p.startPrefetch(ctx, keys, concurrency)
	}
	plans := make([]*plan, len(objects))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for i, o := range objects {
		g.Go(func() error {
			plans[i] = p.plan(gctx, o)
			return nil
		})
	}
	_ = g.Wait()
	<-p.ready
	p.forget(keys)
	return plans
}

// startPrefetch sends the LISTs of the keys' groups now; ready closes
// when they have answered.
func (p *planner) startPrefetch(ctx context.Context, keys []objectKey, concurrency int) {
	ready := make(chan struct{})
	p.ready, p.prefetching = ready, true
	go func() {
		defer close(ready)
		p.prefetch(ctx, keys, concurrency)
	}()
}

// forget drops what the LISTs read of the set's own objects, keeping the
// rest (what prune may delete) in copies of their own, so that the lists
// themselves can be freed.
func (p *planner) forget(keys []objectKey) {
	inSet := make(map[objectKey]bool, len(keys))
	for _, k := range keys {
		inSet[k] = true
	}
	live := map[objectKey]*unstructured.Unstructured{}
	for k, u := range p.live {
		if !inSet[k] {
			live[k] = u.DeepCopy()
		}
	}
	p.live, p.forgotten = live, inSet
}

// plan reads the live object and dry-runs the desired one.
func (p *planner) plan(ctx context.Context, o *sources.Object) *plan {
	pl := &plan{obj: o, mask: p.mask}
	if p.hidden != nil {
		pl.hidden = func() []string { return p.hidden(o) }
	} else {
		pl.hidden = func() []string { return o.DecryptedFields }
	}
	if utils.AnyInMetadata(o.Unstructured, ignoreSelector) {
		pl.kind, pl.reason = planSkip, "annotated to be ignored (ssa: Ignore or reconcile: disabled)"
		return pl
	}

	if p.absentKinds[o.GroupVersionKind().GroupKind()] {
		pl.kind, pl.reason = planDeferred, "its CustomResourceDefinition is applied in an earlier stage"
		return pl
	}
	if ns := o.GetNamespace(); ns != "" && p.absent[ns] {
		pl.kind, pl.reason = planDeferred, "its Namespace "+ns+" is applied in an earlier stage"
		return pl
	}
	var err error
	// With validate: all, and for an object the inventory does not list,
	// the dry-run goes out first, while the LISTs may still be in flight:
	// it writes nothing, and what it says is weighed below, after what the
	// live object says. Otherwise the live object is read first: when it
	// shows the apply would change nothing, no dry-run is needed.
	dryRun := &unstructured.Unstructured{}
	var dryRunErr error
	// sendDryRun makes the request body (only for the objects that need
	// it) and dry-runs it; false when the body cannot be made.
	sendDryRun := func(likelyChange bool) bool {
		if likelyChange {
			p.onDryRun()
		}
		if pl.body, err = applyBody(o.Unstructured); err != nil {
			pl.kind, pl.err = planFailed, err
			return false
		}
		// Without force first: a conflict names the fields another
		// manager owns, which the write (forced) takes; only then is
		// the forced dry-run sent, for what the write will do.
		dryRunErr = p.clients.Apply(ctx, o.Unstructured, pl.body, FieldManager, false, true, dryRun)
		if conflicts, ok := fieldConflicts(dryRunErr); ok {
			pl.conflicts = conflicts
			dryRunErr = p.clients.Apply(ctx, o.Unstructured, pl.body, FieldManager, true, true, dryRun)
		}
		return true
	}
	known := p.known[inventory.EntryFor(o.Unstructured).ID]
	dryRunSent := p.validateAll || !known
	if dryRunSent && !sendDryRun(!known) {
		return pl
	}

	select {
	case <-p.ready:
	case <-ctx.Done():
		pl.kind, pl.err = planFailed, ctx.Err()
		return pl
	}
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(o.GroupVersionKind())
	err = p.get(ctx, keyOf(o.Unstructured), existing)
	switch {
	case err == nil:
		pl.existing = existing
		if p.onLive != nil {
			p.onLive(existing)
		}
		// Live and not labelled as this inventory's: gantry did not
		// make it, whatever the inventory's list says.
		owner, ok := ownerOf(existing)
		pl.adopts = !ok || owner != p.owner
	case apierrors.IsNotFound(err):
	case meta.IsNoMatchError(err) || isNamespaceNotFound(err, o):
		return p.missing(pl, err)
	default:
		pl.kind, pl.err = planFailed, fmt.Errorf("reading: %w", err)
		return pl
	}
	if pl.existing != nil && utils.AnyInMetadata(pl.existing, ignoreSelector) {
		pl.kind, pl.reason = planSkip, "the live object is annotated to be ignored"
		return pl
	}
	if pl.existing != nil && !p.keepOwnerLabels && !p.takeOwnership {
		if owner, ok := ownerOf(pl.existing); ok && owner != p.owner {
			pl.kind, pl.err = planFailed, fmt.Errorf("belongs to gantry inventory %s, not to this run's inventory %s; set take-ownership to take it over", owner, p.owner)
			return pl
		}
	}
	if pl.existing != nil && utils.AnyInMetadata(o.Unstructured, ifNotPresentSelector) {
		pl.kind, pl.reason = planSkip, "exists, and is annotated ssa: IfNotPresent"
		return pl
	}
	extra := p.takeOver[inventory.EntryFor(o.Unstructured).ID]
	if !dryRunSent {
		if pl.existing != nil && len(extra) == 0 && unchangedOnServer(appliedObject(o.Unstructured), pl.existing) {
			pl.current = p.readiness && p.health.currentNow(context.Background(), pl.existing)
			if !p.keepLive {
				pl.existing = nil
			}
			return pl // planUnchanged
		}
		if !sendDryRun(true) {
			return pl
		}
	}

	err = dryRunErr
	switch {
	case err == nil && len(pl.conflicts) > 0 && p.refuseConflicts:
		pl.kind, pl.err = planFailed, fmt.Errorf("would take %s; set field-conflicts to take to apply it anyway", describeConflicts(pl.conflicts))
		return pl
	case err == nil:
	case pl.existing != nil && ssaerrors.IsImmutableError(err):
		// Flux's test takes every Invalid answer for an immutable
		// field. Recreating helps only when the server accepts the
		// object as new; otherwise a recreate would delete what it
		// cannot put back. What the create says is the object's fault.
		if cerr := p.creatable(ctx, o.Unstructured, pl.existing); cerr != nil {
			pl.kind, pl.err = planFailed, p.describe(cerr, o)
			return pl
		}
		if p.force || utils.AnyInMetadata(o.Unstructured, forceSelector) || utils.AnyInMetadata(pl.existing, forceSelector) {
			if why := p.recreateLoses(ctx, o.Unstructured, pl.existing); why != "" {
				pl.kind, pl.err = planFailed, fmt.Errorf("%s: not recreated, as %s", apiMessage(err), why)
				return pl
			}
			pl.kind = planRecreate
			return pl.withDiff(pl.existing, o.Unstructured)
		}
		pl.kind, pl.err = planFailed, fmt.Errorf("%s (immutable; set force, or annotate the object gantry.dev/force: enabled, to recreate it)", apiMessage(err))
		return pl
	case meta.IsNoMatchError(err) || isNamespaceNotFound(err, o):
		return p.missing(pl, err)
	default:
		pl.kind, pl.err = planFailed, p.describe(err, o)
		return pl
	}
	if pl.existing == nil {
		pl.kind = planCreate
		return pl.withDiff(nil, dryRun)
	}
	if p.keepOwnerLabels {
		keepInventoryLabels(pl.existing, dryRun)
	}
	if !utils.AnyInMetadata(o.Unstructured, mergeSelector) && needsTakeOver(pl.existing) {
		pl.cleanup = true
	}
	if len(extra) > 0 {
		pl.cleanup, pl.takeOver = true, extra
	}
	if pl.cleanup || drifted(pl.existing, dryRun) {
		pl.kind = planConfigure
		pl.withDiff(pl.existing, dryRun)
	}
	if p.keepLive {
		pl.dryRun = dryRun
		return pl
	}
	if !pl.cleanup {
		// Only kubectl's take-over needs the live object later; at
		// 10,000 objects, keeping them all costs a hundred megabytes.
		pl.existing = nil
	}
	return pl
}

// withDiff renders the change for reports. A diff that cannot be rendered
// is reported as such; it does not fail the object.
func (pl *plan) withDiff(live, desired *unstructured.Unstructured) *plan {
	hidden := pl.hidden()
	// The paths are the built object's; live and the dry run's may
	// order their lists otherwise.
	d, err := diffs.ObjectMasked(pl.obj.Ref(), MaskAlike(live, pl.obj.Unstructured, hidden), MaskAlike(desired, pl.obj.Unstructured, hidden), pl.mask)
	if err != nil {
		d = "(diff unavailable: " + err.Error() + ")"
	}
	pl.diff = d
	return pl
}

// missing handles a kind or namespace the cluster does not have: deferred
// when the set itself brings it, failed otherwise.
func (p *planner) missing(pl *plan, err error) *plan {
	if p.dependsOnSet(pl.obj, err) {
		pl.kind, pl.reason = planDeferred, dependencyReason(pl.obj, err)
	} else {
		pl.kind, pl.err = planFailed, p.describe(err, pl.obj)
	}
	return pl
}

func (p *planner) dependsOnSet(o *sources.Object, err error) bool {
	if meta.IsNoMatchError(err) {
		return p.crdKinds[o.GroupVersionKind().GroupKind()]
	}
	return p.namespaces[o.GetNamespace()]
}

func dependencyReason(o *sources.Object, err error) string {
	if meta.IsNoMatchError(err) {
		return "its CustomResourceDefinition is applied in an earlier stage"
	}
	return "its Namespace " + o.GetNamespace() + " is applied in an earlier stage"
}

func isNamespaceNotFound(err error, o *sources.Object) bool {
	if !apierrors.IsNotFound(err) || o.GetNamespace() == "" {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		d := status.Status().Details
		return d != nil && d.Kind == "namespaces" && d.Name == o.GetNamespace()
	}
	return false
}

// describe turns an API error into a message that names what is wrong.
// recreateLoses says why deleting live to recreate it as desired would
// lose more than the object: a CRD's custom resources, every one in the
// cluster, unless prune-crds-with-resources allows it; a bound claim's
// volume, which its reclaim policy may delete, and the claims of a
// StatefulSet that deletes them with itself, unless the object itself is
// annotated force: enabled (the force input alone is not enough).
func (p *planner) recreateLoses(ctx context.Context, desired, live *unstructured.Unstructured) string {
	annotated := utils.AnyInMetadata(desired, forceSelector) || utils.AnyInMetadata(live, forceSelector)
	switch live.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		phase, _, _ := unstructured.NestedString(live.Object, "status", "phase")
		if phase != "Bound" || annotated {
			return ""
		}
		volume, _, _ := unstructured.NestedString(live.Object, "spec", "volumeName")
		return fmt.Sprintf("the claim is bound to PersistentVolume %s, which deleting it releases, and the volume's reclaim policy may delete its data; annotate the claim gantry.dev/force: enabled to recreate it anyway", volume)
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		policy, _, _ := unstructured.NestedString(live.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
		if policy != "Delete" || annotated {
			return ""
		}
		return "its persistentVolumeClaimRetentionPolicy deletes its claims, and their data, when it is deleted; annotate it gantry.dev/force: enabled to recreate it anyway"
	}
	gk, ok := object.GetCRDGroupKind(live)
	if !ok || p.crdsWithResources {
		return ""
	}
	cr, err := anyCustomResource(ctx, p.clients.Client, live)
	switch {
	case err != nil:
		return fmt.Sprintf("whether %s resources exist, which deleting the CRD would delete, cannot be told: %v", gk.Kind, err)
	case cr != "":
		return fmt.Sprintf("deleting the CRD would delete every %s resource in the cluster (such as %s); prune-crds-with-resources allows it", gk.Kind, cr)
	}
	return ""
}

// creatable dry-runs u's creation in place of live. The API server
// validates an object before it looks for its name, so an object that
// exists answers AlreadyExists exactly when it would be accepted as new.
// A value that live itself holds (a Service's node port or cluster IP)
// is freed by the delete a recreate makes first: that refusal does not
// count; one held by another object does.
func (p *planner) creatable(ctx context.Context, u, live *unstructured.Unstructured) error {
	err := p.clients.Client.Create(ctx, u.DeepCopy(), client.DryRunAll, client.FieldOwner(FieldManager))
	if err == nil || apierrors.IsAlreadyExists(err) || heldBy(err, u, live) {
		return nil
	}
	return err
}

// heldBy reports whether every cause of an Invalid answer is a value
// already allocated that live holds at the same field.
func heldBy(err error, u, live *unstructured.Unstructured) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if !strings.Contains(c.Message, "already allocated") {
			return false
		}
		wanted := valuesAt(u.Object, pathSteps(c.Field), false)
		held := valuesAt(live.Object, pathSteps(c.Field), true)
		if len(wanted) == 0 {
			return false
		}
		for _, v := range wanted {
			if !slices.Contains(held, v) {
				return false
			}
		}
	}
	return true
}

// valuesAt is what obj holds at the field path's steps, as strings: every
// item of a list at the end; with anyIndex, whatever the indices, as a
// value may have moved within its list.
func valuesAt(v any, steps []fieldStep, anyIndex bool) []string {
	if len(steps) == 0 {
		if list, ok := v.([]any); ok {
			var out []string
			for _, item := range list {
				out = append(out, valuesAt(item, nil, anyIndex)...)
			}
			return out
		}
		if v == nil {
			return nil
		}
		return []string{fmt.Sprint(v)}
	}
	step, rest := steps[0], steps[1:]
	if list, ok := v.([]any); ok && step.index >= 0 {
		if anyIndex {
			var out []string
			for _, item := range list {
				out = append(out, valuesAt(item, rest, anyIndex)...)
			}
			return out
		}
		if step.index >= len(list) {
			return nil
		}
		return valuesAt(list[step.index], rest, anyIndex)
	}
	m, _ := v.(map[string]any)
	return valuesAt(m[step.key], rest, anyIndex)
}

func (p *planner) describe(err error, o *sources.Object) error {
	if meta.IsNoMatchError(err) {
		if best := p.closestKind(o); best != "" {
			return fmt.Errorf("the cluster has no kind %s in %s; did you mean %s?", o.GetKind(), o.GetAPIVersion(), best)
		}
		if best := p.closestAPIVersion(o); best != "" {
			return fmt.Errorf("the cluster has no kind %s in %s; did you mean apiVersion: %s?", o.GetKind(), o.GetAPIVersion(), best)
		}
		return fmt.Errorf("the cluster has no kind %s in %s (is its CRD installed?)", o.GetKind(), o.GetAPIVersion())
	}
	if isNamespaceNotFound(err, o) {
		return fmt.Errorf("namespace %s does not exist and is not in the set", o.GetNamespace())
	}
	return withAPIMessage(err)
}

// withAPIMessage is err said as apiMessage says it, still unwrapping to
// err (so that a refusal stays a refusal and a lost answer a lost answer).
func withAPIMessage(err error) error { return &messageError{msg: apiMessage(err), err: err} }

type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }

// apiMessage is the API server's own message, which names the field.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

// needsTakeOver reports whether kubectl left its marks on the live object.
func needsTakeOver(live *unstructured.Unstructured) bool {
	if _, ok := live.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; ok {
		return true
	}
	for _, mf := range live.GetManagedFields() {
		for _, m := range takeOver.managers {
			if mf.Manager == m.Name && mf.Operation == m.OperationType {
				return true
			}
		}
	}
	return false
}

// drifted compares the live object with the dry-run result: labels,
// annotations, and everything but metadata and status, normalised as ssa
// does, so that an object that has not drifted is not written.
func drifted(live, dryRun *unstructured.Unstructured) bool {
	// An apply that changes nothing returns the live object as it is
	// (same resourceVersion and managedFields): the common case, decided
	// without copying and normalising both.
	if apiequality.Semantic.DeepEqual(live.Object, dryRun.Object) {
		return false
	}
	if !apiequality.Semantic.DeepEqual(live.GetLabels(), dryRun.GetLabels()) ||
		!apiequality.Semantic.DeepEqual(live.GetAnnotations(), dryRun.GetAnnotations()) {
		return true
	}
	return !apiequality.Semantic.DeepEqual(bodyOf(live), bodyOf(dryRun))
}

func bodyOf(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata")
	unstructured.RemoveNestedField(c.Object, "status")
	if err := normalize.DryRunUnstructured(c); err != nil {
		return u.Object
	}
	return c.Object
}

// errorList collects per-object errors from concurrent workers.
type errorList struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorList) add(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *errorList) err() error { return joinErrors(l.errs) }

// What a report says of an object whose request got no answer: the
// server stopped answering (the run's error says once which server and
// how), or the run's end cut the request short.
const (
	NoAnswer  = "no answer from the API server"
	TimedOut  = "not done: the run's timeout passed"
	Cancelled = "not done: the run was cancelled"
	// Fenced: the write was not sent, because the run no longer holds
	// its inventory's Lease (the run's error says once why).
	Fenced = "not done: the run lost the inventory's Lease"
)

// cutShort says what left err's request without an answer, as a report
// says it of the object (NoAnswer, TimedOut, Cancelled), or "" when the
// request was answered.
func cutShort(err error) string {
	var fenced *kube.FencedError
	switch {
	case errors.As(err, &fenced):
		return Fenced
	case kube.ConnectionLost(err):
		return NoAnswer
	case errors.Is(err, context.DeadlineExceeded):
		return TimedOut
	case errors.Is(err, context.Canceled):
		return Cancelled
	}
	return ""
}

// setError records why an object failed: msg, or that its request got no
// answer. Either way, Unanswered marks a write that may have been carried
// out (a 5xx answer too: the server may have stored it first).
func setError(o *result.Object, err error, msg string) {
	o.Error = msg
	if why := cutShort(err); why != "" {
		o.Error = why
	} else {
		o.Problems = problemsOf(err)
	}
	o.Unanswered = kube.Unanswered(err)
}

// joinErrors joins per-object errors, except that objects cut off by an
// API server that stopped answering, or by the run's end, are said once,
// together, not once per object.
func joinErrors(errs []error) error {
	var kept []error
	groups := map[string][]*ObjectError{}
	for _, e := range errs {
		var oe *ObjectError
		if e != nil && errors.As(e, &oe) {
			if why := cutShort(oe.Err); why != "" {
				groups[why] = append(groups[why], oe)
				continue
			}
		}
		kept = append(kept, e)
	}
	for _, why := range []string{NoAnswer, TimedOut, Cancelled, Fenced} {
		switch objs := groups[why]; {
		case len(objs) == 1:
			kept = append(kept, objs[0])
		case len(objs) > 1:
			kept = append(kept, newUndoneError(objs))
		}
	}
	return errors.Join(kept...)
}

// UndoneError is the objects that an API server which stopped answering,
// or the run's end, left undone, said once.
type UndoneError struct {
	Refs []string
	Err  error
}

func newUndoneError(objs []*ObjectError) *UndoneError {
	e := &UndoneError{Err: objs[0].Err}
	for _, oe := range objs {
		e.Refs = append(e.Refs, oe.Ref)
		var down *kube.UnreachableError
		if errors.As(oe.Err, &down) {
			e.Err = oe.Err // names the server and the first error
		}
	}
	sort.Strings(e.Refs)
	return e
}

func (e *UndoneError) Error() string {
	const named = 3
	refs := strings.Join(e.Refs[:min(named, len(e.Refs))], ", ")
	if len(e.Refs) > named {
		refs += fmt.Sprintf(" and %d more", len(e.Refs)-named)
	}
	why := kube.DescribeLost(e.Err)
	switch cutShort(e.Err) {
	case TimedOut:
		why = "the run's timeout passed"
	case Cancelled:
		why = "the run was cancelled"
	case Fenced:
		why = "the run lost the inventory's Lease"
	}
	return fmt.Sprintf("%s; %d objects left undone (%s), each listed in the report", why, len(e.Refs), refs)
}

func (e *UndoneError) Unwrap() error { return e.Err }

// ObjectError is a failure of one object, named first, with its file.
type ObjectError struct {
	Ref    string
	Source string
	// Line is where the object starts in Source, 0 when not known.
	Line int
	// Patches are the kustomize patches that target the object.
	Patches []string
	Err     error
	// Problems are the fields Err is about, each with its line in Source
	// when known.
	Problems []result.Problem
}

func (e *ObjectError) Error() string {
	var b strings.Builder
	b.WriteString(e.Ref)
	line := e.Line
	if len(e.Problems) == 1 && e.Problems[0].Line > 0 {
		line = e.Problems[0].Line
	}
	switch {
	case len(e.Problems) == 1 && e.Problems[0].Source != "" && e.Problems[0].Line > 0:
		// A patch set the field at fault: there, not in the base.
		fmt.Fprintf(&b, " (%s:%d)", e.Problems[0].Source, e.Problems[0].Line)
	case e.Source != "":
		where := e.Source
		if line > 0 {
			where = fmt.Sprintf("%s:%d", e.Source, line)
		}
		if len(e.Patches) > 0 {
			where += ", patched by " + strings.Join(e.Patches, ", ")
		}
		b.WriteString(" (" + where + ")")
	}
	switch len(e.Problems) {
	case 0:
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	case 1:
		b.WriteString(": ")
		b.WriteString(e.Problems[0].String())
	default:
		fmt.Fprintf(&b, ": %d problems", len(e.Problems))
		for _, p := range e.Problems {
			b.WriteString("\n    " + p.At(""))
		}
	}
	return b.String()
}

func (e *ObjectError) Unwrap() error { return e.Err }

// keepInventoryLabels copies the live object's inventory labels onto the
// dry-run result, for a diff that names no inventory: apply would keep them
// (it always labels), so they are no change.
func keepInventoryLabels(live, dryRun *unstructured.Unstructured) {
	l := live.GetLabels()
	labels := dryRun.GetLabels()
	for _, k := range []string{inventory.NameLabel, inventory.NamespaceLabel} {
		if v, ok := l[k]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
		}
	}
	if labels != nil {
		dryRun.SetLabels(labels)
	}
}

// conflictCause reads a manager's name from a conflict's cause, as the API
// server writes it: conflict with "name" (using v1, at a time).
var conflictCause = regexp.MustCompile(`^conflict with ("(?:[^"\\]|\\.)*")`)

// fieldConflicts reads an apply's conflict: each field and the manager
// that owns it, except kubectl's, whose fields a deploy tool takes over
// as Flux does. ok says err was a conflict at all.
func fieldConflicts(err error) (conflicts []result.Conflict, ok bool) {
	if !apierrors.IsConflict(err) {
		return nil, false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil, false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		ok = true
		manager := c.Message
		if m := conflictCause.FindStringSubmatch(c.Message); m != nil {
			if name, err := strconv.Unquote(m[1]); err == nil {
				manager = name
			}
		}
		if slices.ContainsFunc(takeOver.managers, func(f ssa.FieldManager) bool { return f.Name == manager }) {
			continue
		}
		conflicts = append(conflicts, result.Conflict{Field: c.Field, Manager: manager})
	}
	return conflicts, ok
}

// describeConflicts names the fields and their managers, for messages.
func describeConflicts(conflicts []result.Conflict) string {
	const named = 5
	parts := make([]string, 0, named+1)
	for i, c := range conflicts {
		if i == named {
			parts = append(parts, fmt.Sprintf("and %d more", len(conflicts)-named))
			break
		}
		parts = append(parts, fmt.Sprintf("%s from %s", c.Field, c.Manager))
	}
	return strings.Join(parts, ", ")
}

// closestKind is the kind of o's group version the cluster serves that o's
// kind most likely misspells, "" when none is near (or the cluster cannot
// say: it is asked only once an object failed).
func (p *planner) closestKind(o *sources.Object) string {
	if p.clients == nil || p.clients.Kube == nil {
		return ""
	}
	list, err := p.clients.Kube.Discovery().ServerResourcesForGroupVersion(o.GetAPIVersion())
	if err != nil {
		return ""
	}
	var kinds []string
	for _, r := range list.APIResources {
		if !strings.Contains(r.Name, "/") {
			kinds = append(kinds, r.Kind)
		}
	}
	return suggest.Closest(o.GetKind(), kinds)
}

// closestAPIVersion is the apiVersion, of those in which the cluster serves
// o's kind, nearest to the one o names: a misspelt group or an old version.
// "" when the cluster serves the kind in none (or cannot say).
func (p *planner) closestAPIVersion(o *sources.Object) string {
	if p.clients == nil || p.clients.Kube == nil {
		return ""
	}
	_, lists, err := p.clients.Kube.Discovery().ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		return ""
	}
	var serving []string
	for _, list := range lists {
		for _, r := range list.APIResources {
			if r.Kind == o.GetKind() && !strings.Contains(r.Name, "/") {
				serving = append(serving, list.GroupVersion)
				break
			}
		}
	}
	return suggest.Nearest(o.GetAPIVersion(), serving)
}

// problemsOf names the fields an invalid object's error is about: each
// problem offline validation found, or the causes the API server gave
// with its answer. nil when err names no field.
func problemsOf(err error) []result.Problem {
	var invalid *schemas.InvalidError
	if errors.As(err, &invalid) {
		return invalid.Unique()
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil
	}
	s := status.Status()
	if s.Details != nil && len(s.Details.Causes) > 0 {
		var out []result.Problem
		for _, c := range s.Details.Causes {
			out = append(out, result.Problem{Field: c.Field, Message: c.Message})
		}
		return out
	}
	// Server-side apply's typing errors carry their field in the message:
	// "failed to create typed patch object (...): .spec.replcas: field
	// not declared in schema".
	if _, rest, ok := strings.Cut(s.Message, "): "); ok {
		var out []result.Problem
		for _, p := range schemas.TypingProblems(rest) {
			if p.Field != "" {
				out = append(out, p)
			}
		}
		return out
	}
	return nil
}

// currentNow says whether kstatus finds live ready as it is (a Namespace
// or CRD this run created: no rule is about those).
func currentNow(live *unstructured.Unstructured) bool {
	res, err := status.Compute(live)
	return err == nil && res.Status == status.CurrentStatus
}
