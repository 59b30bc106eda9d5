package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/result"
)

// A set that shrinks to 40 % of what the inventory lists (a folder
// renamed, manifests moved elsewhere) is refused by the default guard
// before anything is written, in apply and in diff, naming the count;
// max-prune allows it.
func TestLargePruneIsRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	set := func(n int, value string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%02d\n  namespace: %s\ndata:\n  v: %s\n", i, ns, value)
		}
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "set.yaml"), b.String())
		return dir
	}
	args := func(dir string, extra ...string) []string {
		return append([]string{"--path=" + dir, "--inventory=guard", "--inventory-namespace=" + ns, "--timeout=60s"}, extra...)
	}
	if r := gantry(t, append([]string{"apply"}, args(set(20, "a"))...)...); r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	shrunk := set(8, "b") // 12 of 20 to prune, and a change to the 8
	const says = "prune would delete 12 of the 20 objects inventory"

	r := gantry(t, append([]string{"diff"}, args(shrunk)...)...)
	if r.code != 1 || !strings.Contains(r.stderr, says) {
		t.Errorf("diff: exit %d, want 1 saying %q\n%s", r.code, says, r.stderr)
	}
	r = gantry(t, append([]string{"apply"}, args(shrunk)...)...)
	if r.code != 1 || !strings.Contains(r.stderr, says) || r.res == nil || r.res.Reason != result.ReasonValidationFailed {
		t.Fatalf("apply: exit %d, want 1 saying %q\n%s", r.code, says, r.stderr)
	}
	list, err := env.Client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "cm-") {
			n++
			if cm.Data["v"] != "a" {
				t.Errorf("%s was written by the refused run: %v", cm.Name, cm.Data)
			}
		}
	}
	if n != 20 {
		t.Errorf("%d ConfigMaps after the refused run, want all 20", n)
	}

	r = gantry(t, append([]string{"apply"}, args(shrunk, "--max-prune=60%")...)...)
	if r.code != 0 || counts(t, r)[result.Deleted] != 12 || counts(t, r)[result.Configured] != 8 {
		t.Errorf("with max-prune=60%%: exit %d, %v, want 12 deleted and 8 configured\n%s", r.code, counts(t, r), r.stderr)
	}
}
