package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/result"
)

// An operator bundle with two mistakes, on a cluster that has neither its
// Namespace nor its CRD: apply names both in one pass (the operator's
// replicas: -1, a handwritten rule, and its custom resource's replicas:
// "three", the CRD's schema), each at its field, and creates nothing,
// not even the Namespace and CRD a dry-run of the rest would need.
func TestApplyNamesEveryErrorInOnePass(t *testing.T) {
	t.Parallel()
	base := env.Namespace(t)
	ns := base + "-op"
	group := strings.ReplaceAll(base, "-", "") + ".example.com"
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "namespace.yaml"), fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns))
	writeFile(t, filepath.Join(dir, "crd.yaml"), fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: alertmanagers.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: Alertmanager, plural: alertmanagers}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
`, group))
	writeFile(t, filepath.Join(dir, "operator.yaml"), fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: operator, namespace: %s}
spec:
  replicas: -1
  selector: {matchLabels: {app: operator}}
  template:
    metadata: {labels: {app: operator}}
    spec: {containers: [{name: operator, image: registry.k8s.io/pause:3.10}]}
`, ns))
	writeFile(t, filepath.Join(dir, "alertmanager.yaml"), fmt.Sprintf(`apiVersion: %s/v1
kind: Alertmanager
metadata: {name: main, namespace: %s}
spec:
  replicas: three
`, group, ns))

	r := gantry(t, "apply", dir, "--inventory=bundle", "--inventory-namespace="+base, "--timeout=60s")
	if r.code != 1 || r.res == nil || r.res.Reason != result.ReasonValidationFailed {
		t.Fatalf("exit %d, want 1 (ValidationFailed)\n%s", r.code, r.stderr)
	}
	failed := map[string]result.Object{}
	for _, o := range r.res.Objects {
		if o.Action == result.Failed {
			failed[o.Kind] = o
		}
	}
	for kind, want := range map[string]struct {
		field string
		line  int
	}{"Deployment": {"spec.replicas", 5}, "Alertmanager": {"spec.replicas", 5}} {
		o, ok := failed[kind]
		if !ok || len(o.Problems) == 0 || o.Problems[0].Field != want.field || o.Problems[0].Line != want.line {
			t.Errorf("%s: problems %#v, want %s at line %d\n%s", kind, o.Problems, want.field, want.line, r.stderr)
		}
	}
	ctx := context.Background()
	if _, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Namespace was created for a dry-run that could only fail: %v", err)
	}
}
