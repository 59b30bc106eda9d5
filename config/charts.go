package config

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/gantry-dev/gantry/artifact"
)

// RemoteChart is a chart fetched before the build, from an OCI registry
// or a Helm repository, as the workflow allows.
type RemoteChart struct {
	// Ref is oci://registry/path/name, or the chart's name in
	// Repository (an https:// Helm repository).
	Ref, Repository string
	// Version is an exact version or a semver range; empty: the highest
	// release.
	Version string
	// Allowed are the hosts and URL prefixes of allow-remote-charts.
	Allowed []string
	// Cache is chart-cache: empty for none.
	Cache string
	// FromRunFile: a run file named the chart, so that it gets
	// credentials only from the registries the workflow bound them to.
	FromRunFile bool
	// VersionFromRunFile: a run file named the chart, its version or its
	// repository, so that what is fetched may differ at another revision.
	VersionFromRunFile bool
}

// Request is what the artifact client fetches.
func (r *RemoteChart) Request(offline bool) artifact.ChartRequest {
	return artifact.ChartRequest{Ref: r.Ref, Repository: r.Repository, Version: r.Version, Allowed: r.Allowed, Cache: r.Cache, Offline: offline}
}

// remoteChart reads a chart from a registry or repository: chart as
// oci://registry/path/name, or a chart's name with chart-repository; and
// chart-version, allow-remote-charts and chart-cache. A chart whose host
// the workflow does not allow is refused here, before any request. It
// says whether the chart is remote.
func (in *inputs) remoteChart(c *Config) bool {
	given := func(name string) bool { return in.vals[name].origin != "default" && in.vals[name].raw != "" }
	repo, version := in.str("chart-repository"), in.str("chart-version")
	allowed := in.lines("allow-remote-charts")
	for _, a := range allowed {
		if strings.Contains(a, "://") {
			if _, ok := artifact.ChartHost(a); !ok || !(strings.HasPrefix(a, "oci://") || strings.HasPrefix(a, "https://") || strings.HasPrefix(a, "http://")) {
				in.bad("allow-remote-charts", "%q is not a host or a URL prefix such as oci://ghcr.io/org/ or https://charts.example.com", a)
			}
		} else if _, err := name.NewRegistry(a, name.StrictValidation); err != nil || strings.ContainsAny(a, "/@") {
			in.bad("allow-remote-charts", "%q is not a host or a URL prefix such as oci://ghcr.io/org/ or https://charts.example.com", a)
		}
	}
	cache := in.str("chart-cache")
	if cache != "" {
		if info, err := os.Stat(cache); err == nil && !info.IsDir() {
			in.bad("chart-cache", "%s is not a folder", cache)
		}
	}
	remote := strings.HasPrefix(c.Chart, "oci://") || repo != ""
	if !remote {
		for _, n := range []string{"chart-repository", "chart-version"} {
			if given(n) {
				in.bad(n, "only with a chart from a registry (chart: oci://...) or a repository (chart-repository)")
			}
		}
		return false
	}
	if c.Chart == "" {
		in.bad("chart-repository", "only with chart: the chart's name in the repository")
		return true
	}
	rc := &RemoteChart{Ref: c.Chart, Repository: repo, Version: version, Allowed: allowed, Cache: cache, FromRunFile: in.vals["chart"].from == FromRunFile,
		VersionFromRunFile: in.vals["chart"].from == FromRunFile || in.vals["chart-version"].from == FromRunFile || in.vals["chart-repository"].from == FromRunFile}
	if version != "" {
		if _, err := semver.NewConstraint(version); err != nil {
			in.bad("chart-version", "%q is neither a version nor a semver range (such as 1.2.3, ^1.2 or >=1.0 <2): %v", version, err)
		}
	}
	// What is fetched first, and the input that named it.
	input, u := "chart", c.Chart
	if repo == "" {
		rest := strings.TrimPrefix(c.Chart, "oci://")
		last := path.Base(rest)
		if _, err := name.NewRepository(rest); err != nil || !strings.Contains(rest, "/") || strings.ContainsAny(last, ":@") || !artifact.ValidChartName(last) {
			in.bad("chart", "%q is not oci://registry/path/name (the version goes in chart-version, not a tag)", c.Chart)
			return true
		}
	} else {
		input, u = "chart-repository", repo
		p, err := url.Parse(repo)
		if err != nil || !(p.Scheme == "https" || p.Scheme == "http" && loopbackHost(p.Hostname())) {
			in.bad("chart-repository", "%q: want the https:// URL of a Helm repository (the folder of its index.yaml)", repo)
			return true
		}
		if !artifact.ValidChartName(c.Chart) {
			in.bad("chart", "%q is not a chart's name in chart-repository (a name such as cert-manager, not a path or URL)", c.Chart)
			return true
		}
	}
	host, ok := artifact.ChartHost(u)
	switch {
	case !ok:
		in.bad(input, "%q is not a plain URL (no user, query, fragment or ..)", u)
	case len(allowed) == 0:
		in.bad(input, "the host %s is not one the workflow allows charts from: a remote chart is fetched only from hosts or URL prefixes allow-remote-charts lists (none are)", host)
	case !artifact.ChartAllowed(allowed, u):
		in.bad(input, "the host %s (%s) is not one the workflow allows charts from: allow-remote-charts lists %s", host, u, strings.Join(allowed, ", "))
	}
	c.RemoteChart = rc
	return true
}

func loopbackHost(h string) bool {
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}

// chartCacheOutside refuses a chart cache in the checkout: a pull request
// writes there, and a chart (and index) it put in the cache would be
// taken as one fetched and verified.
func (in *inputs) chartCacheOutside(cache, checkout string) {
	abs, err := filepath.Abs(cache)
	if err != nil {
		return
	}
	if checkout, err = filepath.Abs(checkout); err != nil {
		return
	}
	for _, p := range []*string{&abs, &checkout} {
		if real, err := filepath.EvalSymlinks(*p); err == nil {
			*p = real
		}
	}
	if rel, err := filepath.Rel(checkout, abs); err == nil && (rel == "." || filepath.IsLocal(rel)) {
		in.bad("chart-cache", "%s lies in the checkout (%s), which a pull request writes: a chart put there would be taken as fetched; give a folder outside it (on GitHub, /github/home/charts, which actions/cache keeps as ${{ runner.temp }}/_github_home/charts)", cache, checkout)
	}
}
