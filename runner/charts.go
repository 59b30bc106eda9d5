package runner

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/pipeline"
	"github.com/gantry-dev/gantry/result"
)

// fetchedChart is a unit's remote chart, fetched once for the run: the
// unit's own pipeline and the units that read its CRDs build the same
// folder.
type fetchedChart struct {
	once  sync.Once
	chart *artifact.FetchedChart
	err   error
}

// remoteChart fetches cfg's chart from its registry or repository (or
// takes it from the chart cache) into a folder of its own, removed when
// the session closes.
func (s *Session) remoteChart(ctx context.Context, cfg *config.Config) (*artifact.FetchedChart, error) {
	s.chartsMu.Lock()
	if s.charts == nil {
		s.charts = map[*config.Config]*fetchedChart{}
	}
	f, ok := s.charts[cfg]
	if !ok {
		f = &fetchedChart{}
		s.charts[cfg] = f
	}
	s.chartsMu.Unlock()
	f.once.Do(func() {
		dir, err := os.MkdirTemp("", "gantry-chart-")
		if err != nil {
			f.err = err
			return
		}
		s.chartsMu.Lock()
		s.chartDirs = append(s.chartDirs, dir)
		s.chartsMu.Unlock()
		if cfg.Timeout > 0 {
			// Bounded as an artifact's pull is.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
		}
		f.chart, f.err = chartClient(cfg).FetchChart(ctx, cfg.RemoteChart.Request(cfg.Offline), dir)
	})
	return f.chart, f.err
}

// withChart points opts' build at cfg's remote chart, fetched, and says
// which chart it is (reference, version, digest) and where it came from;
// nil when cfg has none or it was fetched, else the failed result.
func (s *Session) withChart(ctx context.Context, cfg *config.Config, opts *pipeline.Options, out Output) *result.Result {
	if cfg.RemoteChart == nil || opts.Build.Chart == nil {
		return nil
	}
	got, err := s.remoteChart(ctx, cfg)
	if err != nil {
		return &result.Result{Schema: result.SchemaVersion, Command: cfg.Command, Version: s.Version,
			Reason: result.ReasonBuildFailed, Message: err.Error(), Stages: []result.Stage{}, Objects: []result.Object{}}
	}
	how := "fetched"
	if got.FromCache {
		how = "taken from the chart cache"
	}
	if got.Verified {
		how += ", its signature verified"
	}
	// An OCI chart is named by its manifest's digest, as helm push
	// printed it and cosign signed it; a repository's, by its archive's,
	// as its index lists it.
	digest := got.Digest
	if got.Manifest != "" {
		digest = got.Manifest
	}
	out.Info(fmt.Sprintf("chart %s version %s (%s) %s", got.Ref, got.Version, digest, how))
	opts.Build.Path, opts.Build.Chart.Dir, opts.Build.Chart.Shown = got.Dir, got.Dir, got.Ref+":"+got.Version
	return nil
}

// removeCharts removes the folders charts were fetched into.
func (s *Session) removeCharts() {
	s.chartsMu.Lock()
	defer s.chartsMu.Unlock()
	for _, d := range s.chartDirs {
		os.RemoveAll(d)
	}
	s.chartDirs = nil
}

// chartClient is the client that fetches cfg's chart. A run file's chart
// on a registry the workflow gave no credentials for gets none: not the
// workflow's token (ghcr.io), not the Docker config's.
func chartClient(cfg *config.Config) *artifact.Client {
	o := artifactOptions(cfg)
	if rc := cfg.RemoteChart; rc != nil && rc.FromRunFile && !boundRegistry(rc.Ref, cfg.Registry.Hosts) {
		o.Anonymous = true
	}
	return artifact.New(o)
}

// boundRegistry says ref is an OCI chart on a registry the workflow's
// credentials are bound to.
func boundRegistry(ref string, hosts []string) bool {
	host, ok := artifact.ChartHost(ref)
	return ok && strings.HasPrefix(ref, "oci://") && slices.Contains(hosts, host)
}
