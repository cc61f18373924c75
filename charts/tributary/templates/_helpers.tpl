{{/* Names, labels and the flags shared by the coordinator templates. */}}

{{- define "tributary.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name; pod names (FULLNAME-N) must stay valid DNS labels. */}}
{{- define "tributary.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tributary.headless" -}}
{{- printf "%s-headless" (include "tributary.fullname" .) -}}
{{- end -}}

{{- define "tributary.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tributary.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: coordinator
{{- end -}}

{{- define "tributary.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "tributary.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* DNS name of pod $i: FULLNAME-i.HEADLESS.NAMESPACE.svc.DOMAIN */}}
{{- define "tributary.podHost" -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "tributary.fullname" .root) (int .i) (include "tributary.headless" .root) .root.Release.Namespace .root.Values.clusterDomain -}}
{{- end -}}

{{/* --peers: RAFTID=NODEID@HOST:PORT for the bootstrap pods; raft id = ordinal + 1. */}}
{{- define "tributary.peers" -}}
{{- $root := . -}}
{{- $items := list -}}
{{- range $i := until (int .Values.bootstrapReplicas) -}}
{{- $items = append $items (printf "%d=%s-%d@%s:%d" (add1 $i) (include "tributary.fullname" $root) $i (include "tributary.podHost" (dict "root" $root "i" $i)) (int $root.Values.ports.cluster)) -}}
{{- end -}}
{{- join "," $items -}}
{{- end -}}

{{/* Raft quorum of the voters when every pod is a voter. */}}
{{- define "tributary.quorum" -}}
{{- add1 (div (int .Values.replicas) 2) -}}
{{- end -}}

{{- define "tributary.tlsSecret" -}}
{{- if .Values.tls.secretName -}}
{{- .Values.tls.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "tributary.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The pods' ServiceAccount. */}}
{{- define "tributary.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tributary.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tributary.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Checks that fail the render with a clear message. */}}
{{- define "tributary.validate" -}}
{{- if lt (int .Values.bootstrapReplicas) 1 -}}
{{- fail "bootstrapReplicas must be at least 1" -}}
{{- end -}}
{{- if lt (int .Values.replicas) 1 -}}
{{- fail "replicas must be at least 1" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) (not .Values.tls.certManager.enabled) -}}
{{- fail "tls.enabled needs tls.secretName or tls.certManager.enabled (or tls.enabled=false for a plaintext test cluster)" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.enabled needs tls.certManager.issuerRef.name" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.edgeCASecretName) (not .Values.tls.allowSharedCA) -}}
{{- fail "tls.enabled needs tls.edgeCASecretName (a Secret whose ca.crt signs the edges' certificates; the intake trusts only it, the cluster port only the coordinators' ca.crt), or tls.allowSharedCA=true to trust the coordinators' ca.crt for edges too (--allow-shared-ca: an edge's certificate then passes the cluster port's TLS handshake)" -}}
{{- end -}}
{{- if not (has .Values.podAntiAffinity (list "hard" "soft" "none")) -}}
{{- fail (printf "podAntiAffinity %q: want hard, soft or none" .Values.podAntiAffinity) -}}
{{- end -}}
{{- end -}}
