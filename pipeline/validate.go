package pipeline

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/schemas/releases"
)

// OfflineOptions are what validation without a cluster checks against.
type OfflineOptions struct {
	// Release is the Kubernetes release of the built-in kinds.
	Release *releases.Release
	// CRDs define custom resources beyond the set's own CRDs (the crds
	// input).
	CRDs []*unstructured.Unstructured
	// AllowUnknownGroups lets kinds of these groups through unchecked
	// when no CRD defines them.
	AllowUnknownGroups []string
}

// Validate builds the configuration and checks every object, writing
// nothing. With opts.Offline it needs no cluster and no credentials:
// built-in kinds against the release's schemas and the API server's
// handwritten rules, custom resources against their CRDs, CEL rules
// included. Without it, every object is dry-run on the cluster as diff
// dry-runs it. Each object is reported valid or failed.
func Validate(ctx context.Context, opts Options, connect Connector, obs Observer) *result.Result {
	if opts.Offline != nil {
		connect = nil
		// A SOPS file without its key is checked as far as it can be
		// (its metadata), not refused: a fork's pull request has no key.
		opts.Build.KeepSOPSEncrypted = true
	}
	opts.ValidateAll, opts.Inventory, opts.Prune = true, "", false
	r := newRun("validate", opts, connect, obs)
	run := r.validateOnCluster
	if opts.Offline != nil {
		run = r.validateWithoutCluster
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout+time.Minute)
	defer cancel()
	return r.execute(ctx, []stage{
		r.buildStage(),
		{name: "validate", reason: result.ReasonValidationFailed, stopOnError: true, run: run},
	})
}

// validateWithoutCluster checks every object offline.
func (r *run) validateWithoutCluster(ctx context.Context) error {
	if err := r.checkRuleSchemas(ctx); err != nil {
		return err
	}
	problems, err := r.offlineProblems(ctx)
	if err != nil {
		return err
	}
	var failures []error
	for i, obj := range r.objects {
		if err := problems[i]; err != nil {
			failures = append(failures, r.recordInvalid(obj, "validate", err))
			continue
		}
		r.record(resultObject(obj.Unstructured, obj.Source, "validate", result.Valid), false)
	}
	return errors.Join(failures...)
}

// withDefaultNamespace gives a namespaced object without a namespace the
// one it would be applied to, when known.
func withDefaultNamespace(u *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	if ns == "" || u.GetNamespace() != "" {
		return u
	}
	c := u.DeepCopy()
	c.SetNamespace(ns)
	return c
}

// validateOnCluster dry-runs every object as diff does and reports each
// valid or failed.
func (r *run) validateOnCluster(ctx context.Context) error {
	if err := r.checkRuleSchemas(ctx); err != nil {
		return err
	}
	err := r.diff(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.res.Objects[:0]
	for _, o := range r.res.Objects {
		switch o.Action {
		case result.Created, result.Configured, result.Recreated, result.Unchanged:
			o.Action, o.Diff = result.Valid, ""
		case result.Deleted:
			continue // with no inventory there is nothing to prune; never said
		}
		o.Stage = "validate"
		kept = append(kept, o)
	}
	r.res.Objects = kept
	clear(r.byID)
	for i, o := range kept {
		r.byID[o.ID] = i
	}
	return err
}
