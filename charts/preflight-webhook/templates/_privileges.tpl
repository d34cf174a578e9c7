{{/* What the chart grants and admits beyond the generated ClusterRoles (docs/security.md,
     "What each identity may do"): the apiserver's addresses for the NetworkPolicies, the egress
     switch, and the namespaces where jobs live (Secret reads, the audit's Event writes). */}}

{{/* The apiserver's addresses as CIDRs (JSON list): networkPolicy.apiserverCIDRs, else the endpoints of
     the `kubernetes` Service in default read at install/upgrade (lookup; `helm template` sees none). */}}
{{- define "pw.apiserverCIDRs" -}}
{{- $out := list -}}
{{- if .Values.networkPolicy.apiserverCIDRs -}}
{{- $out = without .Values.networkPolicy.apiserverCIDRs "" | uniq -}}
{{- else -}}
{{- $slices := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "" | default dict -}}
{{- range $s := $slices.items | default list -}}
{{- if eq (get ($s.metadata.labels | default dict) "kubernetes.io/service-name") "kubernetes" -}}
{{- range $e := $s.endpoints | default list -}}
{{- range $a := $e.addresses | default list -}}
{{- $out = append $out (printf "%s/%s" $a (ternary "128" "32" (contains ":" $a))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $out -}}
{{- /* a cluster without the apiserver's EndpointSlice (the mirroring controller not running): its Endpoints */ -}}
{{- $ep := lookup "v1" "Endpoints" "default" "kubernetes" | default dict -}}
{{- range $sub := $ep.subsets | default list -}}
{{- range $a := $sub.addresses | default list -}}
{{- $out = append $out (printf "%s/%s" $a.ip (ternary "128" "32" (contains ":" $a.ip))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $out = $out | uniq | sortAlpha -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* config.registryAccess.mode as a string: off | allowlist | all */}}
{{- define "pw.registryMode" -}}
{{- $ra := .Values.config.registryAccess | default dict -}}
{{- $mode := toString ($ra.mode | default "off") -}}
{{- if eq $mode "false" }}{{ $mode = "off" }}{{ end -}}
{{- $mode -}}
{{- end -}}

{{/* "true" when the egress NetworkPolicy is rendered: networkPolicy.egress.enabled true, or auto (the default)
     and config.registryAccess on */}}
{{- define "pw.egressOn" -}}
{{- $e := .Values.networkPolicy.egress.enabled -}}
{{- if eq (toString $e) "auto" -}}
{{- ne (include "pw.registryMode" .) "off" -}}
{{- else -}}
{{- eq (toString $e) "true" -}}
{{- end -}}
{{- end -}}

{{/* Never a registry: private (RFC 1918, RFC 4193), CGNAT (RFC 6598, pod ranges of some clouds),
     link-local (the metadata services) and loopback ranges */}}
{{- define "pw.privateV4" -}}
["10.0.0.0/8","100.64.0.0/10","127.0.0.0/8","169.254.0.0/16","172.16.0.0/12","192.168.0.0/16"]
{{- end -}}
{{- define "pw.privateV6" -}}
["::1/128","fc00::/7","fe80::/10"]
{{- end -}}

{{/* The namespaces where jobs live (JSON list), where the webhook may get Secrets and the audit controller may
     read Secrets and write Events: rbac.jobNamespaces, else every namespace that exists now (lookup) and the
     webhook judges (not kube-system, kube-node-lease, kube-public, the release namespace nor
     webhook.excludeNamespaces; not one being deleted). A listed namespace the webhook never judges is refused. */}}
{{- define "pw.jobNamespaces" -}}
{{- $excluded := include "pw.excludedNamespaces" . | fromJsonArray -}}
{{- /* a dict, not append: append copies the list each time (10,000 namespaces: seconds) */ -}}
{{- $out := dict -}}
{{- if .Values.rbac.jobNamespaces -}}
{{- range $ns := .Values.rbac.jobNamespaces -}}
{{- if has $ns $excluded -}}
{{- fail (printf "rbac.jobNamespaces lists %q, a namespace the webhook never judges (%s): its Secrets are never read and no Event is written there" $ns (join ", " $excluded)) -}}
{{- end -}}
{{- $_ := set $out $ns true -}}
{{- end -}}
{{- else -}}
{{- $all := lookup "v1" "Namespace" "" "" | default dict -}}
{{- range $n := $all.items | default list -}}
{{- if and (not (has $n.metadata.name $excluded)) (ne (($n.status | default dict).phase | default "") "Terminating") -}}
{{- $_ := set $out $n.metadata.name true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson (keys $out | sortAlpha) -}}
{{- end -}}
