"""An AIPerfSweep's remaining children: the AIPerfJobs its sweep controller has not created yet.

The sweep controller creates its children one after another (AIPerf 0.13.0
`orchestrator/orchestrator.py` awaits each child's terminal phase before the next), long after the
sweep was applied; the webhook judges each child when the controller creates it, as any AIPerfJob.
So the audit controller judges, for a waiting sweep, each child that does not exist yet, as the
webhook will judge it then: the child AIPerfJob the sweep adapter renders
(`webhook.workloads.aiperf_sweep`, AIPerf's `sweep_controller/k8s_executor.py`
`_build_child_spec` / `_build_child_metadata`), evaluated through `webhook.preflight.evaluate`.

- Which children exist: AIPerfJobs owned by the sweep, as the operator's rollup counts them
  (`operator/handlers/sweep/_child_phase_buckets.py` `_is_owned_child`: the labels
  `aiperf.nvidia.com/sweep` and `aiperf.nvidia.com/sweep-uid`). A child that exists is an
  AIPerfJob and is judged on its own while it waits (webhook/audit/jobs.py).
- The order: `SweepWorkload.run_order()` (repeated: trials outer, variations inner; independent:
  the reverse), the order the controller creates them in.
- Each trial of a variation is its own child (`<sweep>-v<NN>-t<N>`): its name and seed differ, so
  it is judged under its own name.
- A sweep the adapter cannot expand into children (the operator refuses it) has no child to judge:
  the controller then judges the sweep itself, as the webhook did at apply.

Pure: objects in, (name, child object) out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from webhook.config import Settings
from webhook.workloads.aiperf_sweep import (
    SWEEP_LABEL,
    SWEEP_UID_LABEL,
    TRIAL_INDEX_LABEL,
    SweepWorkload,
    build,
)
from webhook.workloads.aiperf_sweep.children import child_uid
from webhook.workloads.base import AdapterError


@dataclass(frozen=True)
class RemainingChild:
    """One child AIPerfJob the sweep controller will create: its name, its run and its object."""

    name: str
    #: 1-based position in the controller's run order, of `runs`
    run: int
    runs: int
    variation: int
    label: str
    obj: dict[str, Any]


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def created_children(sweep: dict[str, Any], aiperfjobs: Iterable[dict[str, Any]]) -> set[str]:
    """The names of the sweep's children that exist (`_is_owned_child`'s labels)."""
    m = _meta(sweep)
    name, uid = m.get("name"), m.get("uid")
    out: set[str] = set()
    for job in aiperfjobs:
        jm = _meta(job)
        labels = jm.get("labels")
        if not isinstance(labels, dict):
            continue
        if labels.get(SWEEP_LABEL) == name and (not uid or labels.get(SWEEP_UID_LABEL) == uid):
            if isinstance(jm.get("name"), str):
                out.add(jm["name"])
    return out


def child_of_sweep(job: dict[str, Any]) -> str | None:
    """The name of the AIPerfSweep an AIPerfJob is a child of (its `aiperf.nvidia.com/sweep` label)."""
    labels = _meta(job).get("labels")
    sweep = labels.get(SWEEP_LABEL) if isinstance(labels, dict) else None
    return sweep if isinstance(sweep, str) and sweep else None


def remaining_children(
    sweep: dict[str, Any], aiperfjobs: Iterable[dict[str, Any]], settings: Settings
) -> list[RemainingChild] | None:
    """The children still to be created, in run order; None when the sweep has no child to judge
    (the adapter cannot read it, or the operator refuses it before any child: judge the sweep)."""
    try:
        wl = build(copy.deepcopy(sweep), settings=settings)
    except AdapterError:
        return None
    if not isinstance(wl, SweepWorkload) or not wl.children:
        return None
    created = created_children(sweep, aiperfjobs)
    runs = wl.run_order()
    out: list[RemainingChild] = []
    for i, (name, child) in enumerate(runs, 1):
        if name in created:
            continue
        obj = copy.deepcopy(child.workload.obj)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") != name:  # a later trial: its own name, uid and trial label (k8s_executor)
            meta["name"] = name
            meta["uid"] = child_uid(str(meta.get("namespace") or ""), name)
            labels = meta.setdefault("labels", {})
            if TRIAL_INDEX_LABEL in labels:
                labels[TRIAL_INDEX_LABEL] = str(child.trials[child.names.index(name)])
        out.append(RemainingChild(name, i, len(runs), child.variation, child.label, obj))
    return out
