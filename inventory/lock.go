package inventory

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/kube"
)

// LockOptions tune Lock. The zero value is a good default.
type LockOptions struct {
	// Duration is how long the lease stays valid without renewal, so that
	// a run that died without releasing it blocks others only this long.
	// Default 30s.
	Duration time.Duration
	// Retry is how often a waiting run checks the lease again. Default
	// 250ms.
	Retry time.Duration
	// OnWait is called once when the lease is found held by someone else.
	OnWait func(holder string)
}

// HeldError says that another run holds the inventory's lease.
type HeldError struct {
	Namespace, Name, Holder string
	Since                   time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("inventory %s/%s is locked by %s (since %s); another run is using it",
		e.Namespace, e.Name, e.Holder, e.Since.UTC().Format(time.RFC3339))
}

// Lock takes the Lease named after the inventory for holder, waiting while
// another holder has a valid one, until ctx ends (then *HeldError). The
// lease is renewed in the background until it is released; Held says
// whether it is still this run's to write under.
//
// client-go's leader election was built for long-running leaders (jittered
// retry loops, callbacks, klog); a CI run needs a lock with a clear refusal
// message and prompt release, which is this.
func (s *Store) Lock(ctx context.Context, namespace, name, holder string, opts LockOptions) (*Held, error) {
	if opts.Duration == 0 {
		opts.Duration = 30 * time.Second
	}
	if opts.Retry == 0 {
		opts.Retry = 250 * time.Millisecond
	}
	leases := s.Client.CoordinationV1().Leases(namespace)
	leaseName := ConfigMapName(name)
	// The Lease's own requests pass the fence that its loss raises.
	ctx = kube.Unfenced(ctx)
	waited := false
	var lastHeld *HeldError

	// A run gives its Lease back when it ends, so the Lease is usually
	// not there: it is created first, without the read before that costs
	// a round trip; one that is there is then read as below.
	tryCreate := true
	for {
		now := metav1.NewMicroTime(time.Now())
		var lease *coordinationv1.Lease
		var err error
		if tryCreate {
			tryCreate = false
			err = apierrors.NewNotFound(coordinationv1.Resource("leases"), leaseName)
		} else {
			lease, err = leases.Get(ctx, leaseName, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err):
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: namespace, Labels: map[string]string{
					ManagedByLabel: ManagedByValue, InventoryLabel: name,
				}},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To(holder),
					LeaseDurationSeconds: ptr.To(int32(opts.Duration / time.Second)),
					AcquireTime:          &now,
					RenewTime:            &now,
				},
			}
			sent := time.Now()
			lease, err = leases.Create(ctx, lease, metav1.CreateOptions{FieldManager: "gantry"})
			if err == nil {
				return s.keep(namespace, name, lease, opts.Duration, sent), nil
			}
			// An answer lost on the way back may hide a Lease that
			// was created: the next look finds it ours.
			if !apierrors.IsAlreadyExists(err) && !kube.Unanswered(err) {
				return nil, fmt.Errorf("locking inventory %s/%s: %w", namespace, name, err)
			}
			if apierrors.IsAlreadyExists(err) && !waited && lastHeld == nil {
				continue // there is one: read it now, with no pause
			}
		case err != nil:
			if ctx.Err() != nil {
				break
			}
			return nil, fmt.Errorf("locking inventory %s/%s: %w", namespace, name, err)
		default:
			h := validHolder(lease, now.Time)
			if h == "" || h == holder {
				lease.Spec.HolderIdentity = ptr.To(holder)
				lease.Spec.LeaseDurationSeconds = ptr.To(int32(opts.Duration / time.Second))
				lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
				sent := time.Now()
				lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: "gantry"})
				if err == nil {
					return s.keep(namespace, name, lease, opts.Duration, sent), nil
				}
				if !apierrors.IsConflict(err) && !kube.Unanswered(err) && ctx.Err() == nil {
					return nil, fmt.Errorf("locking inventory %s/%s: %w", namespace, name, err)
				}
				break
			}
			since := now.Time
			if lease.Spec.AcquireTime != nil {
				since = lease.Spec.AcquireTime.Time
			}
			lastHeld = &HeldError{Namespace: namespace, Name: name, Holder: h, Since: since}
			if !waited && opts.OnWait != nil {
				opts.OnWait(h)
			}
			waited = true
		}
		select {
		case <-ctx.Done():
			if lastHeld != nil {
				return nil, lastHeld
			}
			return nil, fmt.Errorf("locking inventory %s/%s: %w", namespace, name, ctx.Err())
		case <-time.After(opts.Retry):
		}
	}
}

// validHolder is who holds lease at now: empty when nobody does, or when
// its holder let it expire.
func validHolder(lease *coordinationv1.Lease, now time.Time) string {
	if lease.Spec.RenewTime == nil ||
		lease.Spec.RenewTime.Add(time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))*time.Second).Before(now) {
		return ""
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// Holder reads who holds the Lease of an inventory now, without taking
// it: empty when there is no Lease, or when it expired.
func (s *Store) Holder(ctx context.Context, namespace, name string) (string, error) {
	lease, err := s.Client.CoordinationV1().Leases(namespace).Get(ctx, ConfigMapName(name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the Lease of inventory %s/%s: %w", namespace, name, err)
	}
	return validHolder(lease, time.Now()), nil
}

// Held is a Lease this run holds: renewed in the background until
// Release, and lost when another run took it or when it could not be
// renewed in time. A run writes only while Check says it may.
type Held struct {
	store           *Store
	namespace, name string
	leaseName       string
	holder          string
	duration        time.Duration
	lost            chan struct{}
	stop            context.CancelFunc
	done            chan struct{}
	releaseOnce     sync.Once
	loseOnce        sync.Once

	mu sync.Mutex
	// current is the Lease as last written; renewed is when the request
	// that wrote it was sent (the Lease runs from then).
	current *coordinationv1.Lease
	renewed time.Time
	// renewedWall is renewed on the wall clock alone. The monotonic clock
	// goes on while the process is stopped but not while the machine
	// sleeps (a laptop's lid closed, a suspended VM); the wall clock, set
	// again on waking, goes on through both.
	renewedWall time.Time
	lostErr     *LostError
}

// LostError says that a run no longer holds its inventory's Lease, and so
// may not write.
type LostError struct {
	Namespace, Name string
	// Holder is the run that holds the Lease now, or else the one that
	// wrote the inventory after this one; empty when neither is known.
	Holder string
	// Unrenewed is how long the Lease went without renewal when it was
	// given up for that; zero when another run took it.
	Unrenewed time.Duration
}

func (e *LostError) Error() string {
	who := "no other run is known to have taken it"
	if e.Holder != "" {
		who = "taken over by " + e.Holder
	}
	if e.Unrenewed > 0 {
		return fmt.Sprintf("lost the Lease of inventory %s/%s: not renewed for %s, longer than a run may write without it (%s); stopped writing",
			e.Namespace, e.Name, e.Unrenewed.Round(100*time.Millisecond), who)
	}
	return fmt.Sprintf("lost the Lease of inventory %s/%s: %s; stopped writing", e.Namespace, e.Name, who)
}

// writable is the part of the Lease's duration a run writes under after
// its last renewal: the rest is the margin for a write already on its way,
// and for the clocks of two runners that disagree.
func (h *Held) writable() time.Duration { return h.duration * 2 / 3 }

// keep renews the lease every quarter of its duration until Release.
func (s *Store) keep(namespace, name string, lease *coordinationv1.Lease, d time.Duration, sent time.Time) *Held {
	// stopping ends the renewal in flight too: giving the lease back must
	// not wait for a renewal that a stalled server never answers.
	stopping, stop := context.WithCancel(kube.Unfenced(context.Background()))
	h := &Held{
		store: s, namespace: namespace, name: name, leaseName: ConfigMapName(name),
		holder: ptr.Deref(lease.Spec.HolderIdentity, ""), duration: d,
		lost: make(chan struct{}), stop: stop, done: make(chan struct{}),
		current: lease, renewed: sent, renewedWall: sent.Round(0),
	}
	go h.renew(stopping)
	return h
}

func (h *Held) renew(ctx context.Context) {
	defer close(h.done)
	leases := h.store.Client.CoordinationV1().Leases(h.namespace)
	t := time.NewTicker(h.duration / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if h.Check() != nil {
			return
		}
		h.mu.Lock()
		next := h.current.DeepCopy()
		h.mu.Unlock()
		sent := time.Now()
		next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(sent))
		rctx, cancel := context.WithTimeout(ctx, h.duration/4)
		// The write is conditional on the version this run last wrote:
		// it fails if another run took the Lease meanwhile, however long
		// this one was away.
		updated, err := leases.Update(rctx, next, metav1.UpdateOptions{FieldManager: "gantry"})
		if apierrors.IsConflict(err) {
			// A renewal whose answer was lost changed the version:
			// still ours if the holder is.
			// It runs from when that renewal was sent, which is
			// not known: the next renewal extends it.
			updated, err = h.store.stillOurs(rctx, leases, h.leaseName, next)
			h.mu.Lock()
			sent = h.renewed
			h.mu.Unlock()
		}
		cancel()
		switch {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			h.loseTo(ctx, 0)
			return
		case err != nil:
			continue // transient: the next tick tries again, until Check gives up
		}
		h.mu.Lock()
		if h.lostErr == nil {
			h.current, h.renewed, h.renewedWall = updated, sent, sent.Round(0)
		}
		h.mu.Unlock()
	}
}

// Check returns nil while the run may write under the Lease, and a
// *LostError once it may not: another run took it, or it has gone
// without renewal for longer than writable. A run that was stopped (a
// paused runner, a long pause of the process) past that finds out here
// before its next write goes out.
func (h *Held) Check() error {
	h.mu.Lock()
	lost, unrenewed := h.lostErr, h.unrenewed()
	h.mu.Unlock()
	if lost != nil {
		return lost
	}
	if unrenewed >= h.writable() {
		h.loseTo(context.Background(), unrenewed)
		return h.Check()
	}
	return nil
}

// unrenewed is how long the Lease has gone without renewal: the longer of
// what the two clocks say, so that neither a stopped process nor a machine
// that slept passes for a run that kept its Lease. A wall clock stepped
// forward (a drifted clock corrected) can make a run give its Lease up
// early: a failed run, never two runs writing; one set back changes
// nothing, the monotonic clock still bounds it. Called with mu held.
func (h *Held) unrenewed() time.Duration {
	return max(time.Since(h.renewed), time.Since(h.renewedWall))
}

// loseTo records the loss once, naming who holds the Lease now; callers
// that come meanwhile wait for it.
func (h *Held) loseTo(ctx context.Context, unrenewed time.Duration) {
	h.loseOnce.Do(func() {
		e := &LostError{Namespace: h.namespace, Name: h.name, Unrenewed: unrenewed}
		// Who took it, for the message; a failed read leaves it unnamed.
		rctx, cancel := context.WithTimeout(kube.Unfenced(context.WithoutCancel(ctx)), 3*time.Second)
		defer cancel()
		if l, err := h.store.Client.CoordinationV1().Leases(h.namespace).Get(rctx, h.leaseName, metav1.GetOptions{}); err == nil {
			e.Holder = ptr.Deref(l.Spec.HolderIdentity, "")
		}
		if e.Holder == "" || e.Holder == h.holder {
			// A run that took it and has finished since gave it back:
			// the inventory names who wrote it last.
			e.Holder = ""
			if inv, err := h.store.Load(rctx, h.namespace, h.name); err == nil && inv.WrittenBy != h.holder {
				e.Holder = inv.WrittenBy
			}
		}
		h.mu.Lock()
		h.lostErr = e
		h.mu.Unlock()
		close(h.lost)
	})
}

// Lost is closed once the Lease is lost.
func (h *Held) Lost() <-chan struct{} { return h.lost }

// Release ends the renewal and gives the Lease back, only if it is still
// this run's.
func (h *Held) Release() {
	h.releaseOnce.Do(func() {
		h.stop()
		<-h.done
		h.mu.Lock()
		current, lost := h.current, h.lostErr != nil
		h.mu.Unlock()
		if lost {
			return // another run's now, or to be taken once expired
		}
		leases := h.store.Client.CoordinationV1().Leases(h.namespace)
		// A lease that is not given back expires after its duration: a
		// server that stopped answering does not hold the run up longer.
		ctx, cancel := context.WithTimeout(kube.Unfenced(context.Background()), 3*time.Second)
		defer cancel()
		// A conflict means the version changed: delete it only if it is
		// still ours.
		del := func(l *coordinationv1.Lease) error {
			return leases.Delete(ctx, h.leaseName, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion},
			})
		}
		if err := del(current); apierrors.IsConflict(err) {
			if l, err := h.store.stillOurs(ctx, leases, h.leaseName, current); err == nil {
				_ = del(l)
			}
		}
	})
}

// stillOurs reads the Lease again and returns it if its holder is still
// the one of mine (same UID), else a conflict.
func (s *Store) stillOurs(ctx context.Context, leases coordinationclient.LeaseInterface, leaseName string, mine *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	l, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if l.UID != mine.UID || ptr.Deref(l.Spec.HolderIdentity, "") != ptr.Deref(mine.Spec.HolderIdentity, "") {
		return nil, apierrors.NewConflict(coordinationv1.Resource("leases"), leaseName, fmt.Errorf("held by %s now", ptr.Deref(l.Spec.HolderIdentity, "")))
	}
	return l, nil
}
