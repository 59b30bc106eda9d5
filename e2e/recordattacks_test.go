package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// The attacks on the cluster's record are made as the actor docs/
// reliability.md calls the namespace writer: a service account that may
// read and write ConfigMaps and Secrets in the inventory's namespace and
// nothing else, through impersonation. The workflow's runs hold the
// record-key; the attacker does not.

// namespaceWriter is a client that may only read and write ConfigMaps and
// Secrets in ns.
func namespaceWriter(t *testing.T, ns string) kubernetes.Interface {
	t.Helper()
	bindServiceAccount(t, ns, "record-writer", []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
	}})
	cfg := rest.CopyConfig(env.Cluster.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":record-writer"}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The account is as narrow as it says.
	if _, err := c.RbacV1().ClusterRoleBindings().List(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the namespace writer may list ClusterRoleBindings: %v", err)
	}
	return c
}

// clusterAdminBinding is the object every forgery tries to make gantry
// write: cluster-admin for the attacker's own service account.
func clusterAdminBinding(name, ns string) map[string]any {
	return map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": name},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "record-writer", "namespace": ns}},
	}
}

// editRevisions rewrites the revisions the inventory's ConfigMap lists,
// and its entries, as the namespace writer.
func editRevisions(t *testing.T, c kubernetes.Interface, ns, inv string, edit func(revs []map[string]any, entries []map[string]any) []map[string]any) {
	t.Helper()
	ctx := context.Background()
	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName(inv), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var revs, entries []map[string]any
	if err := json.Unmarshal([]byte(cm.Data["revisions"]), &revs); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(cm.Data["entries"]), &entries); err != nil {
		t.Fatal(err)
	}
	entries = edit(revs, entries)
	rb, _ := json.Marshal(revs)
	eb, _ := json.Marshal(entries)
	cm.Data["revisions"], cm.Data["entries"] = string(rb), string(eb)
	if _, err := c.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// forgePayload adds obj to the stored objects of revision n and writes
// the new payload's digest into the inventory, with an entry for obj:
// everything a digest check looks at agrees.
func forgePayload(t *testing.T, c kubernetes.Interface, ns, inv string, n int, obj map[string]any) {
	t.Helper()
	ctx := context.Background()
	sec, err := c.CoreV1().Secrets(ns).Get(ctx, inventory.RevisionName(inv, n), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(gunzip(t, sec.Data["objects.json.gz"])), &p); err != nil {
		t.Fatal(err)
	}
	p["objects"] = append(p["objects"].([]any), obj)
	raw, _ := json.Marshal(p)
	sec.Data["objects.json.gz"] = gzipJSON(t, p)
	if _, err := c.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// gzipJSON marshals p again: the same bytes as raw.
	sum := sha256.Sum256(raw)
	editRevisions(t, c, ns, inv, func(revs, entries []map[string]any) []map[string]any {
		for _, rv := range revs {
			if rv["number"].(float64) == float64(n) {
				rv["payloads"] = map[string]any{"": "sha256:" + hex.EncodeToString(sum[:])}
			}
		}
		name := obj["metadata"].(map[string]any)["name"].(string)
		return append(entries, map[string]any{"id": "_" + name + "_rbac.authorization.k8s.io_ClusterRoleBinding", "v": "v1"})
	})
}

func bindingAbsent(t *testing.T, name, when string) {
	t.Helper()
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("%s: the forged ClusterRoleBinding %s was written with the workflow's credentials (%v)", when, name, err)
	}
}

// A namespace writer inflates a revision's payload, adds a binding to
// cluster-admin, writes its digest into the inventory and lists the
// binding. drift --correct (from the newest revision), rollback (to the
// older one) and atomic's undo each refuse to write from the forged
// revision, naming it; the binding never exists.
func TestRecordForgedPayloadIsNotWritten(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	args := []string{"--inventory=shop", "--inventory-namespace=" + ns, "--timeout=60s"}
	for _, v := range []string{"one", "two"} {
		writeFile(t, filepath.Join(dir, "cm.yaml"), configMapYAML(ns, "settings", v))
		if r := gantry(t, append([]string{"apply", "--path=" + dir}, args...)...); r.code != 0 {
			t.Fatalf("apply %s: exit %d\n%s", v, r.code, r.stderr)
		}
	}
	attacker := namespaceWriter(t, ns)
	newest, older := "forged-newest-"+ns, "forged-older-"+ns
	forgePayload(t, attacker, ns, "shop", 2, clusterAdminBinding(newest, ns))
	forgePayload(t, attacker, ns, "shop", 1, clusterAdminBinding(older, ns))

	drift := gantry(t, append([]string{"drift", "--correct"}, args...)...)
	if !recordAttack(drift.code == entrypoint.ExitInvalid && strings.Contains(drift.stderr, "revision 2 of inventory "+ns+"/shop cannot be written from")) {
		t.Errorf("drift --correct from a forged revision: exit %d, want 2 naming revision 2\n%s", drift.code, drift.stderr)
	}
	if drift.res == nil || drift.res.Correction != nil {
		t.Errorf("a correction ran: %+v", drift.res)
	}
	bindingAbsent(t, newest, "drift --correct")

	for _, to := range []string{"--to=1", "--to=2"} {
		rb := gantry(t, append([]string{"rollback", to}, args...)...)
		if !recordAttack(rb.code == entrypoint.ExitInvalid && strings.Contains(rb.stderr, "MAC does not match")) {
			t.Errorf("rollback %s to a forged revision: exit %d, want 2 saying its MAC does not match\n%s", to, rb.code, rb.stderr)
		}
	}
	bindingAbsent(t, older, "rollback")

	writeFile(t, filepath.Join(dir, "cm.yaml"), configMapYAML(ns, "settings", "three")+"---\n"+unschedulableDeployment(ns))
	atomic := gantry(t, "apply", "--path="+dir, "--inventory=shop", "--inventory-namespace="+ns, "--timeout=8s", "--atomic", "--max-prune=100%")
	if !recordAttack(atomic.code == entrypoint.ExitFailed && atomic.res != nil && atomic.res.Reason == result.ReasonHealthCheckFailed &&
		strings.Contains(atomic.res.Message, "not rolled back") && strings.Contains(atomic.res.Message, "cannot be written from")) {
		t.Errorf("atomic over a forged record: exit %d, want 1, HealthCheckFailed, not rolled back naming the forged revision\n%+v\n%s", atomic.code, atomic.res, atomic.stderr)
	}
	bindingAbsent(t, older, "atomic's undo")
	bindingAbsent(t, newest, "atomic's undo")
}

// With ConfigMap update alone, the newest revision's payloads are dropped
// and an artifact of the attacker's registry named instead, with a folder
// outside it. Neither the correction nor drift's report pulls it: a
// registry the record names is reached only when the revision is
// authentic.
func TestRecordForgedArtifactIsNotPulled(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.yaml"), configMapYAML(ns, "settings", "one"))
	args := []string{"--inventory=shop", "--inventory-namespace=" + ns, "--timeout=60s"}
	if r := gantry(t, append([]string{"apply", "--path=" + dir}, args...)...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	attacker := namespaceWriter(t, ns)
	editRevisions(t, attacker, ns, "shop", func(revs, entries []map[string]any) []map[string]any {
		delete(revs[0], "payloads")
		revs[0]["artifact"] = "oci://127.0.0.1:1/evil/app@sha256:" + strings.Repeat("a", 64)
		revs[0]["artifactPath"] = "../"
		return entries
	})
	drift := gantry(t, append([]string{"drift", "--correct", "--registry-hosts=127.0.0.1:1"}, args...)...)
	if !recordAttack(drift.code == entrypoint.ExitInvalid && strings.Contains(drift.stderr, "cannot be written from")) {
		t.Errorf("drift --correct from a forged artifact: exit %d, want 2\n%s", drift.code, drift.stderr)
	}
	report := gantry(t, append([]string{"drift", "--registry-hosts=127.0.0.1:1"}, args...)...)
	if !recordAttack(report.code == entrypoint.ExitInvalid && !strings.Contains(report.stderr, "pulling ")) {
		t.Errorf("drift's report from a forged artifact: exit %d, want 2 with nothing pulled\n%s", report.code, report.stderr)
	}
	rb := gantry(t, append([]string{"rollback", "--to=1", "--registry-hosts=127.0.0.1:1"}, args...)...)
	if !recordAttack(rb.code == entrypoint.ExitInvalid && !strings.Contains(rb.stderr, "pulling ")) {
		t.Errorf("rollback to a forged artifact: exit %d, want 2 with nothing pulled\n%s", rb.code, rb.stderr)
	}
}

// gantryWithout runs gantry with the workflow's variables but without
// the record-key (or with another one).
func gantryWithout(t *testing.T, key string, args ...string) gantryRun {
	t.Helper()
	environ := []string{"HOME=" + os.Getenv("HOME"), "GANTRY_KUBECONFIG=" + env.Cluster.Kubeconfig}
	if key != "" {
		environ = append(environ, "GANTRY_RECORD_KEY="+key)
	}
	var stdout, stderr bytes.Buffer
	code := entrypoint.Run(context.Background(), args, environ, &stdout, &stderr)
	t.Logf("gantry %s: exit %d\n%s", args[0], code, stderr.String())
	return gantryRun{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// Without record-key, what writes from the record is refused before
// anything runs, saying how to set it up; with another key, the record
// is not this workflow's. The record still informs history and drift.
func TestRecordWithoutTheKey(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	inv := []string{"--inventory=shop", "--inventory-namespace=" + ns, "--timeout=60s"}
	for _, v := range []string{"one", "two"} {
		writeFile(t, filepath.Join(dir, "cm.yaml"), configMapYAML(ns, "settings", v))
		if r := gantry(t, append([]string{"apply", "--path=" + dir}, inv...)...); r.code != 0 {
			t.Fatalf("apply %s: exit %d\n%s", v, r.code, r.stderr)
		}
	}
	for _, args := range [][]string{
		{"rollback"},
		{"drift", "--correct"},
		{"apply", "--path=" + dir, "--atomic"},
	} {
		r := gantryWithout(t, "", append(args, inv...)...)
		if !recordAttack(r.code == entrypoint.ExitInvalid && strings.Contains(r.stderr, "record-key") && strings.Contains(r.stderr, "openssl rand")) {
			t.Errorf("%v without record-key: exit %d, want 2 saying how to give record-key\n%s", args, r.code, r.stderr)
		}
	}
	other := gantryWithout(t, "another-workflow-key-0123456789abcdef0123", append([]string{"rollback"}, inv...)...)
	if !recordAttack(other.code == entrypoint.ExitInvalid && strings.Contains(other.stderr, "MAC does not match")) {
		t.Errorf("rollback with another workflow's key: exit %d, want 2\n%s", other.code, other.stderr)
	}
	if cm, _ := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "settings", metav1.GetOptions{}); cm == nil || cm.Data["value"] != "two" {
		t.Errorf("a refused run wrote: %v", cm)
	}
	if r := gantryWithout(t, "", append([]string{"drift"}, inv...)...); r.code != entrypoint.ExitOK {
		t.Errorf("drift's report without the key: exit %d, want 0\n%s", r.code, r.stderr)
	}
	if r := gantryWithout(t, "", "history", "--inventory=shop", "--inventory-namespace="+ns); r.code != entrypoint.ExitOK {
		t.Errorf("history without the key: exit %d\n%s", r.code, r.stderr)
	}
	// A run without the key records its revision unsigned: nothing is
	// written from the record until a run with the key records one.
	writeFile(t, filepath.Join(dir, "cm.yaml"), configMapYAML(ns, "settings", "three"))
	if r := gantryWithout(t, "", append([]string{"apply", "--path=" + dir}, inv...)...); r.code != 0 {
		t.Fatalf("apply without the key: exit %d\n%s", r.code, r.stderr)
	}
	if r := gantry(t, append([]string{"rollback", "--to=2"}, inv...)...); !recordAttack(r.code == entrypoint.ExitInvalid && strings.Contains(r.stderr, "recorded without record-key")) {
		t.Errorf("rollback past an unsigned newest revision: exit %d, want 2\n%s", r.code, r.stderr)
	}
}

// drift --correct of an artifact puts back what drifted and writes
// nothing else: the tag it compared with still names the artifact that
// was pushed, nothing is pushed, signed or tagged.
func TestCorrectionPushesNothing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	reg, creds := realRegistry(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.yaml"), configMapYAML(ns, "settings", "one"))
	ref := "oci://" + reg + "/acme/shop:1.0"
	if r := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+ref); r.code != 0 {
		t.Fatalf("push: exit %d\n%s", r.code, r.stderr)
	}
	before, err := crane.Digest(reg+"/acme/shop:1.0", crane.Insecure, crane.WithAuth(registryAuth(creds)))
	if err != nil {
		t.Fatal(err)
	}
	inv := []string{"--inventory=shop", "--inventory-namespace=" + ns, "--timeout=60s"}
	if r := gantryAuth(t, creds, append([]string{"apply", "--artifact=" + ref}, inv...)...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["value"] = "by-hand"
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	r := gantryAuth(t, creds, append([]string{"drift", "--artifact=" + ref, "--correct"}, inv...)...)
	if r.code != entrypoint.ExitChanges || r.res == nil || r.res.Correction == nil || !r.res.Correction.Succeeded() {
		t.Fatalf("drift --correct of the artifact: exit %d, want 3 with a correction\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "pushed") || r.res.Correction.Artifact != nil && len(r.res.Correction.Artifact.Tags) > 0 {
		t.Errorf("the correction pushed:\n%s", r.stderr)
	}
	for _, st := range r.res.Correction.Stages {
		if st.Name == "push" || st.Name == "pull" || st.Name == "prune" && st.Skipped == "" {
			t.Errorf("the correction ran stage %s", st.Name)
		}
	}
	after, err := crane.Digest(reg+"/acme/shop:1.0", crane.Insecure, crane.WithAuth(registryAuth(creds)))
	if err != nil || after != before {
		t.Errorf("tag 1.0 after the correction: %s (%v), was %s", after, err, before)
	}
	if cm, _ := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); cm == nil || cm.Data["value"] != "one" {
		t.Errorf("the correction did not put the value back: %v", cm)
	}
}

// A substituted secret rotated since the revision a rollback goes back
// to is masked too: the live value (the newer secret) appears in no
// output of the rollback, its .diff included. drift of a path masks a
// value set by hand at a field that holds a substituted secret.
func TestRotatedSecretsStayMasked(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	older, newer, byHand := canary("older"), canary("newer"), canary("byhand")
	dir := t.TempDir()
	set := func(mode string) {
		writeFile(t, filepath.Join(dir, "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: "+ns+"}\ndata:\n  token: ${API_TOKEN}\n  mode: "+mode+"\n")
	}
	inv := []string{"--inventory=rotated", "--inventory-namespace=" + ns, "--timeout=60s"}
	set("one")
	if r := gantry(t, append([]string{"apply", "--path=" + dir, "--substitute=API_TOKEN=" + older}, inv...)...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	set("two")
	if r := gantry(t, append([]string{"apply", "--path=" + dir, "--substitute=API_TOKEN=" + newer}, inv...)...); r.code != 0 {
		t.Fatalf("second apply: exit %d\n%s", r.code, r.stderr)
	}
	out := t.TempDir()
	outputs := func(r gantryRun) string {
		var all strings.Builder
		all.WriteString(r.stdout + r.stderr)
		for _, f := range []string{"report.json", "report.diff"} {
			b, _ := os.ReadFile(filepath.Join(out, f))
			all.Write(b)
		}
		return all.String()
	}
	back := gantry(t, append([]string{"rollback", "--to=1", "--report=" + filepath.Join(out, "report.json")}, inv...)...)
	if back.code != 0 {
		t.Fatalf("rollback: exit %d\n%s", back.code, back.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "report.diff")); !strings.Contains(string(b), "mode") {
		t.Fatalf("the rollback's .diff shows no change:\n%s", b)
	}
	for _, leak := range scanForSecrets(outputs(back), older, newer) {
		t.Errorf("rollback prints %q", leak)
	}

	// By hand, at the substituted field.
	patch := `{"data":{"token":"` + byHand + `"}}`
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Patch(ctx, "settings", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	set("one")
	drift := gantry(t, append([]string{"drift", "--path=" + dir, "--substitute=API_TOKEN=" + older, "--report=" + filepath.Join(out, "report.json")}, inv...)...)
	if drift.code != entrypoint.ExitChanges {
		t.Fatalf("drift of the path: exit %d, want 3\n%s", drift.code, drift.stderr)
	}
	for _, leak := range scanForSecrets(outputs(drift), older, newer, byHand) {
		t.Errorf("drift of a path prints %q", leak)
	}
}

// A run that adopts a Namespace made by hand (with a ConfigMap in it) is
// killed right after its first write lands: everything after it is lost,
// as when the process dies. The record written before that first write
// already lists the Namespace as adopted, so the next apply, which finds
// it labelled as gantry's, keeps the mark, and a rollback to the set
// before releases the Namespace instead of deleting it and what it
// holds.
func TestAdoptionSurvivesAKillAfterTheFirstWrite(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	team := ns + "-team"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, namespaceObject(team), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(ctx, team, metav1.DeleteOptions{}) })
	if _, err := env.Client.CoreV1().ConfigMaps(team).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "handmade"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inv := []string{"--inventory=adopts", "--inventory-namespace=" + ns, "--lease-duration=" + pauseLease, "--max-prune=100%"}
	base := writeSet(t, configMap(ns, "base"))
	if r := gantry(t, append([]string{"apply", "--path=" + base, "--timeout=60s"}, inv...)...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	withTeam := writeSet(t, configMap(ns, "base"), namespaceYAML(team))

	proxy := newAPIProxy(t, env.Cluster)
	var mu sync.Mutex
	ahead, dead := false, false
	proxy.setHook(func(class string, n int, r *http.Request) proxyAction {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case dead:
			return proxyAction{when: breakBefore}
		case class == "inventory-write":
			ahead = true
		case class == "apply" && ahead:
			// The Namespace's write lands; nothing after it does.
			dead = true
			return proxyAction{when: breakAfter}
		}
		return proxyAction{}
	})
	killed := gantryWith(t, proxy.kubeconfig, append([]string{"apply", "--path=" + withTeam, "--timeout=8s"}, inv...)...)
	if killed.code == 0 {
		t.Fatalf("the run cut off after its first write succeeded\n%s", killed.stderr)
	}
	live, err := env.Client.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{})
	if err != nil || live.Labels[inventory.NameLabel] != "adopts" {
		t.Fatalf("the Namespace's write did not land: %v %v", err, live.GetLabels())
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName("adopts"), metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data["adopted"], "_"+team+"__Namespace") {
		t.Fatalf("the record written before the first write does not list the Namespace as adopted: %v %q", err, cm.Data["adopted"])
	}

	if r := gantry(t, append([]string{"apply", "--path=" + withTeam, "--timeout=60s"}, inv...)...); r.code != 0 {
		t.Fatalf("the next apply: exit %d\n%s", r.code, r.stderr)
	}
	back := gantry(t, append([]string{"rollback", "--to=1", "--timeout=60s"}, inv...)...)
	if back.code != 0 {
		t.Fatalf("rollback: exit %d\n%s", back.code, back.stderr)
	}
	if live, err := env.Client.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{}); err != nil || live.DeletionTimestamp != nil {
		t.Fatalf("the rollback deleted the Namespace that existed before gantry: %v", err)
	} else if _, ok := live.Labels[inventory.NameLabel]; ok {
		t.Errorf("the Namespace was not released: labels %v", live.Labels)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(team).Get(ctx, "handmade", metav1.GetOptions{}); err != nil {
		t.Errorf("what the Namespace held before gantry is gone: %v", err)
	}
}
