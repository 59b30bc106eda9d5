package reporters

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/result"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update to accept):\n%s", path, got)
	}
}

const deploymentDiff = `--- live/Deployment.apps/shop/web
+++ desired/Deployment.apps/shop/web
@@ -6,7 +6,7 @@
   name: web
   namespace: shop
 spec:
-  replicas: 2
+  replicas: 3
   template:
     spec:
       containers:
`

// sample is a run with every kind of outcome.
func sample() *result.Result {
	start := time.Date(2026, 11, 21, 6, 0, 0, 0, time.UTC)
	return &result.Result{
		Schema:    result.SchemaVersion,
		Command:   "apply",
		Version:   "v0.1.0",
		Started:   start,
		Finished:  start.Add(4200 * time.Millisecond),
		Reason:    result.ReasonHealthCheckFailed,
		Message:   "1 of 4 objects not ready within the timeout (1m0s): Deployment.apps/shop/worker is InProgress: Ready: 0/1; pod worker-7d9 unschedulable: 0/1 nodes are available",
		Revision:  "main@sha1:0123abcd",
		Source:    "https://github.com/acme/shop",
		Inventory: &result.Inventory{Name: "shop", Namespace: "deploy"},
		Stages: []result.Stage{
			{Name: "build", Duration: 12 * time.Millisecond},
			{Name: "validate", Duration: 80 * time.Millisecond},
			{Name: "apply", Duration: 31 * time.Millisecond},
			{Name: "prune", Duration: 4 * time.Millisecond},
			{Name: "wait", Duration: 4 * time.Second, Error: "1 of 4 objects not ready"},
		},
		Objects: []result.Object{
			{ID: "shop_settings__ConfigMap", APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "settings", Action: result.Unchanged, Stage: "apply", Source: "deploy/settings.yaml", Health: &result.Health{Status: "Current"}},
			{ID: "shop_web_apps_Deployment", APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Action: result.Configured, Stage: "apply", Source: "deploy/web.yaml", Diff: deploymentDiff, Health: &result.Health{Status: "Current"},
				Conflicts: []result.Conflict{{Field: ".spec.replicas", Manager: "kube-controller-manager"}}},
			{ID: "shop_worker_apps_Deployment", APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "worker", Action: result.Created, Stage: "apply", Source: "deploy/worker.yaml",
				Diff:   "--- live/Deployment.apps/shop/worker\n+++ desired/Deployment.apps/shop/worker\n@@ -0,0 +1,3 @@\n+apiVersion: apps/v1\n+kind: Deployment\n+metadata: {name: worker}\n",
				Health: &result.Health{Status: "InProgress", Message: "Ready: 0/1; pod worker-7d9 unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector"}},
			{ID: "shop_old__Service", APIVersion: "v1", Kind: "Service", Namespace: "shop", Name: "old", Action: result.Deleted, Stage: "prune",
				Diff: "--- live/Service/shop/old\n+++ desired/Service/shop/old\n@@ -1,3 +0,0 @@\n-apiVersion: v1\n-kind: Service\n-metadata: {name: old}\n"},
		},
	}
}

func TestMarkdownGolden(t *testing.T) {
	t.Parallel()
	page := Page{RunURL: "https://github.com/acme/shop/actions/runs/42", Marker: "gantry:comment inventory=deploy/shop"}
	for d := FullDiffs; d <= CountsOnly; d++ {
		golden(t, fmt.Sprintf("markdown-%d-%s.md", d, strings.ReplaceAll(d.String(), " ", "-")), Markdown(sample(), page, d))
	}
	diff := sample()
	diff.Command, diff.Reason, diff.Message = "diff", result.ReasonProgressing, "changes pending"
	golden(t, "markdown-diff.md", Markdown(diff, Page{}, FullDiffs))

	// An apply with atomic: the failure as the cause, the rollback's run
	// beside it, and its outcome as the result.
	atomic := sample()
	atomic.Cause, atomic.Reason, atomic.RecordedRevision = atomic.Reason, result.ReasonRolledBack, 4
	atomic.Message += "; rolled back to revision 3"
	rb := sample()
	rb.Command, rb.Reason, rb.Message, rb.RolledBackTo, rb.RecordedRevision = "rollback", result.ReasonRolledBack, "revision 3 applied again", 3, 5
	rb.Objects = rb.Objects[:1]
	rb.Objects[0].Action, rb.Objects[0].Health = result.Configured, &result.Health{Status: "Current"}
	atomic.Rollback = rb
	md := Markdown(atomic, page, ObjectsOnly)
	golden(t, "markdown-atomic.md", md)
	for _, want := range []string{"HealthCheckFailed, rolled back to revision 3", "#### Rollback: ↩️ gantry rollback to revision 3: RolledBack", "**History** revision 5"} {
		if !strings.Contains(md, want) {
			t.Errorf("the atomic rendering lacks %q", want)
		}
	}
}

// big is a run that changed n objects, each with a sizeable diff.
func big(n int) *result.Result {
	res := sample()
	res.Objects = nil
	var diff strings.Builder
	diff.WriteString("--- live/ConfigMap/x\n+++ desired/ConfigMap/x\n@@ -1,40 +1,40 @@\n")
	for i := range 40 {
		fmt.Fprintf(&diff, "-  key%d: old value %d\n+  key%d: new value %d\n", i, i, i, i)
	}
	for i := range n {
		res.Objects = append(res.Objects, result.Object{
			ID: fmt.Sprintf("apps_cm-%05d__ConfigMap", i), APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps",
			Name: fmt.Sprintf("cm-%05d", i), Action: result.Configured, Source: fmt.Sprintf("deploy/cm-%05d.yaml", i), Diff: diff.String(),
		})
	}
	return res
}

func TestTenThousandObjectsFitEveryLimit(t *testing.T) {
	t.Parallel()
	res := big(10000)
	page := Page{RunURL: "https://github.com/acme/shop/actions/runs/42"}
	summary, sd := Fit(res, page, SummaryLimit)
	comment, cd := Fit(res, page, CommentLimit)
	if len(summary) > 1<<20 {
		t.Errorf("summary is %d bytes, over 1 MiB", len(summary))
	}
	if n := len([]rune(comment)); n > CommentLimit {
		t.Errorf("comment is %d characters, over 65,536", n)
	}
	for name, s := range map[string]string{"summary": summary, "comment": comment} {
		if !strings.Contains(s, "left out to stay within the size limit") || !strings.Contains(s, "9750 more changed objects") {
			t.Errorf("%s does not say what it left out:\n%s", name, s[len(s)-400:])
		}
		if !strings.Contains(s, "[Run details](https://github.com/acme/shop/actions/runs/42)") {
			t.Errorf("%s does not link the run", name)
		}
	}
	t.Logf("10,000 objects: summary %d bytes at %q, comment %d bytes at %q", len(summary), sd, len(comment), cd)

	// A smaller run keeps its diffs.
	small, d := Fit(big(20), page, CommentLimit)
	if d != FullDiffs || !strings.Contains(small, "new value 39") {
		t.Errorf("20 objects rendered at %q", d)
	}
}

func TestFenceOutlastsBackticksInDiffs(t *testing.T) {
	t.Parallel()
	f := fence("diff", "+ run: |\n+   echo ````\n")
	if !strings.HasPrefix(f, "`````diff\n") || !strings.HasSuffix(f, "\n`````") {
		t.Errorf("fence:\n%s", f)
	}
}

func TestCellEscapesTableBreakers(t *testing.T) {
	t.Parallel()
	if got := cell("a|b\nc <script>"); got != `a\|b<br>c &lt;script&gt;` {
		t.Errorf("cell = %q", got)
	}
}

// The summary says which health rules decided how many objects, each
// rule's name (which a run file writes) as plain text.
func TestHealthRulesFact(t *testing.T) {
	res := sample()
	res.Objects[0].Health = &result.Health{Status: "Current", Rule: "built-in rule for Certificate.cert-manager.io"}
	res.Objects[1].Health = &result.Health{Status: "Failed", Rule: "rule for Gizmo.example.com at deploy/[x](http://evil)*.yaml:3", Message: "rule for Gizmo.example.com at deploy/[x](http://evil)*.yaml:3: failed: Broken"}
	md := Markdown(res, Page{}, ObjectsOnly)
	for _, want := range []string{"**Health** decided by built-in rule for Certificate.cert-manager.io (1), rule for Gizmo.example.com at deploy/\\[x\\]\\(http://evil\\)\\*.yaml:3 (1); kstatus decided the rest"} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
	if strings.Contains(md, "[x](http://evil)") {
		t.Errorf("a rule's name is read as Markdown:\n%s", md)
	}
}
