package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gantry-dev/gantry/result"
)

// crdYAML is a small CRD of kind <Kind> in group, namespaced.
func crdYAML(group, kind string) string {
	plural := strings.ToLower(kind) + "s"
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[1]s.%[2]s}
spec:
  group: %[2]s
  scope: Namespaced
  names: {kind: %[3]s, plural: %[1]s, singular: %[4]s}
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
                size: {type: integer}
`, plural, group, kind, strings.ToLower(kind))
}

// An operator's bundle ships CRDs that none of its own objects use (as
// Argo CD's install.yaml does), on a cluster that serves other CRDs: the
// objects after the CRDs are written without waiting for those CRDs to
// be established (the wait stage checks them, with everything else), and
// no run lists every CRD of the cluster, which on a real cluster can be
// hundreds of megabytes. The one CRD whose custom resource the set holds
// is established before that resource is written.
func TestCRDsAreReadOneByOneAndWaitedForOnlyWhenUsed(t *testing.T) {
	t.Parallel()
	env.Require(t)
	proxy := newAPIProxy(t, env.Cluster)
	ns := env.Namespace(t)
	group := ns + ".gantry.test"
	dir := t.TempDir()
	var unused []string
	var b strings.Builder
	for i := range 9 {
		kind := fmt.Sprintf("Spare%d", i)
		unused = append(unused, strings.ToLower(kind)+"s."+group)
		b.WriteString("---\n" + crdYAML(group, kind))
	}
	writeFile(t, filepath.Join(dir, "crds.yaml"), b.String())
	writeFile(t, filepath.Join(dir, "used.yaml"), crdYAML(group, "Gadget")+fmt.Sprintf(`---
apiVersion: %s/v1
kind: Gadget
metadata: {name: g, namespace: %s}
spec: {size: 3}
`, group, ns))
	writeFile(t, filepath.Join(dir, "app.yaml"), fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s-operator}
rules: [{apiGroups: [%[2]q], resources: ["*"], verbs: [get, list, watch]}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: operator-config, namespace: %[1]s}
data: {level: info}
`, ns, group))

	var seen func() []seenRequest
	record := func() { seen = proxy.record() }
	const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	noCRDList := func(run string) {
		t.Helper()
		for _, r := range seen() {
			if r.method == http.MethodGet && r.path == crdPath {
				t.Errorf("%s: listed every CRD of the cluster (GET %s)", run, r.path)
				return
			}
		}
	}
	apply := func() gantryRun {
		t.Helper()
		r := gantryWith(t, proxy.kubeconfig, "apply", dir, "--inventory=bundle", "--inventory-namespace="+ns, "--timeout=90s")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		return r
	}

	record()
	r := apply()
	if c := counts(t, r); c[result.Created] != 13 {
		t.Errorf("first apply: counts %v, want 13 created", c)
	}
	noCRDList("first apply")
	// The ten new CRDs' kinds are looked up in one discovery, not one each.
	discoveries := 0
	for _, req := range seen() {
		if req.method == http.MethodGet && req.path == "/apis" {
			discoveries++
		}
	}
	if discoveries > 4 {
		t.Errorf("first apply: fetched the server's API groups %d times for ten new CRDs, want at most 4 (connect, a kind the mapper does not know, one discovery of every kind, a reconnect once the used CRD is established)", discoveries)
	}
	// Between the write of the unused CRDs and the write of the
	// ConfigMap after them, none of those CRDs is read.
	requests := seen()
	lastCRD, configMap := -1, -1
	for i, req := range requests {
		switch {
		case req.class == "apply" && strings.HasPrefix(req.path, crdPath+"/spare"):
			lastCRD = i
		case req.class == "apply" && strings.HasSuffix(req.path, "/configmaps/operator-config") && configMap < 0:
			configMap = i
		}
	}
	if lastCRD < 0 || configMap < lastCRD {
		t.Fatalf("want the unused CRDs written before the ConfigMap: CRDs at %d, ConfigMap at %d", lastCRD, configMap)
	}
	for _, req := range requests[lastCRD:configMap] {
		if req.method == http.MethodGet && strings.HasPrefix(req.path, crdPath) {
			t.Errorf("read %s before writing the objects after it; nothing there uses it", req.path)
		}
	}
	// The wait stage saw every CRD established.
	crds := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, name := range append(unused, "gadgets."+group) {
		crd, err := crds.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("CRD %s: %v", name, err)
		}
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		established := false
		for _, c := range conditions {
			m, _ := c.(map[string]any)
			established = established || m["type"] == "Established" && m["status"] == "True"
		}
		if !established {
			t.Errorf("CRD %s is not established after a run that waited", name)
		}
	}

	record()
	if r := apply(); r.res.Counts()["unchanged"] != 13 {
		t.Errorf("no-op: counts %v, want 13 unchanged", r.res.Counts())
	}
	noCRDList("no-op")

	if r := gantry(t, "delete", "--inventory=bundle", "--inventory-namespace="+ns); r.code != 0 {
		t.Errorf("delete: exit %d\n%s", r.code, r.stderr)
	}
}
