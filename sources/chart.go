package sources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/gantry-dev/gantry/schemas/releases"
	"github.com/gantry-dev/gantry/sources/charts"
)

// Chart names a Helm chart to build from, instead of a kustomization or
// a folder of manifests: rendered in-process by Helm's own packages, as
// helm template renders it, then built as a folder of manifests is (SOPS,
// substitution, target namespace, patches and limits alike).
type Chart struct {
	// Dir is the chart's folder, in the workspace.
	Dir string
	// Shown names the chart's folder in messages, reports and objects'
	// sources instead of Dir: a fetched chart is named by its reference
	// and version, not by the temporary folder it was unpacked into.
	Shown string
	// ReleaseName is .Release.Name.
	ReleaseName string
	// Values are values files, in order (later ones win); they are read
	// as every file of a build is (bounded, SOPS decrypted).
	Values []string
	// Set are KEY=VALUE lines, as helm's --set, applied after them.
	Set []string
	// KubeVersion and APIVersions are .Capabilities: the cluster's on a
	// live run, kubernetes-version's offline.
	KubeVersion string
	APIVersions []string
	// Hooks says what becomes of the chart's hooks (helm.sh/hook) other
	// than tests: HooksRefuse (the default) fails the build naming them,
	// HooksAsObjects applies them as objects of the set, HooksLeaveOut
	// leaves them out, said. Test hooks are always left out, said.
	Hooks string
	// Render renders; nil renders as charts.RenderIsolated does: in a
	// process of its own, bounded in time and memory, when the
	// executable can be its own renderer.
	Render func(context.Context, charts.Options) (*charts.Rendered, error)
}

// SecretName matches the names of variables and values whose values are
// secrets (masked in all output; followed by provenance in a chart).
var SecretName = regexp.MustCompile(`(?i)pass|pwd|secret|token|key|cred|auth|cert|private|salt`)

// What becomes of a chart's hooks.
const (
	HooksRefuse    = "refuse"
	HooksAsObjects = "objects"
	HooksLeaveOut  = "leave-out"
)

// ChartNotice is what a build tells of a chart it rendered: what a
// report says once, so that nothing is dropped or answered unsaid.
type ChartNotice struct {
	// Chart is the chart's name and version (shop 1.2.0), Dir its folder.
	Chart, Dir string
	// Lookup: a template called lookup, which was answered empty, as
	// helm template answers it.
	Lookup bool
	// LeftOut are the hooks left out (tests always; others when asked),
	// by their template file.
	LeftOut []string
}

// notPrintable is a character a name may not hold where it is printed.
func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

// chartShown is how messages name c, whose folder is dir: as Shown, or
// by its path from the workspace.
func chartShown(c *Chart, dir, workDir string) string {
	if c.Shown != "" {
		return c.Shown
	}
	return displayPath(dir, nil, workDir)
}

// Shown names what opts builds in messages: the chart as it is shown, or
// Path.
func (opts BuildOptions) Shown() string {
	if opts.Chart != nil && opts.Chart.Shown != "" {
		return opts.Chart.Shown
	}
	return opts.Path
}

// renderChart renders opts.Chart into parts of manifests, each named by
// its template's file in the chart's folder.
func renderChart(opts BuildOptions, sfs *sopsFS) ([]*manifestPart, error) {
	c := opts.Chart
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, &BuildError{File: c.Dir, Err: err}
	}
	shown := chartShown(c, dir, opts.WorkDir)
	ropts := charts.Options{
		Dir:          dir,
		ReleaseName:  c.ReleaseName,
		Namespace:    opts.TargetNamespace,
		Set:          c.Set,
		KubeVersion:  c.KubeVersion,
		APIVersions:  c.APIVersions,
		MaxFileBytes: opts.MaxFileBytes,
		Deny:         opts.CredentialFiles,
		Workspace:    sfs.workspace(),
	}
	if ropts.Namespace == "" {
		ropts.Namespace = "default"
	}
	if ropts.KubeVersion == "" {
		// Not Helm's default (v1.20.0, which charts of today refuse):
		// the newest release gantry knows, as an offline run checks.
		ropts.KubeVersion = "v" + releases.Newest + ".0"
	}
	for _, v := range c.Values {
		if abs, err := filepath.Abs(v); err == nil {
			v = abs
		}
		b, err := sfs.ReadFile(v)
		if err != nil {
			var be *BuildError
			if errors.As(err, &be) {
				return nil, err
			}
			return nil, &BuildError{File: displayPath(v, nil, opts.WorkDir), Err: fmt.Errorf("reading values: %w", err)}
		}
		name := displayPath(v, nil, opts.WorkDir)
		ropts.Values = append(ropts.Values, charts.Values{Name: name, Content: b})
	}
	ropts.Set = nil
	for _, line := range c.Set {
		if k, v, ok := strings.Cut(line, "="); ok && v != "" && SecretName.MatchString(k) {
			if opts.taint != notTainted {
				v = opts.taint.String(v)
				line = k + "=" + v
			}
			// The value this build holds: what its messages are masked of.
			sfs.secretInput(shown+" (set "+strings.TrimSpace(k)+")", v)
		}
		ropts.Set = append(ropts.Set, line)
	}
	// A chart given secrets (values SOPS decrypted, set lines named as
	// secrets) can quote them, whole or changed, in what it fails with:
	// Build shows what it says only where the builds with other values
	// say the same (sayByProvenance).
	fail := func(err error) ([]*manifestPart, error) {
		return nil, &BuildError{File: shown, Err: err}
	}
	render := c.Render
	if render == nil {
		render = charts.RenderIsolated(charts.Limits{})
	}
	rendered, err := render(context.Background(), ropts)
	if err != nil {
		return fail(err)
	}
	// Template files are named in the console, the report and the
	// summary: a name that is not printable (a line break, a control or
	// direction character) could write lines of its own there.
	for _, docs := range [][]charts.Document{rendered.CRDs, rendered.Manifests} {
		for _, d := range docs {
			if strings.ContainsFunc(d.Source, notPrintable) {
				return nil, &BuildError{File: shown, Err: fmt.Errorf("the chart's file %q has a character that is not printable: refused", d.Source)}
			}
		}
	}
	for _, h := range rendered.Hooks {
		if strings.ContainsFunc(h.Source, notPrintable) {
			return nil, &BuildError{File: shown, Err: fmt.Errorf("the chart's file %q has a character that is not printable: refused", h.Source)}
		}
	}
	// A document's source is chartname/templates/x.yaml: named in the
	// chart's folder, whatever the folder is called.
	source := func(s string) string {
		if _, rest, ok := strings.Cut(s, "/"); ok {
			return strings.TrimSuffix(shown, "/") + "/" + path.Clean(rest)
		}
		return shown
	}
	notice := ChartNotice{Chart: strings.TrimSpace(rendered.Name + " " + rendered.Version), Dir: shown, Lookup: rendered.Lookup}
	var parts []*manifestPart
	add := func(d charts.Document) {
		if strings.TrimSpace(d.Content) == "" {
			return
		}
		parts = append(parts, &manifestPart{source: source(d.Source), data: []byte(d.Content), parse: true})
	}
	for _, d := range rendered.CRDs {
		add(d)
	}
	var refused []string
	for _, h := range rendered.Hooks {
		file := source(h.Source)
		switch {
		case slices.Contains(h.Events, "test"):
			notice.LeftOut = append(notice.LeftOut, file+" (test)")
		case c.Hooks == HooksLeaveOut:
			notice.LeftOut = append(notice.LeftOut, file+" ("+strings.Join(h.Events, ", ")+")")
		case c.Hooks == HooksAsObjects:
			add(h.Document)
		default:
			refused = append(refused, file+" ("+strings.Join(h.Events, ", ")+")")
		}
	}
	if len(refused) > 0 {
		return fail(fmt.Errorf("the chart has hooks, which Helm runs at set points of an install or upgrade and gantry does not: %s; set chart-hooks to objects to apply them as objects of the set (in the set's order: CRDs and Namespaces first, then the rest), or to leave-out to leave them out", strings.Join(refused, ", ")))
	}
	for _, d := range rendered.Manifests {
		add(d)
	}
	if opts.ChartNotice != nil {
		opts.ChartNotice(notice)
	}
	return parts, nil
}

// buildChart builds the objects of opts.Chart.
func buildChart(opts BuildOptions, sfs *sopsFS) ([]sourced, error) {
	parts, err := renderChart(opts, sfs)
	if err != nil {
		return nil, err
	}
	parseManifests(parts)
	var out []sourced
	for _, part := range parts {
		if part.err != nil {
			return nil, part.err
		}
		for i := range part.items {
			part.items[i].chart = true
		}
		out = append(out, part.items...)
	}
	return out, nil
}

// buildChartWrapped builds a chart's rendering with patches: its
// documents are written, file by file, to a folder that kustomize then
// builds as it builds any folder with patches; objects and messages name
// the chart's own files. The target namespace is the release's, given
// to the templates, not forced on every object.
func buildChartWrapped(opts BuildOptions, sfs *sopsFS, bounded *boundedFS) ([]sourced, error) {
	parts, err := renderChart(opts, sfs)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Chart.Dir)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "gantry-chart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out, err := os.OpenRoot(tmp)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	shown := chartShown(opts.Chart, dir, opts.WorkDir)
	files := map[string][]byte{}
	var order []string
	for _, p := range parts {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.source, shown), "/")
		if rel == "" || !filepath.IsLocal(rel) {
			rel = "rendered.yaml"
		}
		if _, ok := files[rel]; !ok {
			order = append(order, rel)
		} else {
			files[rel] = append(files[rel], "\n---\n"...)
		}
		files[rel] = append(files[rel], p.data...)
	}
	for _, rel := range order {
		if err := out.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			return nil, err
		}
		if err := out.WriteFile(rel, files[rel], 0o600); err != nil {
			return nil, err
		}
	}
	bounded.allow(tmp)
	wrapped := opts
	wrapped.TargetNamespace, wrapped.Path = "", shown
	built, err := buildWrapped(tmp, dir, wrapped, sfs, bounded)
	for i := range built {
		built[i].chart = true
	}
	return built, err
}
