package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tenants is how many namespaces the tenants scenario configures.
const tenants = 100

// tenantsScenario: a platform team's set, the same six objects in each of
// 100 namespaces it brings (the Namespace, a ResourceQuota, a LimitRange,
// a NetworkPolicy, a RoleBinding and a ConfigMap): few objects of a kind
// in each namespace, many in all. Each tool's first apply and no-op (see
// firstAndNoop), each with namespaces of its own.
func (b *bench) tenantsScenario(ctx context.Context) []row {
	name := fmt.Sprintf("%d namespaces of a platform team's set (each its Namespace, quota, limits, network policy, role binding, settings: %d objects)", tenants, 6*tenants)
	return b.firstAndNoop(ctx, "tenants", name, 0, tenantsSet)
}

// tenantsSet writes the set: namespaces <prefix>-000 to -099, six objects
// each, in one file (kubectl applies it in order, each Namespace first).
func tenantsSet(dir, prefix string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var s strings.Builder
	for i := range tenants {
		fmt.Fprintf(&s, `---
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s-%03[2]d, labels: {pod-security.kubernetes.io/enforce: restricted}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: quota, namespace: %[1]s-%03[2]d}
spec: {hard: {pods: "20", requests.cpu: "4", requests.memory: 8Gi}}
---
apiVersion: v1
kind: LimitRange
metadata: {name: limits, namespace: %[1]s-%03[2]d}
spec:
  limits:
    - type: Container
      default: {cpu: 500m, memory: 512Mi}
      defaultRequest: {cpu: 100m, memory: 128Mi}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: %[1]s-%03[2]d}
spec: {podSelector: {}, policyTypes: [Ingress, Egress]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-edit, namespace: %[1]s-%03[2]d}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{kind: Group, name: team-%03[2]d, apiGroup: rbac.authorization.k8s.io}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: tenant, namespace: %[1]s-%03[2]d}
data: {owner: team-%03[2]d, tier: standard}
`, prefix, i)
	}
	return os.WriteFile(filepath.Join(dir, "tenants.yaml"), []byte(s.String()), 0o644)
}
