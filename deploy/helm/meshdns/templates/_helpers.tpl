{{/* The labels kustomize's bases give every object of a component. */}}
{{- define "meshdns.labels" -}}
app.kubernetes.io/component: {{ . }}
app.kubernetes.io/name: meshdns
{{- end }}

{{/* What Helm adds besides (not on selectors). */}}
{{- define "meshdns.helmLabels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "meshdns.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{/* A config file's ConfigMap name, suffixed with a hash of its content so a change rolls the
pods (as kustomize's configMapGenerator does). Args: root, base name, content. */}}
{{- define "meshdns.configName" -}}
{{ index . 1 }}-{{ index . 2 | sha256sum | trunc 10 }}
{{- end }}

{{- define "meshdns.serveConfig" -}}
{{ .Values.serve.config | default (.Files.Get "files/serve-config.yaml") }}
{{- end }}
{{- define "meshdns.irohConfig" -}}
{{ .Values.controllerIroh.config | default (.Files.Get "files/iroh-config.yaml") }}
{{- end }}
{{- define "meshdns.meshConfig" -}}
{{ .Values.controllerMesh.config | default (.Files.Get "files/mesh-config.yaml") }}
{{- end }}

{{/* The objects of one of deploy/'s RBAC files, placed as kustomize places them: namespaced
objects and ServiceAccount subjects in the release namespace, the component's labels added.
Args: root, file, component. */}}
{{- define "meshdns.fromFile" -}}
{{- $root := index . 0 -}}
{{- $component := index . 2 -}}
{{- $clusterScoped := list "ClusterRole" "ClusterRoleBinding" "CustomResourceDefinition" "Namespace" -}}
{{- range $doc := splitList "\n---\n" ($root.Files.Get (index . 1)) }}
{{- $o := fromYaml $doc }}
{{- if $o.kind }}
{{- $labels := merge (include "meshdns.labels" $component | fromYaml) (include "meshdns.helmLabels" $root | fromYaml) ($o.metadata.labels | default dict) }}
{{- $_ := set $o.metadata "labels" $labels }}
{{- if not (has $o.kind $clusterScoped) }}
{{- $_ := set $o.metadata "namespace" $root.Release.Namespace }}
{{- end }}
{{- range $s := $o.subjects | default list }}
{{- if eq $s.kind "ServiceAccount" }}
{{- $_ := set $s "namespace" $root.Release.Namespace }}
{{- end }}
{{- end }}
---
{{ toYaml $o }}
{{- end }}
{{- end }}
{{- end }}

{{/* The container security context every meshdns container runs with. */}}
{{- define "meshdns.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities: {drop: ["ALL"]}
{{- end }}
