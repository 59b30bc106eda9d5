package sources

import (
	"cmp"
	"slices"
	"unicode"

	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/validation/path"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/result"
)

// originAnnotation is where kustomize records which file an object came
// from; gantry keeps it as Object.Source and strips it before apply.
const originAnnotation = "config.kubernetes.io/origin"

// Object is one object of the desired set.
type Object struct {
	*unstructured.Unstructured
	// Encrypted marks an object left SOPS-encrypted by a build that keeps
	// encryption (a push without identities): what an artifact carries,
	// so that decrypted secrets never leave the run. Never applied.
	Encrypted bool
	// Source is the file the object came from (for generated objects, the
	// kustomization that generated it), relative to the working directory
	// when it lies below it.
	Source string
	// Generated: a kustomize generator made it.
	Generated bool
	// Rendered: a Helm chart's template made it (BuildOptions.Chart).
	Rendered bool
	// DecryptedFields are the fields (JSON pointers) whose values SOPS
	// decrypted, found by provenance, not by their values: masked in
	// every diff and revision whatever their length. Its identity
	// (apiVersion, kind, name, namespace) is never among them.
	DecryptedFields []string
}

// BuildOptions say what to build.
type BuildOptions struct {
	// Path is a kustomize overlay or a plain folder of manifests.
	Path string
	// Chart, when set, is built instead of Path: a Helm chart rendered
	// in-process. TargetNamespace is then its release's namespace, and
	// is not forced on objects that name another.
	Chart *Chart
	// ChartNotice, when set, is told what a chart's rendering left out
	// or answered empty, once per chart.
	ChartNotice func(ChartNotice)
	// WorkDir is what Object.Source is relative to. Default: the process's
	// working directory.
	WorkDir string
	// TargetNamespace, when set, overrides the namespace of every
	// namespaced object (kustomize's namespace transformer).
	TargetNamespace string
	// Patches are extra patch files (strategic merge or JSON 6902 with a
	// target), applied on top of the build.
	Patches []string
	// Substitute, when not nil, enables strict ${VAR} substitution.
	Substitute map[string]string
	// SOPSIdentities decrypt files and objects encrypted with SOPS for age
	// recipients. An encrypted file without them is an error: it is never
	// applied encrypted.
	SOPSIdentities []age.Identity
	// KeepSOPSEncrypted, without SOPSIdentities, lets SOPS-encrypted
	// objects through still encrypted (Object.Encrypted): a push packs them
	// as they are in git, and whoever applies the artifact decrypts them.
	KeepSOPSEncrypted bool
	// Packed says the folder is an OCI artifact's, whose manifests file
	// joins the set's objects in one stream, those SOPS encrypted among
	// them (renamed or relabelled by the build that packed them): each
	// is decrypted on its own, as Flux decrypts them. Anywhere else, a
	// file that joins SOPS-encrypted documents with others is refused:
	// SOPS checks a file's integrity (its MAC) as a whole.
	Packed bool
	// AllowRemoteBases lets kustomize fetch resources and components
	// that are URLs (git or HTTP). Without it the build reads nothing but
	// the folder, and fails at once naming a remote entry.
	AllowRemoteBases bool
	// MaxFileBytes bounds one file the build reads, MaxObjects the
	// objects of the set; zero means DefaultMaxFileBytes and
	// DefaultMaxObjects.
	MaxFileBytes int64
	MaxObjects   int
	// CredentialFiles are files the build must never read, whatever
	// names them: those the run holds its credentials in.
	CredentialFiles []string
	// Skipped, when set, is told once which files and folders a plain
	// folder's build left out (hidden ones, and files that are not
	// .yaml, .yml or .json), so that nothing is dropped unsaid.
	Skipped func(files []string)
	// Decrypted, when set, is told every value decrypted, so that output
	// can mask them: a ConfigMap generated from an encrypted file, a diff,
	// an error. It may be called from several goroutines.
	Decrypted func(values []string)
	// SecretValues, when set, is told the values of the set's Secrets,
	// which output then masks wherever else they appear (copied into a
	// ConfigMap by a kustomize replacement); unlike Decrypted, they are
	// not new to the workflow (they are in its files), and are not
	// registered with the platform.
	SecretValues func(values []string)
	// NoOrigins builds without recording the file each object came from
	// (Object.Source stays empty), for a build whose objects are only
	// printed. Recording them makes kustomize note every transformation
	// on every object, which on an overlay of many components and image
	// overrides costs several times the build itself. A failure found
	// after kustomize (a SOPS leftover, a substitution, an object without
	// a kind) builds once more with them, so that it names the file.
	NoOrigins bool

	// taint builds with every value SOPS decrypts, and every set line
	// named as a secret, changed (provenance.go).
	taint taintVariant
	// trace, when set, is told what the build was given as secrets, and
	// whether it got as far as checking where they went.
	trace *buildTrace
}

// buildTrace is what a build tells its caller of the secrets it was
// given: the files (and set lines) they came from, and whether the
// provenance check ran, after which everything the build says has been
// proven not to depend on them.
type buildTrace struct {
	secrets []string
	proven  bool
}

// BuildError is a build failure; File names the file at fault when known.
type BuildError struct {
	File string
	Err  error
}

func (e *BuildError) Error() string {
	if e.File == "" {
		return e.Err.Error()
	}
	return e.File + ": " + e.Err.Error()
}

func (e *BuildError) Unwrap() error { return e.Err }

// Build turns opts.Path into objects with their origin. A kustomization is
// built by kustomize, in-process, with every plugin that could run code
// (exec, container, helm) disabled; a plain folder of manifests is read with
// kustomize's own parser (its YAML rules, List expansion, local-config
// objects dropped), as if a kustomization listed every manifest in it, as
// Flux does.
//
// The user's folder is never written to. Origin tracking is turned on by
// handing kustomize the root kustomization with buildMetadata added, in
// memory. A target namespace or extra patches need a kustomization of
// their own around the user's: the build then runs from a temporary one
// that references the folder, so they apply after everything the user's
// kustomization does.
func Build(opts BuildOptions) ([]*Object, error) {
	trace := &buildTrace{}
	opts.trace = trace
	objects, afterKustomize, err := build(opts)
	// Files are named from the objects' origins: a failure that needs
	// them is found again with them.
	if err != nil && (afterKustomize || strings.Contains(err.Error(), "produces ID conflict")) && opts.NoOrigins {
		// A check that needs the files (what a kept SOPS file built to)
		// may pass with them: then the second build is the set.
		opts.NoOrigins = false
		*trace = buildTrace{}
		objects, _, err = build(opts)
	}
	if err != nil && len(trace.secrets) > 0 && !trace.proven {
		err = sayByProvenance(opts, trace.secrets, err)
	}
	return objects, err
}

// sayByProvenance is err when the build says the same with other values
// where it was given secrets (both variants), and otherwise a refusal
// that says nothing the build said. A failure found before the
// provenance check (two objects of one name, a kustomize error, a limit)
// may quote what a template or a replacement made of a secret, in any
// encoding (its hex in a name, its length): its message is checked as
// output is, by what it depends on, not by matching values.
func sayByProvenance(opts BuildOptions, secrets []string, err error) error {
	for _, v := range variants {
		alt := opts
		alt.taint, alt.trace = v, nil
		alt.Decrypted, alt.SecretValues, alt.ChartNotice, alt.Skipped = nil, nil, nil, nil
		_, _, terr := build(alt)
		if terr == nil || terr.Error() != err.Error() {
			return &BuildError{File: opts.Shown(), Err: fmt.Errorf("the build failed, and what it says depends on what it was given as secrets (%s): built with other values there, it %s; so it is not shown. Build with other values (or without the secrets) to see it", strings.Join(secrets, ", "), map[bool]string{true: "succeeds", false: "says something else"}[terr == nil])}
		}
	}
	return err
}

// build is Build; afterKustomize says an error was found in what kustomize
// built, where the objects' files name it.
func build(opts BuildOptions) (_ []*Object, afterKustomize bool, retErr error) {
	if opts.WorkDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, false, err
		}
		opts.WorkDir = wd
	}
	if opts.Chart != nil {
		// The chart's folder is what the build reads, and what errors
		// name.
		opts.Path = opts.Chart.Dir
	}
	abs, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, false, &BuildError{File: opts.Path, Err: err}
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, false, &BuildError{File: opts.Path, Err: fmt.Errorf("path not found")}
	}
	if !info.IsDir() && !(info.Mode().IsRegular() && isManifestFile(abs)) {
		return nil, false, &BuildError{File: opts.Path, Err: fmt.Errorf("not a folder, nor a .yaml, .yml or .json file of manifests")}
	}
	// Folders are compared, and files named, by where they really are: a
	// workspace reached through a link (a CI runner's mount) would
	// otherwise have a folder linked from its sibling walked twice, and
	// name files by absolute paths.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	// The working directory as named, before its links are resolved:
	// what a named file's path is read against (allowNamed).
	namedWork, _ := filepath.Abs(cmp.Or(opts.WorkDir, "."))
	if real, err := filepath.EvalSymlinks(opts.WorkDir); err == nil {
		opts.WorkDir = real
	}

	// The reader every file of the build passes (BuildOptions.Reader).
	bounded := boundedFSOf(opts.Reader())
	if !opts.AllowRemoteBases {
		if err := refuseRemote(abs, opts.WorkDir, bounded.ReadFile, map[string]bool{}); err != nil {
			return nil, false, err
		}
	}
	// Values files and extra patches are named by the run's inputs: read
	// where they are (credential files still refused), each file alone.
	named := slices.Clone(opts.Patches)
	if opts.Chart != nil {
		named = append(named, opts.Chart.Values...)
	}
	for _, p := range named {
		bounded.allowNamed(p, namedWork, opts.WorkDir)
	}
	sfs := newSOPSFS(bounded, opts, func(p string) string { return displayPath(p, nil, opts.WorkDir) })
	// What charts' renderings tell is told once the build is done: the
	// provenance check compares it with what the build with other values
	// tells (a count of hooks left out can spell a value).
	var notices []ChartNotice
	tell := opts.ChartNotice
	opts.ChartNotice = func(n ChartNotice) { notices = append(notices, n) }
	defer func() {
		if retErr == nil && tell != nil {
			for _, n := range notices {
				tell(n)
			}
		}
	}()
	defer func() {
		// kustomize may panic on what a pull request wrote (two objects
		// of one id): a refusal, not a crash.
		if r := recover(); r != nil {
			retErr = &BuildError{File: opts.Path, Err: fmt.Errorf("kustomize build failed: %v", r)}
		}
		if opts.trace != nil {
			opts.trace.secrets = sfs.secretFiles()
		}
		// kustomize, and the checks after it, quote values and names
		// in what they refuse: what SOPS decrypted is hidden there.
		retErr = sfs.hideIn(retErr)
	}()
	var built []sourced
	switch {
	case opts.Chart != nil && len(opts.Patches) > 0:
		built, err = buildChartWrapped(opts, sfs, bounded)
	case opts.Chart != nil:
		built, err = buildChart(opts, sfs)
	case opts.TargetNamespace != "" || len(opts.Patches) > 0:
		built, err = buildWrapped(abs, "", opts, sfs, bounded)
	case FindKustomization(abs) != "":
		built, err = buildKustomization(abs, opts, sfs)
	default:
		built, err = buildPlain(abs, opts, sfs, bounded)
	}
	if err != nil {
		if refused := sfs.refusal(); refused != nil {
			return nil, false, refused
		}
		return nil, false, err
	}

	maxObjects := opts.MaxObjects
	if maxObjects <= 0 {
		maxObjects = DefaultMaxObjects
	}
	if len(built) > maxObjects {
		return nil, false, &BuildError{File: opts.Path, Err: &LimitError{fmt.Sprintf("%d objects, over the limit of %d (max-objects)", len(built), maxObjects)}}
	}
	// Converting is a JSON round trip per object (a third of a plain
	// folder's build); it runs on every core.
	objects := make([]*Object, len(built))
	errs := make([]error, len(built))
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), len(built))
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(built); i += workers {
				objects[i], errs[i] = toObject(built[i].res, built[i].source)
				if objects[i] != nil {
					objects[i].Generated = built[i].generated
					objects[i].Rendered = built[i].chart
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			file := built[i].source
			if file == "" {
				file = opts.Path // found again with origins, when kustomize built it
			}
			return nil, true, &BuildError{File: file, Err: err}
		}
	}
	if err := RefuseDuplicates(objects, func(o *Object) string { return o.Source }); err != nil {
		return nil, true, err
	}
	if opts.taint != notTainted {
		// The build for the provenance check ends here.
		return objects, false, nil
	}
	if opts.trace != nil {
		// From here on, what the build says is of objects whose
		// provenance is checked first.
		opts.trace.proven = true
	}
	if sfs.decryptedFiles() {
		if opts.NoOrigins {
			// Which file an object came from decides what may hold a
			// decrypted value: built again with origins.
			return nil, true, errNeedsOrigins
		}
		if err := checkProvenance(objects, opts, sfs, notices); err != nil {
			return nil, true, err
		}
	}
	if err := decryptBuilt(objects, sfs); err != nil {
		return nil, true, err
	}
	if opts.Substitute != nil {
		if err := substituteAll(objects, opts.Substitute); err != nil {
			return nil, true, err
		}
	}
	for _, o := range objects {
		if o.GetKind() == "" || o.GetAPIVersion() == "" {
			return nil, true, &BuildError{File: o.Source, Err: fmt.Errorf("object %q has no apiVersion or kind", o.GetName())}
		}
		if err := nameCheck(o); err != nil {
			return nil, true, &BuildError{File: o.Source, Err: err}
		}
	}
	revealSecrets(objects, opts.SecretValues)
	return objects, false, nil
}

// MinSecretDataMask is the shortest Secret value masked wherever else it
// appears: a short one ("true", a port) would mask every such word of
// every report. Secrets' own data is masked by their kind whatever its
// length.
const MinSecretDataMask = 8

// revealSecrets tells reveal the values of the set's Secrets, so that
// output masks them wherever else they appear: copied into a ConfigMap
// by a kustomize replacement, as they are or base64-encoded.
func revealSecrets(objects []*Object, reveal func([]string)) {
	if reveal == nil {
		return
	}
	var values []string
	add := func(v string) {
		if len(strings.TrimSpace(v)) >= MinSecretDataMask {
			values = append(values, v)
		}
	}
	for _, o := range objects {
		if o.GetAPIVersion() != "v1" || o.GetKind() != "Secret" || o.Encrypted {
			continue
		}
		if data, ok := o.Object["data"].(map[string]any); ok {
			for _, v := range data {
				if s, ok := v.(string); ok {
					if b, err := base64.StdEncoding.DecodeString(s); err == nil {
						add(string(b))
					}
				}
			}
		}
		if data, ok := o.Object["stringData"].(map[string]any); ok {
			for _, v := range data {
				if s, ok := v.(string); ok {
					add(s)
				}
			}
		}
	}
	if len(values) > 0 {
		reveal(values)
	}
}

// nameCheck refuses a kind, name or namespace that no Kubernetes object
// can have: one with a line break or another control character, a
// slash or a percent sign (the API server's rule for every name), or a
// namespace that is not a DNS label. Names reach logs, summaries and
// comments, and one that could never be applied must not reach them.
func nameCheck(o *Object) error {
	for what, v := range map[string]string{"kind": o.GetKind(), "name": o.GetName(), "namespace": o.GetNamespace(), "apiVersion": o.GetAPIVersion()} {
		if strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) {
			return fmt.Errorf("an object's %s %q holds a control character (a line break, say): no Kubernetes object can have it", what, v)
		}
	}
	if name := o.GetName(); name != "" {
		if msgs := path.IsValidPathSegmentName(name); len(msgs) > 0 {
			return fmt.Errorf("%s %q: invalid name: %s", o.GetKind(), name, strings.Join(msgs, "; "))
		}
	}
	if ns := o.GetNamespace(); ns != "" {
		if msgs := k8svalidation.IsDNS1123Label(ns); len(msgs) > 0 {
			return fmt.Errorf("%s %q: invalid namespace %q: %s", o.GetKind(), o.GetName(), ns, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// RefuseDuplicates refuses two objects of one identity (group, kind,
// namespace, name), whatever their apiVersions: the cluster holds one
// object, and which of the two it would hold would change from run to
// run. source names an object's file.
func RefuseDuplicates(objects []*Object, source func(*Object) string) error {
	seen := make(map[string]*Object, len(objects))
	for _, o := range objects {
		gvk := o.GroupVersionKind()
		key := gvk.Group + "|" + gvk.Kind + "|" + o.GetNamespace() + "|" + o.GetName()
		first, dup := seen[key]
		if !dup {
			seen[key] = o
			continue
		}
		what := o.Ref()
		if first.GetAPIVersion() != o.GetAPIVersion() {
			what += fmt.Sprintf(" (as %s here, as %s there)", o.GetAPIVersion(), first.GetAPIVersion())
		}
		file := source(o)
		if file == "" {
			file = "the build"
		}
		also := source(first)
		if also == "" {
			also = "another file"
		}
		return &BuildError{File: file, Err: fmt.Errorf("%s is defined twice, also in %s: one object can be written once", what, also)}
	}
	return nil
}

// sourced is a built resource and the file it came from, as displayed.
type sourced struct {
	res    *resource.Resource
	source string
	// generated: a generator made it (its origin says which).
	generated bool
	// chart: a chart's template made it.
	chart bool
}

func kustomizer() *krusty.Kustomizer {
	kopts := krusty.MakeDefaultOptions()
	kopts.PluginConfig = types.DisabledPluginConfig()
	// As Flux's kustomize-controller builds: a kustomization may reach
	// files and folders anywhere in the repository (boundedFS refuses
	// anything outside it).
	kopts.LoadRestrictions = types.LoadRestrictionsNone
	return krusty.MakeKustomizer(kopts)
}

// buildKustomization runs kustomize on the kustomization in dir, with origin
// tracking added in memory.
func buildKustomization(dir string, opts BuildOptions, sfs *sopsFS) ([]sourced, error) {
	// kustomize resolves symbolic links in the root before it reads the
	// kustomization; the in-memory copy must sit at the same path.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, &BuildError{File: opts.Path, Err: err}
	}
	file := filepath.Join(root, FindKustomization(root))
	content, err := sfs.ReadFile(file)
	if err != nil {
		var be *BuildError
		if errors.As(err, &be) {
			return nil, err
		}
		return nil, &BuildError{File: displayPath(file, nil, opts.WorkDir), Err: err}
	}
	var fsys filesys.FileSystem = sfs
	if !opts.NoOrigins {
		fsys = trackingFS{FileSystem: sfs, file: file, content: withOriginTracking(content)}
	}
	hfs := newHelmChartsFS(fsys, sfs.ReadFile, opts, sfs.workspace())
	hfs.secrets = sfs.decryptedFiles
	resMap, err := kustomizer().Run(hfs, root)
	if err != nil {
		if hfs.err != nil {
			return nil, hfs.err
		}
		msg := withoutObjects(err.Error(), root, nil, opts.WorkDir)
		return nil, &BuildError{File: displayPath(dir, nil, opts.WorkDir), Err: fmt.Errorf("kustomize build: %s", relPaths(msg, nil, "", opts.WorkDir))}
	}
	hfs.report()
	return withOrigins(resMap.Resources(), root, nil, opts.WorkDir, hfs.chartOf), nil
}

// trackingFS is the disk, except that the root kustomization reads as
// content.
type trackingFS struct {
	filesys.FileSystem
	file    string
	content []byte
}

func (f trackingFS) ReadFile(name string) ([]byte, error) {
	if filepath.Clean(name) == f.file {
		return f.content, nil
	}
	return f.FileSystem.ReadFile(name)
}

// withOriginTracking adds originAnnotations to a kustomization's
// buildMetadata. A file that does not parse is returned as it is, for
// kustomize to report.
func withOriginTracking(content []byte) []byte {
	node, err := kyaml.Parse(string(content))
	if err != nil || node.YNode().Kind != kyaml.MappingNode {
		return content
	}
	list, err := node.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, "buildMetadata"))
	if err != nil || list == nil || list.YNode().Kind != kyaml.SequenceNode {
		return content
	}
	for _, v := range list.YNode().Content {
		if v.Value == types.OriginAnnotations {
			return content
		}
	}
	list.YNode().Content = append(list.YNode().Content, &kyaml.Node{Kind: kyaml.ScalarNode, Tag: kyaml.NodeTagString, Value: types.OriginAnnotations})
	out, err := node.String()
	if err != nil {
		return content
	}
	return []byte(out)
}

// withOrigins pairs resources with the file named by their origin
// annotation, which is relative to the build root.
//
// chartOf names the chart folder a file stands for, when it is a chart's
// rendering (helmCharts).
func withOrigins(resources []*resource.Resource, root string, pathMap map[string]string, workDir string, chartOf func(string) string) []sourced {
	out := make([]sourced, 0, len(resources))
	for _, res := range resources {
		var source string
		var generated, chart bool
		if origin, err := res.GetOrigin(); err == nil && origin != nil {
			source = origin.Path
			if origin.ConfiguredIn != "" {
				source = origin.ConfiguredIn
			}
			if source != "" && !filepath.IsAbs(source) {
				source = filepath.Join(root, source)
			}
			if c := chartOf(filepath.Clean(source)); c != "" {
				source, chart = c, true
			} else {
				source = displayPath(source, pathMap, workDir)
			}
			generated = origin.ConfiguredBy.Kind != ""
		}
		out = append(out, sourced{res: res, source: source, generated: generated, chart: chart})
	}
	return out
}

// buildPlain reads a folder without a kustomization: every manifest below
// it in lexical order, except hidden files and folders (such as
// .sops.yaml, sops' configuration); a subfolder with a
// kustomization of its own is built by kustomize. This is what kustomize
// does with a kustomization listing them, without its cost of checking
// every new object against all earlier ones (quadratic; 20 s for 5000
// objects here).
func buildPlain(dir string, opts BuildOptions, sfs *sopsFS, bounded *boundedFS) ([]sourced, error) {
	// The walk reads the files and builds the subfolders' kustomizations,
	// in order; the files are parsed after it, on every core.
	var parts []*manifestPart
	var skipped []string
	// Folders reached through a link, by real path: a link back up the
	// tree must not walk it for ever.
	walked := map[string]bool{dir: true}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		walked[real] = true
	}
	var walk func(top string) error
	walk = func(top string) error {
		return filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			source := displayPath(p, nil, opts.WorkDir)
			if p != top && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					skipped = append(skipped, source+"/")
					return filepath.SkipDir
				}
				skipped = append(skipped, source)
				return nil
			}
			if d.IsDir() {
				if p == top {
					return nil
				}
				if walked[p] {
					return filepath.SkipDir // reached again through a link
				}
				if FindKustomization(p) != "" {
					if !opts.AllowRemoteBases {
						if err := refuseRemote(p, opts.WorkDir, bounded.ReadFile, map[string]bool{}); err != nil {
							return err
						}
					}
					items, err := buildKustomization(p, opts, sfs)
					if err != nil {
						return err
					}
					parts = append(parts, &manifestPart{items: items})
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				// Read as kubectl and kustomize read it, when it
				// stays in the workspace.
				real, err := filepath.EvalSymlinks(p)
				if err != nil {
					return &BuildError{File: source, Err: fmt.Errorf("a symbolic link that leads nowhere: %w", err)}
				}
				if !bounded.inside(real) {
					return &BuildError{File: source, Err: &LimitError{fmt.Sprintf("resolves to %s, outside the workspace (%s): refused", real, bounded.root())}}
				}
				info, err := os.Stat(real)
				if err != nil {
					return &BuildError{File: source, Err: err}
				}
				if info.IsDir() {
					if walked[real] {
						return nil
					}
					walked[real] = true
					if FindKustomization(real) != "" {
						items, err := buildKustomization(real, opts, sfs)
						if err != nil {
							return err
						}
						parts = append(parts, &manifestPart{items: items})
						return nil
					}
					return walk(real)
				}
				if !info.Mode().IsRegular() {
					skipped = append(skipped, source)
					return nil
				}
			} else if !d.Type().IsRegular() {
				skipped = append(skipped, source)
				return nil
			}
			if !isManifest(d.Name()) {
				skipped = append(skipped, source)
				return nil
			}
			b, err := sfs.ReadFile(p)
			if err != nil {
				var be *BuildError
				if errors.As(err, &be) {
					return err
				}
				return &BuildError{File: source, Err: err}
			}
			parts = append(parts, &manifestPart{source: source, data: b, parse: true})
			return nil
		})
	}
	walkErr := walk(dir)
	if len(skipped) > 0 && opts.Skipped != nil {
		opts.Skipped(skipped)
	}
	parseManifests(parts)

	// The first failure in the folder's order wins: a file that does not
	// parse comes before a later subfolder that does not build.
	var out []sourced
	seen := map[string]string{} // object id -> the file that defined it
	for _, part := range parts {
		if part.err != nil {
			return nil, part.err
		}
		for _, it := range part.items {
			id := it.res.CurId()
			// One object, whatever apiVersion it is written in.
			key := id.Group + "|" + id.Kind + "|" + id.EffectiveNamespace() + "|" + id.Name
			if first, dup := seen[key]; dup {
				return nil, &BuildError{File: it.source, Err: fmt.Errorf("%s/%s is defined twice, also in %s", id.Kind, id.Name, first)}
			}
			seen[key] = it.source
			out = append(out, it)
		}
	}
	if walkErr != nil {
		var be *BuildError
		if errors.As(walkErr, &be) {
			return nil, walkErr
		}
		return nil, &BuildError{File: opts.Path, Err: walkErr}
	}
	return out, nil
}

// buildWrapped runs kustomize from a temporary kustomization that
// references dir and adds the target namespace and the patches; a plain
// folder is first copied next to a generated kustomization.
//
// shownAs, when set, is the folder that abs stands for in messages and
// objects' files (a chart's, for its rendering).
func buildWrapped(abs, shownAs string, opts BuildOptions, sfs *sopsFS, bounded *boundedFS) ([]sourced, error) {
	tmp, err := os.MkdirTemp("", "gantry-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bounded.allow(tmp)

	// pathMap maps temporary copies back to the files they came from.
	pathMap := map[string]string{}
	base := abs
	if FindKustomization(abs) == "" {
		plain := filepath.Join(tmp, "plain")
		n, err := copyPlainFolder(abs, plain, sfs.FileSystem)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			// No manifests at all: an empty set (prune's allow-empty
			// guard decides what that may mean), not a kustomize error.
			return nil, nil
		}
		pathMap[plain] = abs
		if info, err := os.Stat(abs); err == nil && !info.IsDir() {
			pathMap[plain] = filepath.Dir(abs)
		}
		if shownAs != "" {
			pathMap[plain] = shownAs
		}
		base = plain
	}

	wrapper := filepath.Join(tmp, "root")
	if err := os.Mkdir(wrapper, 0o755); err != nil {
		return nil, err
	}
	// kustomize refuses absolute paths to other kustomizations; a
	// relative one may climb out of the root.
	rel, err := filepath.Rel(wrapper, base)
	if err != nil {
		return nil, err
	}
	k := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: []string{rel},
		Namespace: opts.TargetNamespace,
	}
	if !opts.NoOrigins {
		k.BuildMetadata = []string{types.OriginAnnotations}
	}
	for i, p := range opts.Patches {
		b, err := bounded.ReadFile(p)
		if err != nil {
			return nil, &BuildError{File: p, Err: fmt.Errorf("reading patch: %w", err)}
		}
		name := fmt.Sprintf("patch-%d.yaml", i)
		if err := os.WriteFile(filepath.Join(wrapper, name), b, 0o600); err != nil {
			return nil, err
		}
		pathMap[filepath.Join(wrapper, name)] = p
		k.Patches = append(k.Patches, types.Patch{Path: name})
	}
	kb, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(wrapper, konfig.DefaultKustomizationFileName()), kb, 0o600); err != nil {
		return nil, err
	}

	sfs.display = func(p string) string { return displayPath(p, pathMap, opts.WorkDir) }
	hfs := newHelmChartsFS(sfs, sfs.ReadFile, opts, sfs.workspace())
	hfs.secrets = sfs.decryptedFiles
	resMap, err := kustomizer().Run(hfs, wrapper)
	if err != nil {
		if hfs.err != nil {
			return nil, hfs.err
		}
		msg := withoutObjects(err.Error(), wrapper, pathMap, opts.WorkDir)
		return nil, &BuildError{File: opts.Path, Err: fmt.Errorf("kustomize build: %s", relPaths(msg, pathMap, tmp, opts.WorkDir))}
	}
	hfs.report()
	return withOrigins(resMap.Resources(), wrapper, pathMap, opts.WorkDir, hfs.chartOf), nil
}

func toObject(res *resource.Resource, source string) (*Object, error) {
	b, err := nodeJSON(res.YNode())
	if err != nil {
		return nil, err
	}
	// Through JSON, so that numbers are int64 as unstructured expects
	// (kustomize's own maps hold int).
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	if a := u.GetAnnotations(); a != nil {
		delete(a, originAnnotation)
		if len(a) == 0 {
			a = nil
		}
		u.SetAnnotations(a)
	}
	return &Object{Unstructured: u, Source: source}, nil
}

// nodeJSON is what kyaml's RNode.MarshalJSON returns for a mapping node,
// without its detour through YAML text: that encodes the node and parses
// it again (half of a plain folder's build time); decoding the node gives
// the same values.
func nodeJSON(n *kyaml.Node) ([]byte, error) {
	m := map[string]any{}
	if err := n.Decode(&m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// displayPath maps a temporary copy back to its original and makes it
// relative to workDir when it lies below it.
func displayPath(p string, pathMap map[string]string, workDir string) string {
	for tmp, orig := range pathMap {
		if p == tmp || strings.HasPrefix(p, tmp+string(filepath.Separator)) {
			p = orig + strings.TrimPrefix(p, tmp)
			break
		}
	}
	if rel, err := filepath.Rel(workDir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// wrapperNoise is the part of a kustomize error that only says the
// generated build root could not accumulate the user's folder; what follows
// it names the real problem.
var wrapperNoise = regexp.MustCompile(`accumulating resources: accumulation err='accumulating resources from '[^']*': '[^']*' must resolve to a file': (recursed accumulation of path '[^']*': )?`)

// relPaths rewrites the temporary paths in a kustomize error message.
// conflictObjects finds kustomize's dump of the objects of an ID conflict,
// and in it each object's origin.
var (
	conflictObjects = regexp.MustCompile(`(?s)(produces ID conflict): \[.*\]`)
	conflictOrigin  = regexp.MustCompile(`"config\.kubernetes\.io/origin":"path: ([^"\\]+)`)
	conflictID      = regexp.MustCompile(`"kind":"([^"]+)","metadata":\{.*?"name":"([^"]+)"(?:,"namespace":"([^"]+)")?\}`)
)

// withoutObjects replaces the objects kustomize prints whole when a
// transformation makes two of them one (their data included, a Secret's
// too) by the object's name and the files that define it. root is the
// kustomization's folder, which origins are relative to.
func withoutObjects(msg, root string, pathMap map[string]string, workDir string) string {
	dump := conflictObjects.FindStringSubmatch(msg)
	if dump == nil {
		return msg
	}
	what := "two objects"
	if id := conflictID.FindStringSubmatch(dump[0]); id != nil {
		what = result.Ref("", id[1], id[3], id[2])
	}
	var files []string
	for _, m := range conflictOrigin.FindAllStringSubmatch(dump[0], -1) {
		p := m[1]
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		files = append(files, displayPath(p, pathMap, workDir))
	}
	desc := what + " is defined twice"
	if len(files) > 0 {
		desc += ", in " + strings.Join(files, " and ")
	}
	return strings.Replace(msg, dump[0], dump[1]+": "+desc+": one object can be written once", 1)
}

func relPaths(msg string, pathMap map[string]string, tmp, workDir string) string {
	msg = wrapperNoise.ReplaceAllString(msg, "")
	keys := make([]string, 0, len(pathMap))
	for k := range pathMap {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		msg = strings.ReplaceAll(msg, k, displayPath(pathMap[k], nil, workDir))
	}
	if tmp != "" {
		msg = strings.ReplaceAll(msg, filepath.Join(tmp, "root"), "(gantry build root)")
	}
	if wd := workDir + string(filepath.Separator); wd != "/" {
		msg = strings.ReplaceAll(msg, wd, "")
	}
	return msg
}

// FindKustomization names the kustomization file in dir ("" when none).
func FindKustomization(dir string) string {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return name
		}
	}
	return ""
}

func isManifest(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// copyPlainFolder copies the manifests under src to dst and writes a
// kustomization listing them. A subfolder with a kustomization of its own is
// referenced where it is, by absolute path, since it may refer to files
// outside itself (../base).
func copyPlainFolder(src, dst string, read filesys.FileSystem) (int, error) {
	var resources []string
	// A single file given as the path is copied as a folder of one.
	root := src
	if info, err := os.Stat(src); err == nil && !info.IsDir() {
		root = filepath.Dir(src)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	// What is written lands in dst, whatever the names read.
	out, err := os.OpenRoot(dst)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && p != src {
				return filepath.SkipDir
			}
			if p != src && FindKustomization(p) != "" {
				// Relative to dst, where the generated kustomization lands.
				rp, err := filepath.Rel(dst, p)
				if err != nil {
					return err
				}
				resources = append(resources, rp)
				return filepath.SkipDir
			}
			return out.MkdirAll(rel, 0o755)
		}
		if strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// A linked file is read (the bounded read refuses one
			// that leads out of the workspace); a linked folder
			// would need the generated kustomization to reach out
			// of its own.
			if info, err := os.Stat(p); err == nil && info.IsDir() {
				return &BuildError{File: p, Err: fmt.Errorf("a link to a folder cannot be built with target-namespace or patches; link the files, or give the folder a kustomization")}
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		if !isManifest(d.Name()) {
			return nil
		}
		b, err := read.ReadFile(p) // bounded, as the build reads it
		if err != nil {
			return &BuildError{File: p, Err: err}
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			return nil
		}
		resources = append(resources, rel)
		return out.WriteFile(rel, b, 0o600)
	})
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", src, err)
	}
	sort.Strings(resources)
	k := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: resources,
	}
	kb, err := yaml.Marshal(k)
	if err != nil {
		return 0, err
	}
	return len(resources), out.WriteFile(konfig.DefaultKustomizationFileName(), kb, 0o600)
}

// isManifestFile says whether a file given as the path is one of
// manifests: a folder's build reads the same files.
func isManifestFile(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}
