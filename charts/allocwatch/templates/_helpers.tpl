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

{{/* repository[:tag][@digest]; the tag defaults to appVersion. */}}
{{- define "allocwatch.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- if kindIs "float64" $tag }}
{{- /* A number from a values file is a float64, which toString writes as 2.0240101e+07 from seven digits on. */}}
{{- if gt $tag 9007199254740992.0 }}
{{- fail (printf "image.tag %v: a number this long loses digits on its way through YAML; quote it" $tag) }}
{{- end }}
{{- $tag = int64 $tag }}
{{- end }}
{{- $tag = toString $tag }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* The metrics Service exists when asked for, or when a ServiceMonitor needs it. */}}
{{- define "allocwatch.serviceEnabled" -}}
{{- if and .Values.metrics.enabled (or .Values.metrics.service.enabled .Values.metrics.serviceMonitor.enabled) }}true{{ end }}
{{- end }}

{{/* An interval given as plain seconds ("0.5", 2) rather than a Go duration. */}}
{{- define "allocwatch.plainSeconds" -}}
{{- if regexMatch "^([0-9]+(\\.[0-9]*)?|\\.[0-9]+)$" (toString . | trim) }}true{{ end }}
{{- end }}

{{/* The interval as the user reads it: plain seconds get their unit. */}}
{{- define "allocwatch.intervalText" -}}
{{- $text := toString .Values.interval | trim }}
{{- if include "allocwatch.plainSeconds" $text }}{{ $text }}s{{ else }}{{ $text }}{{ end }}
{{- end }}

{{/* The interval in seconds, read as the watcher reads it (the schema has checked its syntax). */}}
{{- define "allocwatch.intervalSeconds" -}}
{{- $text := toString .Values.interval | trim }}
{{- if include "allocwatch.plainSeconds" $text }}
{{- float64 $text }}
{{- else }}
{{- $unit := dict "ns" 1e-9 "us" 1e-6 "µs" 1e-6 "μs" 1e-6 "ms" 1e-3 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- $seconds := 0.0 }}
{{- range regexFindAll "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)" $text -1 }}
{{- $number := regexFind "^[0-9.]+" . }}
{{- $seconds = addf $seconds (mulf (float64 $number) (get $unit (trimPrefix $number .))) }}
{{- end }}
{{- $seconds }}
{{- end }}
{{- end }}

{{/* Checks that values.schema.json cannot express. */}}
{{- define "allocwatch.validate" -}}
{{- /* The watcher exits 2 on an interval outside 10ms..24h: fail here, not in a crash loop. */}}
{{- $interval := include "allocwatch.intervalSeconds" . | float64 }}
{{- if or (lt $interval 0.01) (gt $interval 86400.0) }}
{{- fail (printf "interval %v is outside 10ms..24h, the range the watcher accepts" .Values.interval) }}
{{- end }}
{{- if and (not .Values.metrics.enabled) (or .Values.metrics.service.enabled .Values.metrics.serviceMonitor.enabled) }}
{{- fail "metrics.service.enabled and metrics.serviceMonitor.enabled need metrics.enabled=true" }}
{{- end }}
{{- $strategy := .Values.updateStrategy | default dict }}
{{- if ne ($strategy.type | default "RollingUpdate") "OnDelete" }}
{{- with $strategy.rollingUpdate }}
{{- /* Values merge maps, so a maxSurge meets the default maxUnavailable. */}}
{{- $zero := list "0" "0%" }}
{{- $surge := has (toString (.maxSurge | default 0)) $zero | not }}
{{- $unavailable := has (toString (.maxUnavailable | default 0)) $zero | not }}
{{- if and $surge $unavailable }}
{{- fail "updateStrategy.rollingUpdate: maxSurge needs maxUnavailable=0 (the API server rejects both non-zero)" }}
{{- end }}
{{- if not (or $surge $unavailable) }}
{{- fail "updateStrategy.rollingUpdate: maxUnavailable and maxSurge cannot both be 0 (the rollout could never start)" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The watcher's command line, built from values. */}}
{{- define "allocwatch.args" -}}
- {{ printf "--socket=%s" .Values.podResourcesSocket | quote }}
- {{ printf "--driver-root=%s/driver" .Values.nvmlMockRoot | quote }}
- {{ printf "--interval=%v" .Values.interval | quote }}
- {{ printf "--used-fraction=%v" .Values.usedFractionPerClaim | quote }}
{{- range .Values.resourceNames }}
- {{ printf "--resource-name=%s" . | quote }}
{{- end }}
{{- range .Values.draDrivers }}
- {{ printf "--dra-driver=%s" . | quote }}
{{- end }}
{{- if .Values.metrics.enabled }}
- {{ printf "--metrics-address=:%v" .Values.metrics.port | quote }}
{{- else }}
- "--metrics-address="
{{- end }}
- {{ printf "--log-format=%s" .Values.logFormat | quote }}
- {{ printf "--log-level=%s" .Values.logLevel | quote }}
{{- if .Values.keepReadingsOnExit }}
- "--keep-readings-on-exit"
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
