package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/e2e/registry"
	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/result"
)

// A chart as a team publishes it: packaged and pushed by the helm CLI to
// a registry that asks for credentials (Debian's docker-registry), one
// version signed by the cosign CLI. gantry resolves a semver range
// against the registry's tags, checks the signature cosign made, refuses
// the unsigned version while verifying (nothing written), upgrades to it
// when not, and with the registry gone takes the pinned version from its
// cache.
func TestChartPushedByHelmToARegistry(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	root, _ := chartWorkspace(t, ns)
	reg, err := registry.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	helm, err := cluster.Tool("helm")
	if err != nil {
		t.Fatal(err)
	}
	cosignBin, err := cluster.Tool("cosign")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	tool := func(bin string, extraEnv []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(cluster.ToolEnv(home), extraEnv...)
		cmd.Dir = home
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), args[0], err, out)
		}
		return string(out)
	}
	digests := map[string]string{}
	for _, v := range []string{"v1", "v2"} {
		tool(helm, nil, "package", filepath.Join(root, "platform-"+v), "--destination", home)
		version := map[string]string{"v1": "1.0.0", "v2": "2.0.0"}[v]
		out := tool(helm, nil, "push", filepath.Join(home, "platform-"+version+".tgz"), "oci://"+reg.Host+"/charts",
			"--plain-http", "--username="+reg.Username, "--password="+reg.Password)
		m := regexp.MustCompile(`Digest: (sha256:[0-9a-f]{64})`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("helm push printed no digest:\n%s", out)
		}
		digests[version] = m[1]
	}
	priv, pub := cosignKeys(t, "pw")
	tool(cosignBin, []string{"COSIGN_PASSWORD=pw"}, "sign", "--key="+priv, "--tlog-upload=false", "--allow-http-registry=true", "--yes",
		"--registry-username="+reg.Username, "--registry-password="+reg.Password, reg.Host+"/charts/platform@"+digests["1.0.0"])

	cache := t.TempDir()
	chart := "oci://" + reg.Host + "/charts/platform"
	creds := []string{"--registry-username=" + reg.Username, "--registry-password=" + reg.Password}
	args := func(version, values string, extra ...string) []string {
		return append([]string{"apply", "--chart=" + chart, "--chart-version=" + version, "--allow-remote-charts=" + reg.Host,
			"--chart-cache=" + cache, "--values=" + filepath.Join(root, "values-"+values+".yaml"), "--release-name=edge",
			"--target-namespace=" + ns, "--chart-hooks=leave-out", "--inventory=platform", "--inventory-namespace=" + ns, "--timeout=90s"}, extra...)
	}
	ref := func(kind, name string) string { return kind + "/" + ns + "/" + name }
	svc, features := ref("Service", "edge"), ref("ConfigMap", "edge-features")
	verify := []string{"--verify=cosign", "--cosign-public-key=" + pub}

	// ^1.0.0 is 1.0.0 of the two tags; its signature is cosign's.
	r := gantryAuth(t, append(creds, verify...), args("^1.0.0", "v1")...)
	if r.code != entrypoint.ExitOK {
		t.Fatalf("apply ^1.0.0, verified: exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Created] != 4 || len(r.res.Objects) != 4 {
		t.Fatalf("apply ^1.0.0: %v, want the CRD, Deployment, ConfigMap and Service created", chartActions(r))
	}
	// The chart is named by its reference, not by the temporary folder
	// it was unpacked into, in the report and on the console.
	if len(r.res.Charts) != 1 || r.res.Charts[0].Name != "platform 1.0.0" || r.res.Charts[0].Folder != chart+":1.0.0" {
		t.Errorf("the report's charts: %+v, want platform 1.0.0 from %s:1.0.0", r.res.Charts, chart)
	}
	if l := r.res.Charts[0].LeftOut; len(l) != 2 || !strings.HasPrefix(l[0], chart+":1.0.0/templates/") {
		t.Errorf("the hooks left out: %q, want them named in %s:1.0.0", l, chart)
	}
	if strings.Contains(r.stderr, os.TempDir()) {
		t.Errorf("the console names a temporary folder:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "chart "+chart+" version 1.0.0 ("+digests["1.0.0"]) {
		t.Errorf("the console does not name the chart's version and the digest helm push gave (%s):\n%s", digests["1.0.0"], r.stderr)
	}
	if strings.Contains(r.stderr+r.stdout, reg.Password) {
		t.Error("the registry's password was printed")
	}

	// 2.0.0 is not signed: while verifying it is refused, and nothing of
	// it is written.
	r = gantryAuth(t, append(creds, verify...), args(">=1.0.0", "v2")...)
	if r.code == entrypoint.ExitOK || !strings.Contains(r.stderr, "2.0.0") || !strings.Contains(r.stderr, "not signed") {
		t.Fatalf("apply of the unsigned 2.0.0, verifying: exit %d, want a refusal naming it\n%s", r.code, r.stderr)
	}
	if !exists(t, chartServices, ns, "edge") || exists(t, chartConfigMaps, ns, "edge-features") {
		t.Errorf("the refused chart changed the cluster")
	}

	// Without credentials the registry refuses the chart, named.
	r = gantry(t, args("2.0.0", "v2")...)
	if r.code == entrypoint.ExitOK || !strings.Contains(r.stderr, chart) {
		t.Errorf("apply without credentials: exit %d, want a failure naming the chart\n%s", r.code, r.stderr)
	}

	// Not verifying, >=1.0.0 is 2.0.0: the Service it dropped is pruned.
	r = gantryAuth(t, creds, args(">=1.0.0", "v2")...)
	if r.code != entrypoint.ExitOK {
		t.Fatalf("apply >=1.0.0: exit %d\n%s", r.code, r.stderr)
	}
	if a := chartActions(r); a[svc] != result.Deleted || a[features] != result.Created || r.res.Charts[0].Name != "platform 2.0.0" {
		t.Errorf("apply >=1.0.0: %v, chart %+v; want 2.0.0, the Service pruned and edge-features created", a, r.res.Charts)
	}

	// The registry gone, the pinned version comes from the cache: the
	// same objects, nothing written.
	reg.Stop()
	r = gantryAuth(t, creds, args("2.0.0", "v2")...)
	if r.code != entrypoint.ExitOK {
		t.Fatalf("apply 2.0.0 from the cache: exit %d\n%s", r.code, r.stderr)
	}
	if c := counts(t, r); c[result.Unchanged] != len(r.res.Objects) || !strings.Contains(r.stderr, "taken from the chart cache") {
		t.Errorf("apply 2.0.0 from the cache: %v\n%s", chartActions(r), r.stderr)
	}
}
