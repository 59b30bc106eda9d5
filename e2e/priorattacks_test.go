package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
)

// runWithKey runs gantry in-process with key as its record-key ("" for
// none) and returns its exit code and everything it printed and wrote
// (the JSON report and the .diff).
func runWithKey(t *testing.T, key string, args ...string) (int, string) {
	t.Helper()
	out := t.TempDir()
	environ := []string{"HOME=" + os.Getenv("HOME"), "GANTRY_KUBECONFIG=" + env.Cluster.Kubeconfig, "GANTRY_REPORT=" + filepath.Join(out, "report.json")}
	if key != "" {
		environ = append(environ, "GANTRY_RECORD_KEY="+key)
	}
	var stdout, stderr bytes.Buffer
	code := entrypoint.Run(context.Background(), args, environ, &stdout, &stderr)
	all := stdout.String() + stderr.String()
	for _, f := range []string{"report.json", "report.diff"} {
		b, _ := os.ReadFile(filepath.Join(out, f))
		all += string(b)
	}
	return code, all
}

func subjectsOf(t *testing.T, ns, name string) []string {
	t.Helper()
	rb, err := env.Client.RbacV1().RoleBindings(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range rb.Subjects {
		out = append(out, s.Name)
	}
	return out
}

// Which revision keeps what an adopted object held before is read only
// from the signed newest revision. An admin's RoleBinding (alice,
// mallory) is adopted, given back by a rollback, mallory revoked, adopted
// again (alice only), then a later apply. The namespace writer takes the
// object out of the `prior` list of the revision that kept its content
// last, so that a search through the lists would fall to the earlier
// adoption. The rollback puts back alice only.
func TestRecordPriorListsCannotRedirectAnUndo(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	inv := []string{"--inventory=redir", "--inventory-namespace=" + ns, "--timeout=60s"}
	apply := append([]string{"apply", "--path=" + dir}, inv...)
	writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", "one"))
	mustRun := func(what string, args ...string) {
		t.Helper()
		if r := gantry(t, args...); r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", what, r.code, r.stderr)
		}
	}
	mustRun("revision 1", apply...)
	subject := func(name string) rbacv1.Subject {
		return rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: name}
	}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rb"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{subject("alice"), subject("mallory")},
	}, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "rb.yaml"), `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: rb, namespace: `+ns+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
`)
	mustRun("revision 2 (adopts alice and mallory)", apply...)
	mustRun("rollback to 1 (gives them back)", append([]string{"rollback", "--to=1"}, inv...)...)
	rb, err := env.Client.RbacV1().RoleBindings(ns).Get(ctx, "rb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rb.Subjects = []rbacv1.Subject{subject("alice")}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Update(ctx, rb, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	mustRun("revision 4 (adopts alice)", apply...)
	writeFile(t, filepath.Join(dir, "settings.yaml"), configMapYAML(ns, "settings", "two"))
	mustRun("revision 5", apply...)
	editRevisions(t, namespaceWriter(t, ns), ns, "redir", func(revs, entries []map[string]any) []map[string]any {
		for _, rv := range revs {
			if rv["number"].(float64) == 4 {
				delete(rv, "prior")
			}
		}
		return entries
	})
	back := gantry(t, append([]string{"rollback", "--to=3"}, inv...)...)
	got := subjectsOf(t, ns, "rb")
	if !recordAttack(!slices.Contains(got, "mallory")) {
		t.Errorf("the rollback put back a revoked subject from the earlier adoption: %v (exit %d)\n%s", got, back.code, back.stderr)
	}
}

// What an adopted object held before is sealed, all of it: a ConfigMap
// made by hand holding the workflow's database password, taken over by a
// set that does not hold it, leaves nothing the namespace writer can
// read in the revision.
func TestPriorContentIsSealed(t *testing.T) {
	t.Parallel()
	invNS, app := env.Namespace(t), env.Namespace(t)
	ctx := context.Background()
	password, handmade := canary("dbpass"), canary("by-hand-only")
	createByHand(t, app, "db-config", map[string]string{"url": "postgres://app:" + password + "@db/orders", "note": handmade})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "db.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db-config\n  namespace: "+app+"\ndata:\n  url: postgres://db/orders\n")
	writeFile(t, filepath.Join(dir, "creds.yaml"), "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: "+app+"\nstringData:\n  password: ${DB_PASSWORD}\n")
	code, out := runWithKey(t, testRecordKey, "apply", "--path="+dir, "--inventory=sealed", "--inventory-namespace="+invNS, "--timeout=60s", "--substitute=DB_PASSWORD="+password)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	list, err := namespaceWriter(t, invNS).CoreV1().Secrets(invNS).List(ctx, metav1.ListOptions{LabelSelector: inventory.RevisionOfLabel + "=sealed"})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("revision Secrets: %v, %d", err, len(list.Items))
	}
	var stored strings.Builder
	for _, s := range list.Items {
		stored.WriteString(gunzip(t, s.Data["objects.json.gz"]))
	}
	// The diff shows what the apply removes (the note, not a secret gantry
	// knows of); the password it masks.
	leaks := append(scanForSecrets(stored.String(), password, handmade), scanForSecrets(out, password)...)
	if !recordAttack(len(leaks) == 0) {
		t.Errorf("what the adopted ConfigMap held is readable where the inventory is, or the password is printed: %v", leaks)
	}
}

// A field that held a substituted secret, dropped by a later set after
// the workflow's value was rotated, is masked in diff's and apply's
// outputs by the fields the newest revision recorded: the old value is
// printed nowhere.
func TestDroppedSecretFieldStaysMasked(t *testing.T) {
	t.Parallel()
	invNS, app := env.Namespace(t), env.Namespace(t)
	applied, rotated := canary("applied-pass"), canary("rotated-pass")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cfg.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: "+app+"\ndata:\n  url: postgres://db/orders\n  password: ${DB_PASSWORD}\n")
	inv := []string{"--inventory=masks", "--inventory-namespace=" + invNS}
	if code, out := runWithKey(t, testRecordKey, append([]string{"apply", "--path=" + dir, "--timeout=60s", "--substitute=DB_PASSWORD=" + applied}, inv...)...); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	writeFile(t, filepath.Join(dir, "cfg.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: "+app+"\ndata:\n  url: postgres://db/orders\n")
	var printed strings.Builder
	for _, cmd := range [][]string{
		append([]string{"diff", "--path=" + dir, "--substitute=DB_PASSWORD=" + rotated}, inv...),
		append([]string{"apply", "--path=" + dir, "--timeout=60s", "--substitute=DB_PASSWORD=" + rotated}, inv...),
	} {
		code, out := runWithKey(t, testRecordKey, cmd...)
		if code != 0 && code != 3 {
			t.Fatalf("%s: exit %d\n%s", cmd[0], code, out)
		}
		if !strings.Contains(out, "password") {
			t.Fatalf("%s does not show the field dropped; the case does not hold:\n%s", cmd[0], out)
		}
		printed.WriteString(out)
	}
	for _, leak := range scanForSecrets(printed.String(), applied, rotated) {
		t.Errorf("the value applied before is printed: %q", leak)
	}
}

// drift's report from a revision whose Secrets are sealed, without the
// record-key, is refused (exit 2) rather than report a Secret edited by
// hand as in sync.
func TestDriftWithoutTheKeyOfSealedSecrets(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "token.yaml"), secretYAML(ns, canary("sealed-token")))
	inv := []string{"--inventory=sealeddrift", "--inventory-namespace=" + ns}
	if code, out := runWithKey(t, testRecordKey, append([]string{"apply", "--path=" + dir, "--timeout=60s"}, inv...)...); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, "token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["token"] = []byte("edited-by-hand-0123")
	if _, err := env.Client.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	if code, out := runWithKey(t, testRecordKey, append([]string{"drift", "--timeout=60s"}, inv...)...); code != 3 {
		t.Errorf("drift with the key: exit %d, want 3 (drifted)\n%s", code, out)
	}
	code, out := runWithKey(t, "", append([]string{"drift", "--timeout=60s"}, inv...)...)
	if code != 2 || !strings.Contains(out, "record-key") {
		t.Errorf("drift without the key: exit %d, want 2 naming record-key\n%s", code, out)
	}
}
