{{- define "include-loop.again" -}}
{{ include "include-loop.again" . }}
{{- end -}}
