package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// certManagerKindsForTest creates CRDs of cert-manager's group for
// Certificates, CertificateRequests and Issuers, with the status
// subresource and no schema: the test's own writes stand for
// cert-manager here (the proof against cert-manager's controllers is
// TestCertManagerMissingIssuer, whose real CRDs these would replace).
func certManagerKindsForTest(t *testing.T) {
	t.Helper()
	if os.Getenv("GANTRY_CERTMANAGER") != "" {
		t.Skip("GANTRY_CERTMANAGER: cert-manager's own CRDs are installed")
	}
	ctx := context.Background()
	var crds []*unstructured.Unstructured
	for _, k := range []struct{ kind, plural, scope string }{
		{"Certificate", "certificates", "Namespaced"},
		{"CertificateRequest", "certificaterequests", "Namespaced"},
		{"Issuer", "issuers", "Namespaced"},
		{"ClusterIssuer", "clusterissuers", "Cluster"},
	} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(fmt.Appendf(nil, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s.cert-manager.io}
spec:
  group: cert-manager.io
  scope: %[3]s
  names: {plural: %[2]s, kind: %[1]s, listKind: %[1]sList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, k.kind, k.plural, k.scope), &u.Object); err != nil {
			t.Fatal(err)
		}
		createForTest(ctx, t, u)
		crds = append(crds, u)
	}
	waitEstablished(ctx, t, crds)
}

// A Certificate whose Issuer is neither in the run nor on the cluster:
// once its CertificateRequest says why it waits (cert-manager's Pending,
// 'Referenced "Issuer" not found', written here by the test), the run
// fails within seconds, naming the Issuer and that message. One whose
// Issuer is on the cluster, not ready, is waited for until the timeout.
func TestCertificateOfAMissingIssuerFailsTheWait(t *testing.T) {
	certManagerKindsForTest(t)
	certs := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	requests := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificaterequests"}
	issuers := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
	for _, tc := range []struct {
		name     string
		onServer bool
	}{{"missing", false}, {"on the cluster", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			ctx := context.Background()
			if tc.onServer {
				issuer := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
					"metadata": map[string]any{"name": "ca", "namespace": ns}, "spec": map[string]any{}}}
				if _, err := env.Dynamic.Resource(issuers).Namespace(ns).Create(ctx, issuer, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			writeFile(t, dir+"/cert.yaml", fmt.Sprintf("apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: web\n  namespace: %s\nspec:\n  secretName: web-tls\n  issuerRef: {name: ca}\n", ns))
			// cert-manager's part: a CertificateRequest of the
			// Certificate, which says why it waits.
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				for ctx.Err() == nil {
					c, err := env.Dynamic.Resource(certs).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
					if err != nil {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
						"metadata": map[string]any{"name": "web-1", "namespace": ns, "ownerReferences": []any{map[string]any{
							"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "name": "web", "uid": string(c.GetUID()), "controller": true}}},
						"spec": map[string]any{"issuerRef": map[string]any{"name": "ca"}}}}
					if cr, err = env.Dynamic.Resource(requests).Namespace(ns).Create(ctx, cr, metav1.CreateOptions{}); err != nil {
						done <- err
						return
					}
					cr.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Pending",
						"message": `Referenced "Issuer" not found: issuer.cert-manager.io "ca" not found`}}}
					_, err = env.Dynamic.Resource(requests).Namespace(ns).UpdateStatus(ctx, cr, metav1.UpdateOptions{})
					done <- err
					return
				}
				done <- ctx.Err()
			}()
			r := gantry(t, "apply", "--path="+dir, "--inventory=certs", "--inventory-namespace="+ns, "--timeout=12s")
			if err := <-done; err != nil {
				t.Fatalf("writing the CertificateRequest: %v", err)
			}
			if r.code == 0 {
				t.Fatalf("exit 0 for a Certificate that is not ready:\n%s", r.stderr)
			}
			says := strings.Contains(r.stderr, `its Issuer ca is neither in this run nor on the cluster; CertificateRequest/web-1: Pending: Referenced "Issuer" not found`)
			h := healthOf(t, r, "Certificate")
			switch {
			case !tc.onServer && (!says || r.took > 10*time.Second || h == nil || h.Status != "Failed"):
				t.Errorf("after %s, health %+v; want Failed within seconds, naming the Issuer and the CertificateRequest's message:\n%s", r.took, h, r.stderr)
			case tc.onServer && (says || r.took < 12*time.Second || !strings.Contains(r.stderr, "not ready within the timeout")):
				t.Errorf("after %s; want the Certificate of an Issuer on the cluster waited for until the timeout:\n%s", r.took, r.stderr)
			}
		})
	}
}
