package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// largeCRD is a CRD of 285 KB (one kind, Database, in group
// ${NS}.gantry.test), the size of the larger CRDs operators ship.
const largeCRD = "e2e/testdata/validate/large-two-typos/crd.yaml"

// operatorScenario: an operator's bundle shaped as Argo CD's and
// prometheus-operator's are (ten CRDs of 285 KB that none of the bundle's
// own objects use, the operator's Namespace, RBAC and Deployment), applied
// to a cluster that already serves forty such CRDs of other operators.
// Each tool's first apply and no-op, without waiting for readiness; each
// tool applies CRDs of groups of its own.
func (b *bench) operatorScenario(ctx context.Context) []row {
	crd, err := os.ReadFile(largeCRD)
	b.must(err)
	for i := range b.otherCRDs {
		body := strings.ReplaceAll(string(crd), "${NS}", fmt.Sprintf("other-%d", i))
		b.must(b.floorApply(ctx, fmt.Sprintf("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/databases.other-%d.gantry.test", i), body))
	}
	b.logf("operator: %d CRDs of %d KB installed", b.otherCRDs, len(crd)>>10)

	name := fmt.Sprintf("an operator's bundle (10 CRDs of %d KB it does not use, its Namespace, RBAC, Deployment) onto a cluster serving %d more", len(crd)>>10, b.otherCRDs)
	return b.firstAndNoop(ctx, "operator", name, operatorSettle, func(dir, ns string) error { return operatorBundle(dir, string(crd), ns) })
}

// operatorSettle is the pause between each tool's first apply of the
// bundle and its no-op. Right after the first apply, the API server is
// still establishing the ten CRDs, and a no-op measures that: gantry's
// took 0.52 to 0.98 s and kubectl's 0.76 s in one run, and 0.25 and 0.82
// to 0.93 s two to eight seconds later.
const operatorSettle = 5 * time.Second

// operatorBundle writes the bundle: ten CRDs (groups of the namespace's
// name), the operator's Namespace <ns>-system, its ServiceAccount,
// ClusterRole, ClusterRoleBinding and Deployment.
func operatorBundle(dir, crd, ns string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var crds strings.Builder
	for i := range 10 {
		crds.WriteString("---\n" + strings.ReplaceAll(crd, "${NS}", fmt.Sprintf("%s-%d", ns, i)))
	}
	if err := os.WriteFile(filepath.Join(dir, "crds.yaml"), []byte(crds.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "operator.yaml"), []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: operator, namespace: %[1]s-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s-operator}
rules:
  - apiGroups: ["*"]
    resources: ["*"]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s-operator}
subjects: [{kind: ServiceAccount, name: operator, namespace: %[1]s-system}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: operator, namespace: %[1]s-system}
spec:
  replicas: 1
  selector: {matchLabels: {app: operator}}
  template:
    metadata: {labels: {app: operator}}
    spec:
      serviceAccountName: operator
      containers: [{name: operator, image: registry.k8s.io/pause:3.10}]
`, ns)), 0o644)
}
