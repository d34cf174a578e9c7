"""Sweep Children: every child AIPerfJob an AIPerfSweep's controller will create, judged now.

The sweep controller creates its children one after another, long after `kubectl apply`
(AIPerf 0.13.0 `orchestrator/orchestrator.py` awaits each child before the next), so child
37 may be the first that the operator cannot render, whose derived names overflow, whose
ConfigMap is over 1 MiB, or that does not fit a ResourceQuota next to the sweep-controller
pod. This check looks at every child the adapter rendered (`SweepWorkload.children`) and
names the failing ones, worst first (most pods, largest requests, biggest ConfigMap).
The peak itself (controller + heaviest child) is what the other checks see as pod groups.
"""

from __future__ import annotations

from typing import Any

from webhook.checks.base import AIPERFSWEEP, Check, CheckContext
from webhook.checks.configmap import CONFIGMAP_MAX_BYTES, kib, payload_bytes
from webhook.checks.names import MAX_LABEL, jobset_name, longest_names, replicated_jobs
from webhook.results import CheckResult, Status
from webhook.workloads.aiperf_sweep import SweepChild, SweepWorkload, requests_of, worst_first

NAME = "Sweep Children"
_SHOW = 5


def _names(children: list[SweepChild]) -> str:
    shown = ", ".join(c.describe() for c in children[:_SHOW])
    more = len(children) - _SHOW
    return shown + (f" and {more} more" if more > 0 else "")


def child_problems(child: SweepChild) -> list[tuple[str, str]]:
    """(kind, text) of what is wrong with one child on its own: render, names, ConfigMap."""
    wl = child.workload
    out: list[tuple[str, str]] = []
    if wl.render_errors:
        out.append(("render", " ".join(wl.render_errors)))
        return out
    js = jobset_name(wl)
    for n in longest_names(js, replicated_jobs(wl)):
        if len(n.name) > MAX_LABEL:
            out.append(("names", f'{n.what} name "{n.name}" ({len(n.name)} characters) is over {MAX_LABEL}'))
            break
    cm = wl.derived.get("configMap")
    if cm:
        size = payload_bytes(cm)
        if size > CONFIGMAP_MAX_BYTES:
            name = (cm.get("metadata") or {}).get("name")
            out.append(("configmap", f'ConfigMap "{name}" would be {kib(size)} ({size} bytes), over the 1024 KiB limit'))
    return out


_FIX = {
    "render": "Fix: change the sweep values that make these variations unrenderable (the first reason is shown)",
    "names": "Fix: shorten the AIPerfSweep name so every child's derived names fit 63 characters",
    "configmap": "Fix: shrink the benchmark (reference datasets by file or URL, shorter inline prompts) or drop those values",
}
_WHAT = {
    "render": "the AIPerf operator would refuse to render",
    "names": "derive names over the 63-character limit",
    "configmap": "carry a run-config ConfigMap over 1 MiB",
}


class SweepChildren(Check):
    name = NAME
    synchronous = True  # reads only the Workload and cached state
    blocking = True
    needs_pod_groups = False
    kinds = frozenset({AIPERFSWEEP})
    summary = (
        "Every child AIPerfJob of an AIPerfSweep (each variation, each trial) renders, its derived names fit and its "
        "ConfigMap fits 1 MiB; failing children are named worst first."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        wl = ctx.workload
        if not isinstance(wl, SweepWorkload) or not wl.children:
            reason = wl.incomplete_reason or "the sweep has no children to judge"
            return CheckResult(self.name, Status.SKIP, f"Skipped: {reason}")
        by_kind: dict[str, list[tuple[SweepChild, str]]] = {}
        for child in wl.children:
            for kind, text in child_problems(child):
                by_kind.setdefault(kind, []).append((child, text))
        fails: list[str] = []
        details: list[str] = []
        for kind in ("render", "names", "configmap"):
            hits = by_kind.get(kind)
            if not hits:
                continue
            order = {id(c): i for i, c in enumerate(worst_first([c for c, _ in hits]))}
            hits.sort(key=lambda h: order[id(h[0])])
            children = [c for c, _ in hits]
            fails.append(
                f"{len(children)} of {len(wl.children)} children of AIPerfSweep {wl.name} would {_WHAT[kind]}: "
                f"{_names(children)}; {hits[0][0].name}: {hits[0][1]}. {_FIX[kind]}."
            )
            details += [f"{c.describe()}: {t}" for c, t in hits]
        total_runs = sum(len(c.names) for c in wl.children)
        if fails:
            return CheckResult(self.name, Status.FAIL, " ".join(fails), details=details)
        worst = wl.worst or wl.children[0]
        pods, cpu, mem = requests_of(worst.workload)
        notes = "; ".join(wl.notes)
        return CheckResult(
            self.name,
            Status.PASS,
            f"{len(wl.children)} variation(s) x {wl.trials} trial(s) = {total_runs} child AIPerfJob(s), run one at a "
            f"time; heaviest {worst.describe()}: {pods} pod(s), {_cores(cpu)} CPU, {_mib(mem)} memory requested"
            + (f" ({notes})" if notes else ""),
            details=[f"{c.describe()}: {requests_of(c.workload)[0]} pod(s)" for c in wl.children[:50]],
        )


def _cores(v: Any) -> str:
    return f"{v.normalize():f}"


def _mib(v: Any) -> str:
    return f"{int(v) // (1024 * 1024)}Mi"


CHECKS = [SweepChildren()]
