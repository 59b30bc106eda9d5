package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
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
	if r := run(); proxy.count("dry-run") != 0 || r.res.Counts()["unchanged"] != 51 || strings.Contains(r.stderr, "already hold every value") {
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

// A kind spread over many namespaces, one object in each, is read with
// one LIST in all namespaces of the objects carrying the inventory's
// labels, not a GET each, in validate and in the wait; an object that has
// lost its labels is not taken for absent: it is read with a GET and
// given them back.
func TestSpreadKindIsReadByItsInventoryLabels(t *testing.T) {
	t.Parallel()
	env.Require(t)
	proxy := newAPIProxy(t, env.Cluster)
	ns := env.Namespace(t)
	dir := t.TempDir()
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: %[1]s-t%[2]d}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: tenant, namespace: %[1]s-t%[2]d}\ndata: {n: \"%[2]d\"}\n", ns, i)
	}
	writeFile(t, filepath.Join(dir, "tenants.yaml"), b.String())

	var seen func() []seenRequest
	run := func(extra ...string) gantryRun {
		t.Helper()
		seen = proxy.record()
		r := gantryWith(t, proxy.kubeconfig, append([]string{"apply", dir, "--inventory=spread", "--inventory-namespace=" + ns, "--timeout=90s"}, extra...)...)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		return r
	}
	// reads counts the LISTs of ConfigMaps in all namespaces selected by
	// the inventory's labels, and the GETs of each tenant's ConfigMap.
	reads := func() (lists int, gets []string) {
		for _, r := range seen() {
			switch {
			case r.method == http.MethodGet && r.path == "/api/v1/configmaps" && strings.Contains(r.query, "gantry.dev%2Finventory-name%3Dspread"):
				lists++
			case r.method == http.MethodGet && strings.HasSuffix(r.path, "/configmaps/tenant"):
				gets = append(gets, r.path)
			}
		}
		return lists, gets
	}
	defer func() {
		if r := gantry(t, "delete", "--inventory=spread", "--inventory-namespace="+ns); r.code != 0 {
			t.Errorf("delete: exit %d\n%s", r.code, r.stderr)
		}
	}()

	// The wait reads what it waits for the same way.
	run()
	if lists, gets := reads(); lists < 2 || len(gets) != 0 {
		t.Errorf("first apply with wait: %d labelled LISTs of ConfigMaps, want 2 or more; GETs of %v, want none", lists, gets)
	}
	r := run("--wait=false")
	if c := r.res.Counts(); c["unchanged"] != 20 {
		t.Errorf("no-op: counts %v, want 20 unchanged", c)
	}
	if lists, gets := reads(); lists != 1 || len(gets) != 0 {
		t.Errorf("no-op: %d labelled LISTs of ConfigMaps, want 1; GETs of %v, want none", lists, gets)
	}
	// A no-op with the wait reads nothing more: what it found unchanged
	// and ready when it read it, it does not poll again.
	r = run()
	if lists, gets := reads(); lists != 1 || len(gets) != 0 {
		t.Errorf("no-op with wait: %d labelled LISTs of ConfigMaps, want 1; GETs of %v, want none", lists, gets)
	}
	for _, o := range r.res.Objects {
		if o.Health == nil || o.Health.Status != "Current" {
			t.Errorf("no-op with wait: %s health %+v, want Current", o.Ref(), o.Health)
		}
	}

	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(ns + "-t3")
	cm, err := cms.Get(ctx, "tenant", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(cm.Labels, inventory.NameLabel)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = run("--wait=false")
	if c := r.res.Counts(); c["unchanged"] != 19 || c["configured"] != 1 {
		t.Errorf("after a label was removed: counts %v, want 19 unchanged and 1 configured", c)
	}
	// It is read twice: to plan, and again once the run holds the
	// Lease, to confirm that what it planned from is unchanged.
	if _, gets := reads(); len(gets) != 2 || gets[0] != gets[1] || !strings.Contains(gets[0], "/namespaces/"+ns+"-t3/") {
		t.Errorf("after a label was removed: GETs of %v, want the unlabelled one's only, to plan and to confirm", gets)
	}
	if cm, err := cms.Get(ctx, "tenant", metav1.GetOptions{}); err != nil || cm.Labels[inventory.NameLabel] != "spread" {
		t.Errorf("the label is not back: %v, %v", cm.Labels, err)
	}
}
