{{/* One controller: its ConfigMap, Deployment and metrics Service. Args: root, component
("controller-iroh" or "controller-mesh"), which ("iroh" or "mesh"), config, values. */}}
{{- define "meshdns.controller" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $which := index . 2 -}}
{{- $config := index . 3 -}}
{{- $values := index . 4 -}}
{{- $labels := include "meshdns.labels" $component -}}
{{- $configName := include "meshdns.configName" (list $root (printf "meshdns-%s-config" $which) $config) -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $configName }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- $labels | nindent 4 }}
    {{- include "meshdns.helmLabels" $root | nindent 4 }}
data:
  config.yaml: {{ $config | quote }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: meshdns-{{ $component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- $labels | nindent 4 }}
    {{- include "meshdns.helmLabels" $root | nindent 4 }}
spec:
  replicas: {{ $values.replicas }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- $labels | nindent 6 }}
  template:
    metadata:
      labels:
        {{- $labels | nindent 8 }}
    spec:
      serviceAccountName: meshdns-{{ $component }}
      terminationGracePeriodSeconds: 30
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
        - name: meshdns
          image: {{ include "meshdns.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            - controller
            - {{ $which }}
            - --config=/etc/meshdns/config.yaml
            - --http=0.0.0.0:8081
            - --leader-elect
          env:
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
            - name: POD_NAME
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            - {name: MESHDNS_LOG_FORMAT, value: json}
          ports:
            - {name: http, containerPort: 8081, protocol: TCP}
          readinessProbe:
            httpGet: {path: /healthz, port: http}
            periodSeconds: 10
          livenessProbe:
            httpGet: {path: /healthz, port: http}
            periodSeconds: 10
            failureThreshold: 3
          resources:
            {{- toYaml $values.resources | nindent 12 }}
          securityContext:
            {{- include "meshdns.containerSecurity" $root | nindent 12 }}
          volumeMounts:
            - {name: config, mountPath: /etc/meshdns, readOnly: true}
      volumes:
        - name: config
          configMap: {name: {{ $configName }}}
---
apiVersion: v1
kind: Service
metadata:
  name: meshdns-{{ $component }}-metrics
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- $labels | nindent 4 }}
    {{- include "meshdns.helmLabels" $root | nindent 4 }}
    meshdns.io/metrics: "true"
spec:
  clusterIP: None
  selector:
    {{- $labels | nindent 4 }}
  ports:
    - {name: http, port: 8081, targetPort: http, protocol: TCP}
{{- end }}
