package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/result"
)

// A field another controller owns (helm-controller applied the
// ConfigMap) is named, with its manager, by diff and apply, on the
// console and in the report; field-conflicts: refuse fails the run with
// nothing written, as kubectl does without --force-conflicts; by default
// it is taken. Fields of kubectl's managers, server-side or client-side,
// are taken without a word, as Flux does.
func TestFieldConflictsAreNamedAndRefusable(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	kubectl := kubectlPath(t)
	cm := func(name, value string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\ndata:\n  key: " + value + "\n"
	}
	before := t.TempDir()
	writeFile(t, filepath.Join(before, "helm.yaml"), cm("helm-owned", "v1"))
	writeFile(t, filepath.Join(before, "ssa.yaml"), cm("kubectl-ssa", "v1"))
	writeFile(t, filepath.Join(before, "csa.yaml"), cm("kubectl-csa", "v1"))
	for _, args := range [][]string{
		{"apply", "--server-side", "--field-manager=helm-controller", "-f", filepath.Join(before, "helm.yaml")},
		{"apply", "--server-side", "-f", filepath.Join(before, "ssa.yaml")},
		{"apply", "-f", filepath.Join(before, "csa.yaml")},
	} {
		if out, err := exec.Command(kubectl, append([]string{"--kubeconfig=" + env.Cluster.Kubeconfig}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	dir := writeSet(t, cm("helm-owned", "v2"), cm("kubectl-ssa", "v2"), cm("kubectl-csa", "v2"))
	args := func(command string, extra ...string) []string {
		return append([]string{command, "--path=" + dir, "--inventory=conflicts", "--inventory-namespace=" + ns, "--timeout=60s"}, extra...)
	}
	const says = "ConfigMap/" // the object, then the field and its manager
	want := []result.Conflict{{Field: ".data.key", Manager: "helm-controller"}}
	check := func(what string, r gantryRun) {
		t.Helper()
		if !strings.Contains(r.stderr, says+ns+"/helm-owned") || !strings.Contains(r.stderr, ".data.key from helm-controller") {
			t.Errorf("%s does not name the field and its manager:\n%s", what, r.stderr)
		}
		if strings.Contains(r.stderr, "from kubectl") {
			t.Errorf("%s names fields of kubectl's managers, which are taken silently:\n%s", what, r.stderr)
		}
		if r.res == nil {
			t.Fatalf("%s wrote no report", what)
		}
		for _, o := range r.res.Objects {
			switch o.Name {
			case "helm-owned":
				if len(o.Conflicts) != 1 || o.Conflicts[0] != want[0] {
					t.Errorf("%s reports %+v for helm-owned, want %+v", what, o.Conflicts, want)
				}
			default:
				if len(o.Conflicts) != 0 {
					t.Errorf("%s reports conflicts %+v for %s, kubectl's", what, o.Conflicts, o.Name)
				}
			}
		}
	}
	value := func(name string) string {
		c, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Data["key"]
	}

	check("diff", gantry(t, args("diff")...))
	r := gantry(t, args("apply", "--field-conflicts=refuse")...)
	if r.code != 1 || !strings.Contains(r.stderr, "would take .data.key from helm-controller") {
		t.Errorf("apply refusing conflicts: exit %d, want 1 naming the field\n%s", r.code, r.stderr)
	}
	check("the refused apply", r)
	for _, name := range []string{"helm-owned", "kubectl-ssa", "kubectl-csa"} {
		if v := value(name); v != "v1" {
			t.Errorf("the refused apply wrote %s: %q", name, v)
		}
	}
	r = gantry(t, args("apply")...)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	check("apply", r)
	for _, name := range []string{"helm-owned", "kubectl-ssa", "kubectl-csa"} {
		if v := value(name); v != "v2" {
			t.Errorf("apply left %s at %q", name, v)
		}
	}
}
