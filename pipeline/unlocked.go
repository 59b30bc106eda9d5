package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// An apply plans before it takes the inventory's Lease. Everything a plan
// reads (the set's namespaces, the inventory, who holds the Lease, the
// LISTs) is asked at once, in one round trip instead of one after the
// other. Then:
//
//   - a plan that writes nothing (every object unchanged and ready, nothing
//     to prune, the inventory and its newest revision as they are) takes
//     no Lease: it reads again that no Lease is held and that the inventory
//     is still the version it planned with, and it is done;
//   - a plan that writes takes the Lease, and then reads again the
//     inventory and every object it read: when one changed, it plans
//     again under the Lease. What it writes was planned from what the
//     cluster held while the run held the Lease, as if it had been taken
//     first.

// errPlannedNoWrite refuses a write of a run that planned none and so took
// no Lease.
var errPlannedNoWrite = errors.New("this run planned no change and holds no Lease of its inventory: a write now is refused")

// errNoLease refuses a write of a run that has not taken its inventory's
// Lease yet. Only the Namespaces and CRDs that validation creates before
// the Lease can be taken (the Lease lives in the inventory's namespace)
// pass, marked as such.
var errNoLease = errors.New("this run does not hold the Lease of its inventory: a write now is refused")

// peeked is what was read of the inventory before its Lease was taken.
type peeked struct {
	inv    *inventory.Inventory
	err    error
	holder string
}

// mayPlanUnlocked says whether the run may plan before it takes the
// Lease: an apply of a built set, not a rollback or a correction, which
// choose what they apply under the Lease.
func (r *run) mayPlanUnlocked() bool {
	return r.res.Command == "apply" && r.lease == nil && r.opts.lease == nil && r.opts.expect == nil && r.opts.only == nil
}

// readUnlocked reads at once what the plan needs: which namespaces exist,
// the inventory and who holds its Lease, and the LISTs of the set's kinds.
func (r *run) readUnlocked(ctx context.Context) *peeked {
	pk := &peeked{}
	r.readAtOnce(ctx,
		func() { pk.inv, pk.err = r.store.Load(ctx, r.opts.InventoryNamespace, r.opts.Inventory) },
		func() {
			var err error
			if pk.holder, err = r.store.Holder(ctx, r.opts.InventoryNamespace, r.opts.Inventory); err != nil {
				// Unknown: the Lease is taken, as without this read.
				pk.holder = "unknown"
			}
		})
	return pk
}

// readAtOnce sends together the reads a plan starts with (which of the
// set's namespaces exist, the LISTs of its kinds) and the reads given,
// and returns when all but the LISTs have answered (the plan waits for
// those).
func (r *run) readAtOnce(ctx context.Context, reads ...func()) {
	p := r.planner
	p.absentKinds = p.unservedKinds()
	keys := make([]objectKey, 0, len(r.objects))
	for _, o := range r.objects {
		if !p.absentKinds[o.GroupVersionKind().GroupKind()] {
			keys = append(keys, keyOf(o.Unstructured))
		}
	}
	p.startPrefetch(ctx, keys, r.opts.Concurrency)
	var wg sync.WaitGroup
	wg.Go(func() { p.findAbsentNamespaces(ctx, r.opts.Concurrency) })
	for _, read := range reads {
		wg.Go(read)
	}
	wg.Wait()
}

// usePeeked makes the inventory read before the Lease (pk) the run's, to
// plan with; false when there is none or it could not be read (the Lease
// is then taken first, and the read reports why).
func (r *run) usePeeked(pk *peeked) bool {
	if pk == nil || pk.err != nil {
		return false
	}
	r.prev = pk.inv
	r.previous = append([]inventory.Entry(nil), pk.inv.Entries...)
	r.unlocked = pk
	return true
}

// settleUnlocked ends a plan made without the Lease: a plan that writes
// nothing is confirmed and needs none; any other takes the Lease and
// checks that what it read is still so. again says it is not: plan again,
// under the Lease.
func (r *run) settleUnlocked(ctx context.Context) (again bool, err error) {
	heldBy := r.unlocked.holder
	r.unlocked = nil
	ns, name := r.opts.InventoryNamespace, r.opts.Inventory
	if heldBy == "" && r.writesNothing() {
		var holder string
		var holderErr, confirmErr error
		var wg sync.WaitGroup
		wg.Go(func() { holder, holderErr = r.store.Holder(ctx, ns, name) })
		wg.Go(func() { confirmErr = r.store.Confirm(ctx, r.prev) })
		wg.Wait()
		if holderErr == nil && confirmErr == nil && holder == "" {
			r.confirmed = true
			r.clients.Fence.Hold(func() error { return errPlannedNoWrite })
			return false, nil
		}
	}
	planned := r.prev
	held, err := r.takeLease(ctx)
	if err != nil {
		return false, err
	}
	var changed bool
	var readErr error
	var wg sync.WaitGroup
	wg.Go(func() { changed, readErr = r.planner.changedSince(ctx, r.opts.Concurrency) })
	err = r.hold(ctx, held)
	wg.Wait()
	if err != nil {
		return false, err
	}
	if readErr != nil || changed || !r.prev.SameVersion(planned) {
		r.obs.Info(fmt.Sprintf("inventory %s/%s or its objects changed while the run planned: planning again under its Lease", ns, name))
		return true, nil
	}
	return false, nil
}

// writesNothing says whether the plan, applied, would write nothing: every
// object unchanged and (when a wait follows) ready, each listed by the
// inventory as it is, nothing to prune (neither the inventory's entries
// the set no longer has nor orphans its reads found), and its newest
// revision the same set, succeeded, by the same source and gantry.
func (r *run) writesNothing() bool {
	newest := r.prev.Newest()
	if r.revision == nil || newest == nil || !sameSet(newest, r.revision) || newest.Outcome != string(result.ReasonSucceeded) {
		return false
	}
	prev := make(map[string]inventory.Entry, len(r.prev.Entries))
	for _, e := range r.prev.Entries {
		prev[e.ID] = e
	}
	for _, pl := range r.plans {
		if pl.kind != planUnchanged || r.opts.Wait && !pl.current {
			return false
		}
		e := inventory.EntryFor(pl.obj.Unstructured)
		if prev[e.ID] != e {
			return false // new to the inventory: recorded as adopted
		}
	}
	if r.opts.Prune && len(r.staleEntries()) > 0 {
		return false // something to prune, listed or orphaned
	}
	return r.inventoryAsSaved(r.prev, prev)
}

// changedSince reads again every object the plan read, and says whether
// one of them changed (or appeared, or went) since.
func (p *planner) changedSince(ctx context.Context, concurrency int) (bool, error) {
	p.seenMu.Lock()
	seen := maps.Clone(p.seen)
	p.seenMu.Unlock()
	// Only their versions are compared: the LISTs read metadata alone.
	fresh := &planner{clients: p.clients, owner: p.owner, keepOwnerLabels: p.keepOwnerLabels, metadataOnly: true,
		live: map[objectKey]*unstructured.Unstructured{}, listed: map[groupKey]bool{}}
	keys := slices.Collect(maps.Keys(seen))
	fresh.prefetch(ctx, keys, concurrency)
	var changed atomic.Bool
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for _, k := range keys {
		var now string
		switch live, ok := fresh.live[k]; {
		case ok:
			now = live.GetResourceVersion()
		case fresh.listed[k.group]:
		default:
			g.Go(func() error {
				u := &unstructured.Unstructured{}
				err := fresh.read(gctx, k, u)
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				if u.GetResourceVersion() != seen[k] {
					changed.Store(true)
				}
				return nil
			})
			continue
		}
		if now != seen[k] {
			changed.Store(true)
		}
	}
	err := g.Wait()
	return changed.Load(), err
}
