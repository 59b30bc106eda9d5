// Package pipeline runs gantry's stages in their fixed order (build,
// validate, apply, prune, wait) and records what happened in a
// result.Result. The stages are listed in one place, in Apply, each with its
// failure policy beside it.
package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/health"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/schemas"
	"github.com/gantry-dev/gantry/sources"
)

// Options configure a run.
type Options struct {
	Build sources.BuildOptions

	// Inventory names the inventory; InventoryNamespace is where it lives.
	Inventory          string
	InventoryNamespace string
	// DefaultNamespace is given to namespaced objects that have none.
	DefaultNamespace string

	Prune bool
	Wait  bool
	// Force recreates objects whose immutable fields changed.
	Force bool
	// DeleteFluxApplied lets prune and delete remove objects that Flux
	// now applies, which they otherwise leave alone.
	DeleteFluxApplied bool
	// ReleaseTo is the field manager release hands gantry's fields to;
	// empty leaves them unowned.
	ReleaseTo  string
	AllowEmpty bool
	// PruneCRDsWithResources lets prune delete a CRD whose custom
	// resources still exist in the cluster (deleting them with it).
	PruneCRDsWithResources bool
	// PruneSharedNamespaces lets prune and delete remove a Namespace
	// that holds another inventory's record or objects labelled for
	// another inventory (deleting them with it).
	PruneSharedNamespaces bool
	// RefuseConflicts fails, before anything is written, an object whose
	// apply would take fields another field manager (not kubectl's) owns.
	RefuseConflicts bool
	// MaxPrune bounds how much of the inventory one prune may delete;
	// the zero value is the default guard.
	MaxPrune PruneLimit
	// TakeOwnership lets the run take over objects that carry another
	// inventory's labels; without it they fail validation.
	TakeOwnership bool
	// ValidateAll dry-runs every object, also those whose live state
	// shows the apply would change nothing (see unchangedOnServer), so
	// that admission re-checks each one on every run.
	ValidateAll bool
	// Timeout bounds everything but the build: the artifact's push or
	// pull, waiting for the inventory's lock, validate, apply, prune and
	// wait.
	Timeout time.Duration
	// HealthChecks limits the wait to these objects; empty means every
	// applied object.
	HealthChecks []ObjectRef
	// Health decides the custom resources its rules name (nil: kstatus
	// decides every object).
	Health *health.Set
	// HealthErr is what is wrong with the rules: reported, with the
	// fields their kinds' schemas lack, before anything is written.
	HealthErr   error
	Concurrency int
	// Builtins, when set, gives the schemas of built-in kinds of the
	// cluster src talks to, shared by the runs on it (the runner's
	// session keeps them); nil reads them for this run alone.
	Builtins func(src schemas.OpenAPISource) *schemas.Builtins

	// Revision and Source are recorded in the inventory and the result.
	Revision, Source string
	// Version is gantry's own version.
	Version string
	// Holder identifies this run in the inventory's lock.
	Holder string
	// LeaseDuration is how long the inventory's Lease stays valid without
	// renewal (default 30s). A run writes only within two thirds of it
	// after its last renewal.
	LeaseDuration time.Duration
	// Offline, for validate, checks without a cluster.
	Offline *OfflineOptions
	// Artifact, when set, is pulled (and built from) when Build.Path is
	// empty, or pushed after the build when it is not.
	Artifact *ArtifactOptions

	// History is how many revisions of the inventory are kept; 0 keeps
	// as many as its newest revision was kept with, else
	// inventory.DefaultHistory.
	History int
	// Atomic rolls back to the last revision that succeeded when the
	// apply or the wait fails after validation passed.
	Atomic bool
	// Actor is who runs gantry (the CI's user and run), recorded in the
	// revision.
	Actor string
	// ArtifactClient pulls the artifact of a revision that holds no
	// objects, for a rollback to it.
	ArtifactClient *artifact.Client
	// Correct, for drift, applies the set again when it drifted.
	Correct bool
	// RecordKey signs the revisions the run records, and authenticates
	// those a rollback, an atomic undo or a correction writes from; nil:
	// revisions are recorded unsigned and nothing is written from them.
	RecordKey *inventory.RecordKey
	// RegistryHosts are the registries the workflow allows: an artifact
	// a revision names is pulled only from one of them.
	RegistryHosts []string
	// HandManagers are field managers, besides kubectl's and
	// before-first-apply, whose changes drift reports as made by hand
	// and a correction takes back.
	HandManagers []string
	// Secret reports whether a value holds a secret the run masks: a
	// revision records which fields held one, so that what reads it
	// later masks them too. Secrets holds such values, read from a
	// revision, masked from then on.
	Secret  func(value string) bool
	Secrets func(values []string)
	// Mask masks the secrets a value holds, as output masks them: diffs
	// mask each value before the objects are written as YAML.
	Mask func(string) string
	// PodLogLines is how many of its last log lines the wait says of a
	// container that ended with an error; 0 reads no log.
	PodLogLines int

	// rollbackTo, for a rollback run, is the revision to apply again (0:
	// the last that succeeded before the current); cause and failed are
	// the reason and the revision of the failed apply that an atomic
	// rollback undoes.
	rollbackTo int
	cause      result.Reason
	failed     *inventory.Revision
	// lease is the inventory's Lease an atomic apply hands to its
	// rollback, and expect the revision a correction restores: a run
	// that recorded another one since stops it.
	lease  *inventory.Held
	expect *inventory.Revision
	// only, for drift's correction, are the ids of the objects to write;
	// the rest of the set is left as it is.
	only map[string]bool
	// takeOver, for drift's correction, are the field managers whose
	// fields each object's write takes first, by inventory id.
	takeOver map[string][]ssa.FieldManager
}

// ObjectRef names an object for health checks: Kind/namespace/name, or
// Kind/name for cluster-scoped objects.
type ObjectRef struct {
	Kind, Namespace, Name string
}

func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// Observer receives progress as it happens, for a person watching the log.
type Observer interface {
	StageStarted(name string)
	StageFinished(s result.Stage)
	ObjectDone(o result.Object)
	Info(msg string)
}

// Connector opens the cluster connection when the first stage needs it, so
// that `build` works without a cluster.
type Connector func() (*kube.Clients, error)

// stage is one step of a run.
type stage struct {
	name string
	// reason is the run's outcome when this stage fails.
	reason result.Reason
	// stopOnError: a failure ends the run (later stages are skipped).
	stopOnError bool
	// skip, when not empty, says why the stage does not run.
	skip string
	run  func(ctx context.Context) error
}

// run is the shared state of one pipeline run.
type run struct {
	// guard keeps the health rules off objects holding secret values
	// during the wait (waitGuard).
	guardOnce sync.Once
	guard     ruleGuard
	// liveMasked are the fields, by object id, whose live values are
	// masked (collectMasked, maskLive).
	liveMasked map[string][]string
	// priors are, by revision number, the content adopted objects had
	// before gantry took them over, as read from the revisions keeping it.
	priors map[int]map[string]*unstructured.Unstructured
	// warnedRecord: the run said its record is not authentic.
	warnedRecord bool
	// logs are what the wait said of the containers' logs it read.
	logs    podLogs
	opts    Options
	connect Connector
	obs     Observer
	res     *result.Result

	clients *kube.Clients
	// connecting, when not nil, is closed when the connection opened
	// during the build (early, earlyErr) is ready.
	connecting chan struct{}
	early      *kube.Clients
	earlyErr   error
	objects    []*sources.Object
	// artifactObjects, when not nil, is what a push packs instead of
	// objects: the set with SOPS encryption kept.
	artifactObjects []*sources.Object
	// pushing says that a push follows the build.
	pushing bool
	// lazyOrigins: the set was built without the objects' files, which
	// findSources looks up once the run has something to name.
	lazyOrigins bool
	origins     origins
	byID        map[string]int // object id -> index in res.Objects
	lines       lines          // where objects start in their files
	patches     *patches       // the kustomize patches of the build
	plans       []*plan
	// planner holds what validate read of the cluster (the LISTs), which
	// prune reuses.
	planner *planner
	// offline validates what cannot be dry-run yet.
	offline *offlineSchemas
	prev    *inventory.Inventory
	// previous is prev's entries as loaded, before this run saves it.
	previous []inventory.Entry
	mu       sync.Mutex // guards res.Objects and byID for concurrent workers
	store    *inventory.Store
	// applied lists what this run's set holds in the cluster now.
	applied []inventory.Entry
	// lease is the inventory's Lease while this run holds it; its loss
	// stops the run (stopRun) and fences every write.
	lease   *inventory.Held
	stopRun context.CancelCauseFunc
	// unlocked, when not nil, is the inventory (and who held its Lease)
	// as read before the Lease was taken, which the plan was made from:
	// it is settled (settleUnlocked) before anything is written.
	// confirmed: the plan writes nothing, and was confirmed without
	// taking the Lease.
	unlocked  *peeked
	confirmed bool
	// deadlineCtx carries the one deadline of everything after the build.
	deadlineCtx context.Context
	// cleanup runs when the run ends (temporary folders).
	cleanup []func()
	// revision is what this run records of its set once it has applied
	// (wrote says the apply began); from is the revision a rollback
	// applies again.
	revision *inventory.Revision
	wrote    bool
	from     *inventory.Revision
	// begun: the revision was recorded (Pending) before the first
	// write; keepLease: the Lease is handed to an atomic rollback
	// rather than given back.
	begun     bool
	keepLease bool
	// recordsChanged: the inventory's revisions or adopted entries
	// changed since it was saved; unsaved: its last save failed.
	recordsChanged, unsaved bool
	// compared is the revision a drift compares with, or a rollback
	// applies again; managed, for drift, the paths of fields other
	// controllers changed, by object id, which a correction leaves to
	// them; noRevision: a correction records none.
	compared   *inventory.Revision
	managed    map[string][]fieldpath.Path
	noRevision bool
	// progressEvery is how often the wait says what it still waits
	// for (0: defaultProgressEvery).
	progressEvery time.Duration
}

func newRun(command string, opts Options, connect Connector, obs Observer) *run {
	// The report's lines and patches read the build's files again, through
	// one reader of the build's.
	read := sourceReader(opts.Build)
	return &run{
		opts:    opts,
		connect: connect,
		obs:     obs,
		byID:    map[string]int{},
		lines:   lines{workDir: opts.Build.WorkDir, read: read},
		patches: &patches{path: opts.Build.Path, workDir: opts.Build.WorkDir, read: read},
		res: &result.Result{
			Schema:   result.SchemaVersion,
			Command:  command,
			Version:  opts.Version,
			Started:  time.Now().UTC(),
			Revision: opts.Revision,
			Source:   opts.Source,
			Stages:   []result.Stage{},
			Objects:  []result.Object{},
		},
	}
}

// execute runs the stages in order under their failure policies.
func (r *run) execute(parent context.Context, stages []stage) *result.Result {
	ctx, stopRun := context.WithCancelCause(parent)
	defer stopRun(nil)
	r.stopRun = stopRun
	var failures []error
	stopped := false
	for _, s := range stages {
		if stopped {
			r.res.Stages = append(r.res.Stages, result.Stage{Name: s.name, Skipped: "an earlier stage failed"})
			continue
		}
		if s.skip != "" {
			r.res.Stages = append(r.res.Stages, result.Stage{Name: s.name, Skipped: s.skip})
			continue
		}
		r.obs.StageStarted(s.name)
		start := time.Now()
		err := s.run(ctx)
		st := result.Stage{Name: s.name, Duration: time.Since(start)}
		if err != nil {
			st.Error = err.Error()
			failures = append(failures, err)
			if r.res.Reason == "" {
				r.res.Reason = s.reason
				var noConfig *kube.NoConfigError
				if errors.As(err, &noConfig) {
					r.res.Reason = result.ReasonInvalidInput
				}
				if kube.IsUnreachable(err) && !r.wrote {
					// Nothing is known of the objects: the cluster
					// did not answer.
					r.res.Reason = result.ReasonClusterUnreachable
				}
				if parent.Err() != nil {
					// The run itself was cancelled (SIGTERM, Ctrl-C),
					// not failed by its input or the cluster.
					r.res.Reason = result.ReasonCancelled
				}
			}
			stopped = s.stopOnError
		}
		r.res.Stages = append(r.res.Stages, st)
		r.obs.StageFinished(st)
	}
	r.recordRevision(ctx)
	// An atomic apply that failed hands its Lease to its rollback (undo),
	// which gives it back.
	r.keepLease = r.keepLease && r.lease != nil && r.lease.Check() == nil && r.res.Reason != "" && r.wrote
	if r.lease != nil && !r.keepLease {
		r.lease.Release()
		if err := r.lease.Check(); err != nil {
			// Whatever failed after the loss failed because of it.
			r.res.Reason = result.ReasonLeaseLost
			failures = append([]error{err}, failures...)
		}
	}
	r.nameSources(ctx)
	for _, f := range r.cleanup {
		f()
	}
	r.res.Finished = time.Now().UTC()
	if r.res.Reason == "" {
		r.res.Reason = result.SuccessFor(r.res.Command)
	}
	if err := errors.Join(failures...); err != nil {
		r.res.Message = err.Error()
	}
	r.addLines()
	r.res.Sort()
	return r.res
}

// Render runs only the build stage, for the build command.
func Render(ctx context.Context, opts Options, obs Observer) ([]*sources.Object, *result.Result) {
	// The objects are only printed: their files are needed only to name
	// one at fault.
	opts.Build.NoOrigins = true
	r := newRun("build", opts, nil, obs)
	res := r.execute(ctx, []stage{r.buildStage()})
	return r.objects, res
}

// Apply runs the whole pipeline. With atomic, a failed apply or wait is
// followed by a rollback to the last revision that succeeded, and the
// result reports both.
func Apply(ctx context.Context, opts Options, connect Connector, obs Observer) *result.Result {
	r := newRun("apply", opts, connect, obs)
	r.keepLease = opts.Atomic
	res := r.deploy(ctx, r.buildStage())
	if r.keepLease {
		res = r.undo(ctx, res)
	}
	return res
}

// deploy runs the stages of an apply after the given first one, which
// makes the set: the build, or a rollback's reading of its revision.
func (r *run) deploy(ctx context.Context, first stage) *result.Result {
	opts := r.opts
	r.res.Inventory = &result.Inventory{Name: opts.Inventory, Namespace: opts.InventoryNamespace}
	var cancel context.CancelFunc
	stages := []stage{
		// A build failure leaves nothing to do.
		first,
		// An artifact that cannot be pushed (or pulled, verified,
		// decrypted) stops the run: nothing unverified is applied.
		// Validation writes nothing; any failure stops the run before the
		// first write. The timeout starts here.
		{name: "validate", reason: result.ReasonValidationFailed, stopOnError: true, run: func(ctx context.Context) error {
			return r.validate(ctx)
		}},
		// An apply failure stops the run: prune must not delete what the
		// failed apply was replacing, and there is nothing sound to wait
		// for. The inventory keeps every previous entry plus what was
		// written.
		{name: "apply", reason: result.ReasonApplyFailed, stopOnError: true, run: r.apply},
		// A prune failure does not stop the wait (the apply succeeded);
		// entries whose deletion failed stay in the inventory.
		{name: "prune", reason: result.ReasonPruneFailed, skip: skipUnless(opts.Prune, "prune is off"), run: r.prune},
		// A readiness failure is reported with why, per object.
		{name: "wait", reason: result.ReasonHealthCheckFailed, skip: skipUnless(opts.Wait, "wait is off"), run: r.wait},
	}
	stages = r.withArtifact(stages)
	// One deadline for everything after the build.
	timed := func(s stage) stage {
		inner := s.run
		s.run = func(ctx context.Context) error {
			if cancel == nil {
				ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
				r.deadlineCtx = ctx
			}
			return inner(r.deadlineCtx)
		}
		return s
	}
	// The deadline starts with the first stage after the build (or with
	// the pull that comes before it): a stalled registry or cluster cannot
	// hang the run.
	for i := range stages {
		if stages[i].name != "build" {
			stages[i] = timed(stages[i])
		}
	}
	res := r.execute(ctx, stages)
	if cancel != nil {
		cancel()
	}
	return res
}

// Diff builds and dry-runs, and reports what apply would do, prune included;
// it writes nothing.
func Diff(ctx context.Context, opts Options, connect Connector, obs Observer) *result.Result {
	r := newRun("diff", opts, connect, obs)
	r.res.Inventory = &result.Inventory{Name: opts.Inventory, Namespace: opts.InventoryNamespace}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout+time.Minute)
	defer cancel()
	res := r.execute(ctx, r.withArtifact([]stage{
		r.buildStage(),
		{name: "diff", reason: result.ReasonValidationFailed, stopOnError: true, run: r.diff},
	}))
	if res.Succeeded() && res.Changed() {
		res.Reason = result.ReasonProgressing
		res.Message = "changes pending"
	}
	return res
}

// withArtifact puts the artifact stage in its place: a pull before the
// build (which then reads what was pulled), a push right after it.
func (r *run) withArtifact(stages []stage) []stage {
	a := r.opts.Artifact
	if a == nil {
		return stages
	}
	out := make([]stage, 0, len(stages)+1)
	for _, s := range stages {
		if s.name == "build" && r.opts.Build.Path == "" {
			out = append(out, r.pullStage(), s)
			continue
		}
		out = append(out, s)
		if s.name == "build" {
			r.pushing = true
			out = append(out, r.pushStage())
		}
	}
	return out
}

func skipUnless(on bool, why string) string {
	if on {
		return ""
	}
	return why
}

func (r *run) buildStage() stage {
	return stage{name: "build", reason: result.ReasonBuildFailed, stopOnError: true, run: func(ctx context.Context) error {
		if r.connect != nil {
			r.connectEarly()
		}
		// kustomize takes no context: the build runs aside, and a run
		// cancelled meanwhile (a runner's SIGTERM) ends at once, the
		// process with it, instead of when a long build returns.
		type built struct {
			objects, packed []*sources.Object
			err             error
		}
		done := make(chan built, 1)
		go func() {
			objects, packed, err := r.build()
			done <- built{objects, packed, err}
		}()
		select {
		case b := <-done:
			if b.err != nil {
				return b.err
			}
			r.objects, r.artifactObjects = b.objects, b.packed
			r.obs.Info(fmt.Sprintf("%s from %s", nObjects(len(b.objects)), r.opts.Build.Shown()))
			if r.opts.Build.Substitute == nil {
				if w := sources.Unsubstituted(b.objects); w != "" {
					r.obs.Info("warning: " + w)
				}
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("build stopped: %w", context.Cause(ctx))
		}
	}}
}

// build builds the set, and what a push packs when it differs (nil when
// it does not).
func (r *run) build() (objects, packed []*sources.Object, err error) {
	if r.pushing && !r.opts.Build.KeepSOPSEncrypted {
		// What is pushed keeps SOPS encryption, what is applied is
		// decrypted: two builds, the second only when the first
		// met anything encrypted.
		keep := r.opts.Build
		keep.KeepSOPSEncrypted, keep.SOPSIdentities = true, nil
		if packed, err = sources.Build(keep); err != nil {
			return nil, nil, err
		}
		if !slices.ContainsFunc(packed, func(o *sources.Object) bool { return o.Encrypted }) {
			return packed, packed, nil
		}
	}
	opts := r.opts.Build
	if opts.Chart != nil && opts.Chart.KubeVersion == "" && r.connect != nil {
		chart := *opts.Chart
		if chart.KubeVersion, chart.APIVersions, err = r.chartCapabilities(); err != nil {
			return nil, nil, err
		}
		opts.Chart = &chart
	}
	if (r.res.Command == "apply" || r.res.Command == "diff") && !r.pushing && !opts.NoOrigins {
		// Files are looked up only when an object changes or fails
		// (findSources): a run that changes nothing does not pay
		// kustomize's origin tracking.
		opts.NoOrigins = true
	}
	opts.ChartNotice = func(n sources.ChartNotice) {
		r.res.Charts = append(r.res.Charts, result.Chart{Name: n.Chart, Folder: n.Dir, Lookup: n.Lookup, LeftOut: n.LeftOut})
		r.obs.Info(fmt.Sprintf("rendered chart %s from %s", n.Chart, n.Dir))
		if n.Lookup {
			r.obs.Info("chart " + n.Chart + ": its templates call lookup, answered empty, as helm template answers it: what they would read from the cluster is not in the set")
		}
		if len(n.LeftOut) > 0 {
			r.obs.Info("chart " + n.Chart + ": left out " + strings.Join(n.LeftOut, ", "))
		}
	}
	opts.Skipped = func(files []string) {
		const named = 10
		list := strings.Join(files[:min(named, len(files))], ", ")
		if len(files) > named {
			list += fmt.Sprintf(" and %d more", len(files)-named)
		}
		r.obs.Info("left out, as hidden or not .yaml, .yml or .json: " + list)
	}
	objects, err = sources.Build(opts)
	// Manifests read as files name their file without origin tracking;
	// only what kustomize built needs the second build.
	r.lazyOrigins = opts.NoOrigins && !r.opts.Build.NoOrigins &&
		slices.ContainsFunc(objects, func(o *sources.Object) bool { return o.Source == "" })
	if r.lazyOrigins {
		r.origins.done = make(chan struct{})
	}
	return objects, packed, err
}

// origins is the second build, with origin tracking, that names the files
// of what kustomize built: each object's file by inventory entry ID.
type origins struct {
	start   sync.Once
	started atomic.Bool
	done    chan struct{} // closed once files is set
	files   map[string]string
}

// findSources starts the second build in the background, when the set was
// built without its files and the run has something to name: the first
// object that needs a dry-run starts it, so that it runs beside the
// requests that follow, and a run whose objects are all unchanged never
// pays it. A second build that fails (it read the same files a moment
// ago) names no file.
func (r *run) findSources() {
	if !r.lazyOrigins {
		return
	}
	r.origins.start.Do(func() {
		r.origins.started.Store(true)
		go func() {
			defer close(r.origins.done)
			opts := r.opts.Build
			opts.NoOrigins = false
			objects, err := sources.Build(opts)
			if err != nil {
				return
			}
			files := make(map[string]string, len(objects))
			for _, o := range objects {
				files[inventory.EntryFor(o.Unstructured).ID] = o.Source
			}
			r.origins.files = files
		}()
	})
}

// sourceOf is o's file: known from the build, or found by the second
// build; empty while that is still running.
func (r *run) sourceOf(o *sources.Object) string {
	if o.Source != "" || !r.origins.started.Load() {
		return o.Source
	}
	select {
	case <-r.origins.done:
		return r.origins.files[inventory.EntryFor(o.Unstructured).ID]
	default:
		return ""
	}
}

// objectError is err of object o, naming o's file: it starts the second
// build if it has not started, and waits for it.
func (r *run) objectError(o *sources.Object, err error) *ObjectError {
	if r.lazyOrigins {
		r.findSources()
		<-r.origins.done
	}
	source := r.sourceOf(o)
	hidden := decryptedValues(o)
	if err != nil && len(hidden) > 0 {
		// The API server and the offline checks quote the value they
		// refuse: one SOPS decrypted is hidden where it is, whatever
		// its length, in what the error says.
		err = &sources.HiddenError{Err: err, Msg: sources.HideValues(err.Error(), hidden)}
	}
	oe := &ObjectError{Ref: o.Ref(), Source: source, Line: r.lines.lineOf(source, o.GetKind(), o.GetName()), Err: err}
	if source != "" {
		oe.Patches = r.patchesOf(o)
	}
	if cutShort(err) == "" {
		oe.Problems = problemsOf(err)
		secretData := false
		for i := range oe.Problems {
			p := &oe.Problems[i]
			p.Message = sources.HideValues(p.Message, hidden)
			if isSecretData(o, p.Field) {
				// What a check says of a Secret's value is a piece of
				// it (the character a JSON parser stopped at): only
				// that the field is invalid is said.
				p.Message, secretData = "invalid value (what is wrong with a Secret's data is not shown: it would show a piece of it)", true
			}
		}
		if secretData {
			oe.Err = &sources.HiddenError{Err: err, Msg: o.Ref() + ": invalid Secret data, not shown"}
		}
		if oe.Line > 0 {
			for i := range oe.Problems {
				p := &oe.Problems[i]
				p.Line = r.lines.fieldLine(source, oe.Line, p.Field)
				if file, line := r.lines.patchedField(o, oe.Patches, p.Field); line > 0 {
					p.Source, p.Line = file, line
				}
			}
			// In the order of the file.
			slices.SortStableFunc(oe.Problems, func(a, b result.Problem) int { return cmp.Compare(a.Line, b.Line) })
		}
	}
	return oe
}

// failedObject is the report's entry of an object that failed with oe.
func failedObject(obj *sources.Object, oe *ObjectError, stage string) result.Object {
	o := resultObject(obj.Unstructured, oe.Source, stage, result.Failed)
	o.Line = oe.Line
	setError(&o, oe.Err, oe.Err.Error())
	o.Problems = oe.Problems // the same, with their lines
	return o
}

// nameSources gives the report's objects the files the second build found,
// once it is done; a run that was cancelled does not wait for it.
func (r *run) nameSources(ctx context.Context) {
	if !r.origins.started.Load() {
		return
	}
	select {
	case <-r.origins.done:
	case <-ctx.Done():
		return
	}
	for _, o := range r.objects {
		i, ok := r.byID[object.UnstructuredToObjMetadata(o.Unstructured).String()]
		if ok && r.res.Objects[i].Source == "" {
			r.res.Objects[i].Source = r.sourceOf(o)
		}
	}
}

// record sets an object's outcome in the result, replacing an earlier one.
func (r *run) record(o result.Object, announce bool) {
	if i, ok := r.byID[o.ID]; ok {
		r.res.Objects[i] = o
	} else {
		r.byID[o.ID] = len(r.res.Objects)
		r.res.Objects = append(r.res.Objects, o)
	}
	if announce {
		r.obs.ObjectDone(o)
	}
}

func resultObject(u *unstructured.Unstructured, source, stage string, action result.Action) result.Object {
	return result.Object{
		ID:         object.UnstructuredToObjMetadata(u).String(),
		APIVersion: u.GetAPIVersion(),
		Kind:       u.GetKind(),
		Namespace:  u.GetNamespace(),
		Name:       u.GetName(),
		Action:     action,
		Stage:      stage,
		Source:     source,
	}
}

// recordLocked is record for concurrent workers.
func (r *run) recordLocked(o result.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record(o, true)
}

// connectEarly opens the cluster connection while the build runs, so that
// its round trips (TLS, discovery of the core group, which the inventory
// and most sets need) overlap the build's CPU work. An error waits for
// ensureClients, which reports it where it always did.
func (r *run) connectEarly() {
	done := make(chan struct{})
	r.connecting = done
	go func() {
		defer close(done)
		c, err := r.connect()
		if err == nil {
			// The version and the discovery side by side: against a
			// cluster far away each is a round trip.
			var wg sync.WaitGroup
			wg.Go(func() { _, _ = c.Mapper.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1") })
			err = c.Reachable()
			wg.Wait()
		}
		r.early, r.earlyErr = c, err
	}()
}

// ensureClients connects on first use.
func (r *run) ensureClients() error {
	if r.clients != nil {
		return nil
	}
	var c *kube.Clients
	var err error
	if r.connecting != nil {
		<-r.connecting
		c, err = r.early, r.earlyErr
	} else if c, err = r.connect(); err == nil {
		err = c.Reachable()
	}
	if err != nil {
		return err
	}
	r.clients = c
	r.store = &inventory.Store{Client: c.Kube, Metadata: c.Metadata, Key: r.opts.RecordKey}
	return nil
}

// setNamespaces gives namespaced objects without a namespace the default
// one, and takes it away from cluster-scoped objects that have one.
func (r *run) setNamespaces() error {
	var crds []*unstructured.Unstructured
	for _, o := range r.objects {
		if object.IsCRD(o.Unstructured) {
			crds = append(crds, o.Unstructured)
		}
	}
	// One look-up per kind: a kind the cluster does not serve yet costs
	// the REST mapper a discovery request on every miss.
	type lookup struct {
		scope meta.RESTScope
		err   error
	}
	scopes := map[schema.GroupVersionKind]lookup{}
	for _, o := range r.objects {
		gvk := o.GroupVersionKind()
		l, ok := scopes[gvk]
		if !ok {
			l.scope, l.err = object.LookupResourceScope(o.Unstructured, crds, r.clients.Mapper)
			scopes[gvk] = l
		}
		scope, err := l.scope, l.err
		if err != nil {
			if meta.IsNoMatchError(err) || isUnknownKind(err) {
				continue // validate reports it, with every other failure
			}
			return fmt.Errorf("reading the cluster's kinds from %s: %w", r.clients.Config.Host, err)
		}
		switch {
		case scope == meta.RESTScopeNamespace && o.GetNamespace() == "":
			o.SetNamespace(r.opts.DefaultNamespace)
		case scope == meta.RESTScopeRoot && o.GetNamespace() != "":
			o.SetNamespace("")
		}
	}
	return nil
}

// isUnknownKind recognises cli-utils' error for a kind that is neither
// known to the cluster nor defined by the set.
func isUnknownKind(err error) bool {
	var unknown *object.UnknownTypeError
	return errors.As(err, &unknown)
}

// graceContext is for work that must still be done when the run's
// deadline has passed or the run was cancelled: saving the inventory,
// deleting what was provisioned, explaining a failure. It keeps ctx's
// deadline, plus grace, while that is ahead; once ctx has ended, it
// allows grace from now. A server that stopped answering then holds the
// run up by grace at most, not for ever.
func graceContext(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	end := time.Now().Add(grace)
	if d, ok := ctx.Deadline(); ok && ctx.Err() == nil && d.Add(grace).After(end) {
		end = d.Add(grace)
	} else if !ok && ctx.Err() == nil {
		end = time.Now().Add(max(grace, 30*time.Second))
	}
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}
