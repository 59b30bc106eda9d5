package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// The charts scenario times gantry build --chart against helm template of
// the same chart, shaped as a platform's monitoring chart is
// (kube-prometheus-stack): eight components, each with its Deployments,
// Services, ServiceAccount, RBAC and dashboards as ConfigMaps, a
// subchart with values of its own, CRDs in crds/, a hook, and templates
// that include named templates of _helpers.tpl in every object's name and
// labels and print nested values with toYaml and nindent. It is written
// here, by the bench. Both tools run in turn, the order swapped every
// repetition, and must print the same objects.

// chartComponents are the chart's components: their values key and the
// name their objects carry.
var chartComponents = []struct{ key, name string }{
	{"prometheus", "prometheus"}, {"alertmanager", "alertmanager"}, {"grafana", "grafana"},
	{"operator", "operator"}, {"kubeStateMetrics", "kube-state-metrics"}, {"thanosRuler", "thanos-ruler"},
	{"pushgateway", "pushgateway"}, {"blackboxExporter", "blackbox-exporter"},
}

const (
	chartShards     = 3
	chartDashboards = 20
	chartCRDs       = 4
)

const chartHelpers = `{{/* Names and labels, as charts made by helm create have them. */}}
{{- define "platform.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "platform.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "platform.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "platform.componentName" -}}
{{- printf "%s-%s" (include "platform.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "platform.selectorLabels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{- define "platform.labels" -}}
helm.sh/chart: {{ include "platform.chart" .root }}
{{ include "platform.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: {{ include "platform.name" .root }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "platform.serviceAccountName" -}}
{{- $c := index .root.Values .key }}
{{- if $c.serviceAccount.create }}
{{- default (include "platform.componentName" .) $c.serviceAccount.name }}
{{- else }}
{{- default "default" $c.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "platform.image" -}}
{{- $registry := .image.registry | default .root.Values.global.imageRegistry }}
{{- printf "%s/%s:%s" $registry .image.repository (.image.tag | default .root.Chart.AppVersion) }}
{{- end }}
`

// chartTemplates are a component's template files; COMPONENT and KEY
// stand for its name and values key.
var chartTemplates = map[string]string{
	"deployment.yaml": `{{- $c := .Values.KEY }}
{{- if $c.enabled }}
{{- $ctx := dict "root" $ "component" "COMPONENT" "key" "KEY" }}
{{- range $i, $e := until (int $c.shards) }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "platform.componentName" $ctx }}-{{ $i }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
    platform.example.com/shard: {{ $i | quote }}
  {{- with $c.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  replicas: {{ $c.replicas }}
  revisionHistoryLimit: 10
  selector:
    matchLabels:
      {{- include "platform.selectorLabels" $ctx | nindent 6 }}
      platform.example.com/shard: {{ $i | quote }}
  strategy:
    {{- toYaml $c.strategy | nindent 4 }}
  template:
    metadata:
      labels:
        {{- include "platform.labels" $ctx | nindent 8 }}
        platform.example.com/shard: {{ $i | quote }}
      annotations:
        checksum/config: {{ toYaml $c.dashboards | sha256sum }}
        {{- with $c.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "platform.serviceAccountName" $ctx }}
      securityContext:
        {{- toYaml $c.securityContext | nindent 8 }}
      {{- with $.Values.global.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: COMPONENT
          image: {{ include "platform.image" (dict "root" $ "image" $c.image) }}
          imagePullPolicy: {{ $c.image.pullPolicy }}
          args:
            {{- range $c.args }}
            - {{ . | quote }}
            {{- end }}
            - --shard={{ $i }}
          ports:
            {{- range $c.ports }}
            - name: {{ .name }}
              containerPort: {{ .targetPort }}
              protocol: {{ .protocol | default "TCP" }}
            {{- end }}
          env:
            {{- range $c.env }}
            - name: {{ .name }}
              value: {{ .value | quote }}
            {{- end }}
            - name: SHARD
              value: {{ $i | quote }}
          livenessProbe:
            {{- toYaml $c.livenessProbe | nindent 12 }}
          readinessProbe:
            {{- toYaml $c.readinessProbe | nindent 12 }}
          resources:
            {{- toYaml $c.resources | nindent 12 }}
          securityContext:
            {{- toYaml $c.containerSecurityContext | nindent 12 }}
          volumeMounts:
            - name: config
              mountPath: /etc/COMPONENT
            {{- range $c.extraVolumeMounts }}
            - {{ toYaml . | nindent 14 | trim }}
            {{- end }}
      volumes:
        - name: config
          configMap:
            name: {{ include "platform.componentName" $ctx }}-dash-00
        {{- range $c.extraVolumes }}
        - {{ toYaml . | nindent 10 | trim }}
        {{- end }}
      {{- with $c.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
{{- end }}
`,
	"service.yaml": `{{- $c := .Values.KEY }}
{{- if $c.enabled }}
{{- $ctx := dict "root" $ "component" "COMPONENT" "key" "KEY" }}
{{- range $i, $e := until (int $c.shards) }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "platform.componentName" $ctx }}-{{ $i }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
  {{- with $c.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $c.service.type }}
  ports:
    {{- range $c.ports }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .name }}
      protocol: {{ .protocol | default "TCP" }}
    {{- end }}
  selector:
    {{- include "platform.selectorLabels" $ctx | nindent 4 }}
    platform.example.com/shard: {{ $i | quote }}
{{- end }}
{{- end }}
`,
	"serviceaccount.yaml": `{{- $c := .Values.KEY }}
{{- if and $c.enabled $c.serviceAccount.create }}
{{- $ctx := dict "root" $ "component" "COMPONENT" "key" "KEY" }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "platform.serviceAccountName" $ctx }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
  {{- with $c.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: {{ $c.serviceAccount.automount }}
{{- end }}
`,
	"rbac.yaml": `{{- $c := .Values.KEY }}
{{- if and $c.enabled .Values.global.rbac.create }}
{{- $ctx := dict "root" $ "component" "COMPONENT" "key" "KEY" }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "platform.componentName" $ctx }}
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
rules:
  {{- toYaml $c.rbac.clusterRules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "platform.componentName" $ctx }}
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "platform.componentName" $ctx }}
subjects:
  - kind: ServiceAccount
    name: {{ include "platform.serviceAccountName" $ctx }}
    namespace: {{ .Release.Namespace }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "platform.componentName" $ctx }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
rules:
  {{- toYaml $c.rbac.rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "platform.componentName" $ctx }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "platform.componentName" $ctx }}
subjects:
  - kind: ServiceAccount
    name: {{ include "platform.serviceAccountName" $ctx }}
    namespace: {{ .Release.Namespace }}
{{- end }}
`,
	"dashboards.yaml": `{{- $c := .Values.KEY }}
{{- if $c.enabled }}
{{- $ctx := dict "root" $ "component" "COMPONENT" "key" "KEY" }}
{{- range $name, $dash := $c.dashboards }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "platform.componentName" $ctx }}-{{ $name }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
    {{- with $.Values.global.dashboardLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
data:
  {{ $name }}.yaml: |
    {{- toYaml $dash | nindent 4 }}
  {{ $name }}.json: {{ toJson $dash | quote }}
{{- end }}
{{- end }}
`,
}

// chartTopTemplates are the parent chart's other templates: one object
// per component of each kind, and a hook.
var chartTopTemplates = map[string]string{
	"networkpolicies.yaml": `{{- range $key, $c := .Values }}
{{- if and (kindIs "map" $c) (hasKey $c "shards") $c.enabled }}
{{- $ctx := dict "root" $ "component" $c.component "key" $key }}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "platform.componentName" $ctx }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "platform.selectorLabels" $ctx | nindent 6 }}
  policyTypes: [Ingress]
  ingress:
    - ports:
        {{- range $c.ports }}
        - port: {{ .targetPort }}
          protocol: {{ .protocol | default "TCP" }}
        {{- end }}
{{- end }}
{{- end }}
`,
	"poddisruptionbudgets.yaml": `{{- range $key, $c := .Values }}
{{- if and (kindIs "map" $c) (hasKey $c "shards") $c.enabled }}
{{- $ctx := dict "root" $ "component" $c.component "key" $key }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "platform.componentName" $ctx }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
spec:
  {{- toYaml $c.pdb | nindent 2 }}
  selector:
    matchLabels:
      {{- include "platform.selectorLabels" $ctx | nindent 6 }}
{{- end }}
{{- end }}
`,
	"admission-job.yaml": `{{- $ctx := dict "root" $ "component" "admission-create" "key" "operator" }}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ include "platform.componentName" $ctx }}
  namespace: {{ .Release.Namespace }}
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
  labels:
    {{- include "platform.labels" $ctx | nindent 4 }}
spec:
  template:
    metadata:
      labels:
        {{- include "platform.labels" $ctx | nindent 8 }}
    spec:
      restartPolicy: OnFailure
      containers:
        - name: create
          image: {{ include "platform.image" (dict "root" $ "image" .Values.operator.image) }}
          args: [create, --namespace={{ .Release.Namespace }}]
          securityContext:
            {{- toYaml .Values.operator.containerSecurityContext | nindent 12 }}
`,
	"NOTES.txt": `{{ .Chart.Name }} is installed as {{ .Release.Name }} in {{ .Release.Namespace }}.
`,
}

// The subchart: a node exporter with values of its own.
const subHelpers = `{{- define "exporter.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- define "exporter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.extraLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}
`

var subTemplates = map[string]string{
	"daemonset.yaml": `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ include "exporter.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "exporter.labels" . | nindent 4 }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .Chart.Name }}
      app.kubernetes.io/instance: {{ .Release.Name }}
  template:
    metadata:
      labels:
        {{- include "exporter.labels" . | nindent 8 }}
    spec:
      serviceAccountName: {{ include "exporter.fullname" . }}
      hostNetwork: {{ .Values.hostNetwork }}
      containers:
        - name: exporter
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
          args:
            {{- toYaml .Values.args | nindent 12 }}
          ports:
            - name: metrics
              containerPort: {{ .Values.service.port }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
          volumeMounts:
            {{- range .Values.hostPaths }}
            - name: {{ .name }}
              mountPath: {{ .mountPath }}
              readOnly: true
            {{- end }}
      volumes:
        {{- range .Values.hostPaths }}
        - name: {{ .name }}
          hostPath:
            path: {{ .hostPath }}
        {{- end }}
      tolerations:
        {{- toYaml .Values.tolerations | nindent 8 }}
`,
	"service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: {{ include "exporter.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "exporter.labels" . | nindent 4 }}
spec:
  ports:
    - name: metrics
      port: {{ .Values.service.port }}
      targetPort: metrics
  selector:
    app.kubernetes.io/name: {{ .Chart.Name }}
    app.kubernetes.io/instance: {{ .Release.Name }}
`,
	"serviceaccount.yaml": `apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "exporter.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "exporter.labels" . | nindent 4 }}
`,
	"rbac.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "exporter.fullname" . }}
  labels:
    {{- include "exporter.labels" . | nindent 4 }}
rules:
  {{- toYaml .Values.rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "exporter.fullname" . }}
  labels:
    {{- include "exporter.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "exporter.fullname" . }}
subjects:
  - kind: ServiceAccount
    name: {{ include "exporter.fullname" . }}
    namespace: {{ .Release.Namespace }}
`,
	"dashboards.yaml": `{{- range $name, $dash := .Values.dashboards }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "exporter.fullname" $ }}-{{ $name }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "exporter.labels" $ | nindent 4 }}
data:
  {{ $name }}.yaml: |
    {{- toYaml $dash | nindent 4 }}
{{- end }}
`,
}

// dashboards are a component's dashboards, as nested values.
func dashboards(component string) map[string]any {
	out := map[string]any{}
	for d := range chartDashboards {
		var panels []any
		for p := range 6 {
			panels = append(panels, map[string]any{
				"id": p, "title": fmt.Sprintf("%s panel %d", component, p), "type": "timeseries",
				"gridPos": map[string]any{"h": 8, "w": 12, "x": (p % 2) * 12, "y": p / 2 * 8},
				"targets": []any{map[string]any{"expr": fmt.Sprintf(`sum(rate(%s_requests_total{job="%s",code=~"5.."}[5m])) by (instance)`, strings.ReplaceAll(component, "-", "_"), component), "legendFormat": "{{instance}}", "refId": "A"}},
				"fieldConfig": map[string]any{"defaults": map[string]any{"unit": "reqps", "thresholds": map[string]any{"mode": "absolute",
					"steps": []any{map[string]any{"color": "green", "value": nil}, map[string]any{"color": "red", "value": 80}}}}},
			})
		}
		out[fmt.Sprintf("dash-%02d", d)] = map[string]any{
			"title": fmt.Sprintf("%s / %02d", component, d), "uid": fmt.Sprintf("%s-%02d", component, d),
			"tags": []any{"platform", component}, "refresh": "30s", "panels": panels,
			"templating": map[string]any{"list": []any{map[string]any{"name": "datasource", "type": "datasource", "query": "prometheus"}}},
		}
	}
	return out
}

func componentValues(name string, port int) map[string]any {
	return map[string]any{
		"enabled": true, "component": name, "shards": chartShards, "replicas": 2,
		"image": map[string]any{"registry": "quay.io", "repository": "platform/" + name, "tag": "v1.4.2", "pullPolicy": "IfNotPresent"},
		"args":  []any{"--log.level=info", "--log.format=json", "--web.listen-address=:" + fmt.Sprint(port), "--config.file=/etc/" + name + "/config.yaml"},
		"ports": []any{
			map[string]any{"name": "http", "port": port, "targetPort": port},
			map[string]any{"name": "grpc", "port": port + 1, "targetPort": port + 1, "protocol": "TCP"},
			map[string]any{"name": "metrics", "port": port + 2, "targetPort": port + 2},
		},
		"env": []any{map[string]any{"name": "GOMAXPROCS", "value": "2"}, map[string]any{"name": "GOMEMLIMIT", "value": "400MiB"},
			map[string]any{"name": "TZ", "value": "UTC"}},
		"strategy":        map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "25%", "maxUnavailable": 0}},
		"annotations":     map[string]any{"platform.example.com/owner": "observability", "platform.example.com/tier": "core"},
		"podAnnotations":  map[string]any{"prometheus.io/scrape": "true", "prometheus.io/port": fmt.Sprint(port + 2)},
		"livenessProbe":   map[string]any{"httpGet": map[string]any{"path": "/-/healthy", "port": "http"}, "initialDelaySeconds": 10, "periodSeconds": 15, "failureThreshold": 6},
		"readinessProbe":  map[string]any{"httpGet": map[string]any{"path": "/-/ready", "port": "http"}, "periodSeconds": 5, "timeoutSeconds": 3},
		"resources":       map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"cpu": "1", "memory": "512Mi"}},
		"securityContext": map[string]any{"runAsNonRoot": true, "runAsUser": 65534, "runAsGroup": 65534, "fsGroup": 65534, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
		"containerSecurityContext": map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
			"capabilities": map[string]any{"drop": []any{"ALL"}}},
		"extraVolumeMounts": []any{map[string]any{"name": "tmp", "mountPath": "/tmp"}, map[string]any{"name": "data", "mountPath": "/data"}},
		"extraVolumes":      []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{}}, map[string]any{"name": "data", "emptyDir": map[string]any{"sizeLimit": "1Gi"}}},
		"nodeSelector":      map[string]any{"kubernetes.io/os": "linux", "node-role.example.com/monitoring": "true"},
		"tolerations":       []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "monitoring", "effect": "NoSchedule"}},
		"affinity": map[string]any{"podAntiAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{
			map[string]any{"weight": 100, "podAffinityTerm": map[string]any{"topologyKey": "kubernetes.io/hostname",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": name}}}}}}},
		"service":        map[string]any{"type": "ClusterIP", "annotations": map[string]any{"platform.example.com/scrape": "true"}},
		"serviceAccount": map[string]any{"create": true, "name": "", "automount": true, "annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/" + name}},
		"rbac": map[string]any{
			"clusterRules": []any{
				map[string]any{"apiGroups": []any{""}, "resources": []any{"nodes", "nodes/metrics", "services", "endpoints", "pods"}, "verbs": []any{"get", "list", "watch"}},
				map[string]any{"apiGroups": []any{"discovery.k8s.io"}, "resources": []any{"endpointslices"}, "verbs": []any{"get", "list", "watch"}},
				map[string]any{"nonResourceURLs": []any{"/metrics", "/metrics/cadvisor"}, "verbs": []any{"get"}},
			},
			"rules": []any{
				map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps", "secrets"}, "verbs": []any{"get", "list", "watch"}},
				map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "verbs": []any{"get", "create", "update"}},
			},
		},
		"pdb":        map[string]any{"minAvailable": 1},
		"dashboards": dashboards(name),
	}
}

// chartCRD is a CRD of the chart's crds/ folder, with a schema of some
// depth.
func chartCRD(kind string) map[string]any {
	plural := strings.ToLower(kind) + "s"
	if strings.HasSuffix(kind, "s") {
		plural = strings.ToLower(kind) + "es"
	}
	spec := map[string]any{}
	for _, f := range []string{"replicas", "retention", "scrapeInterval", "evaluationInterval", "logLevel", "logFormat", "externalUrl", "routePrefix", "paused", "priorityClassName"} {
		spec[f] = map[string]any{"type": "string", "description": "The " + f + " of the " + kind + "; defaults as the operator documents."}
	}
	spec["resources"] = map[string]any{"type": "object", "description": "Compute resources.", "properties": map[string]any{
		"limits":   map[string]any{"type": "object", "additionalProperties": map[string]any{"x-kubernetes-int-or-string": true}},
		"requests": map[string]any{"type": "object", "additionalProperties": map[string]any{"x-kubernetes-int-or-string": true}}}}
	spec["selector"] = map[string]any{"type": "object", "properties": map[string]any{
		"matchLabels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
		"matchExpressions": map[string]any{"type": "array", "items": map[string]any{"type": "object", "required": []any{"key", "operator"}, "properties": map[string]any{
			"key": map[string]any{"type": "string"}, "operator": map[string]any{"type": "string"}, "values": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}}}},
		"x-kubernetes-map-type": "atomic"}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + ".monitoring.platform.example.com", "annotations": map[string]any{"controller-gen.kubebuilder.io/version": "v0.18.0"}},
		"spec": map[string]any{"group": "monitoring.platform.example.com", "scope": "Namespaced",
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind), "categories": []any{"platform"}},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"apiVersion": map[string]any{"type": "string"}, "kind": map[string]any{"type": "string"}, "metadata": map[string]any{"type": "object"},
					"spec":   map[string]any{"type": "object", "properties": spec},
					"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}},
	}
}

// writeChart writes the chart into dir and says how many template files
// it has.
func writeChart(dir string) (int, error) {
	files := map[string][]byte{}
	put := func(name string, v any) error {
		if s, ok := v.(string); ok {
			files[name] = []byte(s)
			return nil
		}
		b, err := yaml.Marshal(v)
		files[name] = b
		return err
	}
	templates := 0
	if err := put("Chart.yaml", map[string]any{"apiVersion": "v2", "name": "platform", "version": "68.2.1", "appVersion": "v1.4.2",
		"kubeVersion": ">=1.25.0-0", "description": "A platform's monitoring stack", "type": "application",
		"dependencies": []any{map[string]any{"name": "exporter", "version": "4.1.0", "condition": "exporter.enabled"}}}); err != nil {
		return 0, err
	}
	values := map[string]any{
		"nameOverride": "", "fullnameOverride": "",
		"commonLabels": map[string]any{"platform.example.com/team": "observability", "platform.example.com/cost-center": "infra-042"},
		"global": map[string]any{"imageRegistry": "registry.example.com", "rbac": map[string]any{"create": true},
			"imagePullSecrets": []any{map[string]any{"name": "registry-credentials"}},
			"dashboardLabels":  map[string]any{"grafana_dashboard": "1"}},
		"exporter": map[string]any{"enabled": true, "resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}}},
	}
	for i, c := range chartComponents {
		values[c.key] = componentValues(c.name, 9090+10*i)
		for name, body := range chartTemplates {
			body = strings.ReplaceAll(strings.ReplaceAll(body, "COMPONENT", c.name), "KEY", c.key)
			files[filepath.Join("templates", c.name, name)] = []byte(body)
			templates++
		}
	}
	if err := put("values.yaml", values); err != nil {
		return 0, err
	}
	files["templates/_helpers.tpl"] = []byte(chartHelpers)
	for name, body := range chartTopTemplates {
		files[filepath.Join("templates", name)] = []byte(body)
		templates++
	}
	for i, kind := range []string{"Prometheus", "Alertmanager", "ServiceMonitor", "PrometheusRule"}[:chartCRDs] {
		if err := put(fmt.Sprintf("crds/crd-%d-%s.yaml", i, strings.ToLower(kind)), chartCRD(kind)); err != nil {
			return 0, err
		}
	}
	sub := "charts/exporter"
	if err := put(sub+"/Chart.yaml", map[string]any{"apiVersion": "v2", "name": "exporter", "version": "4.1.0", "appVersion": "1.9.1"}); err != nil {
		return 0, err
	}
	if err := put(sub+"/values.yaml", map[string]any{
		"image":       map[string]any{"repository": "quay.io/prometheus/node-exporter", "tag": "v1.9.1"},
		"hostNetwork": true, "args": []any{"--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--path.rootfs=/host/root"},
		"service":   map[string]any{"port": 9100},
		"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}, "limits": map[string]any{"memory": "128Mi"}},
		"hostPaths": []any{map[string]any{"name": "proc", "hostPath": "/proc", "mountPath": "/host/proc"},
			map[string]any{"name": "sys", "hostPath": "/sys", "mountPath": "/host/sys"}, map[string]any{"name": "root", "hostPath": "/", "mountPath": "/host/root"}},
		"tolerations": []any{map[string]any{"operator": "Exists", "effect": "NoSchedule"}},
		"extraLabels": map[string]any{"jobLabel": "node-exporter"},
		"rules":       []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"nodes", "nodes/proxy"}, "verbs": []any{"get", "list", "watch"}}},
		"dashboards":  dashboards("node-exporter"),
	}); err != nil {
		return 0, err
	}
	files[sub+"/templates/_helpers.tpl"] = []byte(subHelpers)
	for name, body := range subTemplates {
		files[filepath.Join(sub, "templates", name)] = []byte(body)
		templates++
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return 0, err
		}
	}
	return templates, nil
}

// objectKeys are the kind/name of each object in a stream of YAML
// documents, sorted.
func objectKeys(out []byte) ([]string, error) {
	var keys []string
	for _, doc := range bytes.Split(append([]byte("\n"), out...), []byte("\n---")) {
		var o struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, tail(doc))
		}
		if o.Kind != "" {
			keys = append(keys, o.Kind+"/"+o.Metadata.Name)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

func (b *bench) chartsScenario() []row {
	dir := filepath.Join(b.work, "chart", "platform")
	templates, err := writeChart(dir)
	b.must(err)
	helm, err := chartTool("helm")
	b.must(err)
	home := filepath.Join(b.work, "helm-home")
	helmEnv := append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	// CRDs are objects of gantry's build; helm template prints them with
	// --include-crds.
	gantryArgs := []string{"build", "--chart", dir, "--chart-hooks", "objects", "--release-name", "bench", "--quiet"}
	helmArgs := []string{"template", "bench", dir, "--include-crds"}
	run := func(bin string, args []string, env []string) (time.Duration, []byte) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		cmd.Dir = filepath.Dir(dir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		d := time.Since(start)
		if err != nil {
			b.must(fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, tail(stderr.Bytes())))
		}
		return d, stdout.Bytes()
	}
	gantryEnv := append(os.Environ(), "GANTRY_WORKSPACE="+filepath.Dir(dir))

	// A first run of each, untimed, fills the page cache with the
	// binaries and gives the objects to compare.
	_, gOut := run(b.gantry, gantryArgs, gantryEnv)
	_, hOut := run(helm, helmArgs, helmEnv)
	gKeys, err := objectKeys(gOut)
	b.must(err)
	hKeys, err := objectKeys(hOut)
	b.must(err)
	if strings.Join(gKeys, "\n") != strings.Join(hKeys, "\n") {
		b.must(fmt.Errorf("charts: gantry built %d objects, helm template printed %d; only gantry's: %v; only helm's: %v",
			len(gKeys), len(hKeys), missing(gKeys, hKeys), missing(hKeys, gKeys)))
	}
	b.logf("charts: %d template files, %d objects, the same kinds and names from both", templates, len(gKeys))

	var g, h []time.Duration
	for rep := range b.reps {
		if rep%2 == 0 {
			d, _ := run(b.gantry, gantryArgs, gantryEnv)
			g = append(g, d)
			d, _ = run(helm, helmArgs, helmEnv)
			h = append(h, d)
		} else {
			d, _ := run(helm, helmArgs, helmEnv)
			h = append(h, d)
			d, _ = run(b.gantry, gantryArgs, gantryEnv)
			g = append(g, d)
		}
		b.logf("charts: rep %d: gantry %s, helm template %s (%.2f)", rep+1, g[rep], h[rep], float64(g[rep])/float64(h[rep]))
	}
	return []row{{
		name: fmt.Sprintf("`build --chart` of a platform chart (%d template files, a subchart, %d CRDs, %d objects; floor: `helm template --include-crds` of it, the same objects)",
			templates, chartCRDs, len(gKeys)),
		gantry: median(g), flr: median(h), ratios: ratios(g, h), target: "≤ 1.2 × helm template",
	}}
}

// chartTool finds a tool of make tools in gantry's bin/ folder.
func chartTool(name string) (string, error) {
	if p := peer(name); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("%s is not built: make tools", name)
}

// missing are the keys of a that b lacks.
func missing(a, b []string) []string {
	in := map[string]bool{}
	for _, k := range b {
		in[k] = true
	}
	var out []string
	for _, k := range a {
		if !in[k] {
			out = append(out, k)
		}
	}
	return out
}
