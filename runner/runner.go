// Package runner runs what configuration made: the units of a run, each
// through the pipeline for its command, and the commands that read a
// cluster's inventories or compare artifacts. It sits between the
// entrypoint, which keeps the command line, the platform and printing,
// and the pipeline, the cluster and the registries: the entrypoint reaches
// them only through here.
package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/pipeline"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/schemas"
	"github.com/gantry-dev/gantry/sources"
	"github.com/gantry-dev/gantry/sources/gitsource"
)

// Output is where a unit's progress goes: the pipeline's observer, and a
// writer for the API server's warnings.
type Output interface {
	pipeline.Observer
	io.Writer
}

// Session is what every unit of one invocation shares.
type Session struct {
	// Version is gantry's, recorded in results and revisions.
	Version string
	// Holder names the run in an inventory's Lease; Actor, in the
	// revisions it records.
	Holder, Actor string
	// Decrypted masks the values a build decrypts from then on;
	// SecretValues, the values of the set's Secrets.
	Decrypted    func(values []string)
	SecretValues func(values []string)
	// Secret reports whether a value holds one the run masks, and Mask
	// masks them in a value.
	Secret func(value string) bool
	Mask   func(value string) string

	// trees are the base revisions offline diffs compare with, each
	// written once per run; treesOnce sets their limits.
	trees     gitsource.Trees
	treesOnce sync.Once

	// trace, when not nil, records every request sent to a cluster
	// (StartTrace).
	trace *kube.Trace

	// RunFile is every unit of the run file, those a selection of units
	// leaves out too: offline, a unit sees the CRDs of the units it
	// depends on. Units sets it to the units it runs when it is nil.
	RunFile []*config.Unit
	// BaseRunFile reads the run file the units came from as a base
	// revision holds it, with the workflow's inputs: within maps a file
	// or folder of the workspace to the same one in that revision's
	// tree, whose root is root. No run file: nil, and so is its answer
	// where the base revision has no run file there.
	BaseRunFile func(within func(string) string, root string) ([]*config.Unit, error)
	baseMu      sync.Mutex
	baseRead    map[string]baseRead
	// unitCRDs are the CRDs each unit's configuration builds, built once
	// for the run.
	unitCRDsMu sync.Mutex
	unitCRDs   map[string]*builtCRDs

	// clusters are what units on one cluster, as one identity, share:
	// its discovery, version, schemas and bounds on requests in flight.
	clustersMu sync.Mutex
	clusters   map[kube.Options]*kube.Cluster
	// builtins are the clusters' schemas of built-in kinds, by cluster.
	builtins map[*kube.Cluster]*schemas.Builtins

	// charts are the units' remote charts, each fetched once, into the
	// folders chartDirs lists.
	chartsMu  sync.Mutex
	charts    map[*config.Config]*fetchedChart
	chartDirs []string
}

// StartTrace records every request the session sends to a cluster from
// now on; the function it returns writes them to w.
func (s *Session) StartTrace() (write func(w io.Writer)) {
	t := kube.NewTrace()
	s.trace = t
	return t.Write
}

// cluster is what the units connecting with opts share (their concurrency
// aside).
func (s *Session) cluster(opts kube.Options) *kube.Cluster {
	opts.Concurrency, opts.MaxConcurrency, opts.Bound = 0, 0, nil
	s.clustersMu.Lock()
	defer s.clustersMu.Unlock()
	if s.clusters == nil {
		s.clusters = map[kube.Options]*kube.Cluster{}
	}
	c, ok := s.clusters[opts]
	if !ok {
		c = &kube.Cluster{}
		s.clusters[opts] = c
	}
	return c
}

// builtinsOf is how the runs connecting with opts get their cluster's
// schemas of built-in kinds, as offline validation reads them from
// /openapi/v3: read and parsed once per group version for every run of
// the session on the same cluster (parsing the core group's takes about
// 30 ms of CPU).
func (s *Session) builtinsOf(opts kube.Options) func(schemas.OpenAPISource) *schemas.Builtins {
	c := s.cluster(opts)
	return func(src schemas.OpenAPISource) *schemas.Builtins {
		s.clustersMu.Lock()
		defer s.clustersMu.Unlock()
		if s.builtins == nil {
			s.builtins = map[*kube.Cluster]*schemas.Builtins{}
		}
		b, ok := s.builtins[c]
		if !ok {
			b = schemas.NewBuiltins(src)
			s.builtins[c] = b
		}
		return b
	}
}

// Close removes what the session wrote: the base revisions' trees and
// the charts it fetched.
func (s *Session) Close() {
	s.trees.Remove()
	s.removeCharts()
}

// baseTrees are the run's base revisions, bounded as a build is: the
// limits are the workflow's, the same for every unit.
func (s *Session) baseTrees(cfg *config.Config) *gitsource.Trees {
	s.treesOnce.Do(func() {
		s.trees.Limits = gitsource.Limits{MaxFiles: cfg.MaxObjects, MaxFileBytes: cfg.MaxFileBytes, MaxBytes: 8 * cfg.MaxFileBytes}
	})
	return &s.trees
}

func kubeOptions(cfg *config.Config) kube.Options {
	return kube.Options{Kubeconfig: cfg.Kubeconfig, Context: cfg.Context, ServiceAccount: cfg.ServiceAccount,
		Concurrency: cfg.ConcurrencyStart, MaxConcurrency: cfg.Concurrency}
}

// kubeOptions are cfg's, with the session's trace.
func (s *Session) kubeOptions(cfg *config.Config) kube.Options {
	o := kubeOptions(cfg)
	o.Trace = s.trace
	return o
}

// Connect connects to cfg's cluster when the pipeline first needs it;
// the API server's warnings print on warnings.
func (s *Session) Connect(cfg *config.Config, warnings io.Writer) pipeline.Connector {
	return func() (*kube.Clients, error) {
		opts := s.kubeOptions(cfg)
		shared := s.cluster(opts)
		opts.Bound = shared.Bound(opts.Concurrency, opts.MaxConcurrency)
		rc, err := kube.RESTConfig(opts)
		if err != nil {
			return nil, err
		}
		rc.WarningHandler = rest.NewWarningWriter(warnings, rest.WarningWriterOptions{Deduplicate: true})
		return kube.ConnectTo(rc, shared)
	}
}

// Options are the pipeline's options for one unit's configuration.
func (s *Session) Options(cfg *config.Config) pipeline.Options {
	opts := pipeline.Options{
		Build: sources.BuildOptions{
			Path:             cfg.Path,
			TargetNamespace:  cfg.TargetNamespace,
			Patches:          cfg.Patches,
			Substitute:       cfg.Substitute,
			SOPSIdentities:   cfg.SOPSIdentities,
			Decrypted:        s.Decrypted,
			SecretValues:     s.SecretValues,
			MaxFileBytes:     cfg.MaxFileBytes,
			MaxObjects:       cfg.MaxObjects,
			AllowRemoteBases: cfg.AllowRemoteBases,
			CredentialFiles:  cfg.CredentialFiles,
		},
		Inventory:              cfg.Inventory,
		InventoryNamespace:     cfg.InventoryNamespace,
		Prune:                  cfg.Prune,
		Wait:                   cfg.Wait,
		Force:                  cfg.Force,
		AllowEmpty:             cfg.AllowEmpty,
		MaxPrune:               cfg.MaxPrune,
		PruneCRDsWithResources: cfg.PruneCRDsWithResources,
		PruneSharedNamespaces:  cfg.PruneSharedNamespaces,
		DeleteFluxApplied:      cfg.DeleteFluxApplied,
		RefuseConflicts:        cfg.RefuseConflicts,
		TakeOwnership:          cfg.TakeOwnership,
		ValidateAll:            cfg.ValidateAll,
		ReleaseTo:              cfg.ReleaseTo,
		Timeout:                cfg.Timeout,
		HealthChecks:           cfg.HealthChecks,
		PodLogLines:            cfg.PodLogLines,
		Health:                 cfg.Health,
		HealthErr:              cfg.HealthErr,
		Concurrency:            cfg.Concurrency,
		Builtins:               s.builtinsOf(s.kubeOptions(cfg)),
		Revision:               cfg.Revision,
		Source:                 cfg.Source,
		Version:                s.Version,
		Holder:                 s.Holder,
		Actor:                  s.Actor,
		LeaseDuration:          cfg.LeaseDuration,
		History:                cfg.History,
		Atomic:                 cfg.Atomic,
		Correct:                cfg.Correct,
		RecordKey:              cfg.RecordKey,
		RegistryHosts:          cfg.Registry.Hosts,
		HandManagers:           cfg.HandManagers,
		Secret:                 s.Secret,
		Secrets:                s.Decrypted,
		Mask:                   s.Mask,
	}
	if !cfg.Offline { // an offline run reads no kubeconfig
		opts.DefaultNamespace = kube.DefaultNamespace(kubeOptions(cfg))
	}
	if cfg.Chart != "" {
		opts.Build.Path = cfg.Chart
		opts.Build.Chart = &sources.Chart{Dir: cfg.Chart, ReleaseName: cfg.ReleaseName, Values: cfg.Values, Set: cfg.Set, Hooks: cfg.ChartHooks}
		if cfg.Offline && cfg.Release != nil {
			opts.Build.Chart.KubeVersion = "v" + cfg.Release.Version + ".0"
		}
		if cfg.TargetNamespace != "" {
			// The release's namespace, as helm install --namespace:
			// where what names none goes.
			opts.DefaultNamespace = cfg.TargetNamespace
		}
	}
	var client *artifact.Client
	switch {
	case cfg.Artifact != "":
		client = ArtifactClient(cfg)
		opts.Artifact = &pipeline.ArtifactOptions{Ref: cfg.Artifact, Path: cfg.ArtifactPath, Tags: cfg.Tags, Client: client,
			Meta: artifact.Meta{Source: cfg.Source, Revision: cfg.Revision}}
	case cfg.Command == "apply" || cfg.Command == "rollback" || cfg.Command == "drift":
		client = ArtifactClient(cfg)
	}
	// A rollback (or an atomic apply's, or drift's) to a revision that
	// holds only an artifact's digest pulls it.
	opts.ArtifactClient = client
	// Without a path, apply and diff pull the artifact and build what was
	// pulled; drift compares with it, or with the last revision.
	if !cfg.PathGiven && (cfg.Command == "drift" || cfg.Artifact != "" && (cfg.Command == "apply" || cfg.Command == "diff")) {
		opts.Build.Path = ""
	}
	return opts
}

// ArtifactClient reaches cfg's registries with its credentials (for the
// registries they were given for), keys and signing settings.
func ArtifactClient(cfg *config.Config) *artifact.Client {
	return artifact.New(artifactOptions(cfg))
}

func artifactOptions(cfg *config.Config) artifact.Options {
	return artifact.Options{
		Username: cfg.Registry.Username, Password: cfg.Registry.Password, Hosts: cfg.Registry.Hosts,
		GitHubToken: cfg.GitHubToken, Insecure: cfg.Registry.Insecure,
		Recipients: cfg.AgeRecipients, Identities: cfg.AgeIdentities,
		Sign: cfg.Sign, Verify: cfg.Verify,
		MaxBytes: cfg.MaxArtifactBytes, MaxFiles: cfg.MaxArtifactFiles,
	}
}

// Command runs a command of one configuration that is not a unit's:
// push, release or rollback.
func (s *Session) Command(ctx context.Context, cfg *config.Config, out Output) *result.Result {
	opts := s.Options(cfg)
	connect := s.Connect(cfg, out)
	switch cfg.Command {
	case "push":
		if failed := s.withChart(ctx, cfg, &opts, out); failed != nil {
			return failed
		}
		return pipeline.Push(ctx, opts, out)
	case "release":
		return pipeline.Release(ctx, opts, connect, out)
	case "rollback":
		return pipeline.Rollback(ctx, opts, cfg.RollbackTo, connect, out)
	}
	return s.Unit(ctx, &config.Unit{Name: cfg.Inventory, Config: cfg}, out, false)
}

// Render builds cfg's configuration, as build prints it.
func (s *Session) Render(ctx context.Context, cfg *config.Config, out Output) ([]*sources.Object, *result.Result) {
	opts := s.Options(cfg)
	if failed := s.withChart(ctx, cfg, &opts, out); failed != nil {
		return nil, failed
	}
	return pipeline.Render(ctx, opts, out)
}

// Unit runs one unit's pipeline for its command (validate, diff, apply,
// delete or drift): a single run is a run of one unit, and each unit of a
// run file runs here too. A unit that others depend on (dependedOn) is
// applied and waited for until healthy, whatever its own wait says: its
// dependents start only then.
func (s *Session) Unit(ctx context.Context, u *config.Unit, out Output, dependedOn bool) *result.Result {
	opts := s.Options(u.Config)
	if failed := s.withChart(ctx, u.Config, &opts, out); failed != nil {
		return failed
	}
	opts.Wait = opts.Wait || dependedOn && u.Config.Command == "apply"
	connect := s.Connect(u.Config, out)
	switch u.Config.Command {
	case "validate":
		offline, err := s.offlineOptions(ctx, u, opts)
		if err != nil {
			return &result.Result{Schema: result.SchemaVersion, Command: "validate", Version: s.Version,
				Reason: result.ReasonInvalidInput, Message: err.Error(), Stages: []result.Stage{}, Objects: []result.Object{}}
		}
		opts.Offline = offline
		return pipeline.Validate(ctx, opts, connect, out)
	case "diff":
		if u.Config.Offline {
			return s.offlineDiff(ctx, u, opts, out)
		}
		if u.Config.Inventory == "" {
			opts.Prune = false
		}
		return pipeline.Diff(ctx, opts, connect, out)
	case "delete":
		return pipeline.Delete(ctx, opts, connect, out)
	case "drift":
		return pipeline.Drift(ctx, opts, connect, out)
	}
	return pipeline.Apply(ctx, opts, connect, out)
}

// offlineDiff compares the unit's configuration with itself at the base
// revision, with no cluster (diff --offline --base).
func (s *Session) offlineDiff(ctx context.Context, u *config.Unit, opts pipeline.Options, out Output) *result.Result {
	cfg := u.Config
	fail := func(err error) *result.Result {
		return &result.Result{Schema: result.SchemaVersion, Command: "diff", Version: s.Version, Base: cfg.Base,
			Reason: result.ReasonBuildFailed, Message: err.Error(), Stages: []result.Stage{}, Objects: []result.Object{}}
	}
	fetched := cfg.RemoteChart != nil
	// A chart the run file names (its reference, version or repository)
	// is the one the run file names at the base: that unit is built as
	// the base's run file gives it.
	fromRunFile := fetched && cfg.RemoteChart.VersionFromRunFile
	if fromRunFile && s.BaseRunFile == nil {
		return fail(fmt.Errorf("the chart %s is fetched as a run file names it, and the run file at %s cannot be read here", cfg.Chart, cfg.Base))
	}
	offline, err := s.offlineOptions(ctx, u, opts)
	if err != nil {
		return fail(err)
	}
	opts.Offline = offline
	workDir := opts.Build.WorkDir
	if workDir == "" {
		workDir = "."
	}
	// One tree per base revision and repository for the whole run,
	// removed when the session closes. A chart the workflow names is
	// fetched, the same at the base (its version is the workflow's
	// input): the tree is the workspace's, for the values files.
	at := opts.Build.Path
	if fetched {
		at = workDir
	}
	tree, err := s.baseTrees(cfg).Checkout(at, cfg.Base)
	if err != nil {
		return fail(err)
	}
	src := pipeline.BaseSource{Revision: cfg.Base, Path: tree.Path, WorkDir: tree.Within(workDir), Within: tree.Within, ChartFetched: fetched}
	if fromRunFile {
		b, err := s.baseUnitBuild(ctx, u, tree, out)
		if err != nil {
			return fail(fmt.Errorf("the run file at %s: %w", cfg.Base, err))
		}
		if b == nil {
			src.Absent = true
		} else {
			src.Build = b
		}
	}
	return pipeline.DiffOffline(ctx, opts, src, out)
}

// baseUnitBuild is how unit u builds as the base's run file gives it,
// its chart fetched as that file names it (the workflow's allow list,
// cache and credentials alike); nil when the base's run file has no unit
// of that name on the same inventory, or no run file is there. Files
// the workflow names (values, patches) are taken at the base as every
// unit's files are.
func (s *Session) baseUnitBuild(ctx context.Context, u *config.Unit, tree *gitsource.Tree, out Output) (*sources.BuildOptions, error) {
	units, err := s.baseUnits(tree)
	if err != nil {
		return nil, err
	}
	for _, bu := range units {
		if bu.Name != u.Name || bu.Config == nil {
			continue
		}
		if bu.Config.Inventory != u.Config.Inventory || bu.Config.InventoryNamespace != u.Config.InventoryNamespace {
			// Another inventory's objects: applying the head
			// creates every object anew, and prunes none of those.
			return nil, nil
		}
		opts := s.Options(bu.Config)
		if failed := s.withChart(ctx, bu.Config, &opts, out); failed != nil {
			return nil, fmt.Errorf("unit %s: %s", u.Name, failed.Message)
		}
		b := opts.Build
		at := func(p string) string {
			// A path the base's run file gives lies in the base's
			// tree; one the workflow gives is the head's, whose
			// file at the base is the one to read.
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
			if rel, err := filepath.Rel(tree.Root, p); err == nil && filepath.IsLocal(rel) {
				return p
			}
			if rel, err := filepath.Rel(tree.Repository, p); err == nil && filepath.IsLocal(rel) {
				return tree.Within(p)
			}
			return p
		}
		b.Patches = slices.Clone(b.Patches)
		for i, p := range b.Patches {
			b.Patches[i] = at(p)
		}
		if b.Chart != nil {
			c := *b.Chart
			c.Values = slices.Clone(c.Values)
			for i, v := range c.Values {
				c.Values[i] = at(v)
			}
			b.Chart = &c
		}
		return &b, nil
	}
	return nil, nil
}

// baseUnits are the units of the run file at the base tree, read once
// for the run, and their secrets masked from then on.
func (s *Session) baseUnits(tree *gitsource.Tree) ([]*config.Unit, error) {
	s.baseMu.Lock()
	defer s.baseMu.Unlock()
	if read, ok := s.baseRead[tree.Root]; ok {
		return read.units, read.err
	}
	units, err := s.BaseRunFile(tree.Within, tree.Root)
	if err == nil {
		for _, bu := range units {
			if bu.Config != nil && len(bu.Config.Secrets) > 0 && s.Decrypted != nil {
				// Values the base's run file alone reads ({env: ...},
				// secret inputs) are masked as the head's are.
				s.Decrypted(bu.Config.Secrets)
			}
		}
	}
	if s.baseRead == nil {
		s.baseRead = map[string]baseRead{}
	}
	s.baseRead[tree.Root] = baseRead{units, err}
	return units, err
}

// baseRead is a base tree's run file, as read.
type baseRead struct {
	units []*config.Unit
	err   error
}

// offlineOptions are validate's, with the CRDs of the crds folders and
// artifacts built as the set is built, and those the units u depends on
// build (CRDs in one unit, their custom resources in the next); nil for a
// validate against the cluster.
func (s *Session) offlineOptions(ctx context.Context, u *config.Unit, opts pipeline.Options) (*pipeline.OfflineOptions, error) {
	cfg := u.Config
	if !cfg.Offline {
		return nil, nil
	}
	o := &pipeline.OfflineOptions{Release: cfg.Release, AllowUnknownGroups: cfg.AllowUnknownKinds}
	for _, d := range s.dependencies(u) {
		o.CRDs = append(o.CRDs, s.builtCRDs(ctx, d)...)
	}
	for _, source := range cfg.CRDs {
		dir := source
		if strings.HasPrefix(source, "oci://") {
			// Pulled (and verified, when verify is set) as any artifact;
			// only the workflow names one.
			tmp, err := os.MkdirTemp("", "gantry-crds-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(tmp)
			if _, err := ArtifactClient(cfg).Pull(ctx, source, tmp); err != nil {
				return nil, fmt.Errorf("crds (%s): %w", source, err)
			}
			dir = tmp
		}
		b := opts.Build
		b.Path, b.WorkDir, b.TargetNamespace, b.Patches, b.Substitute, b.NoOrigins = dir, "", "", nil, nil, true
		if dir != source {
			b.WorkDir = dir
		}
		b.KeepSOPSEncrypted = true
		objects, err := sources.Build(b)
		if err != nil {
			return nil, fmt.Errorf("crds (%s): %w", source, err)
		}
		for _, obj := range objects {
			o.CRDs = append(o.CRDs, obj.Unstructured)
		}
	}
	return o, nil
}

// builtCRDs are what one unit's configuration builds once for the run.
type builtCRDs struct {
	once sync.Once
	crds []*unstructured.Unstructured
}

// dependencies are the units u depends on, directly or through others,
// in the run file's order: in the whole run file, whether or not a
// selection of units runs them.
func (s *Session) dependencies(u *config.Unit) []*config.Unit {
	byName := map[string]*config.Unit{}
	for _, d := range s.RunFile {
		byName[d.Name] = d
	}
	deps := u.DependsOn
	if full, ok := byName[u.Name]; ok {
		deps = full.DependsOn // a selection keeps only the selected
	}
	seen := map[string]bool{u.Name: true}
	var visit func(names []string)
	visit = func(names []string) {
		for _, n := range names {
			if d, ok := byName[n]; ok && !seen[n] {
				seen[n] = true
				visit(d.DependsOn)
			}
		}
	}
	visit(deps)
	var out []*config.Unit
	for _, d := range s.RunFile {
		if seen[d.Name] && d.Name != u.Name {
			out = append(out, d)
		}
	}
	return out
}

// builtCRDs are the CRDs u's configuration builds, as its crds input's
// are built (SOPS-encrypted files kept as they are): none when it builds
// an artifact or fails to build, which its own result reports.
func (s *Session) builtCRDs(ctx context.Context, u *config.Unit) []*unstructured.Unstructured {
	s.unitCRDsMu.Lock()
	if s.unitCRDs == nil {
		s.unitCRDs = map[string]*builtCRDs{}
	}
	b, ok := s.unitCRDs[u.Name]
	if !ok {
		b = &builtCRDs{}
		s.unitCRDs[u.Name] = b
	}
	s.unitCRDsMu.Unlock()
	b.once.Do(func() {
		opts := s.Options(u.Config).Build
		if u.Config.RemoteChart != nil && opts.Chart != nil {
			got, err := s.remoteChart(ctx, u.Config)
			if err != nil {
				return
			}
			opts.Path, opts.Chart.Dir, opts.Chart.Shown = got.Dir, got.Dir, got.Ref+":"+got.Version
		}
		if opts.Path == "" {
			return
		}
		opts.SOPSIdentities, opts.KeepSOPSEncrypted, opts.NoOrigins = nil, true, true
		opts.Decrypted, opts.SecretValues, opts.Skipped = nil, nil, nil
		objects, err := sources.Build(opts)
		if err != nil {
			return
		}
		for _, obj := range objects {
			if obj.GetKind() == "CustomResourceDefinition" && strings.HasPrefix(obj.GetAPIVersion(), "apiextensions.k8s.io/") {
				b.crds = append(b.crds, obj.Unstructured)
			}
		}
	})
	return b.crds
}
