package e2e

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// createByHand makes ConfigMap name in ns as `kubectl create` does: its
// fields owned by kubectl-create, which gantry takes over when it adopts
// the object.
func createByHand(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data,
	}, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
}

// A ConfigMap made with kubectl create (dbhost, dbport) is adopted by an
// atomic apply that sets only `feature`: the apply takes kubectl's fields,
// so its keys go. The apply fails (a Deployment no node can run); the
// undo puts the ConfigMap's content from before back, then releases it:
// dbhost and dbport are there again, `feature` is not, and gantry owns
// none of its fields.
func TestAtomicUndoGivesBackWhatItTook(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", "one"))
	args := []string{"apply", "--path=" + dir, "--inventory=giveback", "--inventory-namespace=" + ns}
	if r := gantry(t, append(args, "--timeout=60s")...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	createByHand(t, ns, "db", map[string]string{"dbhost": "db.internal", "dbport": "5432"})
	writeFile(t, filepath.Join(dir, "db.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n  namespace: "+ns+"\ndata:\n  feature: \"on\"\n")
	writeFile(t, filepath.Join(dir, "web.yaml"), webDeployment(ns, "settings", "\n      nodeSelector: {gantry.dev/no-such-node: \"true\"}"))
	failed := gantry(t, append(args, "--timeout=8s", "--atomic")...)
	if failed.res == nil || failed.res.Reason != result.ReasonRolledBack {
		t.Fatalf("atomic apply: exit %d, want RolledBack\n%s", failed.code, failed.stderr)
	}
	if o := objectByRef(gantryRun{res: failed.res}, "ConfigMap/"+ns+"/db"); o == nil || o.Action != result.Configured {
		t.Fatalf("the failed apply did not take the ConfigMap over: %+v", o)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ConfigMap made by hand is gone: %v", err)
	}
	if cm.Data["dbhost"] != "db.internal" || cm.Data["dbport"] != "5432" {
		t.Errorf("after the undo the ConfigMap holds %v, want dbhost and dbport back", cm.Data)
	}
	if _, ok := cm.Data["feature"]; ok {
		t.Errorf("after the undo the ConfigMap still holds what the failed apply set: %v", cm.Data)
	}
	if cm.Labels[inventory.NameLabel] != "" {
		t.Errorf("the ConfigMap is not released: labels %v", cm.Labels)
	}
	for _, mf := range cm.ManagedFields {
		if mf.Manager == "gantry" {
			t.Errorf("gantry still owns fields of the released ConfigMap: %s", mf.FieldsV1.String())
		}
	}
	o := objectByRef(gantryRun{res: failed.res.Rollback}, "ConfigMap/"+ns+"/db")
	if o == nil || o.Action != result.Released || !strings.Contains(o.Error, "put back") {
		t.Errorf("the undo reports the ConfigMap as %+v, want released with its content put back", o)
	}
}

// The same object, adopted by a manual apply, then applied again by a
// run that does not adopt it (so the revision keeping its content is not
// the newest), then a rollback to before: its content comes back too.
func TestRollbackGivesBackWhatAnOlderRevisionTook(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", "one"))
	args := []string{"apply", "--path=" + dir, "--inventory=older", "--inventory-namespace=" + ns, "--timeout=60s"}
	if r := gantry(t, args...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	createByHand(t, ns, "db", map[string]string{"dbhost": "db.internal", "dbport": "5432"})
	writeFile(t, filepath.Join(dir, "db.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n  namespace: "+ns+"\ndata:\n  feature: \"on\"\n")
	for _, v := range []string{"two", "three", "four"} {
		writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", v))
		if r := gantry(t, args...); r.code != 0 {
			t.Fatalf("apply %s: exit %d\n%s", v, r.code, r.stderr)
		}
	}
	if cm, _ := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "db", metav1.GetOptions{}); cm.Data["dbhost"] != "" {
		t.Fatalf("the apply did not take kubectl's fields: %v", cm.Data)
	}
	back := gantry(t, "rollback", "--to=1", "--inventory=older", "--inventory-namespace="+ns, "--timeout=60s")
	if back.code != 0 {
		t.Fatalf("rollback: exit %d\n%s", back.code, back.stderr)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil || cm.Data["dbhost"] != "db.internal" || cm.Data["dbport"] != "5432" || cm.Data["feature"] != "" {
		t.Errorf("after the rollback: %v %v, want the content from before gantry", err, cm.Data)
	}
}

// With the record-key, a revision keeps the Secrets of every namespace
// sealed in the inventory's namespace: no payload is left in the
// Secret's own namespace, what is stored there reads as neither the
// value nor its base64, and a set that drops that namespace (pruned,
// with everything in it) can still be rolled back to.
func TestRollbackToANamespaceThatWasPruned(t *testing.T) {
	t.Parallel()
	invNS := env.Namespace(t)
	payments := invNS + "-pay"
	ctx := context.Background()
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(ctx, payments, metav1.DeleteOptions{}) })
	first, second := canary("payments-one"), canary("payments-two")
	dir := t.TempDir()
	args := []string{"apply", "--path=" + dir, "--inventory=pay", "--inventory-namespace=" + invNS, "--timeout=60s", "--max-prune=100%"}
	for _, v := range []string{first, second} {
		writeFile(t, filepath.Join(dir, "ns.yaml"), namespaceYAML(payments))
		writeFile(t, filepath.Join(dir, "token.yaml"), secretYAML(payments, v))
		writeFile(t, filepath.Join(dir, "cm.yaml"), configMapYAML(invNS, "settings", "v"))
		if r := gantry(t, args...); r.code != 0 {
			t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
		}
	}
	stored := func(ns string) (string, int) {
		list, err := env.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: inventory.RevisionOfLabel + "=pay"})
		if err != nil {
			t.Fatal(err)
		}
		var all strings.Builder
		for _, s := range list.Items {
			all.WriteString(gunzip(t, s.Data["objects.json.gz"]))
		}
		return all.String(), len(list.Items)
	}
	if _, n := stored(payments); n != 0 {
		t.Errorf("%d revision Secrets in %s, want none: the revisions are kept where the inventory is", n, payments)
	}
	in, n := stored(invNS)
	if n == 0 {
		t.Fatalf("no revision Secret in %s", invNS)
	}
	for _, v := range []string{first, second} {
		if strings.Contains(in, v) || strings.Contains(in, base64.StdEncoding.EncodeToString([]byte(v))) {
			t.Errorf("the inventory's namespace holds a value of a Secret of %s in the clear", payments)
		}
	}

	// The set drops the namespace: pruned, and its Secret with it.
	for _, f := range []string{"ns.yaml", "token.yaml"} {
		if err := removeFile(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if r := gantry(t, args...); r.code != 0 {
		t.Fatalf("apply without %s: exit %d\n%s", payments, r.code, r.stderr)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().Namespaces().Get(ctx, payments, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("%s was not pruned", payments)
	}

	if r := gantry(t, "rollback", "--inventory=pay", "--inventory-namespace="+invNS, "--timeout=60s", "--to=1"); r.code != 0 {
		t.Fatalf("rollback to the revision whose namespace was pruned: exit %d\n%s", r.code, r.stderr)
	}
	s, err := env.Client.CoreV1().Secrets(payments).Get(ctx, "token", metav1.GetOptions{})
	if err != nil || string(s.Data["token"]) != first {
		t.Errorf("after the rollback the Secret of %s is not the first one (%v)", payments, err)
	}
}
