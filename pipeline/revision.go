package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources"
)

// prepareRevision starts making the revision this run records when it has
// applied: the set's objects, compressed before anything is written, so
// that a set too large for one object is refused then. A set that came
// from or went to an artifact is recorded by the artifact's digest, with
// its objects too when they fit. It runs beside validation; wait returns
// its outcome.
func (r *run) prepareRevision() (wait func() error) {
	if r.res.Command != "apply" && r.res.Command != "rollback" || r.noRevision {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() { done <- r.makeRevision() }()
	return func() error { return <-done }
}

func (r *run) makeRevision() error {
	objs := make([]*unstructured.Unstructured, 0, len(r.objects))
	var decrypted [][]string
	for _, o := range r.objects {
		objs = append(objs, appliedObject(o.Unstructured))
		decrypted = append(decrypted, o.DecryptedFields)
	}
	masked := maskedFields(objs, r.opts.Secret, decrypted)
	rv, err := inventory.NewRevision(r.opts.InventoryNamespace, r.opts.Inventory, objs, masked, r.opts.RecordKey)
	a := r.res.Artifact
	var tooLarge *inventory.TooLargeError
	if a != nil && errors.As(err, &tooLarge) {
		rv, err = inventory.NewRevision(r.opts.InventoryNamespace, r.opts.Inventory, nil, nil, r.opts.RecordKey)
		rv.Objects, rv.Digest = len(objs), a.Digest
	}
	if err != nil {
		return err
	}
	if a != nil {
		rv.Artifact = a.URL
		if r.opts.Artifact != nil && !r.pushing {
			rv.ArtifactPath = r.opts.Artifact.Path
		}
	}
	rv.Source, rv.GitRevision, rv.By, rv.GantryVersion = r.res.Source, r.res.Revision, r.opts.Actor, r.opts.Version
	if a != nil && rv.Source == "" {
		rv.Source = a.URL
	}
	if r.from != nil {
		rv.Note = fmt.Sprintf("rollback to revision %d", r.from.Number)
		rv.Cause = string(r.opts.cause)
	}
	r.revision = rv
	return nil
}

// beginRevision records the run's revision, Pending, before the first
// write, so that whatever happens next (a timeout, a cancellation, the
// process killed) the inventory says this set was being applied. A run
// that applies again the set its newest revision applied with success
// records none unless its outcome differs (recordRevision). It reports
// whether the inventory must be saved before writing. A run that adopts
// objects (force) records its revision in any case: it keeps what they
// held before.
func (r *run) beginRevision(ctx context.Context, force bool) bool {
	rv := r.revision
	if rv == nil || r.begun {
		return false
	}
	if newest := r.prev.Newest(); !force && newest != nil && r.from == nil && sameSet(newest, rv) && newest.Succeeded() {
		return false
	}
	r.begin(ctx)
	return true
}

func sameSet(a, b *inventory.Revision) bool {
	return a.Digest == b.Digest && a.Artifact == b.Artifact
}

// recordRevision completes the run's revision with its outcome once the
// run has applied, while the run still holds the inventory's lock (past
// its deadline too: a run that timed out records that it did). A run
// that applied its newest revision's set again, with another outcome,
// records a revision now. Only a run that lost the lock records nothing:
// its revision stays Pending. Trimming follows the history the revision
// was recorded with.
func (r *run) recordRevision(ctx context.Context) {
	if r.revision == nil || !r.wrote || r.prev == nil {
		return
	}
	rv := r.revision
	outcome := string(r.res.Reason)
	if r.res.Reason == "" {
		outcome = string(result.ReasonSucceeded)
		if r.from != nil {
			outcome = string(result.ReasonRolledBack)
		}
	}
	if r.lease == nil || r.lease.Check() != nil {
		if r.begun {
			r.obs.Info(fmt.Sprintf("revision %d stays Pending: the run lost the inventory's lock before it could record its outcome", rv.Number))
		}
		return
	}
	if r.unsaved {
		// The cluster did not take the inventory's last write: the next
		// run finds the revision Pending, and what the run applied.
		if r.begun {
			r.obs.Info(fmt.Sprintf("revision %d stays Pending: the inventory could not be saved", rv.Number))
		}
		return
	}
	// Within the run's deadline and a little grace, as the inventory gets.
	if r.deadlineCtx != nil {
		ctx = r.deadlineCtx
	}
	ctx, cancel := graceContext(ctx, 5*time.Second)
	defer cancel()
	if !r.begun {
		newest := r.prev.Newest()
		if newest != nil && sameSet(newest, rv) && newest.Outcome == outcome {
			r.res.RecordedRevision = newest.Number
			return
		}
		r.begin(ctx)
	}
	trimmed := r.prev.Finish(rv.Number, outcome)
	if err := r.store.Save(ctx, r.prev); err != nil {
		r.obs.Info(fmt.Sprintf("warning: the outcome of revision %d was not recorded: %v", rv.Number, err))
		return
	}
	r.obs.Info(fmt.Sprintf("recorded revision %d of inventory %s/%s", rv.Number, r.opts.InventoryNamespace, r.opts.Inventory))
	if err := r.store.DeleteStored(ctx, r.prev, trimmed); err != nil {
		r.obs.Info("warning: " + err.Error())
	}
}

// begin records the revision now (Begin), warning when its objects could
// not be stored.
func (r *run) begin(ctx context.Context) {
	r.begun, r.recordsChanged = true, true
	if err := r.store.Begin(ctx, r.prev, r.revision, r.opts.History); err != nil {
		r.obs.Info("warning: " + err.Error())
	}
	r.res.RecordedRevision = r.revision.Number
}

// RevisionRefusedError is a rollback refused before anything ran: no
// revision to go back to, or not the one asked for.
type RevisionRefusedError struct{ Err error }

func (e *RevisionRefusedError) Error() string { return e.Err.Error() }
func (e *RevisionRefusedError) Unwrap() error { return e.Err }

// pickRevision chooses the revision a rollback applies: to when given;
// else the newest that succeeded before the current (the newest) one and
// differs from it, since applying the same set again undoes nothing. An
// atomic rollback passes the revision of the apply that failed: the
// newest that succeeded besides it is the one to go back to, unless it
// is the same set (the failed apply changed nothing to undo).
func pickRevision(list []*inventory.Revision, to int, failed *inventory.Revision, inv string) (*inventory.Revision, error) {
	if len(list) == 0 {
		return nil, fmt.Errorf("inventory %s has no revisions: nothing was applied with a revision recorded, so there is nothing to roll back to", inv)
	}
	if to > 0 {
		for _, rv := range list {
			if rv.Number == to {
				return rv, nil
			}
		}
		return nil, fmt.Errorf("inventory %s has no revision %d; it keeps %s", inv, to, numbers(list))
	}
	current := list[0]
	if failed != nil {
		current = failed
	}
	for _, rv := range list {
		if rv.Number == current.Number || !rv.Succeeded() || !rv.HoldsObjects() && rv.Artifact == "" {
			continue
		}
		if rv.Digest != current.Digest || rv.Artifact != current.Artifact {
			return rv, nil
		}
		if failed != nil {
			return nil, fmt.Errorf("the failed apply was of the same set as revision %d, the last that succeeded: there is no change to roll back", rv.Number)
		}
	}
	if failed != nil {
		return nil, fmt.Errorf("inventory %s has no earlier revision that succeeded; it keeps %s", inv, numbers(list))
	}
	return nil, fmt.Errorf("inventory %s has no earlier revision that succeeded and differs from the current one (revision %d); it keeps %s", inv, current.Number, numbers(list))
}

func numbers(list []*inventory.Revision) string {
	s := ""
	for i, rv := range list {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d (%s)", rv.Number, rv.Outcome)
	}
	return s
}

// Rollback applies a recorded revision of the inventory again (to, or
// when 0, the last that succeeded before the current one and differs from
// it), prune
// included, validated first as any apply, and waits for it. Its outcome
// is RolledBack when it succeeds.
func Rollback(ctx context.Context, opts Options, to int, connect Connector, obs Observer) *result.Result {
	opts.rollbackTo = to
	// The set is the revision's; nothing is pushed.
	opts.Artifact = nil
	r := newRun("rollback", opts, connect, obs)
	inv := opts.InventoryNamespace + "/" + opts.Inventory
	res := r.deploy(ctx, r.revisionStage(true, func(list []*inventory.Revision) (*inventory.Revision, error) {
		return pickRevision(list, opts.rollbackTo, opts.failed, inv)
	}))
	if res.Reason == result.ReasonSucceeded {
		res.Reason = result.ReasonRolledBack
		res.Message = fmt.Sprintf("revision %d applied again", res.RolledBackTo)
	}
	return res
}

// revisionStage reads the revision pick chooses and makes the set from it:
// its objects, or, for a revision that holds only an artifact's digest,
// the artifact pulled (verified and decrypted as any pull) and built. For
// a rollback, the run records that it applies that revision again.
func (r *run) revisionStage(rollback bool, pick func([]*inventory.Revision) (*inventory.Revision, error)) stage {
	inv := r.opts.InventoryNamespace + "/" + r.opts.Inventory
	return stage{name: "revision", reason: result.ReasonInvalidInput, stopOnError: true, run: func(ctx context.Context) error {
		fail := func(reason result.Reason, err error) error {
			r.res.Reason = reason
			return err
		}
		if r.connect != nil && r.connecting == nil {
			// The set, from a revision, needs discovery: asked beside
			// the version, not after the revision is read.
			r.connectEarly()
		}
		if err := r.ensureClients(); err != nil {
			return fail(result.ReasonApplyFailed, err)
		}
		// A rollback chooses under the inventory's Lease, and keeps it
		// until it is done: no run can record a revision in between.
		if rollback {
			// Nothing to go back to is refused before the Lease is taken:
			// the refusal writes nothing.
			if r.opts.lease == nil {
				inv, err := r.store.Load(ctx, r.opts.InventoryNamespace, r.opts.Inventory)
				if err != nil {
					return fail(result.ReasonApplyFailed, err)
				}
				picked, err := pick(inv.Revisions)
				if err != nil {
					return &RevisionRefusedError{Err: err}
				}
				if err := r.store.Authenticate(inv, picked.Number); err != nil {
					return &RevisionRefusedError{Err: err}
				}
			}
			if err := r.lockAndLoad(ctx); err != nil {
				if r.res.Reason == "" {
					r.res.Reason = result.ReasonApplyFailed
				}
				return err
			}
		} else if err := r.loadInventory(ctx); err != nil {
			return fail(result.ReasonApplyFailed, err)
		}
		// The revisions no inventory records (a warning only) are looked
		// for while the one picked is read: one round trip, not two.
		var strays []string
		var straysErr error
		var looked sync.WaitGroup
		looked.Go(func() { strays, straysErr = r.store.Strays(ctx, r.prev) })
		warnStrays := func() {
			looked.Wait()
			if straysErr == nil && len(strays) > 0 {
				r.obs.Info("warning: " + inventory.StrayWarning(r.prev, strays))
			}
		}
		picked, err := pick(r.prev.Revisions)
		if err != nil {
			warnStrays()
			return &RevisionRefusedError{Err: err}
		}
		if rollback {
			// Checked again under the Lease: what is written is what this
			// workflow recorded, or nothing.
			if err := r.store.Authenticate(r.prev, picked.Number); err != nil {
				warnStrays()
				return &RevisionRefusedError{Err: err}
			}
		}
		rv, err := r.store.Revision(ctx, r.prev, picked.Number)
		warnStrays()
		if err != nil {
			return fail(result.ReasonApplyFailed, err)
		}
		r.res.Source, r.res.Revision = rv.Source, rv.GitRevision
		r.compared = rv
		if rollback {
			r.from = rv
			r.res.RolledBackTo = rv.Number
			r.obs.Info(fmt.Sprintf("rolling inventory %s back to revision %d (%s%s)", inv, rv.Number, quoted(rv.Source), at(rv.GitRevision)))
		} else {
			r.obs.Info(fmt.Sprintf("comparing with revision %d of inventory %s (%s%s)", rv.Number, inv, quoted(rv.Source), at(rv.GitRevision)))
		}
		if rv.HoldsObjects() {
			objs, err := rv.ObjectsOf()
			if err != nil {
				return fail(result.ReasonApplyFailed, err)
			}
			if rv.Unread() {
				// Compared without them, a drifted Secret would read as
				// in sync.
				return &RevisionRefusedError{Err: fmt.Errorf("revision %d: %w", rv.Number, inventory.ErrSealed)}
			}
			r.maskRecorded(objs, rv.Masked)
			r.objects = make([]*sources.Object, 0, len(objs))
			for _, u := range objs {
				r.objects = append(r.objects, &sources.Object{Unstructured: u})
			}
			if rv.Artifact != "" {
				r.res.Artifact = &result.Artifact{URL: rv.Artifact, Digest: rv.Digest}
			}
			return nil
		}
		if rv.Artifact == "" {
			return fail(result.ReasonApplyFailed, fmt.Errorf("revision %d holds no objects (they could not be stored when it was recorded) and names no artifact: it cannot be used", rv.Number))
		}
		if r.opts.ArtifactClient == nil {
			return fail(result.ReasonArtifactFailed, fmt.Errorf("revision %d names artifact %s: it must be pulled again, and this run has no registry client", rv.Number, rv.Artifact))
		}
		// The record names the registry: it is reached only when the
		// revision is this workflow's, whatever the run does with it.
		if err := r.store.Authenticate(r.prev, rv.Number); err != nil {
			return &RevisionRefusedError{Err: fmt.Errorf("its artifact is not pulled: %w", err)}
		}
		if err := r.revisionArtifactAllowed(rv); err != nil {
			return &RevisionRefusedError{Err: err}
		}
		r.opts.Artifact = &ArtifactOptions{Ref: rv.Artifact, Path: rv.ArtifactPath, Client: r.opts.ArtifactClient}
		if err := r.pullStage().run(ctx); err != nil {
			return fail(result.ReasonArtifactFailed, err)
		}
		if err := r.buildStage().run(ctx); err != nil {
			return fail(result.ReasonBuildFailed, err)
		}
		return nil
	}}
}

// revisionArtifactAllowed refuses an artifact a revision names on a
// registry the workflow does not name (registry-hosts, or its own
// artifact's): the record may shape what is pulled, never where from.
// The folder of it is confined as artifact-path is (pullStage).
func (r *run) revisionArtifactAllowed(rv *inventory.Revision) error {
	ref, err := artifact.ParseRef(rv.Artifact, true)
	if err != nil {
		return fmt.Errorf("revision %d names artifact %s, which is not an OCI reference: %w", rv.Number, quoted(rv.Artifact), err)
	}
	host := ref.Context().RegistryStr()
	if !slices.Contains(r.opts.RegistryHosts, host) {
		return fmt.Errorf("revision %d names artifact %s on registry %s, which the workflow does not name: a revision's artifact is pulled only from a registry in registry-hosts (or the workflow's own artifact's); add %s there to pull it", rv.Number, quoted(rv.Artifact), quoted(host), quoted(host))
	}
	return nil
}

func at(rev string) string {
	if rev == "" {
		return ""
	}
	return " at " + quoted(rev)
}

// quoted is a value a revision carries, as printed: with no line break
// or control character that could start a line of its own.
func quoted(s string) string {
	if strconv.CanBackquote(s) && !strings.ContainsAny(s, "`") {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// loadInventory reads the inventory, once, for a run that does not take
// its Lease (drift).
func (r *run) loadInventory(ctx context.Context) error {
	if r.prev != nil {
		return nil
	}
	prev, err := r.store.Load(ctx, r.opts.InventoryNamespace, r.opts.Inventory)
	if err != nil {
		return err
	}
	if !prev.Exists() {
		return fmt.Errorf("inventory %s/%s not found: nothing was applied to drift from", r.opts.InventoryNamespace, r.opts.Inventory)
	}
	r.prev, r.previous = prev, prev.Entries
	return nil
}

// undo follows an apply with atomic that failed after validation passed
// (its apply, prune or wait) with a rollback, and reports both: the
// rollback's outcome as the result (RolledBack when it succeeded), the
// apply's reason as the cause, the rollback's run beside it.
func (r *run) undo(ctx context.Context, res *result.Result) *result.Result {
	held := r.lease
	if !r.keepLease {
		held = nil
	}
	giveBack := func() {
		if held != nil {
			held.Release()
		}
	}
	switch res.Reason {
	case result.ReasonApplyFailed, result.ReasonPruneFailed, result.ReasonHealthCheckFailed:
	default:
		giveBack()
		return res
	}
	if !r.wrote || ctx.Err() != nil || held == nil {
		giveBack()
		return res
	}
	r.obs.Info(fmt.Sprintf("atomic: %s; rolling back", res.Reason))
	failed := inventory.Revision{}
	if r.revision != nil {
		failed = *r.revision
	}
	failed.Number = res.RecordedRevision
	opts := r.opts
	opts.cause, opts.failed, opts.lease = res.Reason, &failed, held
	rb := Rollback(ctx, opts, 0, r.connect, r.obs)
	// Given back by the rollback's run; here too, should it have stopped
	// before it took the Lease over.
	giveBack()
	rb.Command = "rollback"
	res.Cause, res.Rollback = res.Reason, rb
	switch rb.Reason {
	case result.ReasonRolledBack:
		res.Reason = result.ReasonRolledBack
		res.Message = fmt.Sprintf("%s; rolled back to revision %d", res.Message, rb.RolledBackTo)
	case result.ReasonInvalidInput:
		res.Message = fmt.Sprintf("%s; not rolled back: %s", res.Message, rb.Message)
	default:
		res.Reason = rb.Reason
		res.Message = fmt.Sprintf("%s; the rollback failed too: %s", res.Message, rb.Message)
	}
	return res
}
