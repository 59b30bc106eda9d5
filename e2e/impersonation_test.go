package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/entrypoint"
)

// Prune and delete, run as a service account whose Role covers one
// namespace, never act outside it: an inventory that also lists an object
// of another namespace (applied earlier with wider rights) gets that
// object neither pruned nor deleted. The run says it was forbidden, keeps
// the entry, and does what the account may.
func TestServiceAccountBoundsPruneAndDelete(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	other := env.Namespace(t)
	ctx := context.Background()
	bindServiceAccount(t, ns, "deployer", []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "mine.yaml"), configMap(ns, "mine"))
	writeFile(t, filepath.Join(dir, "gone.yaml"), configMap(ns, "gone"))
	writeFile(t, filepath.Join(dir, "theirs.yaml"), configMap(other, "theirs"))
	args := []string{"--path=" + dir, "--inventory=bounded", "--inventory-namespace=" + ns}
	if r := gantry(t, append([]string{"apply"}, args...)...); r.code != 0 {
		t.Fatalf("apply with the admin's rights: exit %d\n%s", r.code, r.stderr)
	}

	sa := "--service-account=" + ns + "/deployer"
	for _, f := range []string{"theirs.yaml", "gone.yaml"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	r := gantry(t, append([]string{"apply", sa}, args...)...)
	if r.code != entrypoint.ExitFailed {
		t.Fatalf("prune as the service account: exit %d, want %d\n%s", r.code, entrypoint.ExitFailed, r.stderr)
	}
	for _, want := range []string{"ConfigMap/" + other + "/theirs", "forbidden"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the prune's message lacks %q:\n%s", want, r.stderr)
		}
	}
	if _, err := env.Client.CoreV1().ConfigMaps(other).Get(ctx, "theirs", metav1.GetOptions{}); err != nil {
		t.Errorf("the object outside the account's namespace was pruned: %v", err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "gone", metav1.GetOptions{}); err == nil {
		t.Errorf("the object inside the account's namespace was not pruned")
	}
	if ids := entryIDs(t, ns, "bounded"); !strings.Contains(strings.Join(ids, ","), other+"_theirs_") {
		t.Errorf("the inventory dropped the entry it could not prune: %v", ids)
	}

	r = gantry(t, "delete", sa, "--inventory=bounded", "--inventory-namespace="+ns)
	if r.code != entrypoint.ExitFailed || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("delete as the service account: exit %d, want %d saying forbidden\n%s", r.code, entrypoint.ExitFailed, r.stderr)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(other).Get(ctx, "theirs", metav1.GetOptions{}); err != nil {
		t.Errorf("delete removed the object outside the account's namespace: %v", err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{}); err == nil {
		t.Errorf("delete left the object inside the account's namespace")
	}
}
