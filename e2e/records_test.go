package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/e2e/sopsfixture"
	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/reporters/fakeapi"
	"github.com/gantry-dev/gantry/result"
)

// gzipJSON is a revision payload as gantry stores one: the objects,
// JSON, gzip-compressed.
func gzipJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	return b.Bytes()
}

func gunzip(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// Anyone who may write Secrets in the inventory's namespace can forge a
// revision: a Secret labelled as revision 1000, and a real revision's
// payload replaced by a ClusterRoleBinding to cluster-admin. Neither is
// used: the inventory records which revisions exist and their payloads'
// digests. The rollback refuses the changed payload with nothing
// written, a rollback to 1000 is refused, the forged Secret is named in
// a warning, and the next apply is numbered from the inventory and trims
// nothing for it.
func TestForgedRevisionsAreIgnored(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	args := []string{"apply", "--path=" + dir, "--inventory=forged", "--inventory-namespace=" + ns, "--timeout=60s"}
	for _, v := range []string{"one", "two"} {
		writeFile(t, filepath.Join(dir, "cm.yaml"), configMapYAML(ns, "settings", v))
		if r := gantry(t, args...); r.code != 0 {
			t.Fatalf("apply %s: exit %d\n%s", v, r.code, r.stderr)
		}
	}
	crbName := "forged-" + ns
	binding := map[string]any{"objects": []any{map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": crbName},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "default", "namespace": ns}},
	}}}
	labels := func(n string) map[string]string {
		return map[string]string{inventory.ManagedByLabel: inventory.ManagedByValue, inventory.RevisionOfLabel: "forged",
			inventory.RevisionLabel: n, inventory.RevisionNamespaceLabel: ns}
	}
	if _, err := env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: inventory.RevisionName("forged", 1000), Labels: labels("1000")},
		Type:       inventory.RevisionType, Data: map[string][]byte{"objects.json.gz": gzipJSON(t, binding)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	real1, err := env.Client.CoreV1().Secrets(ns).Get(ctx, inventory.RevisionName("forged", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	real1.Data["objects.json.gz"] = gzipJSON(t, binding)
	if _, err := env.Client.CoreV1().Secrets(ns).Update(ctx, real1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	rb := []string{"rollback", "--inventory=forged", "--inventory-namespace=" + ns, "--timeout=60s"}
	r := gantry(t, rb...)
	if r.code != entrypoint.ExitFailed || !strings.Contains(r.stderr, "does not match the digest its inventory records") {
		t.Errorf("rollback to a changed payload: exit %d, want 1 naming the digest\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "gantry-forged.v1000") {
		t.Errorf("the forged Secret is not named in a warning:\n%s", r.stderr)
	}
	if r := gantry(t, append(rb, "--to=1000")...); r.code != entrypoint.ExitInvalid {
		t.Errorf("rollback --to 1000: exit %d, want 2\n%s", r.code, r.stderr)
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Get(ctx, crbName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the forged ClusterRoleBinding was applied: %v", err)
	}
	if cm, _ := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); cm == nil || cm.Data["value"] != "two" {
		t.Errorf("the set changed after refused rollbacks: %v", cm)
	}
	hist := gantry(t, "history", "--inventory=forged", "--inventory-namespace="+ns)
	if !strings.Contains(hist.stderr, "gantry-forged.v1000") || strings.Contains(hist.stdout, "1000") {
		t.Errorf("history lists the forged revision, or does not warn of it:\n%s%s", hist.stdout, hist.stderr)
	}

	writeFile(t, filepath.Join(dir, "cm.yaml"), configMapYAML(ns, "settings", "three"))
	next := gantry(t, args...)
	if next.code != 0 || next.res.RecordedRevision != 3 {
		t.Errorf("the next apply: exit %d, revision %d, want 3\n%s", next.code, next.res.RecordedRevision, next.stderr)
	}
	if got := numbersAndOutcomes(history(t, ns, "forged")); got != "3:ReconciliationSucceeded 2:ReconciliationSucceeded 1:ReconciliationSucceeded" {
		t.Errorf("history: %s", got)
	}
}

// A deploy whose wait runs out of time is recorded, with its outcome, so
// that drift compares with it and its correction does not undo it, and
// rollback goes back to the one before it, not two.
func TestADeployThatTimedOutIsRecorded(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), webDeployment(ns, "settings", ""))
	writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", "one"))
	args := []string{"apply", "--path=" + dir, "--inventory=slow", "--inventory-namespace=" + ns}
	if r := gantry(t, append(args, "--timeout=60s")...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	writeFile(t, filepath.Join(dir, "web.yaml"), webDeployment(ns, "settings", "\n      nodeSelector: {gantry.dev/no-such-node: \"true\"}"))
	writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", "two"))
	slow := gantry(t, append(args, "--timeout=6s")...)
	if slow.code != entrypoint.ExitFailed || slow.res.RecordedRevision != 2 {
		t.Fatalf("the apply that times out: exit %d, revision %d\n%s", slow.code, slow.res.RecordedRevision, slow.stderr)
	}
	if got := numbersAndOutcomes(history(t, ns, "slow")); got != "2:HealthCheckFailed 1:ReconciliationSucceeded" {
		t.Errorf("history: %s", got)
	}
	drift := gantry(t, "drift", "--inventory=slow", "--inventory-namespace="+ns, "--timeout=60s", "--correct")
	if drift.code != 0 || drift.res.Counts()[result.Drifted] != 0 {
		t.Errorf("drift after the deploy that timed out: exit %d, %v (its own changes are not drift)\n%s", drift.code, drift.res.Counts(), drift.stderr)
	}
	if cm, _ := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); cm == nil || cm.Data["value"] != "two" {
		t.Errorf("drift --correct undid the deploy that timed out: %v", cm)
	}
	back := gantry(t, "rollback", "--inventory=slow", "--inventory-namespace="+ns, "--timeout=60s")
	if back.code != 0 || back.res.RolledBackTo != 1 {
		t.Errorf("rollback: exit %d, to %d, want 1\n%s", back.code, back.res.RolledBackTo, back.stderr)
	}
}

// An atomic apply that fails rolls back under the Lease it applied
// with: a run queued behind it (waiting for the Lease) applies after the
// rollback, and is not undone by it.
func TestARunQueuedBehindAnAtomicApplyIsNotUndone(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	good, bad, later := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(good, "web.yaml"), webDeployment(ns, "settings", ""))
	writeFile(t, filepath.Join(good, "settings.yaml"), configMapYAML(ns, "settings", "one"))
	writeFile(t, filepath.Join(bad, "web.yaml"), webDeployment(ns, "settings", "\n      nodeSelector: {gantry.dev/no-such-node: \"true\"}"))
	writeFile(t, filepath.Join(bad, "settings.yaml"), configMapYAML(ns, "settings", "two"))
	writeFile(t, filepath.Join(later, "web.yaml"), webDeployment(ns, "settings", ""))
	writeFile(t, filepath.Join(later, "settings.yaml"), configMapYAML(ns, "settings", "three"))
	apply := func(dir string, extra ...string) gantryRun {
		return gantry(t, append([]string{"apply", "--path=" + dir, "--inventory=queued", "--inventory-namespace=" + ns}, extra...)...)
	}
	if r := apply(good, "--timeout=60s"); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	var wg sync.WaitGroup
	var atomicRun, queued gantryRun
	wg.Add(2)
	go func() { defer wg.Done(); atomicRun = apply(bad, "--timeout=8s", "--atomic") }()
	go func() {
		defer wg.Done()
		// Once the atomic apply holds the Lease and waits for its rollout.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if cm, _ := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); cm != nil && cm.Data["value"] == "two" {
				break
			}
		}
		queued = apply(later, "--timeout=90s")
	}()
	wg.Wait()
	if atomicRun.res == nil || atomicRun.res.Reason != result.ReasonRolledBack {
		t.Fatalf("atomic apply: exit %d\n%s", atomicRun.code, atomicRun.stderr)
	}
	if queued.code != 0 || !strings.Contains(queued.stderr, "waiting") {
		t.Fatalf("the queued apply: exit %d (want 0, after waiting for the Lease)\n%s", queued.code, queued.stderr)
	}
	if cm, _ := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); cm == nil || cm.Data["value"] != "three" {
		t.Errorf("the queued run's set was undone: %v", cm)
	}
	if got := numbersAndOutcomes(history(t, ns, "queued")); got != "4:ReconciliationSucceeded 3:RolledBack 2:HealthCheckFailed 1:ReconciliationSucceeded" {
		t.Errorf("history: %s", got)
	}
}

// An atomic apply that adopted a ConfigMap made by hand, then failed,
// rolls back without deleting it: it existed before gantry. It is
// released (gantry's labels and fields taken off) and kept.
func TestAtomicKeepsWhatExistedBeforeGantry(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), webDeployment(ns, "settings", ""))
	writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", "one"))
	args := []string{"apply", "--path=" + dir, "--inventory=adopt", "--inventory-namespace=" + ns}
	if r := gantry(t, append(args, "--timeout=60s")...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "handmade"}, Data: map[string]string{"value": "by hand"},
	}, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "handmade.yaml"), configMapYAML(ns, "handmade", "by hand"))
	writeFile(t, filepath.Join(dir, "new.yaml"), configMapYAML(ns, "brand-new", "by gantry"))
	writeFile(t, filepath.Join(dir, "web.yaml"), webDeployment(ns, "settings", "\n      nodeSelector: {gantry.dev/no-such-node: \"true\"}"))
	failed := gantry(t, append(args, "--timeout=8s", "--atomic")...)
	if failed.res == nil || failed.res.Reason != result.ReasonRolledBack {
		t.Fatalf("atomic apply: exit %d\n%s", failed.code, failed.stderr)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "handmade", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ConfigMap made by hand was deleted by the rollback: %v", err)
	}
	if cm.Labels[inventory.NameLabel] != "" {
		t.Errorf("the ConfigMap made by hand still carries the inventory's labels: %v", cm.Labels)
	}
	for _, mf := range cm.ManagedFields {
		if mf.Manager == "gantry" {
			t.Errorf("gantry still owns fields of the released ConfigMap: %s", mf.FieldsV1.String())
		}
	}
	if o := objectByRef(gantryRun{res: failed.res.Rollback}, "ConfigMap/"+ns+"/handmade"); o == nil || o.Action != result.Released {
		t.Errorf("the rollback reports the ConfigMap made by hand as %+v, want released", o)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "brand-new", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap the failed run created: %v, want it pruned", err)
	}
}

// Values apply masked stay masked when read back from a revision: a
// substituted secret and a value SOPS decrypted into a ConfigMap do not
// appear in drift (console, report, summary, the drift issue), history or
// rollback, though none of these runs is given the value or the key.
func TestRevisionsMaskWhatApplyMasked(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	c := sopsfixture.New(t)
	substituted, decrypted := canary("substituted"), canary("decrypted")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "kustomization.yaml"), "resources: [settings.yaml]\ngeneratorOptions: {disableNameSuffixHash: true}\nconfigMapGenerator:\n  - name: decrypted\n    envs: [app.env]\n")
	writeFile(t, filepath.Join(dir, "settings.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata:\n  url: postgres://app:${DB_PASSWORD}@db\n  mode: one\n")
	writeFile(t, filepath.Join(dir, "app.env"), "API_KEY="+decrypted+"\nMODE=one\n")
	c.Encrypt(t, filepath.Join(dir, "app.env"))
	first := gantry(t, "apply", "--path="+dir, "--target-namespace="+ns, "--inventory=masked", "--inventory-namespace="+ns, "--timeout=60s",
		"--substitute=DB_PASSWORD="+substituted, "--sops-age-key="+c.Key)
	if first.code != 0 {
		t.Fatalf("apply: exit %d\n%s", first.code, first.stderr)
	}
	// Hand edits next to the secret values, so that the diffs show them.
	for _, name := range []string{"settings", "decrypted"} {
		patch := `{"data":{"mode":"by-hand","MODE":"by-hand"}}`
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
	}
	gh := &fakeapi.GitHub{T: t, Token: "ghs_" + canary("token"), Viewer: "github-actions"}
	srv := httptest.NewServer(gh)
	defer srv.Close()
	leaks := func(what, text string) {
		t.Helper()
		for _, leak := range scanForSecrets(text, substituted, decrypted) {
			t.Errorf("%s prints %q", what, leak)
		}
	}
	drift := runOnSchedule(t, srv, gh.Token, "drift", "--inventory=masked", "--inventory-namespace="+ns, "--timeout=60s")
	if drift.code != entrypoint.ExitChanges || drift.res.Counts()[result.Drifted] != 2 {
		t.Fatalf("drift: exit %d, %v\n%s", drift.code, drift.res.Counts(), drift.stderr)
	}
	if o := objectByRef(drift.gantryRun, "ConfigMap/"+ns+"/settings"); o == nil || !strings.Contains(o.Diff, "mode") {
		t.Fatalf("the drift shows no diff of settings: %+v", o)
	}
	report, _ := json.Marshal(drift.res)
	issues, _ := json.Marshal(gh.Issues())
	if len(gh.Issues()) != 1 {
		t.Errorf("drift issues: %d, want 1", len(gh.Issues()))
	}
	leaks("drift", drift.stdout+withoutMasks(drift.stderr)+string(report)+drift.outputs+drift.summary+string(issues))
	history(t, ns, "masked", substituted, decrypted)
	correct := gantry(t, "drift", "--inventory=masked", "--inventory-namespace="+ns, "--timeout=60s", "--correct")
	report, _ = json.Marshal(correct.res)
	leaks("drift --correct", correct.stdout+correct.stderr+string(report))
	writeFile(t, filepath.Join(dir, "settings.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata:\n  url: none\n  mode: two\n")
	if r := gantry(t, "apply", "--path="+dir, "--target-namespace="+ns, "--inventory=masked", "--inventory-namespace="+ns, "--timeout=60s", "--sops-age-key="+c.Key); r.code != 0 {
		t.Fatalf("second apply: exit %d\n%s", r.code, r.stderr)
	}
	back := gantry(t, "rollback", "--inventory=masked", "--inventory-namespace="+ns, "--timeout=60s")
	report, _ = json.Marshal(back.res)
	if back.code != 0 {
		t.Errorf("rollback: exit %d\n%s", back.code, back.stderr)
	}
	leaks("rollback", back.stdout+back.stderr+string(report))
	if cm, _ := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); cm == nil || !strings.Contains(cm.Data["url"], substituted) {
		t.Errorf("the rollback did not restore the substituted value")
	}
}

// drift --correct takes back what hands changed and leaves what other
// controllers wrote: cert-manager's cainjector's caBundle on a webhook
// configuration, and the replicas an HPA set through the scale
// subresource (written here with the controller manager's field manager,
// as the HPA controller writes it: no metrics server runs here).
func TestCorrectionLeavesControllersFields(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), webDeployment(ns, "settings", ""))
	writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", "one"))
	hook := "hooks-" + ns
	writeFile(t, filepath.Join(dir, "hook.yaml"), `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: `+hook+`
webhooks:
  - name: check.example.com
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Ignore
    clientConfig:
      service: {name: hooks, namespace: `+ns+`}
    rules:
      - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}
`)
	t.Cleanup(func() {
		_ = env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), hook, metav1.DeleteOptions{})
	})
	if r := gantry(t, "apply", "--path="+dir, "--inventory=ctl", "--inventory-namespace="+ns, "--timeout=60s"); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	caBundle := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nnot a real one\n-----END CERTIFICATE-----\n"))
	patch := `{"webhooks":[{"name":"check.example.com","clientConfig":{"caBundle":"` + caBundle + `"}}]}`
	if _, err := env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, hook, types.StrategicMergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: "cert-manager-cainjector"}); err != nil {
		t.Fatal(err)
	}
	scale, err := env.Client.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 3
	if _, err := env.Client.AppsV1().Deployments(ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{FieldManager: "kube-controller-manager"}); err != nil {
		t.Fatal(err)
	}
	// A hand edit elsewhere on the Deployment.
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"owner":"someone"}}}`),
		metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}

	r := gantry(t, "drift", "--inventory=ctl", "--inventory-namespace="+ns, "--timeout=60s", "--correct")
	if r.code != entrypoint.ExitChanges || r.res.Counts()[result.Drifted] != 1 {
		t.Fatalf("drift: exit %d, %v, want the Deployment alone drifted\n%s", r.code, r.res.Counts(), r.stderr)
	}
	web := objectByRef(r, "Deployment.apps/"+ns+"/web")
	if web == nil || len(web.Drift) != 1 || web.Drift[0].Field != ".metadata.labels.owner" || len(web.ManagedBy) != 1 || web.ManagedBy[0].Manager != "kube-controller-manager" {
		t.Errorf("the Deployment's drift: %+v", web)
	}
	if h := objectByRef(r, "ValidatingWebhookConfiguration.admissionregistration.k8s.io/"+hook); h == nil || h.Action != result.InSync ||
		len(h.ManagedBy) != 1 || h.ManagedBy[0].Manager != "cert-manager-cainjector" {
		t.Errorf("the webhook configuration: %+v", h)
	}
	if r.res.Correction == nil || !r.res.Correction.Succeeded() {
		t.Fatalf("the correction: %+v", r.res.Correction)
	}
	for _, o := range r.res.Correction.Objects {
		if o.Action != result.Unchanged && o.Kind != "Deployment" {
			t.Errorf("the correction wrote %s (%s): only the Deployment drifted", o.Ref(), o.Action)
		}
	}
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Labels["owner"] != "" || *d.Spec.Replicas != 3 {
		t.Errorf("after the correction: label owner %q (want it gone), replicas %d (want the HPA's 3)", d.Labels["owner"], *d.Spec.Replicas)
	}
	h, err := env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, hook, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if base64.StdEncoding.EncodeToString(h.Webhooks[0].ClientConfig.CABundle) != caBundle {
		t.Errorf("the correction took cainjector's caBundle")
	}
}

// Trimming follows the count the inventory was kept with: a manual
// rollback after a pipeline's history: 20 deletes nothing, and with
// history: 1 an atomic apply still finds the revision to go back to.
func TestTrimmingFollowsTheInventorysHistory(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir := t.TempDir()
	args := []string{"apply", "--path=" + dir, "--inventory=kept", "--inventory-namespace=" + ns, "--timeout=60s", "--history=20"}
	for _, v := range []string{"1", "2", "3", "4", "5", "6", "7"} {
		writeFile(t, filepath.Join(dir, "cm.yaml"), configMapYAML(ns, "settings", v))
		if r := gantry(t, args...); r.code != 0 {
			t.Fatalf("apply %s: exit %d\n%s", v, r.code, r.stderr)
		}
	}
	if r := gantry(t, "rollback", "--inventory=kept", "--inventory-namespace="+ns, "--timeout=60s"); r.code != 0 {
		t.Fatalf("rollback: exit %d\n%s", r.code, r.stderr)
	}
	if revs := history(t, ns, "kept"); len(revs) != 8 {
		t.Errorf("after a manual rollback: %s, want all 8 kept", numbersAndOutcomes(revs))
	}

	one := t.TempDir()
	writeFile(t, filepath.Join(one, "web.yaml"), webDeployment(ns, "settings-one", ""))
	writeFile(t, filepath.Join(one, "settings.yaml"), configMapYAML(ns, "settings-one", "one"))
	a := []string{"apply", "--path=" + one, "--inventory=one", "--inventory-namespace=" + ns, "--history=1"}
	if r := gantry(t, append(a, "--timeout=60s")...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	writeFile(t, filepath.Join(one, "web.yaml"), webDeployment(ns, "settings-one", "\n      nodeSelector: {gantry.dev/no-such-node: \"true\"}"))
	failed := gantry(t, append(a, "--timeout=8s", "--atomic")...)
	if failed.res == nil || failed.res.Reason != result.ReasonRolledBack || failed.res.Rollback.RolledBackTo != 1 {
		t.Fatalf("atomic with history 1: exit %d\n%s", failed.code, failed.stderr)
	}
}
