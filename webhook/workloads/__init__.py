"""Adapters: one per kind, each turns an object into a Workload.

`build_workload(obj, ...)` picks the adapter by apiVersion group and kind; `None` means
no adapter handles the kind (the webhook allows it untouched).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from webhook.config import Settings
from webhook.workloads.base import AdapterError, RuntimeLookup, Workload
from webhook.workloads.render_cache import CACHE

#: builds the Workload; None for an object of its kind that is not judged (a JobSet a judged job owns)
Adapter = Callable[..., Workload | None]

# (group, kind) → "module:function"; a module is imported when its kind is first met (`serve`
# imports them all at start-up: import_adapters), so the CLI loads only what it judges
_ADAPTERS: dict[tuple[str, str], str] = {
    ("aiperf.nvidia.com", "AIPerfJob"): "webhook.workloads.aiperf:build",
    ("aiperf.nvidia.com", "AIPerfSweep"): "webhook.workloads.aiperf_sweep:build",
    ("trainer.kubeflow.org", "TrainJob"): "webhook.workloads.trainjob:build",
    ("jobset.x-k8s.io", "JobSet"): "webhook.workloads.jobset:build",
}


def _group(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def adapter_for(api_version: str, kind: str) -> Adapter | None:
    target = _ADAPTERS.get((_group(api_version), kind))
    if target is None:
        return None
    mod, fn = target.split(":")
    return getattr(importlib.import_module(mod), fn)


def known_kinds() -> list[str]:
    """The kinds an adapter handles (metrics pre-create their label sets from this)."""
    return [kind for _, kind in _ADAPTERS]


def import_adapters() -> None:
    """Import every adapter now (at start-up) instead of on the first review of its kind."""
    for target in _ADAPTERS.values():
        importlib.import_module(target.split(":")[0])


def build_workload(
    obj: dict[str, Any],
    *,
    settings: Settings,
    runtime_lookup: RuntimeLookup | None = None,
    namespace: str | None = None,
) -> Workload | None:
    """The Workload for `obj`, or None if no adapter handles its kind. Raises AdapterError."""
    if not isinstance(obj, dict):
        raise AdapterError("the object is not a JSON object")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise AdapterError("the object has no apiVersion/kind")
    adapter = adapter_for(api_version, kind)
    if adapter is None:
        return None

    def build(lookup: RuntimeLookup | None, obj: dict[str, Any] = obj, **per_create: Any) -> Workload | None:
        # per_create: the render cache's placeholders (an AIPerfJob's epoch=) for the object it gives
        return adapter(obj, settings=settings, runtime_lookup=lookup, namespace=namespace, **per_create)

    # the same content renders once (a retry, the audit controller's next pass): render_cache.py
    return CACHE.render(
        obj, (_group(api_version), kind), build, settings=settings, runtime_lookup=runtime_lookup, namespace=namespace
    )


__all__ = [
    "AdapterError",
    "RuntimeLookup",
    "Workload",
    "adapter_for",
    "build_workload",
    "import_adapters",
    "known_kinds",
]
