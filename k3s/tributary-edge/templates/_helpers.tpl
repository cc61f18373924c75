{{/* Names and labels of the edge chart. */}}

{{- define "edge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "edge.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "edge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "edge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: edge
{{- end -}}

{{- define "edge.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "edge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "edge.validate" -}}
{{- if not .Values.coordinators -}}
{{- fail "coordinators: give the cloud coordinators' intake addresses (host:port)" -}}
{{- end -}}
{{- if not .Values.images -}}
{{- fail "images: give at least one architecture's image" -}}
{{- end -}}
{{- range $arch, $_ := .Values.images -}}
{{- if not (has $arch (list "arm64" "arm" "amd64")) -}}
{{- fail (printf "images.%s: want arm64, arm or amd64 (the kubernetes.io/arch label)" $arch) -}}
{{- end -}}
{{- end -}}
{{- end -}}
