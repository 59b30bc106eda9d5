package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/reporters/fakeapi"
	"github.com/gantry-dev/gantry/result"
)

// driftRun is one gantry run as a GitHub Action on a schedule would make
// it: its outputs, its job summary and the drift issue on the local
// stand-in of GitHub's API.
type driftRun struct {
	gantryRun
	outputs, summary string
	outputsFile      string
}

func runOnSchedule(t *testing.T, gh *httptest.Server, token string, args ...string) driftRun {
	t.Helper()
	dir := t.TempDir()
	report, outputs, summary := filepath.Join(dir, "report.json"), filepath.Join(dir, "outputs"), filepath.Join(dir, "summary.md")
	for _, f := range []string{outputs, summary} {
		writeFile(t, f, "")
	}
	environ := []string{"HOME=" + os.Getenv("HOME"), "GANTRY_KUBECONFIG=" + env.Cluster.Kubeconfig, "GANTRY_REPORT=" + report, recordKeyEnv,
		"GITHUB_ACTIONS=true", "GITHUB_EVENT_NAME=schedule", "GITHUB_REPOSITORY=acme/shop", "GITHUB_API_URL=" + gh.URL,
		"GITHUB_GRAPHQL_URL=" + gh.URL + "/graphql", "GITHUB_SERVER_URL=https://github.com", "GITHUB_RUN_ID=42",
		"GITHUB_ACTOR=octocat", "GITHUB_OUTPUT=" + outputs, "GITHUB_STEP_SUMMARY=" + summary, "GANTRY_GITHUB_TOKEN=" + token}
	var stdout, stderr bytes.Buffer
	code := entrypoint.Run(context.Background(), args, environ, &stdout, &stderr)
	r := driftRun{gantryRun: gantryRun{code: code, stdout: stdout.String(), stderr: stderr.String()}}
	if b, err := os.ReadFile(report); err == nil {
		r.res = &result.Result{}
		if err := json.Unmarshal(b, r.res); err != nil {
			t.Fatalf("report: %v", err)
		}
	}
	o, _ := os.ReadFile(outputs)
	s, _ := os.ReadFile(summary)
	r.outputs, r.summary, r.outputsFile = string(o), string(s), outputs
	t.Logf("gantry %s: exit %d\n%s", args[0], code, r.stderr)
	return r
}

// driftOf finds an object's drift entry for a field.
func driftOf(r gantryRun, ref, field string) *result.Drift {
	o := objectByRef(r, ref)
	if o == nil {
		return nil
	}
	for i := range o.Drift {
		if o.Drift[i].Field == field {
			return &o.Drift[i]
		}
	}
	return nil
}

// kubectl scale, kubectl label, kubectl edit of a ConfigMap and a deleted
// Secret are each reported as drift with the field manager that made the
// change (exit 3), in the report, the summary, the outputs and one issue;
// correct restores them all; with nothing drifted drift exits 0 and the
// issue is closed. No Secret value appears anywhere.
func TestDriftReportsHandChangesAndCorrectsThem(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	secret := canary("driftsecret")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), webDeployment(ns, "settings", ""))
	writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", "one"))
	writeFile(t, filepath.Join(dir, "token.yaml"), secretYAML(ns, secret))
	if r := gantry(t, "apply", "--path="+dir, "--inventory=shop", "--inventory-namespace="+ns, "--timeout=60s"); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	gh := &fakeapi.GitHub{T: t, Token: "ghs_" + canary("token"), Viewer: "github-actions"}
	srv := httptest.NewServer(gh)
	defer srv.Close()
	drift := []string{"drift", "--inventory=shop", "--inventory-namespace=" + ns, "--timeout=60s"}
	scan := func(r driftRun) {
		t.Helper()
		res, _ := json.Marshal(r.res)
		issues, _ := json.Marshal(gh.Issues())
		// The runner is told each secret to mask: that line, and no other.
		if !strings.Contains(r.stderr, "::add-mask::"+gh.Token) {
			t.Errorf("the token was not masked")
		}
		for _, leak := range scanForSecrets(r.stdout+withoutMasks(r.stderr)+string(res)+r.outputs+r.summary+string(issues), secret, base64.StdEncoding.EncodeToString([]byte(secret)), gh.Token) {
			t.Errorf("%q is printed or reported", leak)
		}
	}

	clean := runOnSchedule(t, srv, gh.Token, drift...)
	scan(clean)
	if clean.code != 0 || clean.res.Reason != result.ReasonNoDrift || clean.res.Counts()[result.InSync] != 3 {
		t.Fatalf("drift right after the apply: exit %d, %s %v\n%s", clean.code, clean.res.Reason, clean.res.Counts(), clean.stderr)
	}
	if len(gh.Issues()) != 0 {
		t.Errorf("an issue was opened without drift")
	}

	kubectl := func(extra []string, args ...string) {
		t.Helper()
		cmd := exec.Command(kubectlPath(t), append([]string{"--kubeconfig", env.Cluster.Kubeconfig, "-n", ns}, args...)...)
		cmd.Env = append(append(os.Environ(), recordKeyEnv), extra...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	kubectl(nil, "scale", "deployment/web", "--replicas=3")
	kubectl(nil, "label", "deployment/web", "owner=someone")
	kubectl([]string{"KUBE_EDITOR=sed -i s/one/edited-by-hand/"}, "edit", "configmap/settings")
	kubectl(nil, "delete", "secret/token")

	found := runOnSchedule(t, srv, gh.Token, drift...)
	scan(found)
	if found.code != entrypoint.ExitChanges || found.res.Reason != result.ReasonDriftDetected {
		t.Fatalf("drift after the changes by hand: exit %d, %s\n%s", found.code, found.res.Reason, found.stderr)
	}
	for _, want := range []struct{ ref, field, change, manager string }{
		{"Deployment.apps/" + ns + "/web", ".spec.replicas", "changed", "kubectl"},
		{"Deployment.apps/" + ns + "/web", ".metadata.labels.owner", "added", "kubectl-label"},
		{"ConfigMap/" + ns + "/settings", ".data.value", "changed", "kubectl-edit"},
	} {
		d := driftOf(found.gantryRun, want.ref, want.field)
		if d == nil || d.Change != want.change || d.Manager != want.manager {
			t.Errorf("%s %s: %+v, want %s by %s", want.ref, want.field, d, want.change, want.manager)
		}
	}
	// The values, as applied and as found, in the report, the console
	// and the summary; the diff a correction would make, on stdout.
	if d := driftOf(found.gantryRun, "Deployment.apps/"+ns+"/web", ".spec.replicas"); d == nil || d.Values() != "1 → 3" {
		t.Errorf(".spec.replicas: %+v, want 1 → 3", d)
	}
	if !strings.Contains(found.stderr, ".spec.replicas changed by kubectl") || !strings.Contains(found.stderr, ": 1 → 3") || !strings.Contains(found.summary, "`1 → 3`") {
		t.Errorf("the console or the summary does not show 1 → 3:\n%s\n%s", found.stderr, found.summary)
	}
	if !strings.Contains(found.stdout, "-  replicas: 3") || !strings.Contains(found.stdout, "+  replicas: 1") || !strings.Contains(found.stdout, "2 drifted, 1 missing,") {
		t.Errorf("stdout does not show what a correction would change:\n%s", found.stdout)
	}
	if d := driftOf(found.gantryRun, "ConfigMap/"+ns+"/settings", ".data.value"); d != nil && d.Time == nil {
		t.Errorf("kubectl edit's change has no time")
	}
	if o := objectByRef(found.gantryRun, "Secret/"+ns+"/token"); o == nil || o.Action != result.Missing {
		t.Errorf("the deleted Secret: %+v, want missing", o)
	}
	if outs := parseOutputs(t, found.outputsFile); outs["drifted"] != "true" || outs["drifted-objects"] != "3" {
		t.Errorf("outputs drifted=%q drifted-objects=%q\n%s", outs["drifted"], outs["drifted-objects"], found.outputs)
	}
	if !strings.Contains(found.summary, "gantry drift: 3 objects drifted") || !strings.Contains(found.summary, "kubectl-label") {
		t.Errorf("summary:\n%s", found.summary)
	}
	issues := gh.Issues()
	if len(issues) != 1 || issues[0].State != "open" || !strings.Contains(issues[0].Body, "kubectl-edit") {
		t.Fatalf("issues after the drift: %+v", issues)
	}

	fixed := runOnSchedule(t, srv, gh.Token, append(drift, "--correct")...)
	scan(fixed)
	if fixed.code != entrypoint.ExitChanges || fixed.res.Correction == nil || !fixed.res.Correction.Succeeded() {
		t.Fatalf("drift --correct: exit %d, correction %+v\n%s", fixed.code, fixed.res.Correction, fixed.stderr)
	}
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 1 || d.Labels["owner"] != "" {
		t.Errorf("after correct: replicas %d, labels %v", *d.Spec.Replicas, d.Labels)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil || cm.Data["value"] != "one" {
		t.Errorf("after correct: ConfigMap %v, %v", cm.Data, err)
	}
	if s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, "token", metav1.GetOptions{}); err != nil || string(s.Data["token"]) != secret {
		t.Errorf("after correct: the Secret is not back: %v", err)
	}

	gone := runOnSchedule(t, srv, gh.Token, drift...)
	scan(gone)
	if gone.code != 0 || gone.res.Reason != result.ReasonNoDrift {
		t.Fatalf("drift after correct: exit %d, %s\n%s", gone.code, gone.res.Reason, gone.stderr)
	}
	if issues := gh.Issues(); len(issues) != 1 || issues[0].State != "closed" {
		t.Errorf("the issue once the drift was gone: %+v", issues)
	}
	if got := strings.Join(gh.Writes(), ", "); !strings.HasPrefix(got, "POST issue") || !strings.HasSuffix(got, "closed") {
		t.Errorf("issue writes: %s", got)
	}
}

// drift over a run file: every unit compared, one report; a unit changed
// by hand is DriftDetected with its manager, the other in sync; exit 3.
func TestDriftOverARunFile(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	root := t.TempDir()
	for _, u := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(root, u), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, u, "cm.yaml"), configMapYAML(ns, "cm-"+u, "as-applied"))
	}
	runFile := filepath.Join(root, "gantry.yaml")
	writeFile(t, runFile, "defaults:\n  inventory-namespace: "+ns+"\n  kubeconfig: "+inWorkspace(t, root, env.Cluster.Kubeconfig, "kubeconfig")+"\n  timeout: 1m\nunits:\n"+
		"  - {name: a, path: a, inventory: a}\n  - {name: b, path: b, inventory: b}\n")
	if r := gantryRunFile(t, ctx, "apply", "--run-file", runFile); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "cm-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["value"] = "changed-by-a-script"
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "nightly-script"}); err != nil {
		t.Fatal(err)
	}
	// A script's own field manager is not one of people's: its change
	// is reported as managed by it, not as drift.
	r := gantryRunFile(t, ctx, "drift", "--run-file", runFile)
	if b := r.unit(t, "b"); r.code != 0 || b.Reason != result.ReasonNoDrift || len(b.Objects) != 1 || len(b.Objects[0].ManagedBy) != 1 || b.Objects[0].ManagedBy[0].Manager != "nightly-script" {
		t.Fatalf("drift --run-file of a script's change: exit %d, unit b %+v\n%s", r.code, b.Result, r.stderr)
	}
	// Named by the workflow, its changes are drift.
	r = gantryRunFile(t, ctx, "drift", "--run-file", runFile, "--hand-managers", "nightly-script")
	if r.code != entrypoint.ExitChanges || r.run == nil || r.run.Reason != result.ReasonDriftDetected {
		t.Fatalf("drift --run-file: exit %d\n%s", r.code, r.stderr)
	}
	if a := r.unit(t, "a"); a.Reason != result.ReasonNoDrift {
		t.Errorf("unit a: %s %s", a.Reason, a.Message)
	}
	b := r.unit(t, "b")
	if d := driftOf(gantryRun{res: b.Result}, "ConfigMap/"+ns+"/cm-b", ".data.value"); b.Reason != result.ReasonDriftDetected || d == nil || d.Manager != "nightly-script" {
		t.Errorf("unit b: %s, drift %+v", b.Reason, d)
	}
}

// A Secret changed by hand is drift, named by its field and manager; its
// values, the applied one and the one set by hand, appear nowhere.
func TestDriftOfASecretShowsNoValue(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	applied, byHand := canary("applied"), canary("byhand")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "token.yaml"), secretYAML(ns, applied))
	if r := gantry(t, "apply", "--path="+dir, "--inventory=sec", "--inventory-namespace="+ns); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, "token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["token"] = []byte(byHand)
	if _, err := env.Client.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"drift"}, {"drift", "--path=" + dir}, {"history"}, {"drift", "--correct"}} {
		r := gantry(t, append(args, "--inventory=sec", "--inventory-namespace="+ns)...)
		res, _ := json.Marshal(r.res)
		for _, leak := range scanForSecrets(r.stdout+r.stderr+string(res), applied, byHand,
			base64.StdEncoding.EncodeToString([]byte(applied)), base64.StdEncoding.EncodeToString([]byte(byHand))) {
			t.Errorf("gantry %v prints or reports %q", args, leak)
		}
		if args[0] == "drift" && (r.code != entrypoint.ExitChanges || driftOf(r, "Secret/"+ns+"/token", ".data.token") == nil) {
			t.Errorf("gantry %v: exit %d, the Secret's drift not named\n%s", args, r.code, r.stderr)
		}
	}
	if s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, "token", metav1.GetOptions{}); err != nil || string(s.Data["token"]) != applied {
		t.Errorf("after correct the Secret holds another value: %v", err)
	}
}

// Right after an apply nothing has drifted, on the shapes people ship: an
// app with its Namespace, a CRD and its custom resource, a Deployment, its
// HPA and Service; an overlay with a component, generators and patches.
// What the API server defaults and the controllers write is not drift.
func TestNoDriftRightAfterAnApply(t *testing.T) {
	t.Parallel()
	dir, appNS := app(t, "app")
	invNS := strings.TrimSuffix(appNS, "-app")
	if r := gantry(t, applyArgs(dir, invNS, appNS)...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	web := env.Namespace(t) + "-web"
	t.Cleanup(func() { _ = env.Client.CoreV1().Namespaces().Delete(context.Background(), web, metav1.DeleteOptions{}) })
	webArgs := []string{"--inventory=web", "--inventory-namespace=" + invNS, "--target-namespace=" + web, "--timeout=90s"}
	if r := gantry(t, append([]string{"apply", "--path=" + filepath.Join("testdata", "offline", "shapes", "web", "overlays", "prod")}, webArgs...)...); r.code != 0 {
		t.Fatalf("apply of the overlay: exit %d\n%s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"drift", "--inventory=app", "--inventory-namespace=" + invNS},
		{"drift", "--path=" + dir, "--substitute=NS=" + appNS, "--inventory=app", "--inventory-namespace=" + invNS},
		{"drift", "--inventory=web", "--inventory-namespace=" + invNS},
	} {
		r := gantry(t, args...)
		if r.code != 0 || r.res.Reason != result.ReasonNoDrift {
			var drifted []string
			for _, o := range r.res.Objects {
				for _, d := range o.Drift {
					drifted = append(drifted, fmt.Sprintf("%s %s %s by %s", o.Ref(), d.Field, d.Change, d.Manager))
				}
			}
			t.Errorf("gantry %v right after the apply: exit %d, %s\n%s\n%s", args, r.code, r.res.Reason, strings.Join(drifted, "\n"), r.stderr)
		}
	}
}
