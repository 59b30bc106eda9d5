package artifact_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/sources"
	"github.com/gantry-dev/gantry/sources/charts"
)

// A chart fetched from a registry renders as a chart's folder does.
func TestFetchedOCIChartRenders(t *testing.T) {
	t.Parallel()
	reg := artifact.NewTestRegistry(t)
	artifact.PushChart(t, reg, "charts/shop", "1.2.3", artifact.ShopChartTgz(t, "1.2.3"))
	c := artifact.New(artifact.Options{})
	got, err := c.FetchChart(context.Background(), artifact.ChartRequest{Ref: "oci://" + reg + "/charts/shop", Version: "^1.2", Allowed: []string{reg}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	objects, err := sources.Build(sources.BuildOptions{WorkDir: got.Dir, Path: got.Dir,
		Chart: &sources.Chart{Dir: got.Dir, ReleaseName: "web", Hooks: sources.HooksLeaveOut, Render: charts.Render}})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, o := range objects {
		refs = append(refs, o.Ref())
	}
	if !slices.ContainsFunc(refs, func(r string) bool { return strings.HasPrefix(r, "Deployment") && strings.Contains(r, "web-shop") }) {
		t.Errorf("no Deployment in %v", refs)
	}
}
