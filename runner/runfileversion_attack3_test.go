package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/config"
)

// diff --offline --base builds a fetched chart whose version a run file
// gave as the base's run file names it; where that file cannot be read,
// it refuses. A run file's unit can set chart-version (a unit input) under the
// workflow's chart: FromRunFile only looks at where "chart" came from, so
// the unit slips through as the workflow's chart and the base is built
// with the version the pull request's run file names, not the refusal.
func TestAttack3RunFileChartVersionSlipsThroughAsWorkflowChart(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(ws, "gantry.yaml")
	if err := os.WriteFile(file, []byte("units:\n- name: shop\n  inventory: shop\n  chart-version: 9.9.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GANTRY_WORKSPACE": ws, "GANTRY_CHART": "oci://charts.example.com/charts/shop",
		"GANTRY_ALLOW_REMOTE_CHARTS": "charts.example.com", "GANTRY_OFFLINE": "true", "GANTRY_BASE": "HEAD~1"}
	units, err := config.LoadUnits(config.Given{Command: "diff", CommandOrigin: "the command line", Flags: map[string]string{}, Env: env}, file, false)
	if err != nil {
		t.Fatal(err)
	}
	cfg := units[0].Config
	if cfg.RemoteChart == nil {
		t.Fatalf("no remote chart: %+v", cfg)
	}
	t.Logf("version %q from run file: %v, offline %v base %q", cfg.RemoteChart.Version, cfg.RemoteChart.FromRunFile, cfg.Offline, cfg.Base)
	s := &Session{}
	defer s.Close()
	res := s.offlineDiff(context.Background(), units[0], s.Options(cfg), &infos{})
	if !strings.Contains(res.Message, "is fetched as a run file names it, and the run file at HEAD~1 cannot be read here") {
		t.Errorf("a chart at the version %s a run file named was not refused for diff --offline --base: %s: %s", cfg.RemoteChart.Version, res.Reason, res.Message)
	}
}
