package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// componentsOverlay writes an app shaped as microservice demos ship
// theirs: a base of services (a Deployment, a Service and a
// ServiceAccount each) and a dozen kustomize components that an overlay
// combines: image registry, tag and tag suffix overrides for every
// service, patches adding environment variables, network policies, a
// service mesh's objects and patches, a service deleted by a patch, a
// generated ConfigMap, labels and replica counts. It returns the overlay.
func componentsOverlay(dir string, services int) (string, error) {
	files := map[string]string{}
	var names, resources []string
	for i := range services {
		names = append(names, fmt.Sprintf("svc%02d", i))
	}
	for _, n := range names {
		files["base/"+n+".yaml"] = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels: {app: %[1]s}
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      serviceAccountName: %[1]s
      securityContext: {runAsNonRoot: true, runAsUser: 1000}
      containers:
      - name: server
        image: registry.example/demo/%[1]s:v1
        ports: [{containerPort: 8080}]
        env: [{name: PORT, value: "8080"}]
        readinessProbe: {grpc: {port: 8080}, periodSeconds: 5}
        resources:
          requests: {cpu: 100m, memory: 64Mi}
          limits: {cpu: 200m, memory: 128Mi}
---
apiVersion: v1
kind: Service
metadata: {name: %[1]s, labels: {app: %[1]s}}
spec:
  selector: {app: %[1]s}
  ports: [{name: grpc, port: 8080, targetPort: 8080}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s}
`, n)
		resources = append(resources, n+".yaml")
	}
	files["base/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + strings.Join(resources, ", ") + "]\n"

	component := func(name, body string) {
		files["components/"+name+"/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n" + body
	}
	var images strings.Builder
	for _, n := range names {
		fmt.Fprintf(&images, "- name: registry.example/demo/%s\n  newTag: v2\n", n)
	}
	component("images-tag", "images:\n"+images.String())
	images.Reset()
	for _, n := range names {
		fmt.Fprintf(&images, "- name: registry.example/demo/%s\n  newName: mirror.example/demo/%s\n", n, n)
	}
	component("images-registry", "images:\n"+images.String())
	images.Reset()
	for _, n := range names {
		fmt.Fprintf(&images, "- name: mirror.example/demo/%s\n  newTag: v2-native\n", n)
	}
	component("images-tag-suffix", "images:\n"+images.String())
	component("branding", "patches:\n- patch: |-\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata: {name: "+names[0]+"}\n    spec:\n      template:\n        spec:\n          containers:\n          - name: server\n            env: [{name: BRANDING, value: \"true\"}]\n")
	component("base-url", "patches:\n- patch: |-\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata: {name: "+names[0]+"}\n    spec:\n      template:\n        spec:\n          containers:\n          - name: server\n            env: [{name: BASE_URL, value: /shop}]\n")
	var policies []string
	for _, n := range names {
		f := "policy-" + n + ".yaml"
		files["components/network-policies/"+f] = fmt.Sprintf("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: %[1]s}\nspec:\n  podSelector: {matchLabels: {app: %[1]s}}\n  policyTypes: [Ingress, Egress]\n  ingress: [{ports: [{port: 8080, protocol: TCP}]}]\n  egress: [{}]\n", n)
		policies = append(policies, f)
	}
	files["components/network-policies/deny-all.yaml"] = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny-all}\nspec:\n  podSelector: {}\n  policyTypes: [Ingress, Egress]\n"
	component("network-policies", "resources: [deny-all.yaml, "+strings.Join(policies, ", ")+"]\n")
	files["components/mesh/gateway.yaml"] = "apiVersion: v1\nkind: Service\nmetadata: {name: gateway}\nspec:\n  selector: {app: gateway}\n  ports: [{name: http, port: 80, targetPort: 8080}]\n"
	var meshPatches strings.Builder
	for _, n := range names {
		fmt.Fprintf(&meshPatches, "- target: {kind: Deployment, name: %s}\n  patch: |-\n    - op: add\n      path: /spec/template/metadata/annotations\n      value: {sidecar.example/inject: \"true\"}\n", n)
	}
	component("mesh", "resources: [gateway.yaml]\npatches:\n"+meshPatches.String())
	component("without-"+names[len(names)-1], "patches:\n- patch: |-\n    $patch: delete\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata: {name: "+names[len(names)-1]+"}\n")
	files["components/settings/app.env"] = "MODE=production\nCACHE=redis:6379\n"
	component("settings", "configMapGenerator:\n- name: settings\n  envs: [app.env]\n")
	component("labels", "labels:\n- pairs: {app.kubernetes.io/part-of: demo}\n")
	component("replicas", "replicas:\n"+func() string {
		var b strings.Builder
		for _, n := range names[:len(names)-1] { // the last one is deleted
			fmt.Fprintf(&b, "- name: %s\n  count: 2\n", n)
		}
		return b.String()
	}())

	var components []string
	for _, c := range []string{"images-tag", "images-registry", "images-tag-suffix", "branding", "base-url", "network-policies", "mesh", "without-" + names[len(names)-1], "settings", "labels", "replicas"} {
		components = append(components, "../components/"+c)
	}
	files["overlay/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: demo\nresources: [../base]\ncomponents:\n- " + strings.Join(components, "\n- ") + "\n"
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "overlay"), nil
}

// componentsScenario: gantry build and kubectl kustomize of the
// components overlay, alternately.
func (b *bench) componentsScenario() row {
	overlay, err := componentsOverlay(filepath.Join(b.work, "components"), 11)
	b.must(err)
	var g, k []time.Duration
	for range b.reps {
		d, err := timed(func() error { return b.exec(b.gantry, "build", overlay) })
		b.must(err)
		g = append(g, d)
		d, err = timed(func() error { return b.exec(b.kubectl, "kustomize", overlay) })
		b.must(err)
		k = append(k, d)
		b.logf("components: gantry %s, kubectl kustomize %s", g[len(g)-1], d)
	}
	return row{name: "build of an overlay of a base and 11 components (images, patches, policies, a generator)", gantry: median(g), kubectl: median(k),
		kratios: ratios(k, g), target: "≤ 1.1 × kubectl kustomize"}
}
