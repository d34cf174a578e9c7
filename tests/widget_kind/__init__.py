"""A fifth kind that exists only in the tests: example.com/v1 Widget, one pod running `spec.image`.

It shows what adding a kind takes (tests/test_chart_kinds.py): this package with its `KIND_SPEC`,
one line in the registration (webhook/workloads/kinds.py KIND_PACKAGES) and one entry in the chart's
values (`webhook.kinds`). Every other list of kinds is derived from the specs."""

from __future__ import annotations

from typing import Any

from webhook.workloads.base import AdapterError, KindFacts, PodGroup, RuntimeLookup, Workload
from webhook.workloads.kinds import FINISHED, JUDGED, RUNNING, KindSpec, Related, phase_of

#: a Widget controller makes the pod; the pod-level fields are the spec's own
FACTS = KindFacts(controllers=("Widget controller",), pod_field="spec.{field}")


def build(
    obj: dict[str, Any], *, settings: Any, runtime_lookup: RuntimeLookup | None = None, namespace: str | None = None
) -> Workload:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise AdapterError("spec must be an object")
    meta = obj.get("metadata") or {}
    return Workload(
        kind="Widget",
        api_version=str(obj.get("apiVersion") or "example.com/v1"),
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or namespace or "default"),
        obj=obj,
        pod_groups=[PodGroup("main", 1, {"containers": [{"name": "main", "image": str(spec.get("image", ""))}]})],
        facts=FACTS,
    )


def widget_state(obj: dict[str, Any], related: Related) -> tuple[str, str]:
    phase = phase_of(obj)
    if phase in ("Done", "Failed"):
        return FINISHED, f"phase {phase}"
    return (RUNNING, "phase Running") if phase == "Running" else (JUDGED, f"phase {phase or 'not set'}")


KIND_SPEC = KindSpec(
    kind="Widget",
    group="example.com",
    version="v1",
    plural="widgets",
    adapter=build,
    state=widget_state,
    owns_jobsets=True,
    unread_metadata=frozenset({"uid", "creationTimestamp"}),
)
