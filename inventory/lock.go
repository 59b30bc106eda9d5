package inventory

import (
	"context"
	"fmt"
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
// lease is renewed in the background until release is called; if renewal
// fails (another run took an expired lease), lost is closed.
//
// client-go's leader election was built for long-running leaders (jittered
// retry loops, callbacks, klog); a CI run needs a lock with a clear refusal
// message and prompt release, which is this.
func (s *Store) Lock(ctx context.Context, namespace, name, holder string, opts LockOptions) (release func(), lost <-chan struct{}, err error) {
	if opts.Duration == 0 {
		opts.Duration = 30 * time.Second
	}
	if opts.Retry == 0 {
		opts.Retry = 250 * time.Millisecond
	}
	leases := s.Client.CoordinationV1().Leases(namespace)
	leaseName := ConfigMapName(name)
	waited := false
	var lastHeld *HeldError

	for {
		now := metav1.NewMicroTime(time.Now())
		lease, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
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
			lease, err = leases.Create(ctx, lease, metav1.CreateOptions{FieldManager: "gantry"})
			if err == nil {
				release, lost := s.keep(namespace, leaseName, lease, opts.Duration)
				return release, lost, nil
			}
			// An answer lost on the way back may hide a Lease that
			// was created: the next look finds it ours.
			if !apierrors.IsAlreadyExists(err) && !kube.Unanswered(err) {
				return nil, nil, fmt.Errorf("locking inventory %s/%s: %w", namespace, name, err)
			}
		case err != nil:
			if ctx.Err() != nil {
				break
			}
			return nil, nil, fmt.Errorf("locking inventory %s/%s: %w", namespace, name, err)
		default:
			h := ptr.Deref(lease.Spec.HolderIdentity, "")
			expired := lease.Spec.RenewTime == nil ||
				lease.Spec.RenewTime.Add(time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))*time.Second).Before(now.Time)
			if h == "" || h == holder || expired {
				lease.Spec.HolderIdentity = ptr.To(holder)
				lease.Spec.LeaseDurationSeconds = ptr.To(int32(opts.Duration / time.Second))
				lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
				lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: "gantry"})
				if err == nil {
					release, lost := s.keep(namespace, leaseName, lease, opts.Duration)
					return release, lost, nil
				}
				if !apierrors.IsConflict(err) && !kube.Unanswered(err) && ctx.Err() == nil {
					return nil, nil, fmt.Errorf("locking inventory %s/%s: %w", namespace, name, err)
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
				return nil, nil, lastHeld
			}
			return nil, nil, fmt.Errorf("locking inventory %s/%s: %w", namespace, name, ctx.Err())
		case <-time.After(opts.Retry):
		}
	}
}

// keep renews the lease until release, which then deletes it (only if it is
// still ours).
func (s *Store) keep(namespace, leaseName string, lease *coordinationv1.Lease, d time.Duration) (func(), <-chan struct{}) {
	leases := s.Client.CoordinationV1().Leases(namespace)
	// stopping ends the renewal in flight too: giving the lease back must
	// not wait for a renewal that a stalled server never answers.
	stopping, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	lost := make(chan struct{})
	current := lease
	go func() {
		defer close(done)
		t := time.NewTicker(d / 3)
		defer t.Stop()
		for {
			select {
			case <-stopping.Done():
				return
			case <-t.C:
				next := current.DeepCopy()
				next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
				ctx, cancel := context.WithTimeout(stopping, d/3)
				updated, err := leases.Update(ctx, next, metav1.UpdateOptions{FieldManager: "gantry"})
				if apierrors.IsConflict(err) {
					// A renewal whose answer was lost changed the
					// version: still ours if the holder is.
					updated, err = s.stillOurs(ctx, leases, leaseName, current)
				}
				cancel()
				if err != nil {
					if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
						close(lost)
						return
					}
					continue // transient: the next tick tries again
				}
				current = updated
			}
		}
	}()
	var released bool
	return func() {
		if released {
			return
		}
		released = true
		stop()
		<-done
		// A lease that is not given back expires after its duration: a
		// server that stopped answering does not hold the run up longer.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		// A lease that cannot be deleted (API unreachable) expires after its
		// duration; a conflict means it is no longer ours.
		del := func(l *coordinationv1.Lease) error {
			return leases.Delete(ctx, leaseName, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion},
			})
		}
		if err := del(current); apierrors.IsConflict(err) {
			if l, err := s.stillOurs(ctx, leases, leaseName, current); err == nil {
				_ = del(l)
			}
		}
	}, lost
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
