package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// webDeployment is a Deployment named web that reads its settings from
// ConfigMap cm; extra goes into its pod spec (a nodeSelector no node
// matches makes it unschedulable: kwok's nodes, like real ones, are chosen
// by the real scheduler).
func webDeployment(ns, cm, extra string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %s
spec:
  progressDeadlineSeconds: 10
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:%s
      containers:
        - name: web
          image: registry.k8s.io/pause:3.10
          envFrom:
            - configMapRef: {name: %s}
`, ns, extra, cm)
}

func configMapYAML(ns, name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: %q\n", name, ns, value)
}

func secretYAML(ns, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\n  namespace: %s\nstringData:\n  token: %s\n", ns, value)
}

// history runs gantry history --output json and returns the revisions.
func history(t *testing.T, ns, inv string, secrets ...string) []map[string]any {
	t.Helper()
	r := gantry(t, "history", "--inventory="+inv, "--inventory-namespace="+ns, "--output=json")
	if r.code != 0 {
		t.Fatalf("history: exit %d\n%s", r.code, r.stderr)
	}
	text := gantry(t, "history", "--inventory="+inv, "--inventory-namespace="+ns)
	for _, leak := range scanForSecrets(r.stdout+r.stderr+text.stdout+text.stderr, secrets...) {
		t.Errorf("history prints %q", leak)
	}
	var out []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("history --output json: %v\n%s", err, r.stdout)
	}
	return out
}

func numbersAndOutcomes(revs []map[string]any) string {
	var s []string
	for _, rv := range revs {
		s = append(s, fmt.Sprintf("%v:%v", rv["number"], rv["outcome"]))
	}
	return strings.Join(s, " ")
}

// An apply with atomic whose rollout cannot finish (its pods fit no node)
// is rolled back to the revision before it: the previous Deployment is
// live and available again, the ConfigMap the failed revision added is
// pruned, the outcome is RolledBack with the wait's failure as the cause,
// exit 1, and the report holds both runs. The revisions say the same, and
// no Secret value appears in any of it.
func TestAtomicRollsBackAFailedRollout(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	secret := canary("revisionsecret")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), webDeployment(ns, "settings", ""))
	writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", "one"))
	writeFile(t, filepath.Join(dir, "token.yaml"), secretYAML(ns, secret))
	args := []string{"apply", "--path=" + dir, "--inventory=web", "--inventory-namespace=" + ns, "--timeout=60s"}
	scan := func(r gantryRun) {
		t.Helper()
		res, _ := json.Marshal(r.res)
		for _, leak := range scanForSecrets(r.stdout+r.stderr+string(res), secret, base64.StdEncoding.EncodeToString([]byte(secret))) {
			t.Errorf("%q is printed or reported", leak)
		}
	}

	first := gantry(t, args...)
	scan(first)
	if first.code != 0 || first.res.RecordedRevision != 1 {
		t.Fatalf("first apply: exit %d, revision %d\n%s", first.code, first.res.RecordedRevision, first.stderr)
	}

	// The next revision cannot roll out, and adds a ConfigMap.
	writeFile(t, filepath.Join(dir, "web.yaml"), webDeployment(ns, "settings", "\n      nodeSelector: {gantry.dev/no-such-node: \"true\"}"))
	writeFile(t, filepath.Join(dir, "extra.yaml"), configMapYAML(ns, "extra", "two"))
	failed := gantry(t, append(args, "--atomic")...)
	scan(failed)
	if failed.code != entrypoint.ExitFailed {
		t.Fatalf("atomic apply: exit %d, want 1\n%s", failed.code, failed.stderr)
	}
	res := failed.res
	if res.Reason != result.ReasonRolledBack || res.Cause != result.ReasonHealthCheckFailed {
		t.Fatalf("reason %s, cause %s; want RolledBack after HealthCheckFailed: %s", res.Reason, res.Cause, res.Message)
	}
	if res.Rollback == nil || res.Rollback.Reason != result.ReasonRolledBack || res.Rollback.RolledBackTo != 1 {
		t.Fatalf("the report lacks the rollback's run: %+v", res.Rollback)
	}
	if o := objectByRef(failedRun(res), "Deployment.apps/"+ns+"/web"); o == nil || o.Health == nil || o.Health.Status == "Current" {
		t.Errorf("the apply's own run should report the Deployment not ready: %+v", o)
	}
	for _, o := range res.Rollback.Objects {
		if o.Ref() == "ConfigMap/"+ns+"/extra" && o.Action != result.Deleted {
			t.Errorf("rollback: ConfigMap extra %s, want deleted", o.Action)
		}
		if o.Ref() == "Deployment.apps/"+ns+"/web" && (o.Health == nil || o.Health.Status != "Current") {
			t.Errorf("rollback: Deployment web health %+v, want Current", o.Health)
		}
	}
	if !strings.Contains(failed.stderr, "rolling back") {
		t.Errorf("the console does not say it rolls back:\n%s", failed.stderr)
	}

	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.NodeSelector) != 0 || d.Status.AvailableReplicas != 1 || d.Status.UpdatedReplicas != 1 {
		t.Errorf("after the rollback: nodeSelector %v, %d available, %d updated; want the first revision, available",
			d.Spec.Template.Spec.NodeSelector, d.Status.AvailableReplicas, d.Status.UpdatedReplicas)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "extra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap extra, which only the failed revision had: %v, want it pruned", err)
	}

	revs := history(t, ns, "web", secret)
	if got := numbersAndOutcomes(revs); got != "3:RolledBack 2:HealthCheckFailed 1:ReconciliationSucceeded" {
		t.Errorf("history: %s", got)
	}
	if len(revs) == 3 && (revs[0]["cause"] != "HealthCheckFailed" || revs[0]["note"] != "rollback to revision 1" || revs[0]["digest"] != revs[2]["digest"]) {
		t.Errorf("revision 3: %v", revs[0])
	}

	// A revision is a Secret: nothing of it is readable as a ConfigMap.
	cms, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cms)
	if leaks := scanForSecrets(string(b), secret, base64.StdEncoding.EncodeToString([]byte(secret))); len(leaks) > 0 {
		t.Errorf("a ConfigMap holds the Secret's value")
	}
	secrets, err := env.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: inventory.RevisionOfLabel + "=web"})
	if err != nil || len(secrets.Items) != 3 || secrets.Items[0].Type != inventory.RevisionType {
		t.Errorf("revision Secrets: %v, %d", err, len(secrets.Items))
	}
}

// failedRun is the apply's own run in an atomic result: its objects and
// stages, without the rollback.
func failedRun(res *result.Result) gantryRun { return gantryRun{res: res} }

// An atomic apply with no revision to go back to (the first apply) keeps
// its failure, and says why it did not roll back.
func TestAtomicWithoutAnEarlierRevision(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "stuck.yaml"), unschedulableDeployment(ns))
	r := gantry(t, "apply", "--path="+dir, "--inventory=stuck", "--inventory-namespace="+ns, "--timeout=60s", "--atomic")
	if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonHealthCheckFailed {
		t.Fatalf("exit %d, reason %s; want 1, HealthCheckFailed\n%s", r.code, r.res.Reason, r.stderr)
	}
	if r.res.Rollback == nil || !strings.Contains(r.res.Message, "not rolled back") || !strings.Contains(r.res.Message, "no earlier revision that succeeded") {
		t.Errorf("message %q does not say why nothing was rolled back", r.res.Message)
	}
}

// rollback --to a chosen revision applies it again and prunes what it did
// not have; revisions are bounded by history; a revision no longer kept,
// and a rollback with nothing before, are refused with exit 2 and nothing
// written.
func TestRollbackToAChosenRevision(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	args := []string{"apply", "--path=" + dir, "--inventory=cfg", "--inventory-namespace=" + ns, "--timeout=60s", "--history=2"}
	for i, name := range []string{"a", "b", "c"} {
		writeFile(t, filepath.Join(dir, name+".yaml"), configMapYAML(ns, name, "v"))
		if r := gantry(t, args...); r.code != 0 || r.res.RecordedRevision != i+1 {
			t.Fatalf("apply %d: exit %d, revision %d\n%s", i+1, r.code, r.res.RecordedRevision, r.stderr)
		}
	}
	if got := numbersAndOutcomes(history(t, ns, "cfg")); got != "3:ReconciliationSucceeded 2:ReconciliationSucceeded" {
		t.Errorf("history with history=2: %s", got)
	}

	gone := gantry(t, "rollback", "--inventory=cfg", "--inventory-namespace="+ns, "--to=1")
	if gone.code != entrypoint.ExitInvalid || !strings.Contains(gone.stderr, "has no revision 1; it keeps 3 (ReconciliationSucceeded), 2") {
		t.Errorf("rollback to a revision not kept: exit %d\n%s", gone.code, gone.stderr)
	}

	r := gantry(t, "rollback", "--inventory=cfg", "--inventory-namespace="+ns, "--to=2", "--history=2")
	if r.code != 0 || r.res.Reason != result.ReasonRolledBack || r.res.RolledBackTo != 2 || r.res.Command != "rollback" {
		t.Fatalf("rollback --to 2: exit %d, %s, to %d\n%s", r.code, r.res.Reason, r.res.RolledBackTo, r.stderr)
	}
	if o := objectByRef(r, "ConfigMap/"+ns+"/c"); o == nil || o.Action != result.Deleted {
		t.Errorf("ConfigMap c, which revision 2 did not have: %+v, want deleted", o)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap %s after the rollback: %v", name, err)
		}
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap c after the rollback: %v, want it pruned", err)
	}
	if got := numbersAndOutcomes(history(t, ns, "cfg")); got != "4:RolledBack 3:ReconciliationSucceeded" {
		t.Errorf("history after the rollback: %s", got)
	}
	// The default goes back from the rollback (revision 2's set) to the
	// last that differs: revision 3.
	again := gantry(t, "rollback", "--inventory=cfg", "--inventory-namespace="+ns)
	if again.code != 0 || again.res.RolledBackTo != 3 {
		t.Errorf("rollback after a rollback: exit %d, to %d\n%s", again.code, again.res.RolledBackTo, again.stderr)
	}

	// One revision only: nothing before it.
	lone := t.TempDir()
	writeFile(t, filepath.Join(lone, "only.yaml"), configMapYAML(ns, "only", "v"))
	if r := gantry(t, "apply", "--path="+lone, "--inventory=lone", "--inventory-namespace="+ns); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	refused := gantry(t, "rollback", "--inventory=lone", "--inventory-namespace="+ns)
	if refused.code != entrypoint.ExitInvalid || !strings.Contains(refused.stderr, "no earlier revision that succeeded") {
		t.Errorf("rollback with nothing before: exit %d\n%s", refused.code, refused.stderr)
	}
	none := gantry(t, "rollback", "--inventory=never", "--inventory-namespace="+ns)
	if none.code != entrypoint.ExitInvalid || !strings.Contains(none.stderr, "has no revisions") {
		t.Errorf("rollback of an inventory never applied: exit %d\n%s", none.code, none.stderr)
	}
	if refused.res == nil || len(refused.res.Stages) == 0 || refused.res.Stages[len(refused.res.Stages)-1].Skipped == "" {
		t.Errorf("a refused rollback ran its apply stages: %+v", refused.res)
	}

	// delete removes the revisions with the inventory.
	if r := gantry(t, "delete", "--inventory=cfg", "--inventory-namespace="+ns); r.code != 0 {
		t.Fatalf("delete: exit %d\n%s", r.code, r.stderr)
	}
	if list, err := env.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: inventory.RevisionOfLabel + "=cfg"}); err != nil || len(list.Items) != 0 {
		t.Errorf("revisions after delete: %v, %d left", err, len(list.Items))
	}
}

// writeBlobs writes two ConfigMaps, blob-a and blob-b, of 600 KiB of
// random data each: each fits in an object, compressed together they do
// not fit in one revision.
func writeBlobs(t *testing.T, dir, ns string) {
	t.Helper()
	for _, name := range []string{"blob-a", "blob-b"} {
		buf := make([]byte, 450*1024)
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name+".yaml"), configMapYAML(ns, name, base64.StdEncoding.EncodeToString(buf)))
	}
}

// A set whose revision would not fit in one object is refused at
// validation, before anything is written: no object, no inventory.
func TestRevisionTooLargeIsRefusedBeforeWriting(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeBlobs(t, dir, ns)
	r := gantry(t, "apply", "--path="+dir, "--inventory=big", "--inventory-namespace="+ns, "--timeout=60s")
	if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonValidationFailed {
		t.Fatalf("exit %d, reason %s; want 1, ValidationFailed\n%s", r.code, r.res.Reason, r.stderr)
	}
	if !strings.Contains(r.stderr, "over the 1000 KiB one Kubernetes object can hold; nothing was written") {
		t.Errorf("the refusal does not say why:\n%s", r.stderr)
	}
	for _, name := range []string{"blob-a", "blob-b", inventory.ConfigMapName("big")} {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s: %v, want nothing written", name, err)
		}
	}
}

// A kustomize overlay whose generated ConfigMap is renamed while its
// Deployment still names the old one: the new pods cannot start (the
// kubelet, and under kwok the cluster's config check, holds them with
// CreateContainerConfigError), the rollout misses its deadline, and atomic
// restores the revision before: the old generated ConfigMap, which the
// failed apply pruned, is back, and the Deployment is available again.
func TestAtomicRollsBackAConfigMapRename(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), webDeployment(ns, "settings", ""))
	kustomization := "namespace: %s\nresources: [web.yaml]\nconfigMapGenerator:\n  - name: %s\n    literals: [LEVEL=info]\n"
	writeFile(t, filepath.Join(dir, "kustomization.yaml"), fmt.Sprintf(kustomization, ns, "settings"))
	args := []string{"apply", "--path=" + dir, "--inventory=web", "--inventory-namespace=" + ns, "--timeout=60s", "--atomic"}
	first := gantry(t, args...)
	if first.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", first.code, first.stderr)
	}
	var generated string
	for _, o := range first.res.Objects {
		if o.Kind == "ConfigMap" {
			generated = o.Name
		}
	}
	if !strings.HasPrefix(generated, "settings-") {
		t.Fatalf("the generator made %q", generated)
	}

	// Renamed: the Deployment's reference to settings is no longer
	// rewritten, and no ConfigMap settings exists.
	writeFile(t, filepath.Join(dir, "kustomization.yaml"), fmt.Sprintf(kustomization, ns, "app-settings"))
	r := gantry(t, args...)
	if r.code != entrypoint.ExitFailed || r.res.Reason != result.ReasonRolledBack || r.res.Cause != result.ReasonHealthCheckFailed {
		t.Fatalf("exit %d, reason %s, cause %s; want 1, RolledBack after HealthCheckFailed\n%s", r.code, r.res.Reason, r.res.Cause, r.stderr)
	}
	if o := objectByRef(gantryRun{res: r.res}, "Deployment.apps/"+ns+"/web"); o == nil || o.Health == nil || !strings.Contains(o.Health.Message, `configmap "settings" not found`) {
		t.Errorf("the failed rollout does not say why: %+v", o)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, generated, metav1.GetOptions{}); err != nil {
		t.Errorf("the first revision's ConfigMap %s: %v", generated, err)
	}
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := d.Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name; ref != generated || d.Status.AvailableReplicas != 1 || d.Status.UpdatedReplicas != 1 {
		t.Errorf("after the rollback the Deployment reads %s (want %s), %d available, %d updated", ref, generated, d.Status.AvailableReplicas, d.Status.UpdatedReplicas)
	}
	if r.res.Rollback == nil || r.res.Rollback.RolledBackTo != 1 {
		t.Errorf("rollback: %+v", r.res.Rollback)
	}
}

// A set applied from an artifact whose objects do not fit in a revision
// is recorded by the artifact's digest alone; a rollback to it pulls the
// artifact again (with the run's registry credentials, when the workflow
// names that registry) and applies it.
func TestRollbackToARevisionThatNamesAnArtifact(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	reg, creds := realRegistry(t)
	dir := t.TempDir()
	writeBlobs(t, dir, ns)
	ref := "oci://" + reg + "/acme/blobs:v1"
	if r := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+ref); r.code != 0 {
		t.Fatalf("push: exit %d\n%s", r.code, r.stderr)
	}
	first := gantryAuth(t, creds, "apply", "--artifact="+ref, "--inventory=blobs", "--inventory-namespace="+ns, "--timeout=60s")
	if first.code != 0 || first.res.RecordedRevision != 1 {
		t.Fatalf("apply from the artifact: exit %d, revision %d\n%s", first.code, first.res.RecordedRevision, first.stderr)
	}
	revs := history(t, ns, "blobs")
	if len(revs) != 1 || revs[0]["artifact"] != first.res.Artifact.URL || revs[0]["digest"] != first.res.Artifact.Digest {
		t.Fatalf("revision of the artifact: %v", revs)
	}
	if _, err := env.Client.CoreV1().Secrets(ns).Get(ctx, inventory.RevisionName("blobs", 1), metav1.GetOptions{}); !apierrors.IsNotFound(err) || revs[0]["payloads"] != nil {
		t.Errorf("the artifact's revision should hold no objects: %v, payloads %v", err, revs[0]["payloads"])
	}

	small := t.TempDir()
	writeFile(t, filepath.Join(small, "small.yaml"), configMapYAML(ns, "small", "v"))
	if r := gantry(t, "apply", "--path="+small, "--inventory=blobs", "--inventory-namespace="+ns, "--timeout=60s", "--max-prune=100%"); r.code != 0 {
		t.Fatalf("apply of another set: exit %d\n%s", r.code, r.stderr)
	}
	// The revision names the registry, and a revision is the cluster's
	// to hold, not an authority: the credentials go there only when the
	// workflow names that registry (registry-hosts).
	refused := gantryAuth(t, creds, "rollback", "--inventory=blobs", "--inventory-namespace="+ns, "--timeout=60s", "--max-prune=100%")
	if refused.code != entrypoint.ExitInvalid || !strings.Contains(refused.stderr, "registry-hosts") {
		t.Errorf("rollback to a registry the workflow does not name: exit %d, want 2 naming registry-hosts\n%s", refused.code, refused.stderr)
	}
	back := gantryAuth(t, creds, "rollback", "--inventory=blobs", "--inventory-namespace="+ns, "--timeout=60s", "--max-prune=100%", "--registry-hosts="+reg)
	if back.code != 0 || back.res.RolledBackTo != 1 || back.res.Artifact == nil || back.res.Artifact.Digest != first.res.Artifact.Digest {
		t.Fatalf("rollback to the artifact's revision: exit %d, to %d, artifact %+v\n%s", back.code, back.res.RolledBackTo, back.res.Artifact, back.stderr)
	}
	for _, name := range []string{"blob-a", "blob-b"} {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap %s after the rollback: %v", name, err)
		}
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "small", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap small after the rollback: %v, want it pruned", err)
	}
}
