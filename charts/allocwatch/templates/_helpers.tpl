{{/* Chart name. */}}
{{- define "allocwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart, or the release name when it holds the chart name. */}}
{{- define "allocwatch.fullname" -}}
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

{{- define "allocwatch.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "allocwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "allocwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "allocwatch.labels" -}}
helm.sh/chart: {{ include "allocwatch.chart" . }}
{{ include "allocwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: allocation-watcher
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The pod's labels: the chart's, then podLabels, which may replace any of them
but the selector's: a pod the DaemonSet does not select could never be created.
*/}}
{{- define "allocwatch.podLabels" -}}
{{- $selector := include "allocwatch.selectorLabels" . | fromYaml }}
{{- range $key, $value := .Values.podLabels }}
{{- if and (hasKey $selector $key) (ne (toString $value) (get $selector $key)) }}
{{- fail (printf "podLabels.%s: the DaemonSet selects its pods by this label, so it stays %q (set nameOverride, or name the release, to change it)" $key (get $selector $key)) }}
{{- end }}
{{- end }}
{{- toYaml (merge (dict) (.Values.podLabels | default dict) (include "allocwatch.labels" . | fromYaml)) }}
{{- end }}

{{/*
repository:tag[@digest]; the tag defaults to appVersion. A number from a
values file arrives as a float64, which would print as 2.0240101e+07: it is
written as the integer it is (the schema caps it where float64 stays exact).
*/}}
{{- define "allocwatch.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- if kindIs "float64" $tag }}{{ $tag = int64 $tag }}{{ end }}
{{- printf "%s:%v" .Values.image.repository $tag }}
{{- with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* "true" when the declared-load watch is on, else empty. */}}
{{- define "allocwatch.declaredLoad" -}}
{{- if dig "enabled" false (.Values.declaredLoad | default dict) }}true{{ end }}
{{- end }}
