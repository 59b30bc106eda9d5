package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/result"
)

var (
	ociRepositories = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}
	kustomizations  = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
)

// fluxControllers starts Flux's own source-controller and
// kustomize-controller (built by make flux-tools) against the test
// cluster, watching ns only, and installs their CRDs. Without the
// binaries the test is skipped, saying how to run it; under make
// test-flux (GANTRY_FLUX=1) their absence fails it.
func fluxControllers(t *testing.T, ns string) dynamic.Interface {
	t.Helper()
	env.Require(t)
	var bins []string
	for _, name := range []string{"source-controller", "kustomize-controller", "flux-crds", "kubectl"} {
		p, err := cluster.Tool(name)
		if err != nil {
			if os.Getenv("GANTRY_FLUX") != "" {
				t.Fatalf("Flux's controllers are not built: %v", err)
			}
			t.Skipf("Flux's controllers are not built (%v): make test-flux builds them and runs this test", err)
		}
		bins = append(bins, p)
	}
	kubectl := bins[3]
	if out, err := exec.Command(kubectl, "--kubeconfig="+env.Cluster.Kubeconfig, "apply", "--server-side", "-f", bins[2]).CombinedOutput(); err != nil {
		t.Fatalf("installing Flux's CRDs: %v\n%s", err, out)
	}
	if out, err := exec.Command(kubectl, "--kubeconfig="+env.Cluster.Kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "-f", bins[2]).CombinedOutput(); err != nil {
		t.Fatalf("waiting for Flux's CRDs: %v\n%s", err, out)
	}
	storage := freeAddr(t)
	start := func(bin string, args ...string) {
		logs := &bytes.Buffer{}
		cmd := exec.Command(bin, append(args,
			"--enable-leader-election=false", "--watch-all-namespaces=false",
			"--metrics-addr="+freeAddr(t), "--health-addr="+freeAddr(t), "--log-level=info")...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.Kubeconfig, "RUNTIME_NAMESPACE="+ns)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("%s logs:\n%s", filepath.Base(bin), lastLines(logs.String(), 30))
			}
		})
	}
	start(bins[0], "--storage-path="+t.TempDir(), "--storage-addr="+storage, "--storage-adv-addr="+storage)
	start(bins[1])
	dyn, err := dynamic.NewForConfig(env.Cluster.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitReady waits for a Flux object's Ready condition to be True and ok
// (when given) to hold for it.
func waitReady(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, ok func(*unstructured.Unstructured) bool) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not there yet: poll again
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" {
				last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				if m["status"] == "True" && (ok == nil || ok(u)) {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s is not Ready: %s", gvr.Resource, ns, name, last)
	}
}

// requestReconcile asks a Flux object to reconcile now, as flux reconcile
// does.
func requestReconcile(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) string {
	t.Helper()
	at := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, at)
	if _, err := dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return at
}

func handled(at string) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		got, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt")
		return got == at
	}
}

// The path from CI deploys to Flux, end to end with Flux's own
// controllers: gantry deploys an app and pushes it signed; an
// OCIRepository verifying the cosign signature and a Kustomization become
// Ready and adopt the same objects; a field removed from the
// configuration stays while gantry co-owns it; gantry release hands the
// inventory over, and Flux's next reconciliation removes the field; gantry
// delete on the released inventory deletes nothing.
func TestFluxHandOff(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dyn := fluxControllers(t, ns)
	reg, creds := realRegistry(t)
	user, password := strings.TrimPrefix(creds[0], "--registry-username="), strings.TrimPrefix(creds[1], "--registry-password=")
	priv, pub := cosignKeys(t, "pw")
	ctx := context.Background()

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "app.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: "+ns+"\ndata:\n  mode: live\n  legacy: kept\n---\n"+
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: "+ns+"\nspec:\n  selector:\n    app: web\n  ports:\n    - port: 80\n")
	inv := []string{"--inventory=shop", "--inventory-namespace=" + ns}
	if r := gantry(t, append([]string{"apply", "--path=" + dir, "--wait=false"}, inv...)...); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	svc, err := env.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	repo := "oci://" + reg + "/acme/shop"
	if r := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+repo+":live", "--revision=main@sha1:1111111111111111111111111111111111111111", "--sign=cosign", "--cosign-key="+priv, "--cosign-password=pw"); r.code != 0 {
		t.Fatalf("push: exit %d\n%s", r.code, r.stderr)
	}

	// What a Flux user writes: registry credentials, the cosign public
	// key, an OCIRepository that verifies, a Kustomization that prunes.
	dockerConfig := fmt.Sprintf(`{"auths":{%q:{"username":%q,"password":%q}}}`, reg, user, password)
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "registry", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(dockerConfig)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cosign-pub", Namespace: ns}, Data: map[string][]byte{"cosign.pub": []byte(readAll(t, pub))}},
	}
	for _, s := range secrets {
		if _, err := env.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	source := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
		"metadata": map[string]any{"name": "shop", "namespace": ns},
		"spec": map[string]any{
			"url": repo, "ref": map[string]any{"tag": "live"}, "interval": "1h", "insecure": true,
			"secretRef": map[string]any{"name": "registry"},
			"verify":    map[string]any{"provider": "cosign", "secretRef": map[string]any{"name": "cosign-pub"}},
		},
	}}
	kustomization := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "shop", "namespace": ns},
		"spec": map[string]any{
			"interval": "1h", "path": "./", "prune": true,
			"sourceRef": map[string]any{"kind": "OCIRepository", "name": "shop"},
		},
	}}
	if _, err := dyn.Resource(ociRepositories).Namespace(ns).Create(ctx, source, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(kustomizations).Namespace(ns).Create(ctx, kustomization, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, dyn, ociRepositories, ns, "shop", func(u *unstructured.Unstructured) bool {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "SourceVerified" && m["status"] == "True" {
				return true
			}
		}
		return false
	})
	waitReady(t, dyn, kustomizations, ns, "shop", nil)

	// Flux adopted gantry's objects: same UID, Flux's labels beside
	// gantry's.
	got, err := env.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || got.UID != svc.UID || got.Labels["kustomize.toolkit.fluxcd.io/name"] != "shop" {
		t.Fatalf("Service web after Flux: %v, uid kept %v, labels %v", err, got.UID == svc.UID, got.Labels)
	}

	// The next revision drops a field. While gantry's field manager
	// co-owns it, Flux's apply cannot remove it.
	replaceInFile(t, filepath.Join(dir, "app.yaml"), "  legacy: kept\n", "")
	if r := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+repo+":live", "--revision=main@sha1:2222222222222222222222222222222222222222", "--sign=cosign", "--cosign-key="+priv, "--cosign-password=pw"); r.code != 0 {
		t.Fatalf("push: exit %d\n%s", r.code, r.stderr)
	}
	waitReady(t, dyn, ociRepositories, ns, "shop", handled(requestReconcile(t, dyn, ociRepositories, ns, "shop")))
	waitReady(t, dyn, kustomizations, ns, "shop", handled(requestReconcile(t, dyn, kustomizations, ns, "shop")))
	if cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); err != nil || cm.Data["legacy"] != "kept" {
		t.Fatalf("before release, legacy = %q (%v): gantry's field manager should still own it", cm.Data["legacy"], err)
	}

	r := gantry(t, append([]string{"release", "--artifact=" + repo + ":live", "--verify=cosign", "--cosign-public-key=" + pub}, append(inv, creds...)...)...)
	if r.code != 0 || counts(t, r)[result.Released] != 2 {
		t.Fatalf("release: exit %d, %v\n%s", r.code, counts(t, r), r.stderr)
	}
	// It prints the Flux objects that reconcile the same artifact, as
	// this test wrote them.
	for _, want := range []string{"kind: OCIRepository", "url: " + repo, "tag: live", "provider: cosign", "name: shop-cosign", "kind: Kustomization", "path: ./", "prune: true"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("release's Flux objects lack %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, password) {
		t.Error("release printed the registry password")
	}
	// After the release, Flux's next reconciliation of the same revision
	// removes it.
	waitReady(t, dyn, kustomizations, ns, "shop", handled(requestReconcile(t, dyn, kustomizations, ns, "shop")))
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil || cm.Data["mode"] != "live" {
		t.Fatalf("ConfigMap settings: %v %v", err, cm)
	}
	if _, ok := cm.Data["legacy"]; ok {
		t.Errorf("the field removed from the configuration is still in the cluster: %v", cm.Data)
	}
	for _, m := range cm.ManagedFields {
		if m.Manager == "gantry" {
			t.Errorf("gantry still manages fields: %+v", m)
		}
	}

	// The released inventory is gone: delete deletes nothing.
	r = gantry(t, append([]string{"delete"}, inv...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("delete: exit %d\n%s", r.code, r.stderr)
	}
	if got, err := env.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil || got.UID != svc.UID {
		t.Errorf("Service web after delete: %v", err)
	}
}
