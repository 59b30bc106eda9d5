package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// prepareRevision starts making the revision this run records when it has
// applied: the set's objects, compressed before anything is written, so
// that a set too large for one object is refused then. A set that came
// from or went to an artifact is recorded by the artifact's digest, with
// its objects too when they fit. It runs beside validation; wait returns
// its outcome.
func (r *run) prepareRevision() (wait func() error) {
	if r.res.Command != "apply" && r.res.Command != "rollback" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() { done <- r.makeRevision() }()
	return func() error { return <-done }
}

func (r *run) makeRevision() error {
	objs := make([]*unstructured.Unstructured, 0, len(r.objects))
	for _, o := range r.objects {
		objs = append(objs, appliedObject(o.Unstructured))
	}
	rv, err := inventory.NewRevision(r.opts.InventoryNamespace, r.opts.Inventory, objs)
	a := r.res.Artifact
	var tooLarge *inventory.TooLargeError
	if a != nil && errors.As(err, &tooLarge) {
		rv, err = inventory.NewRevision(r.opts.InventoryNamespace, r.opts.Inventory, nil)
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

// recordRevision records the prepared revision once the run has applied,
// with the run's outcome, while the run still holds the inventory's lock.
// A run that applied the same set with the same outcome as the last
// revision adds none. A revision that cannot be recorded is said, and does
// not fail a deploy that succeeded.
func (r *run) recordRevision(ctx context.Context) {
	if r.revision == nil || !r.wrote {
		return
	}
	rv := r.revision
	rv.Outcome = string(r.res.Reason)
	if r.res.Reason == "" {
		rv.Outcome = string(result.ReasonSucceeded)
		if r.from != nil {
			rv.Outcome = string(result.ReasonRolledBack)
		}
	}
	// Within the run's own deadline (and a little grace, as the inventory
	// gets): a run that has run out of time, or lost the inventory's
	// lock, records nothing; its inventory says what it did.
	deadline := r.deadlineCtx
	if deadline == nil {
		deadline = ctx
	}
	if deadline.Err() != nil || r.lease != nil && r.lease.Check() != nil {
		r.obs.Info("no revision recorded: the run ended by its timeout, a cancellation or the loss of the inventory's lock")
		return
	}
	ctx, cancel := graceContext(deadline, 5*time.Second)
	defer cancel()
	list, err := r.store.Revisions(ctx, r.opts.InventoryNamespace, r.opts.Inventory)
	if err != nil {
		r.obs.Info("warning: the revision was not recorded: " + err.Error())
		return
	}
	if len(list) > 0 && list[0].Digest == rv.Digest && list[0].Artifact == rv.Artifact &&
		list[0].Outcome == rv.Outcome && r.from == nil {
		r.res.RecordedRevision = list[0].Number
		return
	}
	n, err := r.store.AddRevision(ctx, rv, list, r.opts.History)
	if n > 0 {
		r.res.RecordedRevision = n
		r.obs.Info(fmt.Sprintf("recorded revision %d of inventory %s/%s", n, r.opts.InventoryNamespace, r.opts.Inventory))
	}
	if err != nil {
		r.obs.Info("warning: " + err.Error())
	}
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
		if rv.Number == current.Number || !rv.Succeeded() {
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
		if err := r.ensureClients(); err != nil {
			return fail(result.ReasonApplyFailed, err)
		}
		list, err := r.store.Revisions(ctx, r.opts.InventoryNamespace, r.opts.Inventory)
		if err != nil {
			return fail(result.ReasonApplyFailed, err)
		}
		picked, err := pick(list)
		if err != nil {
			return &RevisionRefusedError{Err: err}
		}
		rv, err := r.store.Revision(ctx, r.opts.InventoryNamespace, r.opts.Inventory, picked.Number)
		if err != nil {
			return fail(result.ReasonApplyFailed, err)
		}
		r.res.Source, r.res.Revision = rv.Source, rv.GitRevision
		if rollback {
			r.from = rv
			r.res.RolledBackTo = rv.Number
			r.obs.Info(fmt.Sprintf("rolling inventory %s back to revision %d (%s%s)", inv, rv.Number, rv.Source, at(rv.GitRevision)))
		} else {
			r.obs.Info(fmt.Sprintf("comparing with revision %d of inventory %s (%s%s)", rv.Number, inv, rv.Source, at(rv.GitRevision)))
		}
		if rv.HoldsObjects() {
			objs, err := rv.ObjectsOf()
			if err != nil {
				return fail(result.ReasonApplyFailed, err)
			}
			r.objects = make([]*Object, 0, len(objs))
			for _, u := range objs {
				r.objects = append(r.objects, &Object{Unstructured: u})
			}
			if rv.Artifact != "" {
				r.res.Artifact = &result.Artifact{URL: rv.Artifact, Digest: rv.Digest}
			}
			return nil
		}
		if r.opts.ArtifactClient == nil {
			return fail(result.ReasonArtifactFailed, fmt.Errorf("revision %d names artifact %s: it must be pulled again, and this run has no registry client", rv.Number, rv.Artifact))
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

func at(rev string) string {
	if rev == "" {
		return ""
	}
	return " at " + rev
}

// undo follows an apply with atomic that failed after validation passed
// (its apply, prune or wait) with a rollback, and reports both: the
// rollback's outcome as the result (RolledBack when it succeeded), the
// apply's reason as the cause, the rollback's run beside it.
func (r *run) undo(ctx context.Context, res *result.Result) *result.Result {
	switch res.Reason {
	case result.ReasonApplyFailed, result.ReasonPruneFailed, result.ReasonHealthCheckFailed:
	default:
		return res
	}
	if !r.wrote || ctx.Err() != nil {
		return res
	}
	r.obs.Info(fmt.Sprintf("atomic: %s; rolling back", res.Reason))
	failed := inventory.Revision{}
	if r.revision != nil {
		failed = *r.revision
	}
	failed.Number = res.RecordedRevision
	opts := r.opts
	opts.cause, opts.failed = res.Reason, &failed
	rb := Rollback(ctx, opts, 0, r.connect, r.obs)
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
