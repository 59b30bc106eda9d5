package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"
)

// The bundle scenario times validate --offline of a monitoring stack's
// bundle, shaped as kube-prometheus's manifests are: ten CRDs of 100 to
// 800 KB whose schemas nest pod templates (containers, probes, affinity,
// volumes) with CEL rules, custom resources of each, RBAC whose names hold
// colons, a List, a Namespace and more than a hundred other objects. It is
// written here, by the bench, not copied from the project. kubectl-validate
// (make bench-peers) checks the same files in the same run.

// bundleKinds are the bundle's custom resource kinds.
var bundleKinds = []string{"Prometheus", "Alertmanager", "ThanosRuler", "PrometheusAgent", "ServiceMonitor",
	"PodMonitor", "Probe", "PrometheusRule", "AlertmanagerConfig", "ScrapeConfig"}

const bundleGroup = "monitoring.gantry.test"

// prose makes descriptions as long as operators write them.
func prose(what string, n int) string {
	s := what + ". "
	for range n {
		s += "Operators document every field at length: what it does, its default, and what changes when it is set; this is what makes their CRDs weigh hundreds of kilobytes. "
	}
	return s
}

func prop(typ, what string, extra ...any) map[string]any {
	p := map[string]any{"type": typ, "description": prose(what, 1)}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i].(string)] = extra[i+1]
	}
	return p
}

func object(what string, props map[string]any, extra ...any) map[string]any {
	o := prop("object", what, extra...)
	o["properties"] = props
	return o
}

func arrayOf(what string, item map[string]any, extra ...any) map[string]any {
	a := prop("array", what, extra...)
	a["items"] = item
	return a
}

func quantity(what string) map[string]any {
	return map[string]any{"description": prose(what, 1), "x-kubernetes-int-or-string": true,
		"anyOf":   []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}},
		"pattern": `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`}
}

func intOrString(what string) map[string]any {
	return map[string]any{"description": prose(what, 1), "x-kubernetes-int-or-string": true,
		"anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}}
}

func stringMap(what string) map[string]any {
	return prop("object", what, "additionalProperties", map[string]any{"type": "string"})
}

func keyRef(what string) map[string]any {
	return object(what, map[string]any{"name": prop("string", "The referent"), "key": prop("string", "The key"),
		"optional": prop("boolean", "Whether it must exist")}, "required", []any{"key"}, "x-kubernetes-map-type", "atomic")
}

func handler(what string) map[string]any {
	return object(what, map[string]any{
		"exec":      object("A command", map[string]any{"command": arrayOf("The command", prop("string", "An argument"))}),
		"httpGet":   object("An HTTP GET", map[string]any{"path": prop("string", "The path"), "port": intOrString("The port"), "scheme": prop("string", "The scheme", "enum", []any{"HTTP", "HTTPS"}), "httpHeaders": arrayOf("Headers", object("A header", map[string]any{"name": prop("string", "Its name"), "value": prop("string", "Its value")}, "required", []any{"name", "value"}))}, "required", []any{"port"}),
		"tcpSocket": object("A TCP socket", map[string]any{"host": prop("string", "The host"), "port": intOrString("The port")}, "required", []any{"port"}),
	})
}

func probe(what string) map[string]any {
	p := handler(what)
	props := p["properties"].(map[string]any)
	for _, f := range []string{"initialDelaySeconds", "periodSeconds", "timeoutSeconds", "successThreshold", "failureThreshold"} {
		props[f] = prop("integer", f, "format", "int32", "minimum", 0)
	}
	props["grpc"] = object("A gRPC check", map[string]any{"port": prop("integer", "The port", "format", "int32"), "service": prop("string", "The service")}, "required", []any{"port"})
	return p
}

func container(what string) map[string]any {
	return object(what, map[string]any{
		"name":    prop("string", "The container's name", "maxLength", 63),
		"image":   prop("string", "The image"),
		"command": arrayOf("The entrypoint", prop("string", "An argument")),
		"args":    arrayOf("Its arguments", prop("string", "An argument")),
		"env": arrayOf("The environment", object("A variable", map[string]any{
			"name": prop("string", "Its name"), "value": prop("string", "Its value"),
			"valueFrom": object("Where its value comes from", map[string]any{
				"configMapKeyRef": keyRef("A ConfigMap's key"), "secretKeyRef": keyRef("A Secret's key"),
				"fieldRef":         object("A field of the pod", map[string]any{"apiVersion": prop("string", "The version"), "fieldPath": prop("string", "The path")}, "required", []any{"fieldPath"}),
				"resourceFieldRef": object("A resource of a container", map[string]any{"containerName": prop("string", "The container"), "resource": prop("string", "The resource"), "divisor": quantity("The divisor")}, "required", []any{"resource"}),
			}),
		}, "required", []any{"name"}), "x-kubernetes-list-type", "map", "x-kubernetes-list-map-keys", []any{"name"}),
		"ports": arrayOf("The ports", object("A port", map[string]any{
			"containerPort": prop("integer", "The port", "format", "int32", "minimum", 1, "maximum", 65535),
			"name":          prop("string", "Its name"),
			"protocol":      prop("string", "Its protocol", "enum", []any{"TCP", "UDP", "SCTP"}, "default", "TCP"),
		}, "required", []any{"containerPort"})),
		"resources": object("Compute resources", map[string]any{
			"limits":   prop("object", "Limits", "additionalProperties", quantity("A quantity")),
			"requests": prop("object", "Requests", "additionalProperties", quantity("A quantity")),
		}),
		"livenessProbe": probe("Liveness"), "readinessProbe": probe("Readiness"), "startupProbe": probe("Start-up"),
		"lifecycle": object("Hooks", map[string]any{"postStart": handler("After start"), "preStop": handler("Before stop")}),
		"securityContext": object("Security", map[string]any{
			"capabilities":             object("Capabilities", map[string]any{"add": arrayOf("Added", prop("string", "A capability")), "drop": arrayOf("Dropped", prop("string", "A capability"))}),
			"privileged":               prop("boolean", "Privileged"),
			"readOnlyRootFilesystem":   prop("boolean", "A read-only root"),
			"runAsUser":                prop("integer", "The user", "format", "int64"),
			"runAsNonRoot":             prop("boolean", "Not root"),
			"allowPrivilegeEscalation": prop("boolean", "Escalation"),
			"seccompProfile":           object("Seccomp", map[string]any{"type": prop("string", "The kind", "enum", []any{"RuntimeDefault", "Localhost", "Unconfined"}), "localhostProfile": prop("string", "The profile")}, "required", []any{"type"}),
		}),
		"volumeMounts": arrayOf("Mounts", object("A mount", map[string]any{"name": prop("string", "The volume"), "mountPath": prop("string", "Where"), "readOnly": prop("boolean", "Read-only"), "subPath": prop("string", "A sub-path")}, "required", []any{"name", "mountPath"})),
	}, "required", []any{"name"}, "x-kubernetes-validations", []any{
		map[string]any{"rule": "!has(self.image) || self.image.size() > 0", "message": "image must not be empty"},
	})
}

func affinity() map[string]any {
	selector := object("A label selector", map[string]any{
		"matchLabels": stringMap("Labels"),
		"matchExpressions": arrayOf("Expressions", object("An expression", map[string]any{
			"key": prop("string", "The key"), "operator": prop("string", "The operator", "enum", []any{"In", "NotIn", "Exists", "DoesNotExist"}), "values": arrayOf("Values", prop("string", "A value"))}, "required", []any{"key", "operator"})),
	}, "x-kubernetes-map-type", "atomic")
	term := object("A pod affinity term", map[string]any{"labelSelector": selector, "namespaces": arrayOf("Namespaces", prop("string", "A namespace")), "topologyKey": prop("string", "The topology key")}, "required", []any{"topologyKey"})
	nodeTerm := object("A node selector term", map[string]any{"matchExpressions": selector["properties"].(map[string]any)["matchExpressions"], "matchFields": selector["properties"].(map[string]any)["matchExpressions"]}, "x-kubernetes-map-type", "atomic")
	return object("Scheduling constraints", map[string]any{
		"nodeAffinity": object("Node affinity", map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution":  object("Required", map[string]any{"nodeSelectorTerms": arrayOf("Terms", nodeTerm)}, "required", []any{"nodeSelectorTerms"}),
			"preferredDuringSchedulingIgnoredDuringExecution": arrayOf("Preferred", object("A weighted term", map[string]any{"weight": prop("integer", "Weight", "minimum", 1, "maximum", 100), "preference": nodeTerm}, "required", []any{"weight", "preference"})),
		}),
		"podAffinity":     object("Pod affinity", map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": arrayOf("Required", term)}),
		"podAntiAffinity": object("Pod anti-affinity", map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": arrayOf("Required", term)}),
	})
}

func volumes() map[string]any {
	items := arrayOf("Items", object("An item", map[string]any{"key": prop("string", "The key"), "path": prop("string", "The path"), "mode": prop("integer", "The mode", "format", "int32")}, "required", []any{"key", "path"}))
	return arrayOf("Volumes", object("A volume", map[string]any{
		"name":                  prop("string", "Its name"),
		"configMap":             object("A ConfigMap", map[string]any{"name": prop("string", "The ConfigMap"), "items": items, "defaultMode": prop("integer", "Mode", "format", "int32"), "optional": prop("boolean", "Optional")}),
		"secret":                object("A Secret", map[string]any{"secretName": prop("string", "The Secret"), "items": items, "defaultMode": prop("integer", "Mode", "format", "int32"), "optional": prop("boolean", "Optional")}),
		"emptyDir":              object("Scratch space", map[string]any{"medium": prop("string", "The medium"), "sizeLimit": quantity("Its size")}),
		"persistentVolumeClaim": object("A claim", map[string]any{"claimName": prop("string", "The claim"), "readOnly": prop("boolean", "Read-only")}, "required", []any{"claimName"}),
		"hostPath":              object("A host path", map[string]any{"path": prop("string", "The path"), "type": prop("string", "Its type")}, "required", []any{"path"}),
		"csi":                   object("A CSI volume", map[string]any{"driver": prop("string", "The driver"), "readOnly": prop("boolean", "Read-only"), "volumeAttributes": stringMap("Attributes")}, "required", []any{"driver"}),
	}, "required", []any{"name"}))
}

// bundleCRD is the CRD of kind, with weight container blocks (its size
// grows with them).
func bundleCRD(kind string, weight int) map[string]any {
	spec := map[string]any{
		"replicas":      prop("integer", "How many", "format", "int32", "minimum", 0),
		"retention":     prop("string", "How long to keep data"),
		"podMetadata":   object("The pods' metadata", map[string]any{"labels": stringMap("Labels"), "annotations": stringMap("Annotations")}),
		"affinity":      affinity(),
		"tolerations":   arrayOf("Tolerations", object("A toleration", map[string]any{"key": prop("string", "The key"), "operator": prop("string", "The operator", "enum", []any{"Exists", "Equal"}), "value": prop("string", "The value"), "effect": prop("string", "The effect"), "tolerationSeconds": prop("integer", "Seconds", "format", "int64")})),
		"volumes":       volumes(),
		"nodeSelector":  stringMap("Node labels"),
		"storage":       object("Storage", map[string]any{"volumeClaimTemplate": object("A claim template", map[string]any{"spec": object("Its spec", map[string]any{"accessModes": arrayOf("Modes", prop("string", "A mode")), "storageClassName": prop("string", "The class"), "resources": object("Resources", map[string]any{"requests": prop("object", "Requests", "additionalProperties", quantity("A quantity"))})})})}),
		"ruleSelector":  affinity()["properties"].(map[string]any)["podAffinity"],
		"externalLabel": stringMap("External labels"),
	}
	for i := range weight {
		spec[fmt.Sprintf("containers%d", i)] = arrayOf("Containers", container("A container"), "x-kubernetes-list-type", "map", "x-kubernetes-list-map-keys", []any{"name"})
	}
	plural := strings.ToLower(kind) + "s"
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + bundleGroup},
		"spec": map[string]any{
			"group": bundleGroup, "scope": "Namespaced",
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true, "subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "description": prose(kind, 2),
					"properties": map[string]any{
						"apiVersion": prop("string", "The version"), "kind": prop("string", "The kind"), "metadata": map[string]any{"type": "object"},
						"spec": object("The desired state", spec, "x-kubernetes-validations", []any{
							map[string]any{"rule": "!has(self.replicas) || self.replicas <= 100", "message": "at most 100 replicas"},
							map[string]any{"rule": "!has(self.retention) || self.retention.matches('^[0-9]+(ms|s|m|h|d|w|y)$')", "message": "retention is a duration such as 15d"},
						}),
						"status": object("The observed state", map[string]any{"conditions": arrayOf("Conditions", object("A condition", map[string]any{"type": prop("string", "The type"), "status": prop("string", "The status")}))}),
					},
				}},
			}},
		},
	}
}

// bundleCR is a valid custom resource of kind.
func bundleCR(kind, ns, name string) map[string]any {
	c := map[string]any{"name": "main", "image": "registry.example/" + strings.ToLower(kind) + ":v1",
		"args": []any{"--log.level=info"}, "ports": []any{map[string]any{"containerPort": 9090, "name": "web"}},
		"env":             []any{map[string]any{"name": "CONFIG", "valueFrom": map[string]any{"configMapKeyRef": map[string]any{"name": "settings", "key": "config"}}}},
		"resources":       map[string]any{"limits": map[string]any{"cpu": "500m", "memory": "256Mi"}, "requests": map[string]any{"cpu": "100m", "memory": "128Mi"}},
		"readinessProbe":  map[string]any{"httpGet": map[string]any{"path": "/-/ready", "port": "web"}, "periodSeconds": 5},
		"securityContext": map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}}
	return map[string]any{"apiVersion": bundleGroup + "/v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app.kubernetes.io/part-of": "monitoring"}},
		"spec": map[string]any{"replicas": 2, "retention": "15d", "containers0": []any{c},
			"affinity": map[string]any{"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{
				map[string]any{"labelSelector": map[string]any{"matchLabels": map[string]any{"app": name}}, "topologyKey": "kubernetes.io/hostname"}}}},
			"volumes": []any{map[string]any{"name": "config", "configMap": map[string]any{"name": "settings"}}}}}
}

// writeBundle writes the bundle into dir: crds/ and manifests/. It
// returns the CRDs' sizes and how many objects it holds (a List's items
// each count).
func writeBundle(dir string) (sizes []int, objects int, err error) {
	ns := "monitoring"
	write := func(sub, name string, docs ...map[string]any) error {
		var b bytes.Buffer
		for _, d := range docs {
			y, err := yaml.Marshal(d)
			if err != nil {
				return err
			}
			b.WriteString("---\n")
			b.Write(y)
		}
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, sub, name), b.Bytes(), 0o644)
	}
	for i, kind := range bundleKinds {
		crd := bundleCRD(kind, 1+i%8)
		y, err := yaml.Marshal(crd)
		if err != nil {
			return nil, 0, err
		}
		sizes = append(sizes, len(y))
		if err := write("crds", strings.ToLower(kind)+"-crd.yaml", crd); err != nil {
			return nil, 0, err
		}
		if err := write("manifests", strings.ToLower(kind)+".yaml", bundleCR(kind, ns, "k8s"), bundleCR(kind, ns, "main")); err != nil {
			return nil, 0, err
		}
		objects += 3
	}
	meta := func(kind, apiVersion, name string, namespaced bool) map[string]any {
		m := map[string]any{"name": name, "labels": map[string]any{"app.kubernetes.io/part-of": "monitoring"}}
		if namespaced {
			m["namespace"] = ns
		}
		return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": m}
	}
	with := func(o map[string]any, kv ...any) map[string]any {
		for i := 0; i+1 < len(kv); i += 2 {
			o[kv[i].(string)] = kv[i+1]
		}
		return o
	}
	docs := []map[string]any{meta("Namespace", "v1", ns, false)}
	var listed []any
	for i := range 10 {
		name := fmt.Sprintf("component-%d", i)
		role := fmt.Sprintf("gantry-bench:%s:read", name) // RBAC names hold colons
		labels := map[string]any{"app": name}
		docs = append(docs,
			meta("ServiceAccount", "v1", name, true),
			with(meta("ClusterRole", "rbac.authorization.k8s.io/v1", role, false), "rules", []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods", "services", "endpoints"}, "verbs": []any{"get", "list", "watch"}}, map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}),
			with(meta("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", role, false), "roleRef", map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}, "subjects", []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": ns}}),
			with(meta("Role", "rbac.authorization.k8s.io/v1", name+":config", true), "rules", []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get"}}}),
			with(meta("RoleBinding", "rbac.authorization.k8s.io/v1", name+":config", true), "roleRef", map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name + ":config"}, "subjects", []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": ns}}),
			with(meta("Deployment", "apps/v1", name, true), "spec", map[string]any{"replicas": 1, "selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{"serviceAccountName": name,
					"containers": []any{map[string]any{"name": "main", "image": "registry.example/" + name + ":v1", "ports": []any{map[string]any{"containerPort": 8080, "name": "http"}},
						"resources":      map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}},
						"readinessProbe": map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": "http"}}}}}}}),
			with(meta("Service", "v1", name, true), "spec", map[string]any{"selector": labels, "ports": []any{map[string]any{"name": "http", "port": 8080, "targetPort": "http"}}}),
			with(meta("NetworkPolicy", "networking.k8s.io/v1", name, true), "spec", map[string]any{"podSelector": map[string]any{"matchLabels": labels},
				"ingress": []any{map[string]any{"ports": []any{map[string]any{"port": 8080, "protocol": "TCP"}}}}, "policyTypes": []any{"Ingress"}}),
			with(meta("PodDisruptionBudget", "policy/v1", name, true), "spec", map[string]any{"minAvailable": 1, "selector": map[string]any{"matchLabels": labels}}),
		)
		listed = append(listed, with(meta("ConfigMap", "v1", name+"-dashboard", true), "data", map[string]any{"dashboard.json": `{"title":"` + name + `"}`}))
	}
	docs = append(docs, with(meta("ConfigMap", "v1", "settings", true), "data", map[string]any{"config": "global: {}"}))
	// Dashboards ship as a List, as kube-prometheus's do.
	docs = append(docs, map[string]any{"apiVersion": "v1", "kind": "List", "items": listed})
	objects += len(docs) - 1 + len(listed)
	return sizes, objects, write("manifests", "stack.yaml", docs...)
}

// bundleScenario times validate --offline of the bundle, gantry's and
// kubectl-validate's, and of a set holding one of its CRDs.
func (b *bench) bundleScenario() []row {
	dir := filepath.Join(b.work, "bundle")
	sizes, count, err := writeBundle(dir)
	b.must(err)
	one := filepath.Join(b.work, "bundle-one")
	b.must(os.MkdirAll(one, 0o755))
	for _, f := range []string{"crds/prometheus-crd.yaml", "manifests/prometheus.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		b.must(err)
		b.must(os.WriteFile(filepath.Join(one, filepath.Base(f)), data, 0o644))
	}
	b.logf("bundle: 10 CRDs of %d to %d KB", minOf(sizes)>>10, maxOf(sizes)>>10)

	// kubectl-validate refuses some of what the API server accepts (RBAC
	// names with colons, a List): its time is kept, and what it refused
	// is counted.
	var refused int
	run := func(bin string, args ...string) (time.Duration, int64) {
		start := time.Now()
		cmd := exec.Command(bin, args...)
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		var exit *exec.ExitError
		switch {
		case err != nil && bin == b.gantry, err != nil && !errors.As(err, &exit):
			b.must(fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, tail(out)))
		case err != nil:
			refused = strings.Count(string(out), " is invalid: ") + strings.Count(string(out), "failed to retrieve validator")
		}
		return d, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
	}
	kv := peer("kubectl-validate")
	var g, k, small []time.Duration
	var gRSS, kRSS int64
	for range b.reps {
		d, rss := run(b.gantry, "validate", "--offline", "--path", dir)
		g, gRSS = append(g, d), max(gRSS, rss)
		d, _ = run(b.gantry, "validate", "--offline", "--path", one)
		small = append(small, d)
		if kv != "" {
			d, rss = run(kv, filepath.Join(dir, "manifests"), "--local-crds", filepath.Join(dir, "crds"))
			k, kRSS = append(k, d), max(kRSS, rss)
		}
		b.logf("bundle: gantry %s (%d MiB), one CRD %s, kubectl-validate %v (%d MiB)", g[len(g)-1], gRSS>>20, small[len(small)-1], k, kRSS>>20)
	}
	objects := "10 CRDs of " + fmt.Sprintf("%d to %d KB", minOf(sizes)>>10, maxOf(sizes)>>10) + " with CEL rules, their 20 custom resources, RBAC with colons in names, a List, a Namespace, " + fmt.Sprint(count) + " objects in all"
	rows := []row{
		{name: "`validate --offline` of a monitoring stack's bundle (" + objects + fmt.Sprintf("; floor: kubectl-validate on the same files, which refused %d objects the API server accepts)", refused),
			gantry: median(g), flr: median(k), ratios: ratios(g, k), target: "≤ 1.0 s, no slower than kubectl-validate"},
		{name: fmt.Sprintf("peak RSS, `validate --offline` of the bundle (kubectl-validate: %d MiB)", kRSS>>20), memory: gRSS, target: "≤ 300 MB"},
		{name: "`validate --offline` of one of its CRDs and two custom resources", gantry: median(small), target: "≤ 0.2 s"},
	}
	if kv == "" {
		b.logf("bundle: kubectl-validate is not built (make bench-peers): gantry alone")
	}
	return rows
}

func minOf(s []int) int {
	m := s[0]
	for _, v := range s {
		m = min(m, v)
	}
	return m
}

func maxOf(s []int) int {
	m := s[0]
	for _, v := range s {
		m = max(m, v)
	}
	return m
}
