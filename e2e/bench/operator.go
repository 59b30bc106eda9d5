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

	type tool struct {
		name        string
		reps        int
		first, noop []time.Duration
		run         func(dir, ns string) error
	}
	tools := []*tool{
		{name: "gantry", reps: b.reps, run: func(dir, ns string) error {
			return b.exec(b.gantry, "apply", "--path="+dir, "--inventory=operator", "--inventory-namespace="+ns, "--wait=false", "--timeout=5m")
		}},
		{name: "kubectl", reps: b.kubectlReps, run: func(dir, _ string) error {
			return b.exec(b.kubectl, "apply", "--server-side", "-f", dir)
		}},
	}
	if b.kapp != "" {
		tools = append(tools, &tool{name: "kapp", reps: b.kubectlReps, run: func(dir, ns string) error {
			return b.exec(b.kapp, "deploy", "--yes", "--app=operator", "--namespace="+ns, "--file="+dir, "--wait=false")
		}})
	}
	for _, t := range tools {
		for rep := range t.reps {
			// The inventory's (and kapp's) namespace exists; the
			// operator's Namespace comes with the bundle.
			ns, err := b.namespace(ctx, "operator-"+t.name)
			b.must(err)
			dir := filepath.Join(b.work, "operator", ns)
			b.must(operatorBundle(dir, string(crd), ns))
			d, err := timed(func() error { return t.run(dir, ns) })
			b.must(err)
			t.first = append(t.first, d)
			d, err = timed(func() error { return t.run(dir, ns) })
			b.must(err)
			t.noop = append(t.noop, d)
			b.logf("operator, %s, rep %d: first %s, no-op %s", t.name, rep+1, t.first[rep], t.noop[rep])
		}
	}
	g, k := tools[0], tools[1]
	var kp tool
	if len(tools) > 2 {
		kp = *tools[2]
	}
	name := fmt.Sprintf("an operator's bundle (10 CRDs of %d KB it does not use, its Namespace, RBAC, Deployment) onto a cluster serving %d more", len(crd)>>10, b.otherCRDs)
	return []row{
		{name: "first apply of " + name, gantry: median(g.first), kubectl: median(k.first), kapp: median(kp.first), target: "faster than kubectl and kapp"},
		{name: "no-op re-apply of " + name, gantry: median(g.noop), kubectl: median(k.noop), kapp: median(kp.noop), target: "faster than kubectl and kapp"},
	}
}

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
