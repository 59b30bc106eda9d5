package charts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/kio"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/kustomize/kyaml/yaml/merge2"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/sources/yamlbound"
)

// InflatedDir is the folder, inside a kustomization's own, that holds the
// rendered charts of its helmCharts: a name no repository's file has (a
// kustomization whose folder holds one is refused).
const InflatedDir = ".gantry-helm-charts"

// KustomizeOptions say how a kustomization's helmCharts are rendered.
type KustomizeOptions struct {
	// Root is the folder chart folders and values files must lie in (the
	// workspace, the repository), absolute; empty, the kustomization's
	// own folder.
	Root string
	// InheritedNamespace is the namespace kustomize hands down to this
	// kustomization from the nearest kustomization above it that sets
	// one (an overlay's namespace: reaches its bases' charts): an entry
	// with no namespace, in a kustomization with none, renders in it.
	// A kustomization built under two such parents renders once for each.
	InheritedNamespace string
	// KubeVersion and APIVersions, when set, replace every entry's own,
	// as kustomize's --helm-kube-version and --helm-api-versions do.
	KubeVersion string
	APIVersions []string
	// DefaultKubeVersion is the Kubernetes version an entry that gives
	// none renders for; empty, Helm's own default (the minor after that
	// of the client-go linked: v1.37.0 for client-go v0.37, except in a
	// test binary, which Helm gives v1.20.0).
	DefaultKubeVersion string
	// MaxFileBytes bounds one file of a chart.
	MaxFileBytes int64
	// Deny are the files and folders no chart may read (Options.Deny).
	Deny []string
	// Render renders a chart; nil renders in this process (Render).
	Render func(context.Context, Options) (*Rendered, error)
	// Now is the clock that names a release an entry leaves unnamed
	// (helm's --generate-name: the chart's name and the Unix time);
	// time.Now when nil.
	Now func() time.Time
}

// Inflated says what was rendered for a kustomization.
type Inflated struct {
	Charts []InflatedChart
	// Lookup says a chart's template called lookup, answered empty.
	Lookup bool
	// Inherited says an entry rendered in KustomizeOptions.InheritedNamespace:
	// the rewrite holds for builds under that namespace only.
	Inherited bool
	// Reordered says the charts' objects come after those of the
	// kustomization's generators: list, not before it as kustomize puts
	// them: a kustomization that has configMapGenerator or
	// secretGenerator entries, generators: and helmCharts all three.
	// Only a build whose sortOptions keep the order (fifo) shows it.
	Reordered bool
}

// InflatedChart is one helmCharts entry rendered.
type InflatedChart struct {
	// Entry is the entry's index in helmCharts (the deprecated
	// helmChartInflationGenerator's entries follow).
	Entry int
	// Name is the chart's name, Dir its folder.
	Name, Dir string
	// ReleaseName and Namespace are those it was rendered with;
	// GeneratedName says the release name came from the clock, as
	// helm's --generate-name names it, so that each build renders anew.
	ReleaseName, Namespace string
	GeneratedName          bool
	// File is the rendered output, among the files returned: kustomize
	// names it as the objects' origin.
	File   string
	Lookup bool
}

// KustomizeError is a helmCharts entry that cannot be rendered, or a
// kustomization whose helmCharts cannot be: the kustomization's file and
// the entry, named.
type KustomizeError struct {
	File string
	// Entry is the entry's index, -1 for the kustomization as a whole.
	Entry int
	Chart string
	Err   error
}

func (e *KustomizeError) Error() string {
	if e.Entry < 0 {
		return fmt.Sprintf("%s: helmCharts: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s: helmCharts[%d] (chart %q): %v", e.File, e.Entry, e.Chart, e.Err)
}

func (e *KustomizeError) Unwrap() error { return e.Err }

// ErrRemoteChart is a helmCharts entry whose chart is not in its chart
// home: kustomize would pull it from its repo; gantry fetches nothing.
var ErrRemoteChart = errors.New("remote charts are not fetched: the chart must be in the repository")

// Kustomization rewrites the kustomization in file (its absolute path;
// content its bytes) that lists helmCharts, so that kustomize, with
// plugins disabled, builds what `kustomize build --enable-helm` builds
// with the helm CLI of the Helm version gantry links: each chart is
// rendered here, as the helm template kustomize runs renders it, and the
// rewritten kustomization (JSON, which kustomize reads as YAML) names the
// rendered output as files, returned by absolute path under InflatedDir in
// the kustomization's folder, that the caller serves in memory beside it.
// The charts' objects land where kustomize's generator puts them: after
// the resources (the files are appended to resources:), or, when the
// kustomization has configMapGenerator or secretGenerator entries, after
// those objects (InflatedDir is then a component, listed first in
// components:, whose kustomization file is among the files: the caller
// answers InflatedDir as a folder, to IsDir and CleanedAbs). Each object is
// marked as helm's, as kustomize marks it, so that namespace: leaves it
// alone, here and in every kustomization above.
//
// Values files, the chart's own values.yaml among them, are read with
// read (bounded, decrypted by the caller); a chart's folder is rendered
// from disk through an os.Root of it. Chart folders and values files must
// lie in opts.Root, named by relative paths: an absolute path, a URL, or a
// path out of the root (links resolved, for chart folders) is refused, as
// is a chart not in its chart home (kustomize would pull it from its
// repo).
//
// A kustomization without helmCharts, or that kustomize cannot read,
// comes back unchanged, with no files and no info: kustomize reports its
// errors. Errors are *KustomizeError, naming the kustomization file and
// the entry.
//
// With buildMetadata's originAnnotations, kustomize names the charts'
// objects' origin as the generator (configuredIn the kustomization file);
// here it names the rendered file (InflatedChart.File, relative to the
// build's root), which the caller maps back.
func Kustomization(ctx context.Context, file string, content []byte, read func(path string) ([]byte, error), opts KustomizeOptions) (rewritten []byte, files map[string][]byte, info *Inflated, err error) {
	if err := yamlbound.Check(content); err != nil {
		return nil, nil, nil, &KustomizeError{File: file, Entry: -1, Err: err}
	}
	var k types.Kustomization
	if err := k.Unmarshal(content); err != nil {
		return content, nil, nil, nil
	}
	k.FixKustomization()
	if len(k.HelmCharts) == 0 {
		return content, nil, nil, nil
	}
	dir := filepath.Dir(file)
	root := opts.Root
	if root == "" {
		root = dir
	}
	whole := func(err error) error { return &KustomizeError{File: file, Entry: -1, Err: err} }
	virtual := filepath.Join(dir, InflatedDir)
	if _, err := os.Lstat(virtual); err == nil {
		return nil, nil, nil, whole(fmt.Errorf("%s is there already: it is the name gantry renders charts under", virtual))
	}
	var globals types.HelmGlobals
	if k.HelmGlobals != nil {
		globals = *k.HelmGlobals
	}
	if globals.ChartHome == "" {
		globals.ChartHome = types.HelmDefaultHome
	}
	if err := relativeInside(root, dir, globals.ChartHome); err != nil {
		return nil, nil, nil, whole(fmt.Errorf("helmGlobals.chartHome %q: %w", globals.ChartHome, err))
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	info = &Inflated{}
	files = map[string][]byte{}
	var names []string
	for i, entry := range k.HelmCharts {
		fail := func(err error) error { return &KustomizeError{File: file, Entry: i, Chart: entry.Name, Err: err} }
		if entry.Namespace == "" {
			// kustomize's own namespace, else the one a parent hands down.
			switch {
			case k.Namespace != "":
				entry.Namespace = k.Namespace
			case opts.InheritedNamespace != "":
				entry.Namespace = opts.InheritedNamespace
				info.Inherited = true
			}
		}
		if opts.KubeVersion != "" {
			entry.KubeVersion = opts.KubeVersion
		}
		if len(opts.APIVersions) > 0 {
			entry.ApiVersions = opts.APIVersions
		}
		if entry.KubeVersion == "" {
			entry.KubeVersion = opts.DefaultKubeVersion
		}
		out, ic, err := inflate(ctx, dir, root, globals, entry, read, opts, now)
		if err != nil {
			return nil, nil, nil, fail(err)
		}
		name := fmt.Sprintf("helmCharts-%d.yaml", i)
		path := filepath.Join(virtual, name)
		files[path] = out
		names = append(names, name)
		ic.Entry, ic.File = i, path
		info.Charts = append(info.Charts, ic)
		info.Lookup = info.Lookup || ic.Lookup
	}
	var doc map[string]any
	if err := unmarshalNumbers(content, &doc); err != nil {
		return nil, nil, nil, whole(err)
	}
	for _, key := range []string{"helmCharts", "helmGlobals", "helmChartInflationGenerator"} {
		deleteKey(doc, key)
	}
	// kustomize reads bases: after resources:; one list keeps that order.
	resources := listAt(doc, "resources")
	if bases := listAt(doc, "bases"); len(bases) > 0 {
		resources = append(resources, bases...)
		deleteKey(doc, "bases")
	}
	if len(k.ConfigMapGenerator) == 0 && len(k.SecretGenerator) == 0 {
		// kustomize adds the charts' objects after the resources, before
		// what generators: makes: at the end of resources: they are
		// where kustomize puts them.
		for _, n := range names {
			resources = append(resources, InflatedDir+"/"+n)
		}
	} else {
		// After the objects of configMapGenerator and secretGenerator:
		// only a component comes after those (and after generators:),
		// the first component before the kustomization's own.
		var b strings.Builder
		b.WriteString("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n")
		for _, n := range names {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		files[filepath.Join(virtual, konfig.DefaultKustomizationFileName())] = []byte(b.String())
		setKey(doc, "components", append([]any{InflatedDir}, listAt(doc, "components")...))
		info.Reordered = len(k.Generators) > 0
	}
	if len(resources) > 0 {
		setKey(doc, "resources", resources)
	}
	rewritten, err = json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, nil, nil, whole(err)
	}
	return append(rewritten, '\n'), files, info, nil
}

// inflate renders one entry as kustomize's HelmChartInflationGenerator
// does: the output of the helm template it runs, as kustomize reads it,
// each object marked as helm's (kustomize's namespace: leaves those
// alone).
func inflate(ctx context.Context, dir, root string, globals types.HelmGlobals, entry types.HelmChart, read func(string) ([]byte, error), opts KustomizeOptions, now func() time.Time) ([]byte, InflatedChart, error) {
	maxFileBytes := opts.MaxFileBytes
	render := opts.Render
	if render == nil {
		render = Render
	}
	var none InflatedChart
	if entry.Name == "" {
		return nil, none, errors.New("chart name cannot be empty")
	}
	if strings.HasPrefix(entry.ReleaseName, "-") {
		return nil, none, fmt.Errorf("releaseName must not start with '-', got %q", entry.ReleaseName)
	}
	if strings.HasPrefix(entry.Name, "-") {
		return nil, none, fmt.Errorf("chart name must not start with '-', got %q", entry.Name)
	}
	if strings.ContainsAny(entry.Name, `/\`) || entry.Name == "." || entry.Name == ".." {
		return nil, none, fmt.Errorf("chart name %q is a path: a chart is a folder of the chart home, named", entry.Name)
	}
	switch entry.ValuesMerge {
	case "":
		entry.ValuesMerge = "override"
	case "merge", "override", "replace":
	default:
		return nil, none, fmt.Errorf("valuesMerge must be one of [merge override replace], not %q", entry.ValuesMerge)
	}
	// The chart home; a version with a repo is a folder of its own,
	// <name>-<version>, as kustomize pulls it.
	home := filepath.Join(dir, globals.ChartHome)
	if entry.Version != "" && entry.Repo != "" {
		home = filepath.Join(home, entry.Name+"-"+entry.Version)
	}
	chartDir := filepath.Join(home, entry.Name)
	if st, err := os.Stat(chartDir); err != nil || !st.IsDir() {
		rel, _ := filepath.Rel(dir, chartDir)
		if entry.Repo != "" {
			return nil, none, fmt.Errorf("no chart at %s, and the chart would be pulled from %s: %w", rel, entry.Repo, ErrRemoteChart)
		}
		return nil, none, fmt.Errorf("no chart at %s and no repo: %w", rel, ErrRemoteChart)
	}
	if err := realInside(root, chartDir); err != nil {
		return nil, none, fmt.Errorf("chart folder %s: %w", chartDir, err)
	}

	// Values: the values file (the chart's own values.yaml unless
	// valuesFile names another), valuesInline over it or instead of it,
	// then additionalValuesFiles, as helm's -f files in that order.
	readValues := func(field, p string) ([]byte, string, error) {
		if strings.Contains(p, "://") {
			return nil, "", fmt.Errorf("%s %q: remote values files are not fetched", field, p)
		}
		if err := relativeInside(root, dir, p); err != nil {
			return nil, "", fmt.Errorf("%s %q: %w", field, p, err)
		}
		full := filepath.Join(dir, p)
		b, err := read(full)
		if err != nil {
			return nil, "", fmt.Errorf("%s %q: %w", field, p, err)
		}
		return b, full, nil
	}
	valuesField, valuesPath := "valuesFile", entry.ValuesFile
	if valuesPath == "" {
		rel, err := filepath.Rel(dir, filepath.Join(chartDir, "values.yaml"))
		if err != nil {
			return nil, none, err
		}
		valuesField, valuesPath = "the chart's values.yaml", rel
	}
	var values []Values
	if len(entry.ValuesInline) > 0 {
		inline := entry.ValuesInline
		if entry.ValuesMerge != "replace" {
			b, _, err := readValues(valuesField, valuesPath)
			if err != nil {
				return nil, none, err
			}
			if inline, err = mergeInline(b, inline, entry.ValuesMerge); err != nil {
				return nil, none, err
			}
		}
		b, err := yaml.Marshal(inline)
		if err != nil {
			return nil, none, err
		}
		values = append(values, Values{Name: "valuesInline", Content: b})
	} else {
		b, full, err := readValues(valuesField, valuesPath)
		if err != nil {
			return nil, none, err
		}
		values = append(values, Values{Name: full, Content: b})
	}
	for _, f := range entry.AdditionalValuesFiles {
		b, full, err := readValues("additionalValuesFiles", f)
		if err != nil {
			return nil, none, err
		}
		values = append(values, Values{Name: full, Content: b})
	}

	// The release name: helm template takes the name given, or names it
	// from --name-template, or, with --generate-name, from the chart's
	// folder and the clock.
	// A nameTemplate is the pull request's code as much as a chart's
	// templates are: the renderer executes it, within its bounds, and
	// says the name it made.
	release, generated := entry.ReleaseName, false
	switch {
	case release != "" && entry.NameTemplate != "":
		return nil, none, errors.New("releaseName and nameTemplate both given: helm refuses a name template with a name")
	case release == "" && entry.NameTemplate != "":
	case release == "":
		base := filepath.Base(chartDir)
		if i := strings.Index(base, "."); i >= 0 {
			base = base[:i]
		}
		release, generated = fmt.Sprintf("%s-%d", base, now().Unix()), true
	}
	if release != "" {
		if err := chartutil.ValidateReleaseName(release); err != nil {
			return nil, none, fmt.Errorf("release name %q: %w", release, err)
		}
	}
	namespace := entry.Namespace
	if namespace == "" {
		// helm's own default, with no kubeconfig: gantry reads none.
		namespace = "default"
	}

	// helm's --api-versions is a list flag: a value with commas is several.
	var apis []string
	for _, a := range entry.ApiVersions {
		apis = append(apis, strings.Split(a, ",")...)
	}
	r, err := render(ctx, Options{Dir: chartDir, ReleaseName: release, NameTemplate: entry.NameTemplate, Namespace: namespace, Values: values,
		KubeVersion: entry.KubeVersion, APIVersions: apis, MaxFileBytes: maxFileBytes, Deny: opts.Deny, Workspace: root})
	if err != nil {
		return nil, none, err
	}
	if release == "" {
		// What the nameTemplate made, checked here as well: its length
		// first, so that nothing longer than a release name is quoted.
		if len(r.ReleaseName) > maxReleaseName {
			return nil, none, fmt.Errorf("nameTemplate: the release name it makes is over %d characters", maxReleaseName)
		}
		if err := chartutil.ValidateReleaseName(r.ReleaseName); err != nil {
			return nil, none, fmt.Errorf("nameTemplate: release name %q: %w", r.ReleaseName, err)
		}
		release = r.ReleaseName
	}
	out, err := kustomizeRead(templateOutput(r, entry.IncludeCRDs, entry.SkipHooks, entry.SkipTests))
	if err != nil {
		return nil, none, err
	}
	return out, InflatedChart{Name: entry.Name, Dir: chartDir, ReleaseName: release, Namespace: entry.Namespace,
		GeneratedName: generated, Lookup: r.Lookup}, nil
}

// templateOutput is what helm template prints of a rendering: the CRDs
// with --include-crds, the manifests, then the hooks unless --no-hooks,
// the tests left out with --skip-tests.
func templateOutput(r *Rendered, includeCRDs, skipHooks, skipTests bool) []byte {
	var b strings.Builder
	if includeCRDs {
		for _, d := range r.CRDs {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", d.Source, d.Content)
		}
	}
	for _, d := range r.Manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", d.Source, d.Content)
	}
	out := strings.TrimSpace(b.String()) + "\n"
	if !skipHooks {
		for _, h := range r.Hooks {
			if skipTests && slices.Contains(h.Events, "test") {
				continue
			}
			out += fmt.Sprintf("---\n# Source: %s\n%s\n", h.Source, h.Content)
		}
	}
	return []byte(out)
}

// kustomizeRead reads helm's output as kustomize's generator reads it
// (text before the first document, a warning helm printed, dropped when
// the whole does not read) and marks each object as helm's, as the
// generator marks it: kustomize's namespace: then leaves it alone, here
// and in every kustomization above. The objects come back as YAML that
// kustomize reads into the same objects.
func kustomizeRead(out []byte) ([]byte, error) {
	// Read here, not in the renderer: kustomize's reader expands
	// aliases, so helm's output is judged by the bounded parser first.
	if err := yamlbound.Check(out); err != nil {
		return nil, fmt.Errorf("reading helm's output: %w", err)
	}
	f := resmap.NewFactory(provider.NewDefaultDepProvider().GetResourceFactory())
	rm, err := f.NewResMapFromBytes(out)
	if err != nil {
		nodes, rerr := (&kio.ByteReader{Reader: bytes.NewReader(out), OmitReaderAnnotations: true}).Read()
		if rerr != nil {
			return nil, fmt.Errorf("reading helm's output: %w", rerr)
		}
		if len(nodes) == 0 {
			return nil, fmt.Errorf("reading helm's output: %w", err)
		}
		if rm, err = f.NewResMapFromRNodeSlice(nodes); err != nil {
			return nil, fmt.Errorf("reading helm's output: %w", err)
		}
	}
	for _, r := range rm.Resources() {
		if err := r.RNode.PipeE(kyaml.SetAnnotation(konfig.HelmGeneratedAnnotation, "true")); err != nil {
			return nil, err
		}
	}
	return rm.AsYaml()
}

// mergeInline puts valuesInline and the values file together as kustomize
// does: override, the inline values win; merge, the file's win.
func mergeInline(file []byte, inline map[string]any, mode string) (map[string]any, error) {
	if err := yamlbound.Check(file); err != nil {
		return nil, fmt.Errorf("the values file: %w", err)
	}
	fileNode, err := kyaml.Parse(string(file))
	if err != nil {
		return nil, fmt.Errorf("the values file: %w", err)
	}
	inlineNode, err := kyaml.FromMap(inline)
	if err != nil {
		return nil, fmt.Errorf("valuesInline: %w", err)
	}
	var merged *kyaml.RNode
	if mode == "override" {
		merged, err = merge2.Merge(inlineNode, fileNode.Copy(), kyaml.MergeOptions{})
	} else {
		merged, err = merge2.Merge(fileNode, inlineNode.Copy(), kyaml.MergeOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("merging valuesInline: %w", err)
	}
	return merged.Map()
}

// relativeInside refuses a path that is absolute, or that leads out of
// root from base.
func relativeInside(root, base, p string) error {
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || filepath.VolumeName(p) != "" {
		return errors.New("an absolute path: give it relative to the kustomization")
	}
	if !inside(root, filepath.Join(base, p)) {
		return fmt.Errorf("leads out of %s", root)
	}
	return nil
}

// realInside refuses a path whose real place (links resolved) is not in
// root's.
func realInside(root, p string) error {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	if !inside(realRoot, real) {
		return fmt.Errorf("resolves to %s, out of %s", real, root)
	}
	return nil
}

func inside(root, p string) bool {
	rel, err := filepath.Rel(filepath.Clean(root), filepath.Clean(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// unmarshalNumbers reads YAML as kustomize does (through JSON), numbers
// kept as they are written.
func unmarshalNumbers(content []byte, v any) error {
	j, err := yamlbound.YAMLToJSON(content)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	return d.Decode(v)
}

// keyOf is the key of doc kustomize reads as field (it matches field
// names whatever their case): the exact one if there, else any.
func keyOf(doc map[string]any, field string) (string, bool) {
	if _, ok := doc[field]; ok {
		return field, true
	}
	for k := range doc {
		if strings.EqualFold(k, field) {
			return k, true
		}
	}
	return "", false
}

func deleteKey(doc map[string]any, field string) {
	for {
		k, ok := keyOf(doc, field)
		if !ok {
			return
		}
		delete(doc, k)
	}
}

func setKey(doc map[string]any, field string, v any) {
	deleteKey(doc, field)
	doc[field] = v
}

func listAt(doc map[string]any, field string) []any {
	k, ok := keyOf(doc, field)
	if !ok {
		return nil
	}
	l, _ := doc[k].([]any)
	return l
}

// nameTemplateFuncs are the functions a helmCharts entry's nameTemplate
// may call: helm's (sprig's), but none that reads the process's
// environment (which holds the run's tokens) or asks DNS.
func nameTemplateFuncs() template.FuncMap {
	funcs := sprig.TxtFuncMap()
	for _, name := range []string{"env", "expandenv", "getHostByName"} {
		delete(funcs, name)
	}
	return funcs
}

// maxReleaseName is the longest release name Helm takes.
const maxReleaseName = 53

// executeNameTemplate is the release name a nameTemplate makes, as helm's
// --name-template makes it, and valid. It runs in the renderer (Render),
// whose bounds stop a template that loops or expands without end; what it
// writes stops at a release name's length.
func executeNameTemplate(text string) (string, error) {
	t, err := template.New("name-template").Funcs(nameTemplateFuncs()).Parse(text)
	if err != nil {
		return "", err
	}
	w := &nameWriter{}
	if err := t.Execute(w, nil); err != nil {
		return "", err
	}
	name := w.b.String()
	if err := chartutil.ValidateReleaseName(name); err != nil {
		return "", fmt.Errorf("release name %q: %w", name, err)
	}
	return name, nil
}

// nameWriter holds a release name, and fails a write that would make it
// longer than one can be (the template's execution stops there).
type nameWriter struct{ b bytes.Buffer }

func (w *nameWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > maxReleaseName {
		return 0, fmt.Errorf("the release name it makes is over %d characters", maxReleaseName)
	}
	return w.b.Write(p)
}
