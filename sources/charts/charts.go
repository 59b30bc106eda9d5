// Package charts renders Helm charts in-process with Helm's own packages
// (its engine, chart loader, values coalescing and install order), for a
// build: a chart in, manifests out, no cluster and no release storage.
//
// A chart is code from the pull request that brings it. Rendering gives it
// no reach beyond the manifests it produces: its files are read through
// the workspace's reader with its folder as the root (so .Files sees the
// chart and nothing else; a link, hard or symbolic, to the repository's
// .git or to the run's credentials fails the chart, named), within bounds
// of count and size; lookup is answered empty, as helm template
// answers it, and its use reported; DNS lookups are answered empty; its
// values schema is checked with no loader at all (Helm's own would fetch
// http and file references); no plugin, post-renderer or helm binary runs.
package charts

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gantry-dev/gantry/sources/reader"
	"github.com/gantry-dev/gantry/sources/yamlbound"
	"github.com/gantry-dev/gantry/sources/yamlenc"

	yaml3 "go.yaml.in/yaml/v3"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/ignore"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"helm.sh/helm/v4/pkg/strvals"
)

// Bounds on what a chart's folder may hold, as on an artifact's content.
const (
	MaxFiles      = 10000
	MaxTotalBytes = 64 << 20
)

// Options say what to render and how.
type Options struct {
	// Dir is the chart's folder; the caller has confined it to the
	// workspace.
	Dir string
	// ReleaseName and Namespace are .Release.Name (default: the chart's
	// name) and .Release.Namespace.
	ReleaseName, Namespace string
	// NameTemplate, when ReleaseName is empty, makes the release name, as
	// helm's --name-template does: a Go template with helm's functions
	// but those that read the environment or ask DNS. It is executed
	// where the chart is rendered, within the same bounds.
	NameTemplate string
	// Values are the values files' contents, in order (later ones win),
	// each named for messages; Set are KEY=VALUE lines, as helm's --set,
	// applied after them.
	Values []Values
	Set    []string
	// KubeVersion is .Capabilities.KubeVersion (v1.37.0); APIVersions
	// are added to .Capabilities.APIVersions.
	KubeVersion string
	APIVersions []string
	// MaxFileBytes bounds one file of the chart.
	MaxFileBytes int64
	// Deny are files (and folders) the chart may not read, whatever
	// names them in it: those the run holds its credentials in. A chart
	// that holds one fails, naming its file.
	Deny []string
	// Workspace is the repository the chart lies in, whose .git files
	// no chart reads, whatever names them in it (a hard link); empty,
	// the chart's folder.
	Workspace string
}

// Values is one values file.
type Values struct {
	Name    string
	Content []byte
}

// Document is one rendered object's YAML and the chart file it came from
// (mychart/templates/deployment.yaml, mychart/charts/db/crds/crd.yaml).
type Document struct {
	Source  string
	Content string
}

// Hook is a rendered hook: the events it runs on (pre-install, test...).
type Hook struct {
	Document
	Events []string
}

// Rendered is a chart rendered: its CRDs (crds/ of the chart and its
// subcharts), its templates' objects in Helm's install order, and its
// hooks, apart.
type Rendered struct {
	// Name and Version are the chart's, from its Chart.yaml.
	Name, Version string
	// ReleaseName is the release name rendered with: Options.ReleaseName,
	// or what its NameTemplate made, or the chart's name.
	ReleaseName string
	CRDs        []Document
	Manifests   []Document
	Hooks       []Hook
	// Lookup says a template called lookup, which was answered empty.
	Lookup bool
}

// Error is a chart that cannot be rendered: its folder, values or a
// template, named.
type Error struct {
	Chart string
	Err   error
}

func (e *Error) Error() string {
	msg := e.Err.Error()
	if len(msg) > maxErrorBytes {
		// Helm repeats a loop's every level (an include a thousand
		// deep); what names the template is at the start.
		msg = msg[:maxErrorBytes] + fmt.Sprintf(" ... (%d bytes more)", len(msg)-maxErrorBytes)
	}
	return fmt.Sprintf("chart %s: %s", e.Chart, msg)
}

// maxErrorBytes bounds a rendering error's text.
const maxErrorBytes = 4096

func (e *Error) Unwrap() error { return e.Err }

// Render renders the chart in opts.Dir.
func Render(ctx context.Context, opts Options) (*Rendered, error) {
	return render(ctx, opts, func(string) {})
}

// render is Render, saying through step when it starts executing the
// nameTemplate (stepNameTemplate) and when it is done with it
// (stepChart): the renderer tells gantry, so that a bound that stops it
// names what was running.
func render(ctx context.Context, opts Options, step func(string)) (*Rendered, error) {
	c, err := load(opts)
	if err != nil {
		return nil, &Error{Chart: opts.Dir, Err: err}
	}
	fail := func(err error) (*Rendered, error) { return nil, &Error{Chart: c.Name(), Err: err} }
	// What helm template checks of the chart before it renders.
	if t := c.Metadata.Type; t != "" && t != "application" {
		return fail(fmt.Errorf("%s charts are not installable", t))
	}
	var missing []string
	for _, d := range c.Metadata.Dependencies {
		if !slices.ContainsFunc(c.Dependencies(), func(sub *chart.Chart) bool { return sub.Name() == d.Name }) {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) > 0 {
		return fail(fmt.Errorf("found in Chart.yaml, but missing in charts/ directory: %s", strings.Join(missing, ", ")))
	}
	release := releaseName(opts.ReleaseName, c)
	if opts.ReleaseName == "" && opts.NameTemplate != "" {
		step(stepNameTemplate)
		name, err := executeNameTemplate(opts.NameTemplate)
		if err != nil {
			return fail(fmt.Errorf("nameTemplate: %w", err))
		}
		step(stepChart)
		release = name
	}
	vals, err := values(opts)
	if err != nil {
		return fail(err)
	}
	if err := chartutil.ProcessDependencies(c, vals); err != nil {
		return fail(fmt.Errorf("dependencies: %w", err))
	}
	caps := common.DefaultCapabilities.Copy()
	if opts.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(opts.KubeVersion)
		if err != nil {
			return fail(fmt.Errorf("kubernetes version %q: %w", opts.KubeVersion, err))
		}
		caps.KubeVersion = *kv
	}
	if len(opts.APIVersions) > 0 {
		caps.APIVersions = append(append(common.VersionSet{}, caps.APIVersions...), opts.APIVersions...)
	}
	if c.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(c.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return fail(fmt.Errorf("needs Kubernetes %s, not %s", c.Metadata.KubeVersion, caps.KubeVersion.String()))
	}
	top, err := commonutil.ToRenderValuesWithSchemaValidation(c, vals, common.ReleaseOptions{
		Name: release, Namespace: opts.Namespace, Revision: 1, IsInstall: true,
	}, caps, true)
	if err != nil {
		return fail(err)
	}
	if err := validateSchemas(c, top["Values"]); err != nil {
		return fail(atValues(err, opts))
	}
	var lookedUp atomic.Bool
	e := engine.Engine{CustomTemplateFuncs: map[string]any{
		// As helm template answers it: a chart never reads the
		// cluster into objects a diff then prints.
		"lookup": func(string, string, string, string) (map[string]any, error) {
			lookedUp.Store(true)
			return map[string]any{}, nil
		},
		"toYaml": toYAML,
	}}
	files, err := e.RenderWithContext(ctx, c, top)
	if err != nil {
		return fail(err)
	}
	for name := range files {
		// Notes are for a person at a terminal, not objects.
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return fail(err)
	}
	// Helm drops a document whose helm.sh/hook names no event it knows,
	// and logs the events: never silently here.
	if dropped := droppedDocuments(files, len(hooks)+len(manifests)); len(dropped) > 0 {
		return fail(fmt.Errorf("%s: a document's helm.sh/hook names no hook event Helm knows, so Helm would drop it: name known events (pre-install, post-install, pre-upgrade, post-upgrade, pre-delete, post-delete, pre-rollback, post-rollback, test)", strings.Join(dropped, ", ")))
	}
	out := &Rendered{Name: c.Name(), Version: c.Metadata.Version, ReleaseName: release, Lookup: lookedUp.Load()}
	for _, crd := range allCRDs(c) {
		out.CRDs = append(out.CRDs, Document{Source: crd.Filename, Content: string(crd.File.Data)})
	}
	for _, m := range manifests {
		out.Manifests = append(out.Manifests, Document{Source: m.Name, Content: m.Content})
	}
	for _, h := range hooks {
		var events []string
		for _, ev := range h.Events {
			events = append(events, ev.String())
		}
		out.Hooks = append(out.Hooks, Hook{Document: Document{Source: h.Path, Content: h.Manifest}, Events: events})
	}
	return out, nil
}

// droppedDocuments names the templates whose documents SortManifests
// left out, when it kept fewer than the files hold.
func droppedDocuments(files map[string]string, kept int) []string {
	total := 0
	var withHooks []string
	for name, content := range files {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		n := 0
		for _, doc := range releaseutil.SplitManifests(content) {
			if strings.TrimSpace(doc) != "" {
				n++
			}
		}
		total += n
		if n > 0 && strings.Contains(content, "helm.sh/hook") {
			withHooks = append(withHooks, name)
		}
	}
	if total <= kept {
		return nil
	}
	slices.Sort(withHooks)
	if len(withHooks) == 0 {
		return []string{fmt.Sprintf("%d documents", total-kept)}
	}
	return withHooks
}

// releaseName is name, or the chart's own name when none is given.
func releaseName(name string, c *chart.Chart) string {
	if name == "" {
		return c.Name()
	}
	return name
}

// allCRDs are the CRDs of the chart and of its enabled subcharts, the
// chart's first, in the order helm install reads them.
func allCRDs(c *chart.Chart) []chart.CRD {
	return c.CRDObjects()
}

// values are the values files merged in order, then the Set lines, as
// helm's -f and --set give them.
func values(opts Options) (map[string]any, error) {
	merged := map[string]any{}
	for _, v := range opts.Values {
		var m map[string]any
		if err := yamlbound.Unmarshal(v.Content, &m); err != nil {
			return nil, fmt.Errorf("values %s: %w", v.Name, err)
		}
		merged = mergeMaps(merged, m)
	}
	for i, s := range opts.Set {
		if err := strvals.ParseInto(s, merged); err != nil {
			// Never the line: it may hold a secret, and Helm's
			// message quotes pieces of it.
			return nil, fmt.Errorf("set line %d is not KEY=VALUE as helm --set reads it", i+1)
		}
	}
	return merged, nil
}

// mergeMaps merges b into a, b's values winning, maps merged key by key,
// as helm merges its values files.
func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// validateSchemas checks the values of the chart and of each subchart
// against its values.schema.json, as helm does, with no loader: a schema
// that refers to another document (http, https, file) is refused rather
// than fetched or read.
func validateSchemas(c *chart.Chart, vals any) error {
	m, _ := vals.(common.Values)
	var errs []error
	if len(c.Schema) > 0 {
		if err := validateSchema(c.Name(), c.Schema, m); err != nil {
			errs = append(errs, err)
		}
	}
	for _, dep := range c.Dependencies() {
		sub, ok := m[dep.Name()].(map[string]any)
		if !ok {
			continue
		}
		if err := validateSchemas(dep, common.Values(sub)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func validateSchema(name string, schema []byte, vals common.Values) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return fmt.Errorf("%s: values.schema.json: %w", name, err)
	}
	compiler := jsonschema.NewCompiler()
	compiler.UseLoader(noLoader{})
	if err := compiler.AddResource("file:///values.schema.json", doc); err != nil {
		return fmt.Errorf("%s: values.schema.json: %w", name, err)
	}
	s, err := compiler.Compile("file:///values.schema.json")
	if err != nil {
		return fmt.Errorf("%s: values.schema.json: %w", name, err)
	}
	// The validator takes JSON's types: the values as JSON, read back.
	j, err := json.Marshal(vals.AsMap())
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return err
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("%s: the values do not match values.schema.json: %w", name, err)
	}
	return nil
}

// schemaProblem is one line of the validator's message: where in the
// values, and what is wrong there.
var schemaProblem = regexp.MustCompile(`(?m)^(\s*)- at '([^']*)': (.*)$`)

// atValues names, for each value a values schema refuses, the values
// file and line that set it (the last that does: later files win), or
// the set line, or the chart's own values.
func atValues(err error, opts Options) error {
	msg := err.Error()
	if !strings.Contains(msg, "values.schema.json") {
		return err
	}
	text := schemaProblem.ReplaceAllStringFunc(msg, func(line string) string {
		m := schemaProblem.FindStringSubmatch(line)
		var path []string
		for _, p := range strings.Split(strings.TrimPrefix(m[2], "/"), "/") {
			if p != "" {
				path = append(path, strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~"))
			}
		}
		return m[1] + whereSet(path, opts) + ": at '" + m[2] + "': " + m[3]
	})
	text = strings.Replace(text, "jsonschema validation failed with 'file:///values.schema.json#'\n", "\n", 1)
	return &located{msg: text, err: err}
}

// located is an error with a message that says where.
type located struct {
	msg string
	err error
}

func (e *located) Error() string { return e.msg }
func (e *located) Unwrap() error { return e.err }

// whereSet is where the value at path was set: the last set line or
// values file that holds it, else the chart's own values.
func whereSet(path []string, opts Options) string {
	if len(path) == 0 {
		return "the values"
	}
	for i := len(opts.Set) - 1; i >= 0; i-- {
		m := map[string]any{}
		if strvals.ParseInto(opts.Set[i], m) == nil && holds(m, path) {
			return fmt.Sprintf("set line %d", i+1)
		}
	}
	for i := len(opts.Values) - 1; i >= 0; i-- {
		doc, err := yamlbound.Node(opts.Values[i].Content)
		if err != nil || len(doc.Content) == 0 {
			continue
		}
		if line := lineOf(doc.Content[0], path); line > 0 {
			return fmt.Sprintf("%s:%d", opts.Values[i].Name, line)
		}
	}
	return "the chart's values"
}

func holds(v any, path []string) bool {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[p]; !ok {
			return false
		}
	}
	return true
}

// lineOf is the line of the value at path in a YAML mapping, 0 when it
// holds none.
func lineOf(n *yaml3.Node, path []string) int {
	for _, p := range path {
		switch n.Kind {
		case yaml3.MappingNode:
			var next *yaml3.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					next = n.Content[i+1]
				}
			}
			if next == nil {
				return 0
			}
			n = next
		case yaml3.SequenceNode:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(n.Content) {
				return 0
			}
			n = n.Content[i]
		default:
			return 0
		}
	}
	return n.Line
}

// noLoader loads no document: a schema refers only to itself.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("refers to %s: a chart's values schema may not load other documents", url)
}

// Load reads the chart in dir through the workspace's reader with dir as
// its root: a link is followed only where it resolves inside the chart (a
// folder that is a link is not walked), and .helmignore is honoured. At
// most MaxFiles files of at most maxFileBytes each, MaxTotalBytes in all.
func Load(dir string, maxFileBytes int64) (*chart.Chart, error) {
	return LoadDenying(dir, maxFileBytes, nil)
}

// LoadDenying is Load, refusing a chart that holds any of deny's files
// or lies in, or holds, any of its folders (by the file itself, not its
// name: a link or a hard link to one is refused too).
func LoadDenying(dir string, maxFileBytes int64, deny []string) (*chart.Chart, error) {
	return load(Options{Dir: dir, MaxFileBytes: maxFileBytes, Deny: deny})
}

// chartReader is the reader a chart of opts is read through: the
// workspace's (its .git and the run's credential files refused), with
// the chart's folder as the root links may resolve in.
func chartReader(opts Options) *reader.Reader {
	workspace := opts.Workspace
	if workspace == "" {
		workspace = opts.Dir
	}
	return reader.New(reader.Options{Root: workspace, Deny: opts.Deny, MaxFileBytes: opts.MaxFileBytes}).Within(opts.Dir)
}

// load reads the chart of opts.Dir as Load does, the files of
// opts.Workspace's .git refused too, whatever names them in the chart (a
// link, a hard link: a chart at the repository's root holds .git). A file
// of the chart that cannot be read fails the chart, named.
func load(opts Options) (*chart.Chart, error) {
	in := chartReader(opts)
	rules := ignore.Empty()
	if b, err := in.ReadFile(filepath.Join(opts.Dir, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
	} else if refused := (*reader.Error)(nil); errors.As(err, &refused) {
		return nil, chartFileError(ignore.HelmIgnore, err)
	}
	rules.AddDefaults()
	var files []*archive.BufferedFile
	err := in.Walk(opts.Dir, reader.WalkOptions{
		MaxFiles:      MaxFiles,
		MaxTotalBytes: MaxTotalBytes,
		Skip:          rules.Ignore,
	}, func(name string, data []byte) error {
		files = append(files, &archive.BufferedFile{Name: name, Data: data})
		return nil
	})
	if err != nil {
		var refused *reader.Error
		if errors.As(err, &refused) {
			return nil, chartFileError(refused.Path, err)
		}
		return nil, err
	}
	// Helm gives each archive it loads (a subchart's .tgz, and the .tgz
	// inside that) a budget of its own: counted here first, all of them
	// together, before any is loaded. An archive is known by its content,
	// not its name: Helm cleans a name (charts/x.tgz/.) before it decides.
	budget := &archiveBudget{bytes: MaxExpandedBytes, entries: MaxFiles}
	for _, f := range files {
		if isGzip(f.Data) {
			if err := budget.check(f.Name, f.Data, 0); err != nil {
				return nil, err
			}
		}
	}
	return loader.LoadFiles(files)
}

// chartFileError is a file of the chart that cannot be read, named by
// its path in the chart, in the words a chart's author acts on.
func chartFileError(name string, err error) error {
	var refused *reader.Error
	if !errors.As(err, &refused) {
		return fmt.Errorf("%s: %w", name, err)
	}
	switch refused.Kind {
	case reader.Credential:
		return fmt.Errorf("%s holds the run's credentials (a kubeconfig, a key, a token), which a chart may never read: keep them out of the chart's folder", name)
	case reader.Git:
		return fmt.Errorf("%s is a file of a .git folder, where a checkout keeps its token, which a chart may never read: refused", name)
	case reader.Outside:
		return fmt.Errorf("%s: a link that leads out of the chart: refused", name)
	}
	return refused
}

// MaxExpandedBytes bounds what a chart's archives (its subcharts' .tgz,
// and theirs) expand to, all of them together, and MaxArchiveDepth how
// deep they nest.
const (
	MaxExpandedBytes = 100 << 20
	MaxArchiveDepth  = 5
)

// isGzip says whether b is gzip's, as a chart archive is.
func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// archiveBudget is what the archives of one chart may still expand to.
type archiveBudget struct {
	bytes   int64
	entries int
}

// check reads an archive as Helm will, counting what it expands to
// against the budget, the archives inside it included (any entry whose
// content is gzip's, whatever its name); nothing is kept but an inner
// archive's own bytes, within the budget.
func (b *archiveBudget) check(name string, data []byte, depth int) error {
	if depth == MaxArchiveDepth {
		return fmt.Errorf("%s: archives nested more than %d deep", name, MaxArchiveDepth)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil // not gzip: Helm expands nothing of it
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			// The end, or no tar (a gzip file of data) or a broken one,
			// which Helm does not expand further either.
			return nil
		}
		if b.entries--; b.entries < 0 {
			return fmt.Errorf("%s: its archives hold more than %d files", name, MaxFiles)
		}
		content, err := io.ReadAll(io.LimitReader(tr, min(b.bytes+1, 2)))
		if err != nil {
			return nil
		}
		n := int64(len(content))
		if isGzip(content) {
			rest, err := io.ReadAll(io.LimitReader(tr, b.bytes+1-n))
			if err != nil {
				return nil
			}
			content = append(content, rest...)
			if b.bytes -= int64(len(content)); b.bytes < 0 {
				break
			}
			if err := b.check(name+"/"+h.Name, content, depth+1); err != nil {
				return err
			}
			continue
		}
		rest, err := io.Copy(io.Discard, io.LimitReader(tr, b.bytes+1-n))
		if b.bytes -= n + rest; b.bytes < 0 {
			break
		}
		if err != nil {
			return nil
		}
	}
	return fmt.Errorf("%s: its archives expand to more than %d bytes", name, MaxExpandedBytes)
}

// toYAML is Helm's toYaml, the same bytes written faster: most of a
// chart's rendering is toYaml of values (resources, probes, affinity),
// which Helm writes as JSON, parses again and only then writes as YAML.
// As Helm's, it gives "" where the value cannot be written.
func toYAML(v any) string {
	data, err := yamlenc.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}
