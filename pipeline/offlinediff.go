package pipeline

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/diffs"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/schemas"
	"github.com/gantry-dev/gantry/sources"
)

// BaseSource is the other side of an offline diff: the configuration as
// it was at a git revision, its files written to Path.
type BaseSource struct {
	Revision string
	// Path is the configuration's folder there; WorkDir, the folder that
	// stands for the build's working directory (the bound of what it
	// reads, and what files are named relative to).
	Path, WorkDir string
	// Within maps a file or folder of the head's workspace to the same
	// one at the base revision (a chart's folder and values files).
	Within func(string) string
	// ChartFetched: the build's chart was fetched, not read from the
	// workspace; the base renders the same chart, with its values files
	// as they were at the base revision.
	ChartFetched bool
	// Build, when set, is how the base builds, as its own run file
	// gives the unit (its paths in the base's tree); Absent says the
	// base has no such unit: everything the head builds is new.
	Build  *sources.BuildOptions
	Absent bool
}

// DiffOffline builds the configuration and the same configuration at a
// base revision, with the same inputs, and reports, object by object, what
// the head changes: created, configured, deleted or unchanged, with each
// diff (Secret values masked), and the head validated offline as validate
// --offline validates it. It needs no cluster and writes nothing.
func DiffOffline(ctx context.Context, opts Options, base BaseSource, obs Observer) *result.Result {
	if opts.Build.SOPSIdentities == nil {
		// Without the key, SOPS files are compared as their ciphertext.
		opts.Build.KeepSOPSEncrypted = true
	}
	r := newRun("diff", opts, nil, obs)
	r.res.Base = base.Revision
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout+time.Minute)
	defer cancel()
	// The base builds beside the head's validation.
	var before []*sources.Object
	var baseErr error
	baseBuilt := make(chan struct{})
	go func() {
		defer close(baseBuilt)
		if base.Absent {
			return
		}
		b := opts.Build
		b.Path, b.WorkDir, b.Skipped = base.Path, base.WorkDir, nil
		if base.Build != nil {
			b = *base.Build
			b.WorkDir, b.Skipped = base.WorkDir, nil
			b.KeepSOPSEncrypted = opts.Build.KeepSOPSEncrypted
		} else if b.Chart != nil && base.Within != nil {
			c := *b.Chart
			if base.ChartFetched {
				b.Path = opts.Build.Path
			} else {
				c.Dir = base.Within(c.Dir)
			}
			c.Values = nil
			for _, v := range b.Chart.Values {
				c.Values = append(c.Values, base.Within(v))
			}
			b.Chart = &c
		}
		before, baseErr = sources.Build(b)
	}()
	var problems []error
	res := r.execute(ctx, []stage{
		r.buildStage(),
		{name: "validate", reason: result.ReasonValidationFailed, run: func(ctx context.Context) error {
			var err error
			problems, err = r.offlineProblems(ctx)
			return err
		}},
		{name: "base", reason: result.ReasonBuildFailed, stopOnError: true, run: func(ctx context.Context) error {
			select {
			case <-baseBuilt:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			if baseErr != nil {
				return fmt.Errorf("the base (%s): %w", base.Revision, baseErr)
			}
			r.obs.Info(fmt.Sprintf("%s at %s", nObjects(len(before)), base.Revision))
			return nil
		}},
		{name: "diff", reason: result.ReasonValidationFailed, stopOnError: true, run: func(ctx context.Context) error {
			return r.diffOffline(ctx, before, problems)
		}},
	})
	if res.Succeeded() && res.Changed() {
		res.Reason = result.ReasonProgressing
		res.Message = "changes pending"
	}
	return res
}

// diffOffline compares the head's objects with the base's and validates
// the head.
func (r *run) diffOffline(ctx context.Context, before []*sources.Object, problems []error) error {
	if problems == nil {
		problems = make([]error, len(r.objects))
	}
	old := map[string]*unstructured.Unstructured{}
	hidden := map[string][]string{} // the fields decrypted, in the base or the head
	for _, o := range before {
		id := inventory.EntryFor(o.Unstructured).ID
		old[id] = o.Unstructured
		hidden[id] = o.DecryptedFields
	}
	for _, o := range r.objects {
		id := inventory.EntryFor(o.Unstructured).ID
		hidden[id] = append(slices.Clone(hidden[id]), o.DecryptedFields...)
	}
	var failures []error
	for i, obj := range r.objects {
		id := inventory.EntryFor(obj.Unstructured).ID
		was := old[id]
		delete(old, id)
		if err := problems[i]; err != nil {
			failures = append(failures, r.recordInvalid(obj, "diff", err))
			continue
		}
		ro := resultObject(obj.Unstructured, obj.Source, "diff", result.Unchanged)
		var d string
		if was == nil || !reflect.DeepEqual(withoutSOPS(was).Object, withoutSOPS(obj.Unstructured).Object) {
			var err error
			if d, err = diffs.BetweenMasked(obj.Ref(), "base", "head", MaskAlike(withoutSOPS(was), obj.Unstructured, hidden[id]), MaskFields(withoutSOPS(obj.Unstructured), hidden[id]), r.opts.Mask); err != nil {
				return fmt.Errorf("%s: %w", obj.Ref(), err)
			}
		}
		switch {
		case was == nil:
			ro.Action = result.Created
		case d != "":
			ro.Action = result.Configured
		}
		if ro.Action != result.Unchanged {
			ro.Diff = d
		}
		r.record(ro, ro.Action != result.Unchanged)
	}
	// What the base had and the head no longer has: an apply with prune
	// deletes it.
	for _, o := range before {
		u, ok := old[inventory.EntryFor(o.Unstructured).ID]
		if !ok {
			continue
		}
		d, err := diffs.BetweenMasked(o.Ref(), "base", "head", MaskFields(withoutSOPS(u), o.DecryptedFields), nil, r.opts.Mask)
		if err != nil {
			return err
		}
		ro := resultObject(u, o.Source, "diff", result.Deleted)
		ro.Diff = d
		r.record(ro, true)
	}
	return errors.Join(failures...)
}

// offlineProblems validates every object of the head offline, at once;
// each entry is the object's problem, nil when it is valid.
func (r *run) offlineProblems(ctx context.Context) ([]error, error) {
	o := r.opts.Offline
	problems := make([]error, len(r.objects))
	if o == nil {
		return problems, nil
	}
	set := make([]*unstructured.Unstructured, len(r.objects))
	for i, obj := range r.objects {
		set[i] = obj.Unstructured
	}
	v, err := schemas.Offline(set, o.CRDs, o.Release, o.AllowUnknownGroups)
	if err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	encrypted := 0
	for i, obj := range r.objects {
		if obj.Encrypted {
			// Its values are ciphertext: only its name and kind can be
			// checked, which the build did.
			encrypted++
			continue
		}
		g.Go(func() error {
			u := obj.Unstructured
			if namespaced, err := v.Namespaced(u.GroupVersionKind()); err != nil {
				return err
			} else if namespaced {
				u = withDefaultNamespace(u, r.opts.DefaultNamespace)
			}
			err := v.Validate(gctx, u)
			var invalid *schemas.InvalidError
			switch {
			case err == nil:
			case errors.As(err, &invalid):
				problems[i] = err
			default:
				return fmt.Errorf("%s: %w", obj.Ref(), err)
			}
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if encrypted > 0 {
		what := "objects"
		if encrypted == 1 {
			what = "object"
		}
		r.obs.Info(fmt.Sprintf("%d SOPS-encrypted %s checked for kind and name only: give sops-age-key to check their values", encrypted, what))
	}
	return problems, nil
}

// withoutSOPS is u without the metadata SOPS adds to what it encrypts:
// compared as ciphertext, a Secret shows which values changed (masked),
// not the keys and MAC that change with every encryption.
func withoutSOPS(u *unstructured.Unstructured) *unstructured.Unstructured {
	if u == nil {
		return nil
	}
	if _, ok := u.Object["sops"]; !ok {
		return u
	}
	c := u.DeepCopy()
	delete(c.Object, "sops")
	return c
}

// recordInvalid records obj as failed offline validation in stage, and
// returns the failure, naming the object's file.
func (r *run) recordInvalid(obj *sources.Object, stage string, err error) error {
	oe := r.objectError(obj, err)
	r.record(failedObject(obj, oe, stage), true)
	return oe
}
