{{- /* Each level includes the next and writes what it gave twice: forty
levels from 1 MiB are 2^60 bytes. */ -}}
{{- define "doubling.double" -}}
{{- if lt (int .n) 40 -}}
{{- $s := include "doubling.double" (dict "n" (add1 .n)) -}}
{{ $s }}{{ $s }}
{{- else -}}
{{ repeat 1048576 "x" }}
{{- end -}}
{{- end -}}
