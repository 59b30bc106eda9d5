// Package config makes the configuration of a run from what it was given:
// flags, GitHub Actions inputs (INPUT_*), GANTRY_* variables and a run
// file's units, each value with where it came from. The rule of who may
// decide what lives here (trust.go): the workflow decides credentials,
// keys, endpoints and what a preview compares with; a run file decides
// only the shape of the run. It imports neither the command line nor
// the platform nor the console.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/health"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/pipeline"
	"github.com/gantry-dev/gantry/schemas/releases"
	"github.com/gantry-dev/gantry/sources"
	"github.com/gantry-dev/gantry/sources/gitsource"
)

// Config is the validated configuration of one run.
type Config struct {
	Command            string
	Path               string
	Inventory          string
	InventoryNamespace string
	Prune, Wait, Force bool
	AllowEmpty         bool
	MaxPrune           pipeline.PruneLimit
	// DeleteFluxApplied: delete-flux-applied.
	DeleteFluxApplied bool
	// RefuseConflicts: field-conflicts refuse.
	RefuseConflicts bool
	// PruneCRDsWithResources: prune-crds-with-resources.
	PruneCRDsWithResources bool
	// PruneSharedNamespaces: prune-shared-namespaces.
	PruneSharedNamespaces bool
	TakeOwnership         bool
	// ValidateAll dry-runs every object (validate: all).
	ValidateAll bool
	// ReleaseTo is the field manager release hands gantry's fields to.
	ReleaseTo string
	// MaxFileBytes and MaxObjects bound what one build may read.
	MaxFileBytes int64
	MaxObjects   int
	// MaxArtifactBytes and MaxArtifactFiles bound what a pull unpacks.
	MaxArtifactBytes int64
	MaxArtifactFiles int
	// AllowRemoteBases lets kustomize fetch remote resources.
	AllowRemoteBases bool
	DetailedExitcode bool
	// Output is what diff prints on stdout: text, json or yaml.
	Output          string
	Timeout         time.Duration
	LeaseDuration   time.Duration
	TargetNamespace string
	Patches         []string
	// Chart is a chart's folder, built instead of Path; Values, Set,
	// ReleaseName and ChartHooks say how it is rendered.
	Chart       string
	Values      []string
	Set         []string
	ReleaseName string
	ChartHooks  string
	// RemoteChart, when set, is the chart fetched before the build
	// (Chart is then its reference, not a folder).
	RemoteChart *RemoteChart
	// Substitute is nil when no variables were given (substitution off).
	Substitute     map[string]string
	Kubeconfig     string
	Context        string
	ServiceAccount string
	HealthChecks   []pipeline.ObjectRef
	// PodLogLines is how many last log lines the wait says of a
	// container that ended with an error.
	PodLogLines int
	// Health decides custom resources by rules (health-rules and the
	// built-in ones); HealthWarnings are the traps found in them, and
	// HealthErr their mistakes, reported with the fields the kinds'
	// schemas lack when the set is validated, all in one pass.
	Health         *health.Set
	HealthWarnings []string
	HealthErr      error
	// Concurrency is the most requests in flight, and the workers each
	// stage keeps; ConcurrencyStart the bound a run starts at, less when
	// concurrency is auto (the bound then grows far from the cluster).
	Concurrency      int
	ConcurrencyStart int
	Report           string
	Revision         string
	Source           string
	// Summary and Comment are auto, true or false.
	Summary, Comment         string
	GitHubToken, GitLabToken string
	Dotenv                   string
	TektonResults            string
	// PathGiven says path was set, not defaulted.
	PathGiven bool
	Artifact  string
	// ArtifactPath is the folder inside a pulled artifact to build.
	ArtifactPath string
	CompareTo    string
	Tags         []string
	Semver       string
	Registry     struct {
		Username, Password string
		// Hosts are the registries the username and password are
		// for: registry-hosts, and those of the artifact, compare-to,
		// crds and chart the workflow gave.
		Hosts    []string
		Insecure bool
	}
	AgeRecipients  []age.Recipient
	AgeIdentities  []age.Identity
	SOPSIdentities []age.Identity
	Sign           *artifact.SignOptions
	Verify         *artifact.VerifyOptions
	// Secrets are the values that must never be printed.
	Secrets []string
	// CredentialFiles are the files the run holds credentials in (its
	// kubeconfigs and the files they name, key files, registry and cloud
	// credentials): no build reads them, wherever they are.
	CredentialFiles []string
	// UnitsConcurrency bounds the units of a run file that run at once.
	UnitsConcurrency int
	// Units, with a run file, are the only units to run (unit).
	Units []string
	// Format is plan's output: github, tekton or gitlab.
	Format string
	// Image is the gantry image plan's jobs run; PipelineName, the
	// name of plan's Tekton Pipeline. Empty for their defaults.
	Image, PipelineName string
	// Offline, for validate: no cluster. Release is the Kubernetes
	// release checked against, CRDs the crds folders, AllowUnknownKinds
	// the groups let through unchecked.
	Offline           bool
	Base              string
	Release           *releases.Release
	CRDs              []string
	AllowUnknownKinds []string
	// History is how many revisions are kept (0: as the inventory's
	// newest revision was kept with); Atomic rolls a failed
	// apply back; RollbackTo is the revision rollback applies (0: the
	// last that succeeded before the current).
	History    int
	Atomic     bool
	RollbackTo int
	// Correct, for drift, applies the set again when it drifted;
	// DriftIssue (auto, true or false) keeps an issue open while it lasts.
	Correct    bool
	DriftIssue string
	// RecordKey signs the revisions the run records and authenticates
	// those it writes from (rollback, atomic, correct); nil without
	// record-key.
	RecordKey *inventory.RecordKey
	// Color is auto, always or never; Quiet prints no progress.
	Color string
	Quiet bool
	// Trace prints every request sent to the cluster when the run ends.
	Trace bool
	// HandManagers, for drift, are field managers whose changes are made
	// by hand, besides kubectl's.
	HandManagers []string
}

// Source is where an input's value came from. The trust rule is decided
// by it: the workflow (flags, INPUT_*, GANTRY_*) decides credentials,
// keys, endpoints and what a preview compares with; a run file decides
// only the shape of the run.
type Source int

const (
	FromDefault  Source = iota
	FromFlag            // a flag, or the path argument
	FromInput           // INPUT_NAME, as GitHub Actions gives inputs
	FromVariable        // GANTRY_NAME, as GitLab and Tekton give them
	FromRunFile         // a run file's unit or its defaults
)

// Workflow says the value was given by whoever runs gantry, not read
// from the configuration it deploys.
func (s Source) Workflow() bool { return s == FromFlag || s == FromInput || s == FromVariable }

// value is one input's raw value and where it came from.
type value struct {
	raw string
	// rules is health-rules given in a run file as a list, read there
	// with its lines.
	rules *yaml.Node
	// file and line: where rules text given in a run file starts.
	file   string
	line   int
	origin string // --flag, INPUT_X, GANTRY_X, file:line or default, for messages
	from   Source
	// masks are what the value read through references: secrets.
	masks []string
}

// Given is what a run was given: the command, the flags by input name as
// raw text, the path argument and the environment. The command line
// makes it; configuration makes units of it.
type Given struct {
	Command string
	// CommandOrigin names where the command came from, for messages.
	CommandOrigin string
	Flags         map[string]string
	// Path is the path argument, if given.
	Path string
	Env  map[string]string
	// unit is a run file's settings of one unit: over the defaults,
	// under the command line and the variables.
	unit map[string]value
}

// EnvName is an input's GitHub Actions variable: INPUT_ upper-cased, hyphens
// kept.
func (in Input) EnvName() string { return "INPUT_" + strings.ToUpper(in.Name) }

// GantryEnvName is an input's variable for GitLab and Tekton.
func (in Input) GantryEnvName() string {
	return "GANTRY_" + strings.ToUpper(strings.ReplaceAll(in.Name, "-", "_"))
}

// resolve reads every input from the command line and env by precedence.
func resolve(g *Given) (map[string]value, error) {
	env := g.Env
	// A GitHub Actions input gantry does not have is a typo in with:,
	// which the runner passes on with a warning only; it is refused here,
	// as an unknown flag is, rather than silently ignored.
	known := map[string]bool{}
	for _, in := range Inputs {
		known[in.EnvName()] = true
	}
	var unknown []string
	for k := range env {
		if strings.HasPrefix(k, "INPUT_") && !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown input %s: gantry has no such input (see action.yml)", strings.Join(unknown, ", "))
	}

	out := map[string]value{}
	for _, in := range Inputs {
		// A unit of a run file keeps its own setting where a variable
		// holds only the input's default: action.yml and the CI
		// templates set every input, given or not.
		given := func(v string) bool {
			return v != "" && (g.unit == nil || (v != in.Default && v != in.ActionDefault))
		}
		raw, flagged := g.Flags[in.Name]
		switch {
		case flagged:
			out[in.Name] = value{raw: raw, origin: "--" + in.Name, from: FromFlag}
		case in.Name == "path" && g.Path != "":
			out[in.Name] = value{raw: g.Path, origin: "the path argument", from: FromFlag}
		case given(env[in.EnvName()]):
			out[in.Name] = value{raw: env[in.EnvName()], origin: in.EnvName(), from: FromInput}
		case given(env[in.GantryEnvName()]):
			out[in.Name] = value{raw: env[in.GantryEnvName()], origin: in.GantryEnvName(), from: FromVariable}
		case g.unit[in.Name].origin != "":
			out[in.Name] = g.unit[in.Name]
		default:
			out[in.Name] = value{raw: in.Default, origin: "default", from: FromDefault}
		}
	}
	out["command"] = value{raw: g.Command, origin: g.CommandOrigin, from: FromFlag}
	return out, nil
}

var (
	envKey        = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
	healthCheckRe = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]*(?:\.[a-z0-9.-]+)?)/(?:([a-z0-9.-]+)/)?([a-z0-9.:-]+)$`)
	// secretName matches variable names whose values are masked in output.
	secretName = sources.SecretName
)

// Load makes one unit's Config from the resolved inputs: each concern
// reads its inputs and names every one that is wrong, so a run refused for
// its configuration lists all it has to fix at once.
func Load(g Given) (*Config, error) {
	return configure(&g)
}

func configure(g *Given) (*Config, error) {
	env := g.Env
	vals, err := resolve(g)
	if err != nil {
		return nil, err
	}
	in := &inputs{vals: vals}
	c := &Config{
		Command:            in.str("command"),
		Path:               in.str("path"),
		PathGiven:          vals["path"].origin != "default",
		Chart:              in.str("chart"),
		Inventory:          in.str("inventory"),
		InventoryNamespace: in.str("inventory-namespace"),
		TargetNamespace:    in.str("target-namespace"),
		Kubeconfig:         in.str("kubeconfig"),
		Context:            in.str("context"),
		ServiceAccount:     in.str("service-account"),
	}
	c.Offline = in.bool("offline")
	in.source(c)
	in.cluster(c)
	in.behaviour(c)
	in.limits(c)
	in.artifact(c)
	in.keys(c, env)
	in.reporting(c, env)
	if c.RemoteChart != nil && c.RemoteChart.Cache != "" {
		checkout := defaultWorkspace(env)
		in.chartCacheOutside(c.RemoteChart.Cache, checkout)
		if ws := in.str("workspace"); ws != "" && ws != checkout {
			in.chartCacheOutside(c.RemoteChart.Cache, ws)
		}
	}
	in.offline(c)
	for _, v := range vals {
		c.Secrets = append(c.Secrets, v.masks...)
	}
	masks, files := kubeconfigCredentials(c, env)
	c.Secrets = append(c.Secrets, masks...)
	c.CredentialFiles = credentialFiles(files, in, env)
	in.health(c)
	return c, errors.Join(in.errs...)
}

// inputs reads the resolved inputs of one configuration and collects what
// is wrong with them, each error naming the input and where it came from.
type inputs struct {
	vals map[string]value
	errs []error
}

func (in *inputs) bad(name, format string, a ...any) {
	in.errs = append(in.errs, fmt.Errorf("%s (from %s): %s", name, in.vals[name].origin, fmt.Sprintf(format, a...)))
}

func (in *inputs) str(name string) string { return strings.TrimSpace(in.vals[name].raw) }

func (in *inputs) lines(name string) []string { return lines(in.vals[name].raw) }

func (in *inputs) bool(name string) bool {
	b, err := strconv.ParseBool(in.str(name))
	if err != nil {
		in.bad(name, "%q is not true or false", in.vals[name].raw)
	}
	return b
}

// number reads a whole number from lo to hi; want says so in the error.
func (in *inputs) number(name string, lo, hi int64, want string) int64 {
	n, err := strconv.ParseInt(in.str(name), 10, 64)
	if err != nil || n < lo || n > hi {
		in.bad(name, "%q is not %s", in.vals[name].raw, want)
	}
	return n
}

// oneOf reads an input that takes one of a few words.
func (in *inputs) oneOf(name string, words ...string) string {
	v := in.str(name)
	if !slices.Contains(words, v) {
		in.bad(name, "%q: want %s", v, orList(words))
	}
	return v
}

// source: what is built and how (path, patches, substitute), or the
// artifact apply and diff pull instead.
func (in *inputs) source(c *Config) {
	c.AllowRemoteBases = in.bool("allow-remote-bases")
	// The command is one of gantry's: parseCommandLine refused others.
	// apply and diff with an artifact and no path pull instead of building.
	pulls := (c.Command == "apply" || c.Command == "diff" || c.Command == "drift") && in.str("artifact") != "" && !c.PathGiven
	// drift compares with the inventory's last revision unless given a
	// configuration.
	needsBuild := (c.Command == "build" || c.Command == "diff" || c.Command == "apply" || c.Command == "push" || c.Command == "validate" ||
		c.Command == "drift" && c.PathGiven) && !pulls
	if needsBuild && c.Chart == "" {
		if info, err := os.Stat(c.Path); err != nil {
			in.bad("path", "%s does not exist", c.Path)
		} else if ext := strings.ToLower(filepath.Ext(c.Path)); !info.IsDir() && !(info.Mode().IsRegular() && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
			in.bad("path", "%s is neither a folder nor a .yaml, .yml or .json file of manifests", c.Path)
		}
	}
	in.chart(c)
	for _, p := range in.lines("patches") {
		if info, err := os.Stat(p); err != nil || info.IsDir() {
			in.bad("patches", "patch file %s does not exist", p)
		}
		c.Patches = append(c.Patches, p)
	}
	if subs := in.lines("substitute"); len(subs) > 0 {
		c.Substitute = map[string]string{}
		for i, l := range subs {
			k, v, ok := strings.Cut(l, "=")
			k = strings.TrimSpace(k)
			if !ok || !envKey.MatchString(k) {
				// Never echo the line: it may hold a secret value.
				in.bad("substitute", "line %d is not KEY=VALUE with KEY a variable name", i+1)
				continue
			}
			c.Substitute[k] = v
			if v != "" && secretName.MatchString(k) {
				c.Secrets = append(c.Secrets, v)
			}
		}
	}
}

// cluster: where the unit goes and under which names it is kept there.
func (in *inputs) cluster(c *Config) {
	if c.Inventory == "" && slices.Contains([]string{"apply", "delete", "release", "rollback", "history", "drift"}, c.Command) {
		in.bad("inventory", "required for %s: give --inventory NAME (GANTRY_INVENTORY, or the Action's inventory input), the name of the record in the cluster of what this configuration applied, the same on every run of it", c.Command)
	}
	if c.Inventory != "" {
		for _, msg := range validation.IsDNS1123Label(c.Inventory) {
			in.bad("inventory", "%q: %s", c.Inventory, msg)
		}
		if len(c.Inventory) > 56 {
			in.bad("inventory", "%q is longer than 56 characters", c.Inventory)
		}
	}
	for _, msg := range validation.IsDNS1123Label(c.InventoryNamespace) {
		in.bad("inventory-namespace", "%q: %s", c.InventoryNamespace, msg)
	}
	if c.TargetNamespace != "" {
		for _, msg := range validation.IsDNS1123Label(c.TargetNamespace) {
			in.bad("target-namespace", "%q: %s", c.TargetNamespace, msg)
		}
	}
	if c.Kubeconfig != "" && !c.Offline {
		if _, err := os.Stat(c.Kubeconfig); err != nil {
			in.bad("kubeconfig", "%s does not exist", c.Kubeconfig)
		}
	}
	if c.Context != "" && !c.Offline {
		// A context that is not there is the input's fault (exit 2),
		// named with those that are, not a failure of the cluster.
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = c.Kubeconfig
		if raw, err := rules.Load(); err == nil && raw.Contexts[c.Context] == nil {
			names := slices.Sorted(maps.Keys(raw.Contexts))
			in.bad("context", "no context %q in the kubeconfig; it has %s", c.Context, orNone(strings.Join(names, ", ")))
		}
	}
	if c.ServiceAccount != "" {
		ns, name, ok := strings.Cut(c.ServiceAccount, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			in.bad("service-account", "%q is not namespace/name", c.ServiceAccount)
		}
	}
}

// behaviour: what the run does to the cluster, and what it waits for.
func (in *inputs) behaviour(c *Config) {
	c.Prune, c.Wait, c.Force = in.bool("prune"), in.bool("wait"), in.bool("force")
	c.AllowEmpty = in.bool("allow-empty")
	c.PruneCRDsWithResources = in.bool("prune-crds-with-resources")
	c.PruneSharedNamespaces = in.bool("prune-shared-namespaces")
	c.DeleteFluxApplied = in.bool("delete-flux-applied")
	c.TakeOwnership = in.bool("take-ownership")
	c.ReleaseTo = in.str("release-to")
	c.ValidateAll = in.oneOf("validate", "changed", "all") == "all"
	c.RefuseConflicts = in.oneOf("field-conflicts", "take", "refuse") == "refuse"
	c.Atomic = in.bool("atomic")
	c.Correct = in.bool("correct")
	c.HandManagers = in.lines("hand-managers")
	if in.str("history") != "" { // else as the inventory was kept
		c.History = int(in.number("history", 1, 1000, "a count of revisions from 1 to 1000"))
	}
	if in.str("to") != "" {
		c.RollbackTo = int(in.number("to", 1, math.MaxInt32, "a revision number, as gantry history lists them"))
	}
	if c.Atomic && !c.Wait {
		// Without the wait, a rollout that fails is never seen.
		in.bad("atomic", "needs wait: a failed rollout is found only by waiting for it")
	}
	if d, err := time.ParseDuration(in.str("timeout")); err != nil || d <= 0 {
		in.bad("timeout", "%q is not a positive duration such as 90s or 5m", in.vals["timeout"].raw)
	} else {
		c.Timeout = d
	}
	if d, err := time.ParseDuration(in.str("lease-duration")); err != nil || d < 3*time.Second || d%time.Second != 0 {
		in.bad("lease-duration", "%q is not a whole number of seconds of at least 3s, such as 30s or 2m", in.vals["lease-duration"].raw)
	} else {
		c.LeaseDuration = d
	}
	if raw := in.str("max-prune"); raw != "" {
		if pct, ok := strings.CutSuffix(raw, "%"); ok {
			n, err := strconv.Atoi(pct)
			if err != nil || n < 0 || n > 100 {
				in.bad("max-prune", "%q is not a percentage from 0%% to 100%%", raw)
			}
			c.MaxPrune = pipeline.PruneLimit{Percent: n, Given: true}
		} else {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 0 {
				in.bad("max-prune", "%q is neither a count of objects (such as 40) nor a percentage (such as 80%%)", raw)
			}
			c.MaxPrune = pipeline.PruneLimit{Count: n, Given: true}
		}
	}
	for _, l := range in.lines("health-checks") {
		m := healthCheckRe.FindStringSubmatch(l)
		if m == nil {
			in.bad("health-checks", "%q is not Kind/namespace/name or Kind/name", l)
			continue
		}
		c.HealthChecks = append(c.HealthChecks, pipeline.ObjectRef{Kind: m[1], Namespace: m[2], Name: m[3]})
	}
	c.PodLogLines = int(in.number("pod-log-lines", 0, 20, "a whole number of lines from 0 to 20"))
	c.Units = in.lines("unit")
	c.UnitsConcurrency = int(in.number("units-concurrency", 1, 64, "a whole number from 1 to 64"))
}

// With concurrency auto, a run starts with AutoConcurrencyStart requests
// in flight, as many as a nearby API server answers at once without
// queueing them, and may grow to AutoConcurrencyMost where answers wait
// on the wire (kube-apiserver serves up to 1000 streams per connection).
const (
	AutoConcurrencyStart = 64
	AutoConcurrencyMost  = 1024
)

// limits bound what one run reads and sends at once.
func (in *inputs) limits(c *Config) {
	if in.str("concurrency") == "auto" {
		c.Concurrency, c.ConcurrencyStart = AutoConcurrencyMost, AutoConcurrencyStart
	} else {
		c.Concurrency = int(in.number("concurrency", 1, AutoConcurrencyMost, fmt.Sprintf("auto or a whole number from 1 to %d", AutoConcurrencyMost)))
		c.ConcurrencyStart = c.Concurrency
	}
	c.MaxFileBytes = in.number("max-file-bytes", 1, math.MaxInt64, "a positive whole number of bytes")
	c.MaxObjects = int(in.number("max-objects", 1, math.MaxInt32, "a positive whole number"))
	c.MaxArtifactBytes = in.number("max-artifact-bytes", 1, math.MaxInt64, "a positive whole number of bytes")
	c.MaxArtifactFiles = int(in.number("max-artifact-files", 1, math.MaxInt32, "a positive whole number"))
}

// artifact: the OCI artifact a command pushes, pulls or compares, and its
// registry.
func (in *inputs) artifact(c *Config) {
	c.Artifact, c.Semver, c.CompareTo = in.str("artifact"), in.str("semver"), in.str("compare-to")
	c.Tags = in.lines("tags")
	c.Registry.Username, c.Registry.Password = in.str("registry-username"), in.str("registry-password")
	c.Registry.Insecure = in.bool("insecure-registry")
	if c.Registry.Password != "" {
		c.Secrets = append(c.Secrets, c.Registry.Password)
	}
	if c.ArtifactPath = in.str("artifact-path"); c.ArtifactPath != "" {
		clean := filepath.Clean(strings.TrimPrefix(c.ArtifactPath, "./"))
		switch {
		case !filepath.IsLocal(clean):
			in.bad("artifact-path", "%q is not a folder inside the artifact (relative, without ..)", c.ArtifactPath)
		case c.PathGiven && (c.Command == "apply" || c.Command == "diff"):
			in.bad("artifact-path", "is for apply and diff from an artifact; with path, they build path and push it")
		}
		c.ArtifactPath = clean
	}
	switch c.Command {
	case "push", "pull", "tag", "list", "inspect", "diff-artifact":
		if c.Artifact == "" {
			in.bad("artifact", "required for %s", c.Command)
		}
	}
	if c.Command == "diff-artifact" {
		switch {
		case c.CompareTo == "":
			in.bad("compare-to", "required for diff-artifact: an oci:// artifact or a folder")
		case strings.HasPrefix(c.CompareTo, "oci://"):
			if _, err := artifact.ParseRef(c.CompareTo, c.Registry.Insecure); err != nil {
				in.bad("compare-to", "%v", err)
			}
		default:
			if info, err := os.Stat(c.CompareTo); err != nil || !info.IsDir() {
				in.bad("compare-to", "%s is neither an oci:// artifact nor a folder", c.CompareTo)
			}
		}
	}
	registry := ""
	if c.Artifact != "" {
		ref, err := artifact.ParseRef(c.Artifact, c.Registry.Insecure)
		if c.Command == "list" {
			err = artifact.ValidRepository(c.Artifact)
		}
		if err != nil {
			in.bad("artifact", "%v", err)
		} else if ref != nil {
			registry = ref.Context().RegistryStr()
		}
	}
	c.Registry.Hosts = in.registryHosts(c)
	if registry != "" && in.vals["artifact"].from == FromRunFile && !slices.Contains(c.Registry.Hosts, registry) {
		// A run file's artifact is pushed to (apply and diff with a path)
		// or pulled from: it stays on the registries the workflow names.
		in.bad("artifact", "the registry %s is not one the workflow names: a run file's artifact is pushed and pulled only where registry-hosts says", registry)
	}
	if c.Command == "tag" && len(c.Tags) == 0 {
		in.bad("tags", "required for tag")
	}
	if c.Command == "pull" {
		if !c.PathGiven {
			in.bad("path", "required for pull: the folder to write the artifact's files to")
		} else if entries, err := os.ReadDir(c.Path); err == nil && len(entries) > 0 {
			in.bad("path", "%s is not empty; pull writes into an empty or new folder", c.Path)
		}
	}
}

// registryHosts are the registries the registry credentials are for: the
// hosts registry-hosts lists, and those of the artifact, compare-to,
// crds and chart references the workflow gave. A reference a run file gives, or a
// revision recorded, is not among them.
func (in *inputs) registryHosts(c *Config) []string {
	var hosts []string
	for _, h := range in.lines("registry-hosts") {
		if strings.ContainsAny(h, "/@") {
			in.bad("registry-hosts", "%q is not a registry: want host or host:port, such as ghcr.io", h)
			continue
		}
		if _, err := name.NewRegistry(h, name.StrictValidation); err != nil {
			in.bad("registry-hosts", "%q is not a registry: %v", h, err)
			continue
		}
		hosts = append(hosts, artifact.RegistryHost(h))
	}
	for _, input := range []string{"artifact", "compare-to", "crds", "chart"} {
		if !in.vals[input].from.Workflow() {
			continue
		}
		for _, l := range in.lines(input) {
			if ref, err := artifact.ParseRef(l, c.Registry.Insecure); err == nil && strings.HasPrefix(l, "oci://") {
				hosts = append(hosts, ref.Context().RegistryStr())
			}
		}
	}
	return hosts
}

// keys: age keys for SOPS and artifacts, cosign signing and verification.
// Every secret among them joins c.Secrets, to be masked.
func (in *inputs) keys(c *Config, env map[string]string) {
	if raw := in.vals["age-recipients"].raw; strings.TrimSpace(raw) != "" {
		r, err := artifact.ParseRecipients(raw)
		if err != nil {
			in.bad("age-recipients", "%v", err)
		}
		c.AgeRecipients = r
	}
	c.SOPSIdentities = in.identities(c, "sops-age-key")
	c.AgeIdentities = in.identities(c, "age-identities")
	switch in.str("sign") {
	case "":
	case "cosign":
		if in.str("cosign-key") == "" && (env["ACTIONS_ID_TOKEN_REQUEST_URL"] == "" || env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] == "") {
			in.bad("sign", "cosign without cosign-key signs keyless, which needs the CI's OIDC identity (on GitHub: permissions: id-token: write); give cosign-key otherwise")
		}
		c.Sign = &artifact.SignOptions{KeyRef: in.str("cosign-key"), Password: []byte(in.vals["cosign-password"].raw),
			FulcioURL: in.str("fulcio-url"), RekorURL: in.str("rekor-url")}
	default:
		in.bad("sign", "%q is not cosign or empty", in.str("sign"))
	}
	if pw := in.vals["cosign-password"].raw; pw != "" {
		c.Secrets = append(c.Secrets, pw)
	}
	for _, name := range []string{"cosign-key", "cosign-public-key"} {
		if v, ok := strings.CutPrefix(in.str(name), "env://"); ok && env[v] != "" {
			c.Secrets = append(c.Secrets, env[v])
		}
	}
	switch in.str("verify") {
	case "":
	case "cosign":
		c.Verify = in.verify()
	default:
		in.bad("verify", "%q is not cosign or empty", in.str("verify"))
	}
	in.recordKey(c)
}

// recordKey reads record-key, which what writes from the cluster's
// record needs: without it, nothing proves that this workflow recorded
// what a rollback, an atomic undo or a correction would write.
func (in *inputs) recordKey(c *Config) {
	if raw := strings.TrimSpace(in.vals["record-key"].raw); raw != "" {
		c.Secrets = append(c.Secrets, raw)
		k, err := inventory.NewRecordKey(raw)
		if err != nil {
			in.bad("record-key", "%v", err)
		}
		c.RecordKey = k
		return
	}
	const how = "give the workflow's record-key (a secret of 32 characters or more, such as openssl rand -base64 32) to this run and to every apply of the inventory"
	switch {
	case c.Command == "rollback":
		in.bad("record-key", "required for rollback, which writes what the cluster's record holds: %s", how)
	case c.Command == "apply" && c.Atomic:
		in.bad("record-key", "required with atomic, whose undo writes what the cluster's record holds: %s", how)
	case c.Command == "drift" && c.Correct && !c.PathGiven && c.Artifact == "":
		in.bad("record-key", "required for correct without a path or artifact, which writes what the cluster's record holds: %s; or give the configuration to correct with (path or artifact)", how)
	}
}

// identities reads an input of age identities, itself or the file it
// names; the key text is a secret.
func (in *inputs) identities(c *Config, name string) []age.Identity {
	raw := in.vals[name].raw
	if strings.TrimSpace(raw) == "" {
		return nil
	}
	var err error
	if in.vals[name].from == FromRunFile {
		// Read through a reference: key text, never a path to follow.
		if !isKeyText(raw) {
			err = errors.New("the value its reference read is not age key text (AGE-SECRET-KEY-1... or a PEM key)")
		}
	} else {
		raw, err = keyText(raw)
	}
	var ids []age.Identity
	if err == nil {
		c.Secrets = append(c.Secrets, keyLines(raw)...)
		ids, err = artifact.ParseIdentities(raw)
	}
	if err != nil {
		in.bad(name, "%v", err)
	}
	return ids
}

// verify reads cosign verification: a public key, or a keyless identity
// and issuer.
func (in *inputs) verify() *artifact.VerifyOptions {
	v := &artifact.VerifyOptions{PublicKeyRef: in.str("cosign-public-key"),
		Identity: in.str("certificate-identity"), IdentityRegexp: in.str("certificate-identity-regexp"),
		Issuer: in.str("certificate-oidc-issuer"), IssuerRegexp: in.str("certificate-oidc-issuer-regexp")}
	if v.PublicKeyRef != "" {
		return v
	}
	if v.Identity == "" && v.IdentityRegexp == "" {
		in.bad("certificate-identity", "keyless verification (verify: cosign without cosign-public-key) needs certificate-identity or certificate-identity-regexp")
	}
	if v.Issuer == "" && v.IssuerRegexp == "" {
		in.bad("certificate-oidc-issuer", "keyless verification needs certificate-oidc-issuer or certificate-oidc-issuer-regexp")
	}
	for _, name := range []string{"certificate-identity-regexp", "certificate-oidc-issuer-regexp"} {
		if _, err := regexp.Compile(in.str(name)); err != nil {
			in.bad(name, "%v", err)
		}
	}
	// Both would leave one unused: cosign lets the pattern win.
	if v.Identity != "" && v.IdentityRegexp != "" {
		in.bad("certificate-identity-regexp", "give certificate-identity or certificate-identity-regexp, not both: which one the certificate must match would be ambiguous")
	}
	if v.Issuer != "" && v.IssuerRegexp != "" {
		in.bad("certificate-oidc-issuer-regexp", "give certificate-oidc-issuer or certificate-oidc-issuer-regexp, not both: which one the certificate must match would be ambiguous")
	}
	if p := in.str("certificate-roots"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			in.bad("certificate-roots", "%v", err)
		}
		v.RootsPEM = b
	}
	return v
}

// reporting: where the outcome goes, and the revision and source it names.
func (in *inputs) reporting(c *Config, env map[string]string) {
	c.DetailedExitcode = in.bool("detailed-exitcode")
	c.Output = in.oneOf("output", "text", "json", "yaml", "junit", "sarif")
	if (c.Output == "junit" || c.Output == "sarif") && c.Command != "validate" && c.Command != "diff" {
		in.bad("output", "%s is for validate and diff (the objects that failed, each at its file and line); %s prints text, json or yaml", c.Output, c.Command)
	}
	c.Format = in.oneOf("format", "github", "tekton", "gitlab")
	if c.Image = in.str("image"); c.Image != "" {
		if _, err := name.ParseReference(c.Image, name.StrictValidation); err != nil || strings.ContainsAny(c.Image, " \t\n\"'$`\\") {
			in.bad("image", "%q: want registry/repository:tag or registry/repository@sha256:digest", c.Image)
		}
	}
	if c.PipelineName = in.str("pipeline-name"); c.PipelineName != "" {
		if errs := validation.IsDNS1123Label(c.PipelineName); len(errs) > 0 {
			in.bad("pipeline-name", "%q: %s", c.PipelineName, strings.Join(errs, "; "))
		}
	}
	c.Summary = in.oneOf("summary", "auto", "true", "false")
	c.Color = in.oneOf("color", "auto", "always", "never")
	c.Quiet = in.bool("quiet")
	c.Trace = in.bool("trace")
	c.Comment = in.oneOf("comment", "auto", "true", "false")
	c.DriftIssue = in.oneOf("drift-issue", "auto", "true", "false")
	c.Report, c.Dotenv, c.TektonResults = in.str("report"), in.str("dotenv"), in.str("tekton-results")
	c.GitHubToken, c.GitLabToken = in.str("github-token"), in.str("gitlab-token")
	for _, tok := range []string{c.GitHubToken, c.GitLabToken, env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"]} {
		if tok != "" {
			c.Secrets = append(c.Secrets, tok)
		}
	}
	if c.Report != "" {
		if dir := filepath.Dir(c.Report); dir != "." {
			if info, err := os.Stat(dir); err == nil && !info.IsDir() {
				in.bad("report", "%s is not a directory", dir)
			}
		}
	}
	if c.Revision = in.str("revision"); c.Revision == "" {
		c.Revision = firstNonEmpty(env["GITHUB_SHA"], env["CI_COMMIT_SHA"])
		if ref := firstNonEmpty(env["GITHUB_REF_NAME"], env["CI_COMMIT_REF_NAME"]); ref != "" && c.Revision != "" {
			c.Revision = ref + "@sha1:" + c.Revision // Flux's revision form
		}
		if c.Revision == "" && c.Artifact == "" && strings.Contains(" diff apply push drift ", " "+c.Command+" ") {
			// Off CI, the commit checked out where path is; an artifact
			// names its own revision.
			c.Revision = gitsource.Head(c.built())
		}
	}
	switch {
	case in.str("source") != "":
		c.Source = in.str("source")
	case env["GITHUB_SERVER_URL"] != "" && env["GITHUB_REPOSITORY"] != "":
		c.Source = env["GITHUB_SERVER_URL"] + "/" + env["GITHUB_REPOSITORY"]
	case env["CI_PROJECT_URL"] != "":
		c.Source = env["CI_PROJECT_URL"]
	default:
		c.Source = c.built()
	}
}

// built is the folder the build reads: the chart's, or path.
func (c *Config) built() string {
	if c.Chart != "" {
		return c.Chart
	}
	return c.Path
}

// offline: what validate checks against without a cluster.
func (in *inputs) offline(c *Config) {
	c.Base = in.str("base")
	switch {
	case c.Command == "diff" && c.Offline && c.Base == "":
		in.bad("offline", "diff --offline compares with a git revision: give base too (such as origin/main)")
	case c.Base != "" && (c.Command != "diff" || !c.Offline):
		in.bad("base", "is for diff --offline")
	case c.Offline && c.Artifact != "":
		// Offline means no network: the configuration is built from path.
		in.bad("artifact", "is for live runs: %s --offline builds path, with no registry or cluster", c.Command)
	}
	if c.Offline {
		// Read only when used: the archives' index is work every other
		// run need not do.
		r, err := releases.Get(in.str("kubernetes-version"))
		if err != nil {
			in.bad("kubernetes-version", "%v", err)
		}
		c.Release = r
	}
	for _, source := range in.lines("crds") {
		if strings.HasPrefix(source, "oci://") {
			if _, err := artifact.ParseRef(source, c.Registry.Insecure); err != nil {
				in.bad("crds", "%v", err)
			}
		} else if info, err := os.Stat(source); err != nil || !info.IsDir() {
			in.bad("crds", "%s is neither a folder nor an oci:// artifact", source)
		}
		c.CRDs = append(c.CRDs, source)
	}
	for _, g := range in.lines("allow-unknown-kinds") {
		if g == "core" {
			g = ""
		} else if msgs := validation.IsDNS1123Subdomain(g); len(msgs) > 0 {
			in.bad("allow-unknown-kinds", "%q is not an API group: %s", g, strings.Join(msgs, "; "))
		}
		c.AllowUnknownKinds = append(c.AllowUnknownKinds, g)
	}
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// lines splits a multi-line input, dropping blank lines and # comments.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// keyText returns the key text an age identity input holds: the value
// itself when it is key text (it starts with AGE-SECRET-KEY- or a PEM
// header, or has several lines), else the content of the file it names
// (relative to the working directory), as age's -i and kustomizer's
// --age-identities take it. Errors never echo the value: it may be a
// mistyped key.
func keyText(raw string) (string, error) {
	if isKeyText(raw) {
		return raw, nil
	}
	b, err := os.ReadFile(strings.TrimSpace(raw))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // without the path, which might be a mistyped key
		}
		return "", fmt.Errorf("neither age key text (AGE-SECRET-KEY-1...) nor a file that can be read (%w)", err)
	}
	return string(b), nil
}

// keyLines are the lines of age key text that are secret: the keys, not
// the comments age-keygen writes around them ("# created: ...",
// "# public key: age1...", public and shown everywhere), nor a PEM key's
// armor lines.
func keyLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "-----") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// ageKeyInputs are the inputs that hold age key text.
var ageKeyInputs = map[string]bool{"sops-age-key": true, "age-identities": true}

// isKeyText says raw is key text, not the path of a file holding it.
func isKeyText(raw string) bool {
	v := strings.TrimSpace(raw)
	return strings.HasPrefix(strings.ToUpper(v), "AGE-SECRET-KEY-") || strings.HasPrefix(v, "-----BEGIN") || strings.Contains(v, "\n")
}

// kubeconfigPaths are the kubeconfig files the run may read: the
// kubeconfig input, those $KUBECONFIG lists and ~/.kube/config, all of
// them, whichever the run uses (a unit's own kubeconfig does not make
// the workflow's any less a credential).
func kubeconfigPaths(cfg *Config, env map[string]string) []string {
	paths := filepath.SplitList(env["KUBECONFIG"])
	if cfg.Kubeconfig != "" {
		paths = append(paths, cfg.Kubeconfig)
	}
	if env["HOME"] != "" {
		paths = append(paths, filepath.Join(env["HOME"], ".kube", "config"))
	}
	return paths
}

// loadKubeconfig reads a kubeconfig with the paths it names resolved
// against its own folder, as client-go resolves them.
func loadKubeconfig(path string) (*clientcmdapi.Config, error) {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	if err := clientcmd.ResolveLocalPaths(kc); err != nil {
		return nil, err
	}
	return kc, nil
}

// kubeconfigCredentials reads the kubeconfigs the run may use, once, for
// the credentials they hold, so that they are masked wherever they might
// surface, and for the files they are in and name, which builds refuse: every
// user's token, password and client key, what its auth provider keeps
// (client secrets, id and refresh tokens) and the environment its exec
// plugin is given, those whose names say secret. An offline run connects to nothing, yet its files are
// read for the masks all the same.
func kubeconfigCredentials(cfg *Config, env map[string]string) (out, files []string) {
	for _, p := range kubeconfigPaths(cfg, env) {
		files = append(files, p)
		kc, err := loadKubeconfig(p)
		if err != nil {
			continue
		}
		for _, a := range kc.AuthInfos {
			files = append(files, a.TokenFile, a.ClientKey, a.ClientCertificate)
			out = append(out, a.Token, a.Password, string(a.ClientKeyData))
			if a.TokenFile != "" {
				// client-go reads the same file to authenticate.
				if b, err := readBounded(a.TokenFile, 64<<10); err == nil {
					out = append(out, strings.TrimSpace(string(b)))
				}
			}
			// By name, as substitution's values (a client id or a region
			// is no secret), and at least MinMaskLength long: masked, a
			// short value (USE_GKE_GCLOUD_AUTH_PLUGIN=True) would hide
			// every word like it.
			if a.AuthProvider != nil {
				for k, v := range a.AuthProvider.Config {
					if secretName.MatchString(k) && len(v) >= MinMaskLength {
						out = append(out, v)
					}
				}
			}
			if a.Exec != nil {
				for _, e := range a.Exec.Env {
					if secretName.MatchString(e.Name) && len(e.Value) >= MinMaskLength {
						out = append(out, e.Value)
					}
				}
			}
		}
	}
	return out, files
}

// credentialFiles lists the files (and folders) that hold the run's
// credentials: the kubeconfigs' (files), those its inputs name and those
// the tools it runs read by default, so that a build refuses them: a pull
// request's kustomization that generates a ConfigMap from the workflow's
// kubeconfig (written into the checkout, or linked to) would otherwise
// print it in a diff.
func credentialFiles(files []string, in *inputs, env map[string]string) []string {
	for _, name := range []string{"sops-age-key", "age-identities", "cosign-key", "record-key"} {
		if v, ok := in.vals[name]; ok && v.from != FromRunFile && v.raw != "" && !isKeyText(v.raw) {
			files = append(files, strings.TrimSpace(v.raw))
		}
	}
	for _, name := range []string{"SOPS_AGE_KEY_FILE", "GOOGLE_APPLICATION_CREDENTIALS", "AWS_SHARED_CREDENTIALS_FILE", "AZURE_FEDERATED_TOKEN_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		files = append(files, env[name])
	}
	if d := env["DOCKER_CONFIG"]; d != "" {
		files = append(files, filepath.Join(d, "config.json"))
	}
	if h := env["HOME"]; h != "" {
		// Files, and folders whose every file is refused: where the
		// tools a workflow runs keep their credentials by default.
		for _, p := range []string{".docker/config.json", ".config/sops/age/keys.txt", ".git-credentials", ".netrc",
			".kube", ".aws", ".ssh", ".gnupg", ".azure", ".config/gcloud", ".config/helm/registry", ".config/gh", ".terraform.d/credentials.tfrc.json"} {
			files = append(files, filepath.Join(h, filepath.FromSlash(p)))
		}
	}
	out := files[:0]
	for _, f := range files {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// chartName is what Helm takes as a release's name: a DNS subdomain of
// at most 53 characters.
var chartReleaseName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// chart: a chart as the unit's source, and how it is rendered. A chart
// counts as a configuration given, as a path does.
func (in *inputs) chart(c *Config) {
	given := func(name string) bool { return in.vals[name].origin != "default" && in.vals[name].raw != "" }
	remote := in.remoteChart(c)
	if c.Chart == "" {
		for _, name := range []string{"values", "set", "release-name"} {
			if given(name) {
				in.bad(name, "only with chart")
			}
		}
		return
	}
	if c.PathGiven {
		in.bad("chart", "give path or chart, not both")
	}
	c.PathGiven = true
	if remote {
		// Fetched before the build, where the workflow allows.
	} else if info, err := os.Stat(filepath.Join(c.Chart, "Chart.yaml")); err != nil || !info.Mode().IsRegular() {
		in.bad("chart", "%s is not a chart's folder (no Chart.yaml in it), nor oci://registry/path/name, nor a chart's name with chart-repository", c.Chart)
	}
	for _, p := range in.lines("values") {
		if info, err := os.Stat(p); err != nil || info.IsDir() {
			in.bad("values", "values file %s does not exist", p)
		}
		c.Values = append(c.Values, p)
	}
	for i, l := range in.lines("set") {
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.TrimSpace(k) == "" {
			// Never echo the line: it may hold a secret value.
			in.bad("set", "line %d is not KEY=VALUE", i+1)
			continue
		}
		c.Set = append(c.Set, l)
		if v != "" && secretName.MatchString(k) {
			c.Secrets = append(c.Secrets, v)
		}
	}
	c.ReleaseName = in.str("release-name")
	if n := c.ReleaseName; n != "" && (len(n) > 53 || !chartReleaseName.MatchString(n)) {
		in.bad("release-name", "%q is not a release name: lower-case letters, digits, - and ., at most 53 characters", n)
	}
	switch c.ChartHooks = in.str("chart-hooks"); c.ChartHooks {
	case "refuse", "objects", "leave-out":
	default:
		in.bad("chart-hooks", "%q: give refuse, objects or leave-out", c.ChartHooks)
	}
}

// health reads health-rules: a list (in a run file, or YAML text), a
// file's path, or none; and compiles them with the built-in rules.
func (in *inputs) health(c *Config) {
	v := in.vals["health-rules"]
	raw := strings.TrimSpace(v.raw)
	builtIns := raw != health.None
	var rules []health.Rule
	var err error
	switch {
	case v.rules != nil:
		rules, err = health.ParseNode(v.rules, v.file, 0)
	case raw == "" || raw == health.None:
	case rulesText(raw) && v.file != "":
		rules, err = health.ParseText([]byte(v.raw), v.file, v.line)
	case rulesText(raw):
		rules, err = health.ParseText([]byte(v.raw), v.origin, 1)
	default:
		if sources.IsCredentialFile(raw, c.CredentialFiles) {
			in.bad("health-rules", "%s is a file the run holds credentials in: it is never read as rules", raw)
			return
		}
		var data []byte
		if data, err = readBounded(raw, health.MaxRulesBytes); err != nil {
			in.bad("health-rules", "%v", err)
			return
		}
		rules, err = health.ParseText(data, raw, 1)
	}
	set, warnings, compileErr := health.CompileOnce(rules, builtIns)
	c.Health, c.HealthWarnings, c.HealthErr = set, warnings, errors.Join(err, compileErr)
}
