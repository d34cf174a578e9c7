"""The single path from an object to a decision, shared by the server and the CLI.

object ─► adapter ─► Workload ─► engine (checks) ─► policy ─► Decision
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from webhook.checks import all_checks
from webhook.checks.base import Check
from webhook.cluster.view import ClusterView
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.engine import applicable, run_checks
from webhook.policy import Decision, decide
from webhook.results import PreflightResults, Status
from webhook.workloads import build_workload
from webhook.workloads.base import RuntimeLookup, Workload

MODES = ("enforce", "warn", "audit")


@dataclass
class Evaluation:
    workload: Workload | None
    results: PreflightResults
    decision: Decision
    notes: list[str] = field(default_factory=list)


def view_runtime_lookup(view: ClusterView) -> RuntimeLookup:
    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind == "TrainingRuntime":
            return view.get_cached("trainingruntimes", namespace, name)
        return view.get_cached("clustertrainingruntimes", None, name)

    return lookup


def _spec_of(obj: dict[str, Any] | None) -> Any:
    return None if not isinstance(obj, dict) else obj.get("spec")


def _subject(obj: dict[str, Any], namespace: str | None) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    ns = meta.get("namespace") or namespace or "default"
    return f'{obj.get("kind", "object")} "{name}" in namespace "{ns}"'


def _overrides(obj: dict[str, Any], settings: Settings, view: ClusterView | None, namespace: str) -> tuple[str | None, set[str], list[str]]:
    """(mode override, checks to skip, notes) from the namespace label and the object annotation."""
    notes: list[str] = []
    mode: str | None = None
    if view is not None and namespace:
        ns = view.get_cached("namespaces", None, namespace) or {}
        value = ((ns.get("metadata") or {}).get("labels") or {}).get(settings.namespace_mode_label)
        if value in MODES and value != settings.mode:
            mode = value
            notes.append(f"mode {value} for namespace {namespace} (label {settings.namespace_mode_label})")
    skip: set[str] = set()
    ann = ((obj.get("metadata") or {}).get("annotations") or {}).get(settings.skip_annotation)
    if isinstance(ann, str) and ann.strip():
        for name in (n.strip() for n in ann.split(",")):
            if not name:
                continue
            if name in settings.skippable_checks:
                skip.add(name)
                notes.append(f"check {name!r} skipped by annotation {settings.skip_annotation}")
            else:
                notes.append(f"annotation {settings.skip_annotation} cannot skip {name!r}: not in skippableChecks")
    return mode, skip, notes


async def _results_for(
    obj: dict[str, Any],
    *,
    settings: Settings,
    view: ClusterView | None,
    deadline: Deadline,
    runtime_lookup: RuntimeLookup | None,
    namespace: str | None,
    checks: list[Check],
    skip: set[str],
) -> tuple[Workload | None, PreflightResults]:
    wl = build_workload(obj, settings=settings, runtime_lookup=runtime_lookup, namespace=namespace)
    if wl is None:
        return None, PreflightResults()
    selected = applicable(checks, wl, settings, skip)
    return wl, await run_checks(wl, selected, settings=settings, deadline=deadline, view=view)


async def evaluate(
    obj: dict[str, Any],
    *,
    settings: Settings,
    deadline: Deadline,
    view: ClusterView | None = None,
    operation: str = "CREATE",
    old_obj: dict[str, Any] | None = None,
    runtime_lookup: RuntimeLookup | None = None,
    namespace: str | None = None,
    checks: list[Check] | None = None,
) -> Evaluation:
    """Evaluate one object. Raises AdapterError when it cannot be read as its kind.

    UPDATE is ratcheted: a spec that did not change passes without checks, and a check
    that already failed on the old object never blocks (it becomes a warning), so a user
    can always cancel, suspend or fix a job.
    """
    checks = all_checks() if checks is None else checks
    if runtime_lookup is None and view is not None:
        runtime_lookup = view_runtime_lookup(view)
    ns = ((obj.get("metadata") or {}).get("namespace")) or namespace or "default"
    if operation == "UPDATE" and old_obj is not None and _spec_of(old_obj) == _spec_of(obj):
        wl = build_workload(obj, settings=settings, runtime_lookup=runtime_lookup, namespace=namespace)
        return Evaluation(wl, PreflightResults(), Decision(allowed=True, outcome="allowed"))

    mode, skip, notes = _overrides(obj, settings, view, ns)
    wl, results = await _results_for(
        obj, settings=settings, view=view, deadline=deadline, runtime_lookup=runtime_lookup,
        namespace=namespace, checks=checks, skip=skip,
    )
    if wl is None:
        return Evaluation(None, results, Decision(allowed=True, outcome="unhandled"))

    preexisting: set[str] = set()
    if operation == "UPDATE" and isinstance(old_obj, dict):
        failing_now = {r.name for r in results.checks if r.status is Status.FAIL}
        if failing_now:
            try:
                _, old_results = await _results_for(
                    copy.deepcopy(old_obj), settings=settings, view=view, deadline=deadline,
                    runtime_lookup=runtime_lookup, namespace=namespace,
                    checks=[c for c in checks if c.name in failing_now], skip=skip,
                )
                preexisting = {r.name for r in old_results.checks if r.status is Status.FAIL}
            except ValueError:
                preexisting = failing_now  # the old object cannot even be read: never block the fix
    decision = decide(results, settings=settings, mode=mode, subject=_subject(obj, namespace), preexisting=preexisting, notes=notes)
    return Evaluation(wl, results, decision, notes)
