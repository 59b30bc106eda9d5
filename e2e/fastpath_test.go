package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/entrypoint"
)

// A re-apply that changes nothing sends no dry-run: the live objects say
// it (validate: changed, the default). validate: all dry-runs every
// object, and a change is dry-run and written as before.
func TestUnchangedObjectsNeedNoDryRun(t *testing.T) {
	t.Parallel()
	env.Require(t)
	proxy := newAPIProxy(t, env.Cluster)
	ns := env.Namespace(t)
	dir := t.TempDir()
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%02d, namespace: %s}\ndata: {n: \"%d\"}\n", i, ns, i)
	}
	fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %s}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.k8s.io/pause:3.10, ports: [{containerPort: 80}]}]
`, ns)
	writeFile(t, filepath.Join(dir, "set.yaml"), b.String())
	run := func(extra ...string) gantryRun {
		t.Helper()
		proxy.setHook(func(string, int, *http.Request) proxyAction { return proxyAction{} })
		r := gantryWith(t, proxy.kubeconfig, append([]string{"apply", dir, "--inventory=fast", "--inventory-namespace=" + ns, "--timeout=90s"}, extra...)...)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		return r
	}
	run()
	if r := run(); proxy.count("dry-run") != 0 || r.res.Counts()["unchanged"] != 51 || !strings.Contains(r.stderr, "51 of 51 objects already hold every value gantry applies") {
		t.Errorf("no-op: %d dry-runs, want 0; counts %v\n%s", proxy.count("dry-run"), r.res.Counts(), r.stderr)
	}
	// Nor is the inventory written, or anything else but the Lease.
	if n, apply, del := proxy.count("inventory-write"), proxy.count("apply"), proxy.count("delete"); n+apply+del != 0 {
		t.Errorf("no-op: %d inventory writes, %d applies, %d deletes; want none", n, apply, del)
	}
	if r := run("--validate=all"); proxy.count("dry-run") != 51 || r.res.Counts()["unchanged"] != 51 {
		t.Errorf("validate: all: %d dry-runs, want 51; counts %v", proxy.count("dry-run"), r.res.Counts())
	}
	replaceInFile(t, filepath.Join(dir, "set.yaml"), `data: {n: "7"}`, `data: {n: "seven"}`)
	if r := run(); proxy.count("dry-run") != 1 || r.res.Counts()["configured"] != 1 {
		t.Errorf("one change: %d dry-runs, want 1; counts %v", proxy.count("dry-run"), r.res.Counts())
	}
}

// What kustomize built is named by a second build, with origins, that runs
// beside the requests once an object needs a dry-run: a change and a
// failure name their files; a no-op does not pay for it.
func TestOverlayRunsNameTheFilesOfWhatChanges(t *testing.T) {
	t.Parallel()
	env.Require(t)
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "kustomization.yaml"), "namespace: "+ns+"\nnamePrefix: p-\nresources: [a.yaml, b.yaml]\nlabels:\n- pairs: {app: shop}\n")
	writeFile(t, filepath.Join(dir, "a.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {n: \"1\"}\n")
	writeFile(t, filepath.Join(dir, "b.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {n: \"1\"}\n")
	run := func(extra ...string) gantryRun {
		t.Helper()
		return gantry(t, append([]string{"apply", dir, "--inventory=named", "--inventory-namespace=" + ns, "--timeout=90s"}, extra...)...)
	}
	sources := func(r gantryRun) map[string]string {
		m := map[string]string{}
		for _, o := range r.res.Objects {
			m[o.Name] = o.Source
		}
		return m
	}
	if r := run(); r.code != 0 || !strings.HasSuffix(sources(r)["p-a"], "a.yaml") || !strings.HasSuffix(sources(r)["p-b"], "b.yaml") {
		t.Fatalf("first apply: exit %d, sources %v\n%s", r.code, sources(r), r.stderr)
	}
	if r := run(); r.code != 0 || sources(r)["p-a"] != "" || sources(r)["p-b"] != "" {
		t.Errorf("no-op: exit %d, sources %v; a run that changes nothing finds no files", r.code, sources(r))
	}
	if r := run("--validate=all"); r.code != 0 || sources(r)["p-a"] != "" || sources(r)["p-b"] != "" {
		t.Errorf("no-op, validate: all: exit %d, sources %v; dry-running unchanged objects finds no files", r.code, sources(r))
	}
	replaceInFile(t, filepath.Join(dir, "b.yaml"), `n: "1"`, `n: "2"`)
	if r := run(); r.code != 0 || r.res.Counts()["configured"] != 1 || !strings.HasSuffix(sources(r)["p-b"], "b.yaml") {
		t.Errorf("one change: exit %d, counts %v, sources %v", r.code, r.res.Counts(), sources(r))
	}
	replaceInFile(t, filepath.Join(dir, "b.yaml"), `data: {n: "2"}`, `data: {n: [2]}`)
	r := run()
	if r.code != entrypoint.ExitFailed || !strings.HasSuffix(sources(r)["p-b"], "b.yaml") || !strings.Contains(r.stderr, "b.yaml") {
		t.Errorf("a rejected object: exit %d, sources %v, its file not named\n%s", r.code, sources(r), r.stderr)
	}
}
