"""Facts read from a PodSpec that several checks need: referenced Secrets and ConfigMaps,
and the pod's effective requests and limits.

The PodSpec shapes the checks rely on are declared here once (`POD_SPEC`, `CONTAINER`, ...)
and adapters validate every user-supplied pod fragment against them before it reaches a
check, so no check meets `containers: "x"` or `resources: {requests: [1]}`.

One reader for all of them, so the secrets check, the quota checks and `plan` agree on
what a pod references and how much it asks for. Everything here is pure and takes the
plain PodSpec dict.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any, NamedTuple

from webhook import quantity
from webhook.workloads.shape import ListOf, MapOf, Schema, clean

__all__ = [
    "POD_SPEC",
    "POD_TEMPLATE",
    "CONTAINER",
    "ENV_VAR",
    "clean_pod_spec",
    "SecretRef",
    "secret_refs",
    "mounted_volumes",
    "config_map_refs",
    "service_account",
    "pod_requests",
    "pod_limits",
    "all_containers",
    "PodClaim",
    "resource_claims",
]


# ----------------------------------------------------------------------------- shapes

_KEY_REF: dict[str, Schema] = {"name": "string", "key": "string", "optional": "boolean"}
_NAMED_REF: dict[str, Schema] = {"name": "string", "optional": "boolean"}
_SELECTOR_REQ: dict[str, Schema] = {"key": "string", "operator": "string", "values": ListOf("string")}
_LABEL_SELECTOR: dict[str, Schema] = {"matchLabels": MapOf("string"), "matchExpressions": ListOf(_SELECTOR_REQ)}
_NODE_TERM: dict[str, Schema] = {"matchExpressions": ListOf(_SELECTOR_REQ), "matchFields": ListOf(_SELECTOR_REQ)}
_POD_TERM: dict[str, Schema] = {
    "labelSelector": _LABEL_SELECTOR,
    "namespaceSelector": _LABEL_SELECTOR,
    "namespaces": ListOf("string"),
    "topologyKey": "string",
    "matchLabelKeys": ListOf("string"),
    "mismatchLabelKeys": ListOf("string"),
}
_POD_AFFINITY: dict[str, Schema] = {
    "requiredDuringSchedulingIgnoredDuringExecution": ListOf(_POD_TERM),
    "preferredDuringSchedulingIgnoredDuringExecution": ListOf({"weight": "integer", "podAffinityTerm": _POD_TERM}),
}
AFFINITY: dict[str, Schema] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ListOf(_NODE_TERM)},
        "preferredDuringSchedulingIgnoredDuringExecution": ListOf({"weight": "integer", "preference": _NODE_TERM}),
    },
    "podAffinity": _POD_AFFINITY,
    "podAntiAffinity": _POD_AFFINITY,
}
TOLERATION: dict[str, Schema] = {
    "key": "string",
    "operator": "string",
    "value": "string",
    "effect": "string",
    "tolerationSeconds": "int64",
}
_SECCOMP: dict[str, Schema] = {"type": "string", "localhostProfile": "string"}
SECURITY_CONTEXT: dict[str, Schema] = {
    "capabilities": {"add": ListOf("string"), "drop": ListOf("string")},
    "privileged": "boolean",
    "allowPrivilegeEscalation": "boolean",
    "readOnlyRootFilesystem": "boolean",
    "runAsNonRoot": "boolean",
    "runAsUser": "int64",
    "runAsGroup": "int64",
    "procMount": "string",
    "seccompProfile": _SECCOMP,
}
POD_SECURITY_CONTEXT: dict[str, Schema] = {
    "runAsNonRoot": "boolean",
    "runAsUser": "int64",
    "runAsGroup": "int64",
    "fsGroup": "int64",
    "fsGroupChangePolicy": "string",
    "supplementalGroups": ListOf("int64"),
    "sysctls": ListOf({"name": "string", "value": "string"}),
    "seccompProfile": _SECCOMP,
}
ENV_VAR: dict[str, Schema] = {
    "name": "string",
    "value": "string",
    "valueFrom": {
        "secretKeyRef": _KEY_REF,
        "configMapKeyRef": _KEY_REF,
        "fieldRef": {"fieldPath": "string", "apiVersion": "string"},
        "resourceFieldRef": {"resource": "string", "containerName": "string", "divisor": "quantity"},
    },
}
ENV_FROM: dict[str, Schema] = {"prefix": "string", "secretRef": _NAMED_REF, "configMapRef": _NAMED_REF}
RESOURCES: dict[str, Schema] = {
    "requests": MapOf("quantity"),
    "limits": MapOf("quantity"),
    "claims": ListOf({"name": "string", "request": "string"}),
}
VOLUME_MOUNT: dict[str, Schema] = {
    "name": "string",
    "mountPath": "string",
    "subPath": "string",
    "subPathExpr": "string",
    "readOnly": "boolean",
    "mountPropagation": "string",
    "recursiveReadOnly": "string",
}
CONTAINER: dict[str, Schema] = {
    "name": "string",
    "image": "string",
    "imagePullPolicy": "string",
    "command": ListOf("string"),
    "args": ListOf("string"),
    "workingDir": "string",
    "env": ListOf(ENV_VAR),
    "envFrom": ListOf(ENV_FROM),
    "resources": RESOURCES,
    "volumeMounts": ListOf(VOLUME_MOUNT),
    "ports": ListOf({"containerPort": "integer", "hostPort": "integer", "name": "string", "protocol": "string"}),
    "securityContext": SECURITY_CONTEXT,
    "restartPolicy": "string",
    "startupProbe": {},
    "livenessProbe": {},
    "readinessProbe": {},
    "lifecycle": {},
    "stdin": "boolean",
    "tty": "boolean",
}
_KEY_TO_PATH: dict[str, Schema] = {"key": "string", "path": "string", "mode": "integer"}
_SOURCE: dict[str, Schema] = {
    "name": "string",
    "optional": "boolean",
    "items": ListOf(_KEY_TO_PATH),
    "defaultMode": "integer",
}
VOLUME: dict[str, Schema] = {
    "name": "string",
    "secret": {"secretName": "string", "optional": "boolean", "items": ListOf(_KEY_TO_PATH), "defaultMode": "integer"},
    "configMap": _SOURCE,
    "projected": {
        "defaultMode": "integer",
        "sources": ListOf({"secret": _SOURCE, "configMap": _SOURCE, "serviceAccountToken": {}, "downwardAPI": {}}),
    },
    "emptyDir": {"medium": "string", "sizeLimit": "quantity"},
    "persistentVolumeClaim": {"claimName": "string", "readOnly": "boolean"},
    "hostPath": {"path": "string", "type": "string"},
}
POD_SPEC: dict[str, Schema] = {
    "containers": ListOf(CONTAINER),
    "initContainers": ListOf(CONTAINER),
    "volumes": ListOf(VOLUME),
    "imagePullSecrets": ListOf({"name": "string"}),
    "nodeSelector": MapOf("string"),
    "nodeName": "string",
    "tolerations": ListOf(TOLERATION),
    "affinity": AFFINITY,
    "serviceAccountName": "string",
    "serviceAccount": "string",
    "automountServiceAccountToken": "boolean",
    "priorityClassName": "string",
    "priority": "integer",
    "preemptionPolicy": "string",
    "runtimeClassName": "string",
    "schedulerName": "string",
    "schedulingGates": ListOf({"name": "string"}),
    "restartPolicy": "string",
    "hostname": "string",
    "subdomain": "string",
    "dnsPolicy": "string",
    "dnsConfig": {
        "nameservers": ListOf("string"),
        "searches": ListOf("string"),
        "options": ListOf({"name": "string", "value": "string"}),
    },
    "hostAliases": ListOf({"ip": "string", "hostnames": ListOf("string")}),
    "topologySpreadConstraints": ListOf(
        {
            "maxSkew": "integer",
            "topologyKey": "string",
            "whenUnsatisfiable": "string",
            "labelSelector": _LABEL_SELECTOR,
            "minDomains": "integer",
            "matchLabelKeys": ListOf("string"),
            "nodeAffinityPolicy": "string",
            "nodeTaintsPolicy": "string",
        }
    ),
    "terminationGracePeriodSeconds": "int64",
    "activeDeadlineSeconds": "int64",
    "shareProcessNamespace": "boolean",
    "hostNetwork": "boolean",
    "hostPID": "boolean",
    "hostIPC": "boolean",
    "hostUsers": "boolean",
    "enableServiceLinks": "boolean",
    "setHostnameAsFQDN": "boolean",
    "securityContext": POD_SECURITY_CONTEXT,
    "overhead": MapOf("quantity"),
    "resources": RESOURCES,
    "readinessGates": ListOf({"conditionType": "string"}),
    # k8s.io/api core/v1 PodResourceClaim: a name, and exactly one of the two sources (the apiserver
    # validates that); the DRA check reads them through resource_claims()
    "resourceClaims": ListOf({"name": "string", "resourceClaimName": "string", "resourceClaimTemplateName": "string"}),
    "os": {"name": "string"},
}
OBJECT_META: dict[str, Schema] = {
    "name": "string",
    "generateName": "string",
    "namespace": "string",
    "uid": "string",
    "labels": MapOf("string"),
    "annotations": MapOf("string"),
}
POD_TEMPLATE: dict[str, Schema] = {"metadata": OBJECT_META, "spec": POD_SPEC}


def clean_pod_spec(value: Any, path: str) -> dict[str, Any]:
    """A user-supplied PodSpec (or a part of one), validated and without null fields.

    Raises AdapterError naming the field, e.g. `spec.podTemplate.extraPodSpec.containers[0].env
    must be a list, not string`.
    """
    return clean(value, POD_SPEC, path) or {}


# ----------------------------------------------------------------------------- references


class SecretRef(NamedTuple):
    """One reference to a Secret (or to one key of it) from a pod.

    `key` is None when the whole Secret is used (imagePullSecrets, envFrom, a secret
    volume without items, a volume plugin's secretRef). `optional` follows Kubernetes: an
    optional reference never stops the pod. `field_path` says where the reference is, e.g.
    `containers[node].env[HF_TOKEN]` or `volumes[creds].secret.items[0]`.
    `unused` is empty when the kubelet reads the Secret, else why it never does (the
    volume is mounted by no container; an iscsi volume without CHAP; a cinder volume,
    which CSI migration hands to a driver without the Secret): such a reference can be
    missing without stopping the pod.
    The first four fields are the shape of `Workload.extra_secret_refs` entries.
    """

    name: str
    key: str | None
    optional: bool
    field_path: str
    unused: str = ""

    def describe(self) -> str:
        """Prose for messages: `env HF_TOKEN of container node`."""
        return describe_path(self.field_path)


def all_containers(pod_spec: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(`initContainers` | `containers`, container) for every container, init first."""
    for kind in ("initContainers", "containers"):
        for c in pod_spec.get(kind) or []:
            if isinstance(c, dict):
                yield kind, c


def containers_copy(pod_spec: Mapping[str, Any], *, resources: bool = False) -> dict[str, Any]:
    """`pod_spec` with a new dict, new container lists and new container dicts (and with
    `resources`, new `resources` maps two levels deep), the rest shared: for code that changes
    containers, or their requests and limits, without deep-copying the whole pod."""
    spec = dict(pod_spec)
    for kind in ("initContainers", "containers"):
        items = pod_spec.get(kind)
        if not isinstance(items, list):
            continue
        copied = []
        for c in items:
            if isinstance(c, dict):
                c = dict(c)
                res = c.get("resources")
                if resources and isinstance(res, dict):
                    c["resources"] = {k: dict(v) if isinstance(v, dict) else v for k, v in res.items()}
            copied.append(c)
        spec[kind] = copied
    return spec


def _name(x: Any) -> str | None:
    if isinstance(x, dict) and isinstance(x.get("name"), str) and x["name"]:
        return x["name"]
    return None


def _items_keys(items: Any) -> list[tuple[int, str]]:
    out = []
    for i, item in enumerate(items or []):
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out.append((i, item["key"]))
    return out


def _secret_source(src: dict[str, Any], name_field: str, path: str, unused: str) -> list[SecretRef]:
    """A `secret` volume source or projected `secret` source, honouring `optional` and items[].key."""
    name = src.get(name_field)
    if not isinstance(name, str) or not name:
        return []
    optional = src.get("optional") is True
    keys = _items_keys(src.get("items"))
    if not keys:
        return [SecretRef(name, None, optional, path, unused)]
    return [SecretRef(name, key, optional, f"{path}.items[{i}]", unused) for i, key in keys]


#: volume plugins that name a Secret, as k8s.io/kubernetes pkg/api/v1/pod/util.go
#: VisitPodSecretNames lists them: (volume source field, field holding the Secret's name)
#: where the holder is a LocalObjectReference (`{name}`) unless the field is `secretName`.
_PLUGIN_SECRETS: tuple[tuple[str, str], ...] = (
    ("azureFile", "secretName"),
    ("cephfs", "secretRef"),
    ("cinder", "secretRef"),
    ("flexVolume", "secretRef"),
    ("rbd", "secretRef"),
    ("scaleIO", "secretRef"),
    ("iscsi", "secretRef"),
    ("storageos", "secretRef"),
    ("csi", "nodePublishSecretRef"),
)


def mounted_volumes(pod_spec: Mapping[str, Any]) -> set[str]:
    """Names of the volumes some init or app container mounts (volumeMounts) or uses as a device
    (volumeDevices): the only volumes the kubelet sets up (k8s.io/kubernetes
    pkg/volume/util/util.go GetPodVolumeNames; the volume manager skips every other volume,
    pkg/kubelet/volumemanager/populator/desired_state_of_world_populator.go)."""
    names: set[str] = set()
    for _, c in all_containers(pod_spec):
        for field_name in ("volumeMounts", "volumeDevices"):
            for m in c.get(field_name) or []:
                if isinstance(m, dict) and isinstance(m.get("name"), str):
                    names.add(m["name"])
    return names


def _plugin_unused(source: str, src: dict[str, Any], vname: str) -> str:
    """Why the kubelet of Kubernetes 1.34 never reads a mounted volume plugin's Secret ("" if it does)."""
    if source == "iscsi" and src.get("chapAuthDiscovery") is not True and src.get("chapAuthSession") is not True:
        # pkg/volume/iscsi/iscsi.go createSecretMap reads the Secret only for CHAP authentication
        return f"iscsi volume {vname} uses no CHAP authentication"
    if source == "cinder":
        # the in-tree plugin is gone; csi-translation-lib plugins/openstack_cinder.go drops secretRef
        return f"cinder volume {vname} is served by the Cinder CSI driver, which is not given the Secret"
    return ""


def secret_refs(pod_spec: Mapping[str, Any]) -> list[SecretRef]:
    """Every Secret the pod references, in PodSpec order.

    The same references as k8s.io/kubernetes pkg/api/v1/pod/util.go VisitPodSecretNames:
    imagePullSecrets; env `secretKeyRef` and `envFrom.secretRef` of containers and
    initContainers; `secret` volumes and projected `secret` sources (with `optional` and
    `items[].key`), and the Secret of the azureFile, cephfs, cinder, flexVolume, rbd,
    scaleIO, iscsi, storageos and csi (`nodePublishSecretRef`) volume plugins. A volume no
    container mounts is never set up, so its references carry `unused` (see `SecretRef`).
    Duplicates are kept: each reference has its own path.
    """
    refs: list[SecretRef] = []
    for i, ps in enumerate(pod_spec.get("imagePullSecrets") or []):
        n = _name(ps)
        if n:
            refs.append(SecretRef(n, None, False, f"imagePullSecrets[{i}]"))
    mounted = mounted_volumes(pod_spec)
    for vol in pod_spec.get("volumes") or []:
        if not isinstance(vol, dict):
            continue
        vname = vol.get("name", "?")
        unused = "" if vname in mounted else f"volume {vname} is mounted by no container"
        if isinstance(vol.get("secret"), dict):
            refs += _secret_source(vol["secret"], "secretName", f"volumes[{vname}].secret", unused)
        projected = vol.get("projected")
        if isinstance(projected, dict):
            for j, source in enumerate(projected.get("sources") or []):
                if isinstance(source, dict) and isinstance(source.get("secret"), dict):
                    path = f"volumes[{vname}].projected.sources[{j}].secret"
                    refs += _secret_source(source["secret"], "name", path, unused)
        for source, field_name in _PLUGIN_SECRETS:
            src = vol.get(source)
            if not isinstance(src, dict):
                continue
            held = src.get(field_name)
            name = held if field_name == "secretName" else _name(held)
            if isinstance(name, str) and name:
                why = unused or _plugin_unused(source, src, vname)
                refs.append(SecretRef(name, None, False, f"volumes[{vname}].{source}.{field_name}", why))
    for kind, c in all_containers(pod_spec):
        cname = c.get("name", "?")
        for env in c.get("env") or []:
            if not isinstance(env, dict):
                continue
            ref = (env.get("valueFrom") or {}).get("secretKeyRef") if isinstance(env.get("valueFrom"), dict) else None
            if isinstance(ref, dict) and _name(ref):
                key = ref.get("key") if isinstance(ref.get("key"), str) else None
                refs.append(
                    SecretRef(
                        ref["name"], key, ref.get("optional") is True, f"{kind}[{cname}].env[{env.get('name', '?')}]"
                    )
                )
        for j, ef in enumerate(c.get("envFrom") or []):
            if isinstance(ef, dict) and isinstance(ef.get("secretRef"), dict) and _name(ef["secretRef"]):
                sr = ef["secretRef"]
                refs.append(SecretRef(sr["name"], None, sr.get("optional") is True, f"{kind}[{cname}].envFrom[{j}]"))
    return refs


def config_map_refs(pod_spec: Mapping[str, Any]) -> list[tuple[str, bool, str]]:
    """(name, optional, field path) of every ConfigMap the pod references."""
    refs: list[tuple[str, bool, str]] = []
    for vol in pod_spec.get("volumes") or []:
        if not isinstance(vol, dict):
            continue
        vname = vol.get("name", "?")
        cm = vol.get("configMap")
        if isinstance(cm, dict) and _name(cm):
            refs.append((cm["name"], bool(cm.get("optional", False)), f"volumes[{vname}].configMap"))
        projected = vol.get("projected")
        if isinstance(projected, dict):
            for j, source in enumerate(projected.get("sources") or []):
                cm = source.get("configMap") if isinstance(source, dict) else None
                if isinstance(cm, dict) and _name(cm):
                    refs.append(
                        (
                            cm["name"],
                            bool(cm.get("optional", False)),
                            f"volumes[{vname}].projected.sources[{j}].configMap",
                        )
                    )
    for kind, c in all_containers(pod_spec):
        cname = c.get("name", "?")
        for env in c.get("env") or []:
            vf = env.get("valueFrom") if isinstance(env, dict) else None
            ref = vf.get("configMapKeyRef") if isinstance(vf, dict) else None
            if isinstance(ref, dict) and _name(ref):
                refs.append(
                    (ref["name"], bool(ref.get("optional", False)), f"{kind}[{cname}].env[{env.get('name', '?')}]")
                )
        for j, ef in enumerate(c.get("envFrom") or []):
            cm = ef.get("configMapRef") if isinstance(ef, dict) else None
            if isinstance(cm, dict) and _name(cm):
                refs.append((cm["name"], bool(cm.get("optional", False)), f"{kind}[{cname}].envFrom[{j}]"))
    return refs


def service_account(pod_spec: Mapping[str, Any]) -> str | None:
    """The ServiceAccount the pod runs as, if one is named (None means `default`)."""
    sa = pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount")
    return sa if isinstance(sa, str) and sa else None


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective pod requests, as the scheduler and quota count them.

    max(sum of app containers + restartable (sidecar) init containers, the peak of each
    init container plus the sidecars started before it) + overhead. Requests default to
    limits when only limits are given. Raises ValueError on an unparseable quantity.
    """
    return quantity.pod_resources(pod_spec, "requests")


def pod_limits(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective pod limits with the same init/sidecar rule, over the limits each container sets."""
    return quantity.pod_resources(pod_spec, "limits")


_ENV_PATH = re.compile(r"(initContainers|containers)\[([^]]+)\]\.env\[(.+)\]")
_ENV_FROM_PATH = re.compile(r"(initContainers|containers)\[([^]]+)\]\.envFrom\[\d+\]")
_VOLUME_PATH = re.compile(
    r"volumes\[([^]]+)\]\.[A-Za-z]+(?:\.sources\[\d+\]\.(?:secret|configMap))?"
    r"(?:\.(?:secretName|secretRef|nodePublishSecretRef))?(?:\.items\[\d+\])?"
)


def describe_path(path: str) -> str:
    """`containers[node].env[HF_TOKEN]` → `env HF_TOKEN of container node` (falls back to the path)."""
    # each bracket's content is read up to the first ']' ([^]]), so matching stays linear in the path:
    # a lazy `.+?` before a literal retried from every ']' was quadratic in a hostile container name
    m = _ENV_PATH.fullmatch(path)
    if m:
        kind = "init container" if m.group(1) == "initContainers" else "container"
        return f"env {m.group(3)} of {kind} {m.group(2)}"
    m = _ENV_FROM_PATH.fullmatch(path)
    if m:
        kind = "init container" if m.group(1) == "initContainers" else "container"
        return f"envFrom of {kind} {m.group(2)}"
    if path.startswith("imagePullSecrets"):
        return "imagePullSecrets"
    m = _VOLUME_PATH.fullmatch(path)
    if m:
        return f"volume {m.group(1)}"
    return path


# ----------------------------------------------------------------------------- DRA claims


class PodClaim(NamedTuple):
    """One `spec.resourceClaims` entry of a pod (k8s.io/api core/v1 PodResourceClaim) and its users.

    `claim_name`: an existing ResourceClaim every pod shares; `template_name`: a ResourceClaimTemplate
    from which the resourceclaim controller makes one claim per pod (k8s.io/kubernetes
    pkg/controller/resourceclaim/controller.go handleClaim). Exactly one is set on a valid pod.
    `used_by`: the `resources.claims` entries that name it, as `container` or `container/request`
    (pod-level `resources.claims` as `pod`). The scheduler allocates every claim of the pod, used by a
    container or not (pkg/scheduler/framework/plugins/dynamicresources: PreFilter takes all of
    pod.spec.resourceClaims)."""

    name: str
    claim_name: str | None
    template_name: str | None
    used_by: tuple[str, ...] = ()


def resource_claims(pod_spec: Mapping[str, Any]) -> list[PodClaim]:
    """The pod's DRA claims, in spec order, each with the containers that use it."""
    users: dict[str, list[str]] = {}
    holders: list[tuple[str, Mapping[str, Any]]] = [(str(c.get("name", "?")), c) for _, c in all_containers(pod_spec)]
    holders.append(("pod", pod_spec))
    for who, holder in holders:
        res = holder.get("resources")
        for entry in (res.get("claims") if isinstance(res, dict) else None) or []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                req = entry.get("request")
                users.setdefault(entry["name"], []).append(f"{who}/{req}" if req else who)
    out: list[PodClaim] = []
    for entry in pod_spec.get("resourceClaims") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        name = entry["name"]
        out.append(
            PodClaim(
                name,
                entry.get("resourceClaimName") or None,
                entry.get("resourceClaimTemplateName") or None,
                tuple(users.get(name, ())),
            )
        )
    return out
