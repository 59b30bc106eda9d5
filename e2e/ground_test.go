package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/result"
)

func namespaceYAML(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", name)
}

// A platform's set brings the teams' Namespaces. One holds team X's
// inventory (its record, Lease and revisions); another holds objects
// labelled for team Y's inventory, whose record is elsewhere. When the
// platform's set drops them, neither Namespace is pruned: the run fails
// (exit 1) naming what stands on each, and keeps them listed. The
// workflow's prune-shared-namespaces lets them go.
func TestPruneKeepsANamespaceAnotherInventoryStandsOn(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	teamX, teamY := ns+"-x", ns+"-y"
	t.Cleanup(func() {
		for _, n := range []string{teamX, teamY} {
			_ = env.Client.CoreV1().Namespaces().Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
	platform := func(dir string, extra ...string) []string {
		return append([]string{"apply", "--path=" + dir, "--inventory=platform", "--inventory-namespace=" + ns, "--timeout=60s"}, extra...)
	}
	if r := gantry(t, platform(writeSet(t, namespaceYAML(teamX), namespaceYAML(teamY), configMap(ns, "platform")))...); r.code != 0 {
		t.Fatalf("the platform's apply: exit %d\n%s", r.code, r.stderr)
	}
	if r := gantry(t, "apply", "--path="+writeSet(t, configMap(teamX, "x")), "--inventory=app", "--inventory-namespace="+teamX, "--timeout=60s"); r.code != 0 {
		t.Fatalf("team X's apply: exit %d\n%s", r.code, r.stderr)
	}
	if r := gantry(t, "apply", "--path="+writeSet(t, configMap(teamY, "y")), "--inventory=svc", "--inventory-namespace="+ns, "--timeout=60s"); r.code != 0 {
		t.Fatalf("team Y's apply: exit %d\n%s", r.code, r.stderr)
	}

	only := writeSet(t, configMap(ns, "platform"))
	r := gantry(t, platform(only)...)
	if r.code != entrypoint.ExitFailed || r.res == nil || r.res.Reason != result.ReasonPruneFailed {
		t.Fatalf("the platform drops the teams' Namespaces: exit %d, want 1 (PruneFailed)\n%s", r.code, r.stderr)
	}
	for ref, want := range map[string]string{
		"Namespace/" + teamX: "the record of gantry inventory " + teamX + "/app",
		"Namespace/" + teamY: "labelled for gantry inventory " + ns + "/svc",
	} {
		if got := skippedWith(r, ref); !strings.Contains(got, want) || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: report %q, want it to name %q\n%s", ref, got, want, r.stderr)
		}
	}
	for _, n := range []string{teamX, teamY} {
		live, err := env.Client.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{})
		if err != nil || live.DeletionTimestamp != nil {
			t.Errorf("Namespace %s was deleted: %v", n, err)
		}
		if !slices.Contains(entryIDs(t, ns, "platform"), "_"+n+"__Namespace") {
			t.Errorf("the kept Namespace %s is no longer listed: %v", n, entryIDs(t, ns, "platform"))
		}
	}
	if _, err := env.Client.CoreV1().ConfigMaps(teamX).Get(ctx, "gantry-app", metav1.GetOptions{}); err != nil {
		t.Errorf("team X's inventory: %v", err)
	}

	r = gantry(t, platform(only, "--prune-shared-namespaces")...)
	if r.code != 0 || counts(t, r)[result.Deleted] != 2 {
		t.Fatalf("with prune-shared-namespaces: exit %d, %v\n%s", r.code, counts(t, r), r.stderr)
	}
	for _, n := range []string{teamX, teamY} {
		if live, err := env.Client.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{}); err == nil && live.DeletionTimestamp == nil {
			t.Errorf("Namespace %s was not deleted with prune-shared-namespaces", n)
		}
	}
}

// delete keeps the guard prune has: a CRD whose custom resources another
// inventory applied is kept (exit 1, naming one), until the workflow says
// prune-crds-with-resources.
func TestDeleteKeepsACRDAnotherInventoryUses(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	group := ns + ".gantry.test"
	crdPath := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets." + group
	t.Cleanup(func() { _ = env.Client.CoreV1().RESTClient().Delete().AbsPath(crdPath).Do(ctx).Error() })
	if r := gantry(t, "apply", "--path="+writeSet(t, crdYAML(group, "Widget")), "--inventory=defs", "--inventory-namespace="+ns, "--timeout=60s"); r.code != 0 {
		t.Fatalf("the CRD's apply: exit %d\n%s", r.code, r.stderr)
	}
	widget := fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: theirs\n  namespace: %s\nspec:\n  size: 1", group, ns)
	if r := gantry(t, "apply", "--path="+writeSet(t, widget), "--inventory=uses", "--inventory-namespace="+ns, "--timeout=60s"); r.code != 0 {
		t.Fatalf("the Widget's apply: exit %d\n%s", r.code, r.stderr)
	}
	r := gantry(t, "delete", "--inventory=defs", "--inventory-namespace="+ns, "--timeout=60s")
	if r.code != entrypoint.ExitFailed || !strings.Contains(r.stderr, "Widget resources this inventory did not apply exist") || !strings.Contains(r.stderr, "theirs") {
		t.Errorf("delete of a CRD another inventory uses: exit %d, want 1 naming the Widget\n%s", r.code, r.stderr)
	}
	if err := env.Client.CoreV1().RESTClient().Get().AbsPath(crdPath).Do(ctx).Error(); err != nil {
		t.Fatalf("the CRD was deleted: %v", err)
	}
	r = gantry(t, "delete", "--inventory=defs", "--inventory-namespace="+ns, "--timeout=60s", "--prune-crds-with-resources")
	if r.code != 0 {
		t.Fatalf("delete with prune-crds-with-resources: exit %d\n%s", r.code, r.stderr)
	}
	if err := env.Client.CoreV1().RESTClient().Get().AbsPath(crdPath).Do(ctx).Error(); err == nil {
		t.Errorf("the CRD is still there after delete with prune-crds-with-resources")
	} else if !apierrors.IsNotFound(err) {
		// Terminating while its custom resources are removed.
		t.Logf("the CRD after delete: %v", err)
	}
}
