"""Facts read from a PodSpec that several checks need: referenced Secrets and ConfigMaps,
and the pod's effective requests and limits.

One reader for all of them, so the secrets check, the quota checks and `plan` agree on
what a pod references and how much it asks for. Everything here is pure and takes the
plain PodSpec dict.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterator, NamedTuple

from webhook import quantity

__all__ = [
    "SecretRef",
    "secret_refs",
    "config_map_refs",
    "service_account",
    "pod_requests",
    "pod_limits",
    "all_containers",
]


class SecretRef(NamedTuple):
    """One reference to a Secret (or to one key of it) from a pod.

    `key` is None when the whole Secret is used (imagePullSecrets, envFrom, a secret
    volume without items). `optional` follows Kubernetes: an optional reference never
    stops the pod. `field_path` says where the reference is, e.g.
    `containers[node].env[HF_TOKEN]` or `volumes[creds].secret.items[0]`.
    Same shape as `Workload.extra_secret_refs` entries.
    """

    name: str
    key: str | None
    optional: bool
    field_path: str

    def describe(self) -> str:
        """Prose for messages: `env HF_TOKEN of container node`."""
        return describe_path(self.field_path)


def all_containers(pod_spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(`initContainers` | `containers`, container) for every container, init first."""
    for kind in ("initContainers", "containers"):
        for c in pod_spec.get(kind) or []:
            if isinstance(c, dict):
                yield kind, c


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


def _secret_source(src: dict[str, Any], name_field: str, path: str) -> list[SecretRef]:
    """A `secret` volume source or projected `secret` source, honouring `optional` and items[].key."""
    name = src.get(name_field)
    if not isinstance(name, str) or not name:
        return []
    optional = bool(src.get("optional", False))
    keys = _items_keys(src.get("items"))
    if not keys:
        return [SecretRef(name, None, optional, path)]
    return [SecretRef(name, key, optional, f"{path}.items[{i}]") for i, key in keys]


def secret_refs(pod_spec: dict[str, Any]) -> list[SecretRef]:
    """Every Secret the pod references, in PodSpec order.

    Covers imagePullSecrets; `secret` volumes and projected `secret` sources (with
    `optional` and `items[].key`); env `secretKeyRef` and `envFrom.secretRef` of
    containers and initContainers. Duplicates are kept: each reference has its own path.
    """
    refs: list[SecretRef] = []
    for i, ps in enumerate(pod_spec.get("imagePullSecrets") or []):
        n = _name(ps)
        if n:
            refs.append(SecretRef(n, None, False, f"imagePullSecrets[{i}]"))
    for vol in pod_spec.get("volumes") or []:
        if not isinstance(vol, dict):
            continue
        vname = vol.get("name", "?")
        if isinstance(vol.get("secret"), dict):
            refs += _secret_source(vol["secret"], "secretName", f"volumes[{vname}].secret")
        projected = vol.get("projected")
        if isinstance(projected, dict):
            for j, source in enumerate(projected.get("sources") or []):
                if isinstance(source, dict) and isinstance(source.get("secret"), dict):
                    refs += _secret_source(source["secret"], "name", f"volumes[{vname}].projected.sources[{j}].secret")
    for kind, c in all_containers(pod_spec):
        cname = c.get("name", "?")
        for env in c.get("env") or []:
            if not isinstance(env, dict):
                continue
            ref = (env.get("valueFrom") or {}).get("secretKeyRef") if isinstance(env.get("valueFrom"), dict) else None
            if isinstance(ref, dict) and _name(ref):
                key = ref.get("key") if isinstance(ref.get("key"), str) else None
                refs.append(
                    SecretRef(ref["name"], key, bool(ref.get("optional", False)), f"{kind}[{cname}].env[{env.get('name', '?')}]")
                )
        for j, ef in enumerate(c.get("envFrom") or []):
            if isinstance(ef, dict) and isinstance(ef.get("secretRef"), dict) and _name(ef["secretRef"]):
                sr = ef["secretRef"]
                refs.append(SecretRef(sr["name"], None, bool(sr.get("optional", False)), f"{kind}[{cname}].envFrom[{j}]"))
    return refs


def config_map_refs(pod_spec: dict[str, Any]) -> list[tuple[str, bool, str]]:
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
                        (cm["name"], bool(cm.get("optional", False)), f"volumes[{vname}].projected.sources[{j}].configMap")
                    )
    for kind, c in all_containers(pod_spec):
        cname = c.get("name", "?")
        for env in c.get("env") or []:
            vf = env.get("valueFrom") if isinstance(env, dict) else None
            ref = vf.get("configMapKeyRef") if isinstance(vf, dict) else None
            if isinstance(ref, dict) and _name(ref):
                refs.append((ref["name"], bool(ref.get("optional", False)), f"{kind}[{cname}].env[{env.get('name', '?')}]"))
        for j, ef in enumerate(c.get("envFrom") or []):
            cm = ef.get("configMapRef") if isinstance(ef, dict) else None
            if isinstance(cm, dict) and _name(cm):
                refs.append((cm["name"], bool(cm.get("optional", False)), f"{kind}[{cname}].envFrom[{j}]"))
    return refs


def service_account(pod_spec: dict[str, Any]) -> str | None:
    """The ServiceAccount the pod runs as, if one is named (None means `default`)."""
    sa = pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount")
    return sa if isinstance(sa, str) and sa else None


def pod_requests(pod_spec: dict[str, Any]) -> dict[str, Decimal]:
    """Effective pod requests, as the scheduler and quota count them.

    max(sum of app containers + restartable (sidecar) init containers, the peak of each
    init container plus the sidecars started before it) + overhead. Requests default to
    limits when only limits are given. Raises ValueError on an unparseable quantity.
    """
    return quantity.pod_resources(pod_spec, "requests")


def pod_limits(pod_spec: dict[str, Any]) -> dict[str, Decimal]:
    """Effective pod limits with the same init/sidecar rule, over the limits each container sets."""
    return quantity.pod_resources(pod_spec, "limits")


def describe_path(path: str) -> str:
    """`containers[node].env[HF_TOKEN]` → `env HF_TOKEN of container node` (falls back to the path)."""
    import re

    m = re.fullmatch(r"(initContainers|containers)\[(.+?)\]\.env\[(.+)\]", path)
    if m:
        kind = "init container" if m.group(1) == "initContainers" else "container"
        return f"env {m.group(3)} of {kind} {m.group(2)}"
    m = re.fullmatch(r"(initContainers|containers)\[(.+?)\]\.envFrom\[\d+\]", path)
    if m:
        kind = "init container" if m.group(1) == "initContainers" else "container"
        return f"envFrom of {kind} {m.group(2)}"
    if path.startswith("imagePullSecrets"):
        return "imagePullSecrets"
    m = re.fullmatch(r"volumes\[(.+?)\]\.(secret|configMap|projected\.sources\[\d+\]\.(?:secret|configMap))(?:\.items\[\d+\])?", path)
    if m:
        return f"volume {m.group(1)}"
    return path
