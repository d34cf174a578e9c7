{{/* The webhook's named single-object reads, derived from .Values.config exactly as the webhook
     derives them from its config (the checks' named_permissions; tests/test_chart_rbac.py compares):
       config.controllers.<jobset|trainer|kueue|aiperf>: get leases <lease>, get deployments <deployment> in <namespace>
       config.nodeProvisioning.clusterAutoscalerStatus "ns/name": get configmaps <name> in <ns>
       config.kueue.admissionLease "ns/name" (a bare name: kube-system): get leases <name> in <ns>
     "pw.namedReadRules" is a JSON object: namespace -> PolicyRules (resourceNames sorted), every namespace
     the settings name. "pw.namedReadNamespaces" is the JSON list of those that get a Role (rbac.namedReadNamespaces). */}}
{{- define "pw.namedReadRules" -}}
{{- $c := .Values.config -}}
{{- $reads := list -}}
{{- range $key := list "jobset" "trainer" "kueue" "aiperf" -}}
{{- $ref := get (default dict $c.controllers) $key | default dict -}}
{{- if and $ref.namespace $ref.lease -}}
{{- $reads = append $reads (dict "ns" $ref.namespace "group" "coordination.k8s.io" "resource" "leases" "name" $ref.lease) -}}
{{- end -}}
{{- if and $ref.namespace $ref.deployment -}}
{{- $reads = append $reads (dict "ns" $ref.namespace "group" "apps" "resource" "deployments" "name" $ref.deployment) -}}
{{- end -}}
{{- end -}}
{{- $ca := (default dict $c.nodeProvisioning).clusterAutoscalerStatus | default "" -}}
{{- if $ca -}}
{{- $p := splitn "/" 2 $ca -}}
{{- if and $p._0 $p._1 -}}
{{- $reads = append $reads (dict "ns" $p._0 "group" "" "resource" "configmaps" "name" $p._1) -}}
{{- end -}}
{{- end -}}
{{- $lease := (default dict $c.kueue).admissionLease | default "" -}}
{{- if $lease -}}
{{- $p := splitn "/" 2 $lease -}}
{{- $ns := $p._0 -}}
{{- $name := $p._1 -}}
{{- if not $name -}}
{{- $ns = "kube-system" -}}
{{- $name = $p._0 -}}
{{- end -}}
{{- $reads = append $reads (dict "ns" $ns "group" "coordination.k8s.io" "resource" "leases" "name" $name) -}}
{{- end -}}
{{- /* namespace -> "group resource" -> names (a space sorts before every name character, as Python's tuples do) */ -}}
{{- $byNs := dict -}}
{{- range $r := $reads -}}
{{- $rules := get $byNs $r.ns | default dict -}}
{{- $k := printf "%s %s" $r.group $r.resource -}}
{{- $_ := set $rules $k (append (get $rules $k | default list) $r.name) -}}
{{- $_ := set $byNs $r.ns $rules -}}
{{- end -}}
{{- $out := dict -}}
{{- range $ns := keys $byNs | sortAlpha -}}
{{- $rules := get $byNs $ns -}}
{{- $list := list -}}
{{- range $k := keys $rules | sortAlpha -}}
{{- $gr := splitn " " 2 $k -}}
{{- $list = append $list (dict "apiGroups" (list $gr._0) "resources" (list $gr._1) "resourceNames" (get $rules $k | uniq | sortAlpha) "verbs" (list "get")) -}}
{{- end -}}
{{- $_ := set $out $ns $list -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The namespaces that get a Role: rbac.namedReadNamespaces when set (each must be named by a setting;
     a Role in a namespace that does not exist fails the install, as it should: it was asked for), else
     those of the settings' namespaces that exist now (lookup; none when Helm sees no cluster). */}}
{{- define "pw.namedReadNamespaces" -}}
{{- $named := include "pw.namedReadRules" . | fromJson -}}
{{- $want := .Values.rbac.namedReadNamespaces | default list -}}
{{- $out := list -}}
{{- if $want -}}
{{- range $ns := $want -}}
{{- if not (hasKey $named $ns) -}}
{{- fail (printf "rbac.namedReadNamespaces lists %q, which no setting names (the namespaces of config.controllers, config.nodeProvisioning.clusterAutoscalerStatus and config.kueue.admissionLease: %s)" $ns (keys $named | sortAlpha | join ", ")) -}}
{{- end -}}
{{- end -}}
{{- $out = $want | uniq | sortAlpha -}}
{{- else -}}
{{- range $ns := keys $named | sortAlpha -}}
{{- if lookup "v1" "Namespace" "" $ns -}}
{{- $out = append $out $ns -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
