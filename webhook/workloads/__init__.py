"""Adapters: one per kind, each turns an object into a Workload.

`build_workload(obj, ...)` picks the adapter by apiVersion group and kind (the kind's KindSpec,
webhook/workloads/kinds.py); `None` means no adapter handles the kind (the webhook allows it untouched).
"""

from __future__ import annotations

from typing import Any

from webhook.config import Settings
from webhook.workloads.base import AdapterError, RuntimeLookup, Workload
from webhook.workloads.kinds import KIND_PACKAGES, Adapter, KindSpec, kind_spec, registry
from webhook.workloads.render_cache import CACHE

# The kinds: one KindSpec per kind package (`KIND_SPEC`), registered once in kinds.KIND_PACKAGES. A package
# is imported when the registry is first read (`serve` reads it at start-up: import_adapters).


def _group(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def adapter_for(api_version: str, kind: str) -> Adapter | None:
    spec = kind_spec(_group(api_version), kind)
    return None if spec is None else spec.adapter


def known_kinds() -> list[str]:
    """The kinds an adapter handles (metrics pre-create their label sets from this)."""
    return [s.kind for s in registry().values()]


def import_adapters() -> None:
    """Import every kind package now (at start-up) instead of on the first review."""
    registry()


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
    "KIND_PACKAGES",
    "Adapter",
    "AdapterError",
    "KindSpec",
    "RuntimeLookup",
    "Workload",
    "adapter_for",
    "build_workload",
    "import_adapters",
    "kind_spec",
    "known_kinds",
]
