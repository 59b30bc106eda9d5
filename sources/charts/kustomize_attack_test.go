package charts

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kustomization.yaml's helmCharts[].nameTemplate is executed as a Go
// template with sprig's full function map, env and expandenv included
// (Helm's engine removes them), and getHostByName, which asks DNS: a pull
// request's kustomization reads the process's environment (the job's
// tokens) into the release name, which every object and every error then
// shows, and can send it out as a DNS name.
func TestAttackKustomizeNameTemplateReadsEnv(t *testing.T) {
	t.Setenv("GANTRY_ATK_TOKEN", "tok-canary-2718")
	ws := t.TempDir()
	chart := filepath.Join(ws, "charts", "app")
	os.MkdirAll(filepath.Join(chart, "templates"), 0o755)
	os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: app\nversion: 0.1.0\n"), 0o644)
	os.WriteFile(filepath.Join(chart, "values.yaml"), []byte("a: 1\n"), 0o644)
	os.WriteFile(filepath.Join(chart, "templates", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"), 0o644)
	read := func(p string) ([]byte, error) { return os.ReadFile(p) }
	for _, tmpl := range []string{
		`{{ env "GANTRY_ATK_TOKEN" }}`,
		`{{ expandenv "x$GANTRY_ATK_TOKEN" }}`,
		`{{ env "GANTRY_ATK_TOKEN" | upper }}`,
	} {
		file := filepath.Join(ws, "kustomization.yaml")
		content := []byte("helmCharts:\n- name: app\n  nameTemplate: '" + tmpl + "'\n")
		_, files, _, err := Kustomization(context.Background(), file, content, read, KustomizeOptions{Root: ws})
		var out strings.Builder
		for _, b := range files {
			out.Write(b)
		}
		t.Logf("%s: error %v; rendered %s", tmpl, err, out.String())
		if err != nil && strings.Contains(strings.ToLower(err.Error()), "tok-canary") || strings.Contains(strings.ToLower(out.String()), "tok-canary") {
			t.Errorf("%s: the process's environment reached the output", tmpl)
		}
	}
	// DNS: a lookup of a name the template makes.
	if _, err := net.LookupHost("localhost"); err == nil {
		file := filepath.Join(ws, "kustomization.yaml")
		content := []byte("helmCharts:\n- name: app\n  nameTemplate: 'x{{ getHostByName \"localhost\" | replace \".\" \"-\" }}'\n")
		_, files, _, err := Kustomization(context.Background(), file, content, read, KustomizeOptions{Root: ws})
		var out strings.Builder
		for _, b := range files {
			out.Write(b)
		}
		t.Logf("getHostByName: error %v; rendered %s", err, out.String())
		if strings.Contains(out.String(), "127-0-0-1") || err != nil && strings.Contains(err.Error(), "127") {
			t.Errorf("nameTemplate asked DNS")
		}
	}
}

// A chart a kustomization's helmCharts names may not read the run's
// credential files (KustomizeOptions.Deny): a hard link in the chart to
// the kubeconfig fails the chart, as for a chart given as the build's
// source.
func TestAttackKustomizeChartReadsCredentialFile(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	cred := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(cred, []byte("token: kube-cred-canary\n"), 0o600)
	chart := filepath.Join(ws, "charts", "app")
	os.MkdirAll(filepath.Join(chart, "templates"), 0o755)
	os.MkdirAll(filepath.Join(chart, "files"), 0o755)
	os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: app\nversion: 0.1.0\n"), 0o644)
	os.WriteFile(filepath.Join(chart, "values.yaml"), []byte("a: 1\n"), 0o644)
	os.WriteFile(filepath.Join(chart, "templates", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: {{ .Files.Get \"files/kc\" | quote }}\n"), 0o644)
	if err := os.Link(cred, filepath.Join(chart, "files", "kc")); err != nil {
		t.Skip("no hard links here:", err)
	}
	read := func(p string) ([]byte, error) { return os.ReadFile(p) }
	_, files, _, err := Kustomization(context.Background(), filepath.Join(ws, "kustomization.yaml"), []byte("helmCharts:\n- name: app\n  releaseName: web\n"), read, KustomizeOptions{Root: ws, Deny: []string{cred}})
	var out strings.Builder
	for _, b := range files {
		out.Write(b)
	}
	t.Logf("error %v; rendered %s", err, out.String())
	if strings.Contains(out.String(), "kube-cred-canary") || err == nil || !strings.Contains(err.Error(), "holds the run's credentials") {
		t.Errorf("a helmCharts chart read the run's kubeconfig through a hard link")
	}
}
