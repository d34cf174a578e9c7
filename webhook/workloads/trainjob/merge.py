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
        first = _FirstByKey(out_list, key)
        for item in patch:
            i = first.find(item[key]) if isinstance(item, dict) and key in item else None
            if i is None:
                first.append(copy_json(item))
            else:
                out_list[i] = strategic_merge(out_list[i], item, "")
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


class _FirstByKey:
    """Where the first map with each value of `key` is in a list, kept as the list grows: the lookup
    that makes merging n entries into a list of m linear (n + m), not n × m (a TrainJob's env of
    20,000 entries took seconds). A value that cannot be hashed is looked for by equality."""

    def __init__(self, items: list[Any], key: str) -> None:
        self.items, self.key = items, key
        self.first: dict[Any, int] = {}
        for i, existing in enumerate(items):
            self._note(existing, i)

    def _note(self, existing: Any, i: int) -> None:
        if isinstance(existing, dict):
            try:
                self.first.setdefault(existing.get(self.key), i)
            except TypeError:  # unhashable: found by find's scan
                pass

    def find(self, value: Any) -> int | None:
        """The index of the first map whose `key` equals `value`, or None."""
        try:
            return self.first.get(value)
        except TypeError:
            return next((i for i, e in enumerate(self.items) if isinstance(e, dict) and e.get(self.key) == value), None)

    def append(self, item: Any) -> None:
        self._note(item, len(self.items))
        self.items.append(item)


def _upsert_all(items: list[dict[str, Any]], new: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """T:pkg/apply upsert, entry by entry: an entry with the same key is replaced whole, else appended."""
    out = list(items)
    first = _FirstByKey(out, key)
    for item in new:
        i = first.find(item.get(key))
        if i is None:
            first.append(item)
        else:
            out[i] = item
    return out


def upsert_env(container: dict[str, Any], env: list[dict[str, Any]]) -> None:
    """UpsertEnvVars(apply.EnvVars(env)): same-name entries are replaced whole, never merged field by field
    (an entry with valueFrom carries no value; one without valueFrom is its value, "" when unset)."""
    entries = []  # existing entries are replaced whole, never changed: no copies
    for e in env:
        entry: dict[str, Any] = {"name": e.get("name")}
        if e.get("valueFrom") is not None:
            entry["valueFrom"] = copy_json(e["valueFrom"])
        else:
            entry["value"] = e.get("value") or ""
        entries.append(entry)
    container["env"] = _upsert_all(container.get("env") or [], entries, "name")


def upsert_volumes(pod: dict[str, Any], volumes: list[dict[str, Any]]) -> None:
    pod["volumes"] = _upsert_all(pod.get("volumes") or [], volumes, "name")


def upsert_mounts(container: dict[str, Any], mounts: list[dict[str, Any]]) -> None:
    container["volumeMounts"] = _upsert_all(container.get("volumeMounts") or [], mounts, "mountPath")
