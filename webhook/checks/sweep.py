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

import json
from dataclasses import dataclass, field
from typing import Any

from webhook.checks.base import AIPERFSWEEP, Check, CheckContext
from webhook.checks.common import kib, no_quota, with_stale
from webhook.kube import CONFIGMAP_MAX_BYTES
from webhook.models.jobset_names import MAX_LABEL, jobset_name, longest_names, replicated_jobs
from webhook.models.quota import (
    PRIORITY_CLASS_READS,
    QUOTA_READS,
    ZERO,
    admission_inputs,
    admitted_pod,
    pod_level_resources,
    project,
    quota_hard,
    quota_scopes,
)
from webhook.objects import PodSpec
from webhook.quantity import format_quantity, parse_quantity
from webhook.results import CheckResult, Status
from webhook.workloads.aiperf_sweep import RUN_TIME_SAMPLED, SweepChild, SweepWorkload, worst_first
from webhook.workloads.base import PodGroup, Workload

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
        size = child.configmap_bytes
        if size > CONFIGMAP_MAX_BYTES:
            name = (cm.get("metadata") or {}).get("name")
            out.append(
                ("configmap", f'ConfigMap "{name}" would be {kib(size)} ({size} bytes), over the 1024 KiB limit')
            )
    return out


_FIX = {
    "render": "Fix: change or remove the values of spec.sweep that produce these children",
    "names": "Fix: shorten the AIPerfSweep name so every child's derived names fit 63 characters",
    "configmap": "Fix: shrink the benchmark (reference datasets by file or URL, shorter inline prompts) or drop those values",
}
_WHAT = {
    "render": "be refused by the AIPerf operator when it renders them",
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
            why = hits[0][1].split(" Fix: ", 1)[0].rstrip(".")
            fails.append(
                f"{len(children)} of {len(wl.children)} children of AIPerfSweep {wl.name} would {_WHAT[kind]}: "
                f"{_names(children)}; {hits[0][0].name}: {why}. {_FIX[kind]}."
            )
            details += [f"{c.describe()}: {t}" for c, t in hits]
        total_runs = sum(len(c.names) for c in wl.children)
        left = unrendered_note(wl)
        if fails:
            return CheckResult(self.name, Status.FAIL, " ".join(fails + ([left] if left else [])), details=details)
        if left:  # what was rendered passes; the rest is unknown: timeoutAction decides, as for a check cut short
            return CheckResult(
                self.name,
                Status.WARN,
                f"{len(wl.children)} of {len(wl.children) + len(wl.unrendered)} children of AIPerfSweep {wl.name} "
                f"were judged and pass; {left}",
                details=[f"not verified: {n}" for n in wl.unrendered],
                timed_out=True,
            )
        worst = wl.worst or wl.children[0]
        pods, cpu, mem = worst.requests
        notes = "; ".join(wl.notes)
        if wl.sweep_type in RUN_TIME_SAMPLED:  # the children's values are unknown until they run
            return CheckResult(
                self.name,
                Status.WARN,
                f"Cannot verify the {wl.variations} child AIPerfJob(s) of this {wl.sweep_type} sweep: their values are "
                "drawn at run time, so only the base template was judged. Fix: check the extremes of the sampled "
                "ranges with a grid sweep first",
            )
        return CheckResult(
            self.name,
            Status.PASS,
            f"{len(wl.children)} variation(s) x {wl.trials} trial(s) = {total_runs} child AIPerfJob(s), run one at a "
            f"time; heaviest {worst.describe()}: {pods} pod(s), {_cores(cpu)} CPU, {_mib(mem)} memory requested"
            + (f" ({notes})" if notes else ""),
            details=[f"{c.describe()}: {c.requests[0]} pod(s)" for c in wl.children[:50]],
        )


def unrendered_note(wl: SweepWorkload) -> str:
    """What a sweep's render left out to stay within the review's deadline ("" when nothing)."""
    left = wl.unrendered
    if not left:
        return ""
    shown = ", ".join(left[:_SHOW]) + (f" and {len(left) - _SHOW} more" if len(left) > _SHOW else "")
    return (
        f"{len(left)} more were not rendered within the review's budget and are not verified (timed out): {shown}. "
        "Fix: raise budgetSeconds and the webhook's timeoutSeconds, or check the sweep with "
        "`preflight-webhook check -f` before applying it"
    )


def _cores(v: Any) -> str:
    return f"{v.normalize():f}"


def _mib(v: Any) -> str:
    return f"{int(v) // (1024 * 1024)}Mi"


def _slim(pod_spec: PodSpec) -> dict[str, Any]:
    """What ResourceQuota admission reads of a pod: everything but the containers' other fields."""
    out = {k: v for k, v in pod_spec.items() if k not in ("containers", "initContainers", "volumes")}
    for key in ("containers", "initContainers"):
        if pod_spec.get(key):
            out[key] = [{"name": c.get("name"), "resources": c.get("resources") or {}} for c in pod_spec[key]]
    return out


def _qty(resource: str, v: Any) -> str:
    res = resource.split(".", 1)[1] if resource.startswith(("requests.", "limits.")) else resource
    return format_quantity(v, res)


class SweepChildQuotas(Check):
    """Each child next to the sweep-controller pod, against every ResourceQuota of the namespace.

    Children run one at a time, so a child fits when status.used + the controller pod + that
    child's pods and objects stay within hard. The arithmetic is the Resource Quotas check's
    (`webhook.models.quota.project`: LimitRange defaults, globalDefault PriorityClass, scopes); children whose
    pods request the same resources share one evaluation.
    """

    name = "Sweep Child Quotas"
    synchronous = True
    needs_cluster = True
    local_capacity = True
    permissions = QUOTA_READS
    optional_permissions = PRIORITY_CLASS_READS
    apis = ("v1",)
    kinds = frozenset({AIPERFSWEEP})
    summary = "Every child of an AIPerfSweep fits each ResourceQuota next to the sweep-controller pod (children run one at a time)."

    async def run(self, ctx: CheckContext) -> CheckResult:
        """Steps: the namespace's quotas and the sweep-controller pod as admission sees it (`_Peak`), each
        distinct child shape evaluated once next to it (`_children`), the objects every run leaves behind
        (`_kept_objects`), then the verdict (`_verdict`)."""
        assert ctx.view is not None
        wl = ctx.workload
        if not isinstance(wl, SweepWorkload) or not wl.children or not wl.pod_groups:
            return CheckResult(
                self.name, Status.SKIP, f"Skipped: {wl.incomplete_reason or 'the sweep has no children to judge'}"
            )
        view = ctx.view
        quotas = sorted(
            view.list_cached("resourcequotas", wl.namespace), key=lambda q: (q.get("metadata") or {}).get("name", "")
        )
        if not quotas:
            return no_quota(self.name, ctx)
        limit_ranges, _, default_pc = admission_inputs(view, wl.namespace)
        controller = wl.pod_groups[0]
        ctl_spec = admitted_pod(_slim(controller.pod_spec), limit_ranges, default_pc)
        peak = _Peak(wl, quotas, limit_ranges, default_pc, controller, ctl_spec)
        rendered = worst_first([c for c in wl.children if c.workload.pod_groups and not c.workload.render_errors])
        if any(pod_level_resources(g.pod_spec) for c in rendered for g in c.workload.pod_groups):
            return CheckResult(
                self.name,
                Status.WARN,
                "Cannot verify the children against ResourceQuotas: pod-level resources are not modelled",
            )
        try:
            fit = self._children(peak, rendered)
        except ValueError as exc:
            return CheckResult(self.name, Status.WARN, f"Could not compute the children's resources: {exc}")
        fit.kept = self._kept_objects(wl, quotas)
        if fit.kept:
            fit.failing.setdefault("", [])
        return with_stale(self._verdict(wl, fit), ctx, "resourcequotas", "limitranges")

    def _children(self, peak: _Peak, rendered: list[SweepChild]) -> _Fit:
        """Each rendered child, worst first, against every quota; children whose pods request the same
        resources share one evaluation. Raises ValueError."""
        cache: dict[str, list[tuple[str, str]]] = {}
        fit = _Fit(rendered=len(rendered))
        for child in rendered:
            slims = [(g, _slim(g.pod_spec)) for g in child.workload.pod_groups]
            key = json.dumps([(g.pods, s) for g, s in slims], sort_keys=True)
            if key not in cache:
                cache[key] = self._evaluate(peak, child, slims)
            for qname, text in cache[key]:
                fit.failing.setdefault(qname, []).append((child, text))
        fit.shapes = len(cache)
        return fit

    def _verdict(self, wl: SweepWorkload, fit: _Fit) -> CheckResult:
        """Every rendered child fits: PASS (WARN, timed out, when the render left children out); else FAIL
        naming, per quota, the children that do not fit and the first to fail, after the kept objects' lines."""
        left = unrendered_note(wl)
        if not fit.failing and left:
            return CheckResult(
                self.name,
                Status.WARN,
                f'All {fit.rendered} rendered children fit the ResourceQuotas of namespace "{wl.namespace}"; ' + left,
                timed_out=True,
            )
        if not fit.failing:
            return CheckResult(
                self.name,
                Status.PASS,
                f'All {fit.rendered} rendered children fit the ResourceQuotas of namespace "{wl.namespace}" '
                f"next to the sweep-controller pod ({fit.shapes} distinct shapes evaluated)",
            )
        lines: list[str] = []
        details: list[str] = []
        lines += fit.kept
        for qname, hits in fit.failing.items():
            if not hits:
                continue
            first = min(hits, key=lambda h: h[0].variation)[0]
            worst, text = hits[0]
            lines.append(
                f"{len(hits)} of {len(wl.children)} children of AIPerfSweep {wl.name} would not fit ResourceQuota "
                f'"{qname}" next to the sweep-controller pod (children run one at a time; the first to fail is '
                f"{first.describe()}): {_names([c for c, _ in hits])}; worst {worst.name}: {text}. Fix: raise hard "
                f"(kubectl edit resourcequota {qname} -n {wl.namespace}), or remove those values from spec.sweep so "
                "every child fits."
            )
            details += [f"{c.describe()}: {t}" for c, t in hits]
        if left:
            lines.append(left)
        return CheckResult(self.name, Status.FAIL, " ".join(lines), details=details)

    @staticmethod
    def _kept_objects(wl: SweepWorkload, quotas: list[dict[str, Any]]) -> list[str]:
        """Objects every run leaves behind until the AIPerfSweep is deleted: the child AIPerfJob
        (the sweep controller never deletes it; the parent's TTL is stripped from children) and
        the run-config ConfigMap it owns. A count quota on them is hit mid-sweep, at one child."""
        runs = wl.run_order()
        out: list[str] = []
        for q in quotas:
            if quota_scopes(q):  # object-count evaluators match no scope
                continue
            qname = (q.get("metadata") or {}).get("name", "?")
            hard = quota_hard(q)
            used = (q.get("status") or {}).get("used") or {}
            for res, what in _KEPT.items():
                if res not in hard:
                    continue
                try:
                    cap, have = int(parse_quantity(str(hard[res]))), int(parse_quantity(str(used.get(res, "0"))))
                except ValueError:
                    continue
                room = cap - have
                if len(runs) <= room:
                    continue
                name, child = runs[max(room, 0)]
                out.append(
                    f'ResourceQuota "{qname}": {res} would reach {have + len(runs)} by the last of the {len(runs)} child '
                    f"runs of AIPerfSweep {wl.name} ({what} stays until the AIPerfSweep is deleted) but hard is {cap} "
                    f"(used {have}), so the apiserver refuses child {name} ({child.label}), run {max(room, 0) + 1} of "
                    f"{len(runs)}, and the sweep stops there. Fix: raise hard {res} to at least {have + len(runs)} "
                    f"(kubectl edit resourcequota {qname} -n {wl.namespace}), or reduce the variations or "
                    "spec.multiRun.numRuns."
                )
        return out

    @staticmethod
    def _evaluate(
        peak: _Peak, child: SweepChild, slims: list[tuple[PodGroup, dict[str, Any]]]
    ) -> list[tuple[str, str]]:
        """(quota, what is over) of each quota the controller pod and this child's pods and objects exceed."""
        wl, cwl, controller = peak.wl, child.workload, peak.controller
        peak_wl = Workload(
            kind=wl.kind, api_version=wl.api_version, name=wl.name, namespace=wl.namespace, obj=wl.obj, facts=wl.facts,
            pod_groups=[controller, *cwl.pod_groups],
            derived={"jobSet": cwl.derived.get("jobSet") or {}, "configMap": cwl.derived.get("configMap") or {},
                     "sweepJobSet": wl.derived.get("jobSet") or {}},
        )  # fmt: skip
        specs = [(controller, peak.ctl_spec)]
        specs += [(g, admitted_pod(s, peak.limit_ranges, peak.default_pc)) for g, s in slims]
        out: list[tuple[str, str]] = []
        for q in peak.quotas:
            p = project(q, peak_wl, specs)
            over = p.exceeded()
            if over:
                parts = [
                    f"{r} would be {_qty(r, p.used.get(r, ZERO) + p.job[r])} (used {_qty(r, p.used.get(r, ZERO))} + "
                    f"controller and child {_qty(r, p.job[r])}) but hard is {_qty(r, p.hard[r])}"
                    for r in over
                ]
                out.append((p.name, "; ".join(parts)))
        return out


@dataclass
class _Peak:
    """What every child is judged next to: the sweep, its namespace's ResourceQuotas by name, what admission
    reads besides the pod (LimitRanges, the globalDefault PriorityClass), and the sweep-controller pod admitted."""

    wl: SweepWorkload
    quotas: list[dict[str, Any]]
    limit_ranges: list[dict[str, Any]]
    default_pc: str
    controller: PodGroup
    ctl_spec: dict[str, Any]


@dataclass
class _Fit:
    """The children judged: per quota name the (child, what is over) that do not fit, worst first ("" for
    the kept objects' lines alone), those lines, how many children were rendered and distinct shapes evaluated."""

    rendered: int
    failing: dict[str, list[tuple[SweepChild, str]]] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    shapes: int = 0


#: quota resource → what each child run leaves behind
_KEPT = {
    "count/aiperfjobs.aiperf.nvidia.com": "each child AIPerfJob",
    "count/configmaps": "each child's run-config ConfigMap",
    "configmaps": "each child's run-config ConfigMap",
}

CHECKS = [SweepChildren(), SweepChildQuotas()]
