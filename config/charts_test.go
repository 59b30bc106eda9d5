package config

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// countingServer stands where a chart would be fetched from and counts
// what it is asked.
func countingServer(t *testing.T) (host string, requests *atomic.Int64) {
	t.Helper()
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), requests
}

// A remote chart is refused when the configuration is read unless the
// workflow allows its host, naming the input and the host, with no
// request sent.
func TestRemoteChartRefusedUnlessAllowed(t *testing.T) {
	host, requests := countingServer(t)
	for _, tc := range []struct {
		flags map[string]string
		input string
	}{
		{map[string]string{"chart": "oci://" + host + "/charts/shop"}, "chart"},
		{map[string]string{"chart": "oci://" + host + "/charts/shop", "allow-remote-charts": "ghcr.io\noci://" + host + "/other/"}, "chart"},
		{map[string]string{"chart": "shop", "chart-repository": "http://" + host + "/stable"}, "chart-repository"},
		{map[string]string{"chart": "shop", "chart-repository": "http://" + host + "/stable", "allow-remote-charts": "http://" + host + "/stab"}, "chart-repository"},
	} {
		_, err := Load(Given{Command: "build", CommandOrigin: "the command line", Flags: tc.flags, Env: map[string]string{}})
		if err == nil || !strings.Contains(err.Error(), tc.input+" (from --"+tc.input+")") || !strings.Contains(err.Error(), "the host "+host) {
			t.Errorf("%v: %v", tc.flags, err)
		}
	}
	// Through a run file, the same.
	file := writeRunFile(t, "units:\n- name: shop\n  chart: oci://"+host+"/charts/shop\n  chart-version: ^1.2\n")
	_, err := LoadUnits(given(file, nil, map[string]string{"GANTRY_ALLOW_REMOTE_CHARTS": "ghcr.io"}), file, false)
	if err == nil || !strings.Contains(err.Error(), "chart (from "+file) || !strings.Contains(err.Error(), "the host "+host) {
		t.Errorf("a run file's chart from a host not allowed: %v", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent while reading the configuration", n)
	}
}

func TestRemoteChartAllowed(t *testing.T) {
	c, err := Load(Given{Command: "build", CommandOrigin: "the command line", Env: map[string]string{}, Flags: map[string]string{
		"chart": "oci://registry.example.com/charts/shop", "chart-version": "^1.2", "allow-remote-charts": "oci://registry.example.com/charts/", "chart-cache": t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if c.RemoteChart == nil || c.RemoteChart.Ref != "oci://registry.example.com/charts/shop" || c.RemoteChart.Version != "^1.2" || c.RemoteChart.Cache == "" {
		t.Errorf("remote chart: %+v", c.RemoteChart)
	}
	// The workflow's chart is one of the registries its credentials go to.
	if !slices.Contains(c.Registry.Hosts, "registry.example.com") {
		t.Errorf("registry hosts: %v", c.Registry.Hosts)
	}
	c, err = Load(Given{Command: "build", CommandOrigin: "the command line", Env: map[string]string{}, Flags: map[string]string{
		"chart": "cert-manager", "chart-repository": "https://charts.jetstack.io", "allow-remote-charts": "charts.jetstack.io"}})
	if err != nil || c.RemoteChart == nil || c.RemoteChart.Repository != "https://charts.jetstack.io" {
		t.Errorf("repository chart: %+v %v", c, err)
	}
	for flags, want := range map[*map[string]string]string{
		{"chart": "oci://registry.example.com/charts/shop:1.2.0", "allow-remote-charts": "registry.example.com"}:                   "chart-version",
		{"chart": "oci://registry.example.com/charts/shop", "chart-version": "one", "allow-remote-charts": "registry.example.com"}: "chart-version (from",
		{"chart": "shop", "chart-repository": "http://charts.example.com", "allow-remote-charts": "charts.example.com"}:            "https://",
		{"chart": "../shop", "chart-repository": "https://charts.example.com", "allow-remote-charts": "charts.example.com"}:        "chart's name",
		{"path": ".", "chart-version": "1.0.0"}:                                                    "only with a chart",
		{"chart": "oci://registry.example.com/charts/shop", "allow-remote-charts": "https://x/?y"}: "allow-remote-charts",
	} {
		_, err := Load(Given{Command: "build", CommandOrigin: "the command line", Env: map[string]string{}, Flags: *flags})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q", *flags, err, want)
		}
	}
}

// A run file decides the chart within what the workflow allows, never
// what is allowed nor the cache charts are trusted from; and a run
// file's chart gets the registry credentials only where registry-hosts
// says.
func TestRunFileChartInputs(t *testing.T) {
	for _, setting := range []string{"allow-remote-charts: [ghcr.io]", "chart-cache: cache"} {
		file := writeRunFile(t, "units:\n- name: shop\n  chart: oci://ghcr.io/acme/shop\n  "+setting+"\n")
		_, err := LoadUnits(given(file, nil, nil), file, false)
		name, _, _ := strings.Cut(setting, ":")
		if err == nil || !strings.Contains(err.Error(), name+" decides") || !strings.Contains(err.Error(), "workflow's to decide") {
			t.Errorf("%s in a run file: %v", name, err)
		}
	}
	file := writeRunFile(t, "defaults:\n  chart-repository: https://charts.jetstack.io\nunits:\n- name: certs\n  inventory: certs\n  chart: cert-manager\n- name: shop\n  inventory: shop\n  chart: oci://ghcr.io/acme/shop\n  chart-repository: \"\"\n")
	units, err := LoadUnits(given(file, nil, map[string]string{"GANTRY_ALLOW_REMOTE_CHARTS": "ghcr.io\nhttps://charts.jetstack.io", "GANTRY_REGISTRY_USERNAME": "u", "GANTRY_REGISTRY_PASSWORD": "p"}), file, false)
	if err != nil {
		t.Fatal(err)
	}
	if rc := units[0].Config.RemoteChart; rc == nil || rc.Ref != "cert-manager" || rc.Repository != "https://charts.jetstack.io" {
		t.Errorf("by name: %+v", rc)
	}
	if rc := units[1].Config.RemoteChart; rc == nil || rc.Ref != "oci://ghcr.io/acme/shop" {
		t.Errorf("oci: %+v", rc)
	}
	if slices.Contains(units[1].Config.Registry.Hosts, "ghcr.io") {
		t.Errorf("a run file's chart made its registry one the credentials go to: %v", units[1].Config.Registry.Hosts)
	}
	// The workflow's chart-repository makes a run file's chart a name.
	file = writeRunFile(t, "units:\n- name: certs\n  inventory: certs\n  chart: cert-manager\n")
	units, err = LoadUnits(given(file, nil, map[string]string{"GANTRY_ALLOW_REMOTE_CHARTS": "charts.jetstack.io", "GANTRY_CHART_REPOSITORY": "https://charts.jetstack.io"}), file, false)
	if err != nil || units[0].Config.RemoteChart == nil || units[0].Config.RemoteChart.Ref != "cert-manager" {
		t.Errorf("a chart's name in the workflow's repository: %v", err)
	}
}

// A chart cache in the checkout is refused: a pull request writes there.
func TestChartCacheOutsideTheCheckout(t *testing.T) {
	ws := t.TempDir()
	cache := filepath.Join(ws, ".gantry-charts")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Load(Given{Command: "build", Env: map[string]string{"GITHUB_WORKSPACE": ws,
		"GANTRY_CHART": "oci://registry.example.com/charts/shop", "GANTRY_ALLOW_REMOTE_CHARTS": "oci://registry.example.com/charts/", "GANTRY_CHART_CACHE": cache}})
	if err == nil || !strings.Contains(err.Error(), "chart-cache") || !strings.Contains(err.Error(), "lies in the checkout") {
		t.Fatalf("a cache in the checkout: %v", err)
	}
	outside := t.TempDir()
	_, err = Load(Given{Command: "build", Env: map[string]string{"GITHUB_WORKSPACE": ws,
		"GANTRY_CHART": "oci://registry.example.com/charts/shop", "GANTRY_ALLOW_REMOTE_CHARTS": "oci://registry.example.com/charts/", "GANTRY_CHART_CACHE": outside}})
	if err != nil && strings.Contains(err.Error(), "chart-cache") {
		t.Fatalf("a cache outside the checkout: %v", err)
	}
}
