package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An allowed host with neither a dot nor a port is a name
// go-containerregistry reads as a Docker Hub account: oci://charts/shop
// would be fetched from index.docker.io/charts/shop. A chart whose
// reference does not resolve to the host allow-remote-charts names is
// refused.
func TestAttackChartHostAsTheRegistryResolvesIt(t *testing.T) {
	t.Parallel()
	for _, allowed := range []string{"charts", "oci://charts/"} {
		c, err := Load(Given{Command: "build", CommandOrigin: "the command line", Env: map[string]string{}, Flags: map[string]string{
			"chart": "oci://charts/shop", "allow-remote-charts": allowed}})
		if err == nil {
			t.Errorf("allow-remote-charts %s: oci://charts/shop accepted, which is fetched from Docker Hub (%+v)", allowed, c.RemoteChart)
		}
	}
}

// The chart cache is refused inside the workspace the run files are read
// from, not only inside GITHUB_WORKSPACE or the working folder's
// repository: a pull request writes the workspace.
func TestAttackChartCacheInsideTheWorkspaceInput(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(ws, "charts-cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Load(Given{Command: "build", CommandOrigin: "the command line", Env: map[string]string{"GANTRY_WORKSPACE": ws}, Flags: map[string]string{
		"chart": "oci://registry.example.com/charts/shop", "allow-remote-charts": "registry.example.com", "chart-cache": cache}})
	if err == nil || !strings.Contains(err.Error(), "chart-cache") {
		t.Errorf("a chart-cache inside the workspace %s: %v", ws, err)
	}
}
