package runner

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gantry-dev/gantry/config"
)

// ghcrRecorder stands for ghcr.io: it asks for Basic credentials and
// records those it is sent.
type ghcrRecorder struct {
	mu   sync.Mutex
	auth []string
}

func (g *ghcrRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp := &http.Response{Request: r, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), ProtoMajor: 1, ProtoMinor: 1}
	if a := r.Header.Get("Authorization"); a != "" {
		g.mu.Lock()
		g.auth = append(g.auth, a)
		g.mu.Unlock()
		resp.StatusCode = http.StatusNotFound
		return resp, nil
	}
	resp.StatusCode = http.StatusUnauthorized
	resp.Header.Set("WWW-Authenticate", `Basic realm="ghcr"`)
	return resp, nil
}

// A pull request's run file naming a chart on ghcr.io, which the
// workflow allows charts from but does not list in registry-hosts, must
// not have the workflow's GitHub token sent with it: registry-hosts is
// where the workflow says its credentials go, and a run file's artifact
// on ghcr.io is refused unless listed there.
func TestAttackRunFileChartOnGHCRGetsNoWorkflowToken(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(ws, "gantry.yaml")
	if err := os.WriteFile(file, []byte("units:\n- name: shop\n  inventory: shop\n  chart: oci://ghcr.io/someone/shop\n  chart-version: 1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GANTRY_WORKSPACE": ws, "GANTRY_RUN_FILE_SERVERS": "https://a.example:6443",
		"GANTRY_ALLOW_REMOTE_CHARTS": "ghcr.io", "GANTRY_GITHUB_TOKEN": "ghs_workflowtoken"}
	units, err := config.LoadUnits(config.Given{Command: "diff", CommandOrigin: "the command line", Flags: map[string]string{}, Env: env}, file, false)
	if err != nil {
		t.Fatal(err)
	}
	cfg := units[0].Config
	if cfg.RemoteChart == nil || cfg.GitHubToken == "" {
		t.Fatalf("remote chart %+v, token given %v", cfg.RemoteChart, cfg.GitHubToken != "")
	}
	rec := &ghcrRecorder{}
	saved := remote.DefaultTransport
	remote.DefaultTransport = rec
	defer func() { remote.DefaultTransport = saved }()
	chartClient(cfg).FetchChart(context.Background(), cfg.RemoteChart.Request(false), t.TempDir())
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, a := range rec.auth {
		b, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic "))
		if strings.Contains(string(b), "ghs_workflowtoken") {
			t.Errorf("the workflow's GitHub token was sent for a run file's chart on ghcr.io (registry hosts %v)", cfg.Registry.Hosts)
			break
		}
	}
}
