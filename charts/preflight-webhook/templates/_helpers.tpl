{{/* Names and labels shared by every template. */}}
{{- define "pw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pw.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 56 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 56 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 56 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "pw.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "pw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "pw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The serving pods, and only them: the certificate Deployment's pods carry the release's
     selectorLabels too (component "certs"), so every selector of the serving pods (Deployment,
     Service, PodDisruptionBudget, NetworkPolicy, spreading) names the component. */}}
{{- define "pw.webhookSelectorLabels" -}}
{{ include "pw.selectorLabels" . }}
app.kubernetes.io/component: webhook
{{- end -}}

{{/* The serving ServiceAccount: the only identity the dry-run guard watches. */}}
{{- define "pw.sa" -}}
{{- default (include "pw.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "pw.certsName" -}}
{{- printf "%s-certs" (include "pw.fullname" .) -}}
{{- end -}}

{{- define "pw.secretName" -}}
{{- default (printf "%s-tls" (include "pw.fullname" .)) .Values.certificates.secretName -}}
{{- end -}}

{{- define "pw.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Namespaces never judged (the webhook's namespaceSelector) and, therefore, never read:
     the serving config's excludedNamespaces. One list for both, as a JSON array. */}}
{{- define "pw.excludedNamespaces" -}}
{{- concat (list "kube-system" "kube-node-lease" "kube-public" .Release.Namespace) .Values.webhook.excludeNamespaces | uniq | toJson -}}
{{- end -}}

{{/* The serving config: .Values.config plus what the chart derives (exclusions, client CA). */}}
{{- define "pw.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $_ := set $cfg "excludedNamespaces" (include "pw.excludedNamespaces" . | fromJsonArray) -}}
{{- /* where `get secrets` is granted (rbac.jobNamespaces; null: rbac.clusterWide): the capability probe asks there */ -}}
{{- $_ := set $cfg "jobNamespaces" (ternary nil (include "pw.jobNamespaces" . | fromJsonArray) .Values.rbac.clusterWide) -}}
{{- /* audit.reports: the audit controller writes Policy Reports only when the chart grants it the report verbs */ -}}
{{- $audit := deepCopy (get $cfg "audit" | default dict) -}}
{{- $_ := set $audit "reports" .Values.audit.reports.enabled -}}
{{- $_ := set $cfg "audit" $audit -}}
{{- if .Values.clientAuth.enabled -}}
{{- $_ := set $cfg "clientAuth" (dict "caFile" "/etc/preflight-webhook/client-ca/ca.crt" "allowedNames" .Values.clientAuth.allowedNames) -}}
{{- else -}}
{{- $_ := set $cfg "clientAuth" (dict "caFile" nil "allowedNames" (list)) -}}
{{- end -}}
{{- /* registryCA: the mounted bundle is the Image Pull check's registryAccess.caFile */ -}}
{{- if or .Values.registryCA.secretName .Values.registryCA.configMapName -}}
{{- $ra := deepCopy (get $cfg "registryAccess" | default dict) -}}
{{- $_ := set $ra "caFile" "/etc/preflight-webhook/registry-ca/ca.crt" -}}
{{- $_ := set $cfg "registryAccess" $ra -}}
{{- end -}}
{{- /* the cluster's own networks are internal addresses for the registry client (webhook/registry/address.py):
     registryAccess.clusterNetworks, networkPolicy.podCIDRs and, where `helm install` can read them, the
     ServiceCIDR objects' spec.cidrs (networking.k8s.io/v1, served from Kubernetes v1.33; `helm template` reads none) */ -}}
{{- $ra := deepCopy (get $cfg "registryAccess" | default dict) -}}
{{- $nets := concat (get $ra "clusterNetworks" | default list) (without (.Values.networkPolicy.podCIDRs | default list) "") -}}
{{- range (lookup "networking.k8s.io/v1" "ServiceCIDR" "" "").items | default list -}}
{{- $nets = concat $nets (.spec.cidrs | default list) -}}
{{- end -}}
{{- $_ := set $ra "clusterNetworks" ($nets | uniq) -}}
{{- $_ := set $cfg "registryAccess" $ra -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Fail early on combinations that would hurt the cluster. */}}
{{- define "pw.validate" -}}
{{- $mode := .Values.certificates.mode -}}
{{- if not (has $mode (list "selfManaged" "certManager" "provided")) -}}
{{- fail (printf "certificates.mode must be selfManaged, certManager or provided, not %q" $mode) -}}
{{- end -}}
{{- if and (eq $mode "provided") (not .Values.certificates.secretName) -}}
{{- fail "certificates.mode=provided needs certificates.secretName (an existing kubernetes.io/tls Secret)" -}}
{{- end -}}
{{- if and (eq $mode "provided") (not .Values.certificates.provided.caBundle) -}}
{{- fail "certificates.mode=provided needs certificates.provided.caBundle (the CA that signed the Secret's certificate)" -}}
{{- end -}}
{{- if ge (float64 .Values.config.budgetSeconds) (float64 .Values.webhook.timeoutSeconds) -}}
{{- fail (printf "config.budgetSeconds (%v) must be below webhook.timeoutSeconds (%v): the answer has to reach the apiserver in time" .Values.config.budgetSeconds .Values.webhook.timeoutSeconds) -}}
{{- end -}}
{{- if and .Values.registryCA.secretName .Values.registryCA.configMapName -}}
{{- fail "registryCA: set secretName or configMapName, not both" -}}
{{- end -}}
{{- if and (or .Values.registryCA.secretName .Values.registryCA.configMapName) (.Values.config.registryAccess | default dict).caFile -}}
{{- fail "registryCA mounts the bundle and sets config.registryAccess.caFile itself: leave config.registryAccess.caFile empty" -}}
{{- end -}}
{{- if and (or .Values.registryCA.secretName .Values.registryCA.configMapName) (not .Values.registryCA.key) -}}
{{- fail "registryCA.key: the key of the Secret or ConfigMap that holds the PEM bundle (e.g. ca.crt)" -}}
{{- end -}}
{{- if and .Values.clientAuth.enabled (not .Values.clientAuth.caBundle) -}}
{{- fail "clientAuth.enabled needs clientAuth.caBundle (PEM of the CA that signs the apiserver's client certificate)" -}}
{{- end -}}
{{- include "pw.validateUpgrade" . -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled=true (the ServiceMonitor scrapes the plain-HTTP metrics port)" -}}
{{- end -}}
{{- if and .Values.metrics.enabled (eq (int .Values.metrics.port) (int .Values.containerPort)) -}}
{{- fail (printf "metrics.port (%v) must differ from containerPort (%v): the metrics listener is a second port" .Values.metrics.port .Values.containerPort) -}}
{{- end -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (add (int .Values.shutdownDelaySeconds) (int .Values.config.drainSeconds)) -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed shutdownDelaySeconds + config.drainSeconds (%v)" .Values.terminationGracePeriodSeconds (add (int .Values.shutdownDelaySeconds) (int .Values.config.drainSeconds))) -}}
{{- end -}}
{{- end -}}


{{/* Charts before 0.2.0 selected the serving pods by name and instance alone, which also matched
     the certificate Deployment's pod. A Deployment's selector is immutable, so `helm upgrade`
     from such a release would fail with the apiserver's "field is immutable"; this says what to
     run instead (docs/install.md, "Upgrading from chart 0.1.0"). `lookup` sees the cluster
     only in install/upgrade (and --dry-run=server), never in `helm template`. */}}
{{- define "pw.validateUpgrade" -}}
{{- $old := lookup "apps/v1" "Deployment" .Release.Namespace (include "pw.fullname" .) -}}
{{- if $old -}}
{{- $sel := (($old.spec).selector).matchLabels | default dict -}}
{{- if not (hasKey $sel "app.kubernetes.io/component") -}}
{{- $ns := .Release.Namespace -}}
{{- $name := include "pw.fullname" . -}}
{{- $legacy := printf "app.kubernetes.io/instance=%s,app.kubernetes.io/name=%s,!app.kubernetes.io/component" .Release.Name (include "pw.name" .) -}}
{{- fail (printf "Deployment %s/%s was installed by a chart before 0.2.0: its selector lacks app.kubernetes.io/component=webhook, and a Deployment's selector is immutable. Move it over without a failed request, then run this helm upgrade again:\n  kubectl -n %s label replicasets,pods -l '%s' app.kubernetes.io/component=webhook\n  kubectl -n %s delete deployment %s --cascade=orphan\n(the new Deployment adopts the labelled ReplicaSet and replaces its pods one by one; docs/install.md, \"Upgrading from chart 0.1.0\")" $ns $name $ns $legacy $ns $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The audit controller (`preflight-webhook audit`): its name, pods and ServiceAccount. */}}
{{- define "pw.auditName" -}}
{{- printf "%s-audit" (include "pw.fullname" .) -}}
{{- end -}}

{{- define "pw.auditSelectorLabels" -}}
{{ include "pw.selectorLabels" . }}
app.kubernetes.io/component: audit
{{- end -}}

{{- define "pw.auditSa" -}}
{{- default (include "pw.auditName" .) .Values.audit.serviceAccount.name -}}
{{- end -}}

{{/* The namespace of the audit controller's leader-election Lease (config.audit.leaseNamespace, "" = the release's). */}}
{{- define "pw.auditLeaseNamespace" -}}
{{- default .Release.Namespace (dig "audit" "leaseNamespace" "" .Values.config) -}}
{{- end -}}

{{/* registryCA: a private registry's CA for the Image Pull check (config.registryAccess.caFile), in the
webhook's and the audit controller's pods (both run the checks). Empty when registryCA is not set. */}}
{{- define "pw.registryCAMount" -}}
{{- if or .Values.registryCA.secretName .Values.registryCA.configMapName -}}
- name: registry-ca
  mountPath: /etc/preflight-webhook/registry-ca
  readOnly: true
{{- end -}}
{{- end -}}

{{- define "pw.registryCAVolume" -}}
{{- with .Values.registryCA -}}
{{- if .secretName -}}
- name: registry-ca
  secret:
    secretName: {{ .secretName }}
    items:
      - {key: {{ .key | quote }}, path: ca.crt}
{{- else if .configMapName -}}
- name: registry-ca
  configMap:
    name: {{ .configMapName }}
    items:
      - {key: {{ .key | quote }}, path: ca.crt}
{{- end -}}
{{- end -}}
{{- end -}}
