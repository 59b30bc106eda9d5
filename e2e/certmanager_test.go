package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/e2e/cluster"
)

var (
	certificates        = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	certificateRequests = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificaterequests"}
)

// certManager installs cert-manager's CRDs and starts cert-manager's own
// controllers (bin/cert-manager-controller, built by make
// cert-manager-tools from the cert-manager module) against the test
// cluster, watching ns only. The tests run under make test-certmanager
// (GANTRY_CERTMANAGER=1) only, where missing binaries fail them.
func certManager(t *testing.T, ns string) {
	t.Helper()
	startCertManager(t, certManagerCRDs(t), ns)
}

// certManagerCRDs installs cert-manager's CRDs, and returns the paths of
// the controller, the CRDs and kubectl.
func certManagerCRDs(t *testing.T) []string {
	t.Helper()
	if os.Getenv("GANTRY_CERTMANAGER") == "" {
		t.Skip("make test-certmanager builds cert-manager's controllers and runs this test")
	}
	env.Require(t)
	var bins []string
	for _, name := range []string{"cert-manager-controller", "cert-manager-crds", "kubectl"} {
		p, err := cluster.Tool(name)
		if err != nil {
			t.Fatalf("cert-manager's controllers are not built (make cert-manager-tools): %v", err)
		}
		bins = append(bins, p)
	}
	kubectl := bins[2]
	if out, err := exec.Command(kubectl, "--kubeconfig="+env.Cluster.Kubeconfig, "apply", "--server-side", "-f", bins[1]).CombinedOutput(); err != nil {
		t.Fatalf("installing cert-manager's CRDs: %v\n%s", err, out)
	}
	if out, err := exec.Command(kubectl, "--kubeconfig="+env.Cluster.Kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "-f", bins[1]).CombinedOutput(); err != nil {
		t.Fatalf("waiting for cert-manager's CRDs: %v\n%s", err, out)
	}
	return bins
}

func startCertManager(t *testing.T, bins []string, ns string) {
	t.Helper()
	logs := &syncBuffer{}
	cmd := exec.Command(bins[0], "--kubeconfig="+env.Cluster.Kubeconfig, "--namespace="+ns, "--cluster-resource-namespace="+ns, "--v=2")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("cert-manager-controller logs:\n%s", lastLines(logs.String(), 40))
		}
	})
	// It is up when its controllers have started; an early exit (a
	// kubeconfig it cannot use, a controller that cannot register) fails
	// here, with its logs.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(logs.String(), `"starting controller"`) || !strings.Contains(logs.String(), "certificates-readiness") {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("cert-manager-controller exited: %v\n%s", err, lastLines(logs.String(), 40))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("cert-manager-controller did not start its controllers in 60s:\n%s", lastLines(logs.String(), 40))
		}
	}
}

// certificateSet is a self-signed Issuer and a Certificate it issues, or,
// with issuer naming another Issuer, a Certificate of an Issuer that may
// not exist.
func certificateSet(t *testing.T, ns, issuer string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "issuer.yaml"), fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: selfsigned
  namespace: %s
spec:
  selfSigned: {}
`, ns))
	writeFile(t, filepath.Join(dir, "certificate.yaml"), fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: web
  namespace: %[1]s
spec:
  secretName: web-tls
  commonName: web.%[1]s.svc
  dnsNames: [web.%[1]s.svc]
  privateKey: {algorithm: RSA, size: 2048}
  issuerRef: {name: %[2]s, kind: Issuer}
`, ns, issuer))
	return dir
}

// condition is the object's condition of type typ, or nil.
func condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

func getCertificate(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := env.Dynamic.Resource(certificates).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// conditionsYAML is the status conditions of u as YAML, without their
// timestamps: what cert-manager wrote.
func conditionsYAML(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		delete(c.(map[string]any), "lastTransitionTime")
	}
	b, _ := yaml.Marshal(conds)
	return string(b)
}

// With the built-in rule, gantry's wait holds until cert-manager has
// issued the Certificate: the run ends with it Ready, and the report
// names the rule that decided.
func TestCertManagerCertificateReady(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	certManager(t, ns)
	dir := certificateSet(t, ns, "selfsigned")
	r := gantry(t, "apply", "--path="+dir, "--inventory=certs", "--inventory-namespace="+ns, "--timeout=5m")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	c := getCertificate(t, ns, "web")
	if ready := condition(c, "Ready"); ready == nil || ready["status"] != "True" {
		t.Errorf("the run ended, but the Certificate's Ready condition is %v:\n%s", ready, conditionsYAML(c))
	}
	if _, err := env.Client.CoreV1().Secrets(ns).Get(context.Background(), "web-tls", metav1.GetOptions{}); err != nil {
		t.Errorf("the run ended before cert-manager wrote the Secret: %v", err)
	}
	h := healthOf(t, r, "Certificate")
	if h == nil || h.Status != "Current" || h.Rule != "built-in rule for Certificate.cert-manager.io" {
		t.Errorf("the Certificate's health in the report: %+v; want Current, decided by the built-in rule for Certificate.cert-manager.io", h)
	}
	if h := healthOf(t, r, "Issuer"); h == nil || h.Status != "Current" || h.Rule != "built-in rule for Issuer.cert-manager.io" {
		t.Errorf("the Issuer's health in the report: %+v; want Current, decided by the built-in rule for Issuer.cert-manager.io", h)
	}
}

// A Certificate naming an Issuer that does not exist. cert-manager marks
// nothing failed: its CertificateRequest stays Pending ('Referenced
// "Issuer" not found'), and the Certificate stays Issuing, not Ready,
// until the Issuer appears. The Issuer is neither in the run nor on the
// cluster: the run fails as soon as cert-manager says so, long before its
// timeout, with the Certificate's own message and its
// CertificateRequest's; the test logs what cert-manager wrote.
func TestCertManagerMissingIssuer(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	certManager(t, ns)
	dir := certificateSet(t, ns, "missing")
	if err := os.Remove(filepath.Join(dir, "issuer.yaml")); err != nil {
		t.Fatal(err)
	}
	r := gantry(t, "apply", "--path="+dir, "--inventory=certs", "--inventory-namespace="+ns, "--timeout=5m")
	if r.code == 0 {
		t.Fatalf("exit 0 for a Certificate whose Issuer does not exist:\n%s", r.stderr)
	}
	if r.took > 2*time.Minute {
		t.Errorf("the run ended after %s: it waited for an Issuer that nothing makes", r.took)
	}
	c := getCertificate(t, ns, "web")
	t.Logf("the Certificate's conditions:\n%s", conditionsYAML(c))
	if ready := condition(c, "Ready"); ready == nil || ready["status"] != "False" {
		t.Errorf("the Certificate's Ready condition: %v", ready)
	}
	crs, err := env.Dynamic.Resource(certificateRequests).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crs.Items) != 1 {
		t.Fatalf("%d CertificateRequests, want the one of the Certificate", len(crs.Items))
	}
	cr := &crs.Items[0]
	t.Logf("its CertificateRequest's conditions:\n%s", conditionsYAML(cr))
	ready := condition(cr, "Ready")
	if ready == nil || ready["status"] != "False" || ready["reason"] != "Pending" || !strings.Contains(fmt.Sprint(ready["message"]), `Referenced "Issuer" not found`) {
		t.Errorf("the CertificateRequest's Ready condition: %v; want False, Pending, Referenced \"Issuer\" not found", ready)
	}

	// What the user sees: the Certificate failed, with the message of
	// its Ready condition, and that it is the built-in rule that decides.
	h := healthOf(t, r, "Certificate")
	if h == nil || h.Status != "Failed" || h.Rule != "built-in rule for Certificate.cert-manager.io" {
		t.Errorf("the Certificate's health in the report: %+v; want Failed by the built-in rule", h)
	}
	if msg := fmt.Sprint(condition(c, "Ready")["message"]); h != nil && !strings.Contains(h.Message, msg) {
		t.Errorf("the report's message %q does not carry the Certificate's own %q", h.Message, msg)
	}
	for _, want := range []string{"Certificate", "web", "its Issuer missing is neither in this run nor on the cluster", "CertificateRequest/" + cr.GetName() + `: Pending: Referenced "Issuer" not found`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the run does not say %q:\n%s", want, r.stderr)
		}
	}
	// and why, from the CertificateRequest cert-manager made for it.
	if h != nil && !strings.Contains(h.Message, `Referenced "Issuer" not found`) {
		t.Errorf("the report's message %q does not say why, as the CertificateRequest does", h.Message)
	}
}

// Without rules (none turns the built-in ones off), kstatus calls a
// Certificate Current while cert-manager has written no status on it (it
// reads a Ready condition once there is one): the run ends before the
// Certificate is issued. cert-manager is started after the run, so that
// the run meets the Certificate as a wait meets one its controller has
// not reached yet, however fast the controller is. What the built-in rule
// changes: it waits for Ready.
func TestCertManagerWithoutRules(t *testing.T) {
	t.Parallel()
	bins := certManagerCRDs(t)
	ns := env.Namespace(t)
	dir := certificateSet(t, ns, "selfsigned")
	start := time.Now()
	r := gantry(t, "apply", "--path="+dir, "--inventory=certs", "--inventory-namespace="+ns, "--timeout=5m", "--health-rules=none")
	c := getCertificate(t, ns, "web")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	if ready := condition(c, "Ready"); ready != nil && ready["status"] == "True" {
		t.Errorf("the Certificate was Ready when the run ended (after %s): the run should not have waited for it:\n%s", r.took, conditionsYAML(c))
	}
	if h := healthOf(t, r, "Certificate"); h == nil || h.Status != "Current" || h.Rule != "" {
		t.Errorf("the Certificate's health in the report: %+v; want kstatus's Current", h)
	}
	// cert-manager does issue it, after the run.
	startCertManager(t, bins, ns)
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = getCertificate(t, ns, "web")
		ready := condition(last, "Ready")
		return ready != nil && ready["status"] == "True", nil
	})
	if err != nil {
		t.Fatalf("cert-manager did not issue the Certificate after the run:\n%s", conditionsYAML(last))
	}
	t.Logf("the run ended %s after it began; the Certificate became Ready %s after the run began", r.took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
