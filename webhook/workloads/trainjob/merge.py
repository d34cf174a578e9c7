"""The merges Trainer applies to plain JSON: strategic merge patches (runtimePatches,
resourcesPerNode claims) and pkg/apply's whole-entry upserts (env, volumes, volume mounts).

T = github.com/kubeflow/trainer/v2@v2.3.0: pkg/runtime/core/trainingruntime.go
mergeRuntimePatches (k8s.io/apimachinery strategicpatch with k8s.io/api's patchMergeKey),
pkg/util/trainingruntime/trainingruntime.go MergeResourceRequirements, pkg/apply.
"""

from __future__ import annotations

from typing import Any

from webhook.workloads.shape import copy_json as copy_json  # re-exported: the plugins copy with it

# strategic-merge keys of the PodSpec fields a runtime patch may carry (k8s.io/api patchMergeKey)
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "claims": "name",
    "replicatedJobs": "name",  # JobSet's listMapKey: patches address replicated jobs by name
}


def strategic_merge(base: Any, patch: Any, field: str = "") -> Any:
    """A strategic merge patch of plain dicts: maps merge, keyed lists merge by key, other lists replace.

    Returns new maps and lists along the merged paths and copies of the patch's values; what
    only `base` holds is shared with it, never changed (the result is cleaned into a copy
    before anything changes it: render)."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = strategic_merge(out[k], v, k)
            else:
                out[k] = copy_json(v)
        return out
    key = _MERGE_KEYS.get(field)
    if key and isinstance(base, list) and isinstance(patch, list):
        out_list = list(base)  # base items are never changed here: a merged item is a new dict
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                out_list.append(copy_json(item))
                continue
            for i, existing in enumerate(out_list):
                if isinstance(existing, dict) and existing.get(key) == item[key]:
                    out_list[i] = strategic_merge(existing, item, "")
                    break
            else:
                out_list.append(copy_json(item))
        return out_list
    return copy_json(patch)


def merge_resources(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """resourcesPerNode over the runtime's resources: per key for requests/limits, claims by name
    (T:pkg/util/trainingruntime/trainingruntime.go MergeResourceRequirements)."""
    out: dict[str, Any] = {}
    for key in ("limits", "requests"):
        merged = dict(base.get(key) or {})
        merged.update(override.get(key) or {})
        if merged or key in base or key in override:
            out[key] = merged
    claims = strategic_merge(base.get("claims") or [], override.get("claims") or [], "claims")
    if claims:
        out["claims"] = claims
    return out


def _upsert(items: list[dict[str, Any]], item: dict[str, Any], key: str) -> None:
    """T:pkg/apply upsert: an entry with the same key is replaced whole, else the item is appended."""
    for i, existing in enumerate(items):
        if existing.get(key) == item.get(key):
            items[i] = item
            return
    items.append(item)


def upsert_env(container: dict[str, Any], env: list[dict[str, Any]]) -> None:
    """UpsertEnvVars(apply.EnvVars(env)): same-name entries are replaced whole, never merged field by field
    (an entry with valueFrom carries no value; one without valueFrom is its value, "" when unset)."""
    out = list(container.get("env") or [])  # entries are replaced whole, never changed: no copies
    for e in env:
        entry: dict[str, Any] = {"name": e.get("name")}
        if e.get("valueFrom") is not None:
            entry["valueFrom"] = copy_json(e["valueFrom"])
        else:
            entry["value"] = e.get("value") or ""
        _upsert(out, entry, "name")
    container["env"] = out


def upsert_volumes(pod: dict[str, Any], volumes: list[dict[str, Any]]) -> None:
    out = list(pod.get("volumes") or [])
    for v in volumes:
        _upsert(out, v, "name")
    pod["volumes"] = out


def upsert_mounts(container: dict[str, Any], mounts: list[dict[str, Any]]) -> None:
    out = list(container.get("volumeMounts") or [])
    for m in mounts:
        _upsert(out, m, "mountPath")
    container["volumeMounts"] = out
