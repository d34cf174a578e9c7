"""Kueue Capacity: the job's total requests (the whole gang, initializers included) against what
its ClusterQueue could ever get in some flavor (never → fail, or warn where the cohort tree
cannot be read fully) and against what is free now (→ warn: it waits in the queue). The cohort
tree's arithmetic (Kueue v0.17.0 potentialAvailable and available) is webhook/models/kueue/cohort.py;
the queue resolution is webhook/models/kueue/queue.py.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import cached, with_stale
from webhook.config import Settings
from webhook.models.context import needs_a_task
from webhook.models.kueue.cohort import ZERO, CohortTree, flavor_limits
from webhook.models.kueue.queue import GROUP, resolve_queue
from webhook.models.kueue.wait import PENDING_PERMISSION, alternatives, job_priority, pending_ahead, wait_message
from webhook.quantity import format_quantity
from webhook.results import CheckResult, Status
from webhook.workloads.base import Workload
from webhook.workloads.podspec import pod_requests


def _need_text(need: dict[str, Decimal]) -> str:
    return ", ".join(f"{r} {format_quantity(v, r)}" for r, v in sorted(need.items()))


class KueueCapacity(Check):
    name = "Kueue Capacity"
    #: a job that waits: Kueue's visibility API is read (reused PENDING_TTL seconds) for who is ahead
    synchronous = False
    #: a job without a queue is answered in the review's task; one in a queue runs as a task
    kept_reads = True
    needs_cluster = True
    permissions = (*cached("localqueues", GROUP), *cached("clusterqueues", GROUP))
    #: the cohort tree (without it a "never" verdict for a ClusterQueue in a cohort is only a warning); the
    #: pending workloads of the visibility API (without it, the ClusterQueue status count); the PriorityClasses
    #: and namespaces are cached for every check that reads them
    optional_permissions = (*cached("cohorts", GROUP), PENDING_PERMISSION)
    summary = (
        "The job's total requests (the whole gang, initializers included) fit what the ClusterQueue could ever get in "
        "some flavor: its nominalQuota plus what it may borrow through its cohort tree (Kueue's potentialAvailable), "
        "never → fail (warn when the tree cannot be read fully); not now → warn: it will wait, with what is in use and "
        "reserved, the pending workloads ahead of it at its priority, borrowing, preemption, and LocalQueues where it fits now."
    )

    def shares_reads(self, settings: Settings) -> bool:
        """Its only live read is one ClusterQueue's pending workloads (Kueue's visibility API), reused
        PENDING_TTL seconds: N waiting jobs of one ClusterQueue cost one GET per window. So the audit
        controller judges it in its cheap pass, every scan (a position is never kept)."""
        return True

    async def run(self, ctx: CheckContext) -> CheckResult:
        """Steps: the job's needs per pod group, the resources the ClusterQueue covers, then the
        first shortfall against what the cohort tree could ever provide (never admitted) and
        against what is free now (waits in the queue)."""
        assert ctx.view is not None
        resolved, reason = resolve_queue(ctx)
        if resolved is None:
            return CheckResult(self.name, Status.SKIP, f"Skipped: {reason}")
        # a job in a queue may wait (the visibility API's read): it runs as a task from here, so its needs and
        # the cohort tree are never computed twice (in the kept-only run, then again as a task)
        needs_a_task(ctx, "the queue's capacity")
        cq = resolved.cluster_queue
        cq_name = (cq.get("metadata") or {}).get("name", "?")
        covered_by = _covered_by(cq)
        try:
            podsets = _podset_needs(ctx.workload, covered_by)
        except ValueError as exc:
            return CheckResult(self.name, Status.WARN, f"Could not compute the job's requests: {exc}")
        total = _total(podsets)
        if not total:
            return CheckResult(self.name, Status.SKIP, "The job requests no resources")

        uncovered = sorted(r for r in total if r not in covered_by)
        if uncovered:
            return with_stale(
                CheckResult(
                    self.name,
                    Status.FAIL,
                    f'ClusterQueue "{cq_name}" has no quota for {", ".join(uncovered)}, which the job requests, so Kueue never '
                    f'admits it. Fix: add {", ".join(uncovered)} to a resourceGroup of ClusterQueue "{cq_name}", or use another queue.',
                ),
                ctx,
                "clusterqueues",
            )

        readable, tree = _tree(ctx, cq)
        caches = ("clusterqueues", "cohorts") if tree.path and readable else ("clusterqueues",)
        in_cohort = f"cohort {' → '.join(chr(34) + n + chr(34) for n in tree.cohort_names)}" if tree.path else ""
        issues = "; ".join(dict.fromkeys(tree.issues))

        never = _shortfall(tree, total, podsets, covered_by, free=False)
        if never is not None:
            return with_stale(self._never_admitted(never, tree, covered_by, cq_name, in_cohort, issues), ctx, *caches)
        caveat = f" (as far as its cohort tree can be read: {issues})" if issues else ""
        wait = _shortfall(tree, total, podsets, covered_by, free=True)
        if wait is not None:
            priority = job_priority(ctx.workload, ctx)
            ahead = await pending_ahead(ctx, cq, priority[0])
            others = alternatives(ctx, cq_name, lambda other: _fits_now(ctx, other))
            message, details = wait_message(ctx, cq, tree, wait, covered_by[wait[0]], ahead, priority, others)
            return with_stale(CheckResult(self.name, Status.WARN, message + caveat, details=details), ctx, *caches)
        return with_stale(
            CheckResult(
                self.name, Status.PASS, f'The job ({_need_text(total)}) fits ClusterQueue "{cq_name}" now{caveat}'
            ),
            ctx,
            *caches,
        )

    def _never_admitted(
        self,
        shortfall: Shortfall,
        tree: CohortTree,
        covered_by: dict[str, list[str]],
        cq_name: str,
        in_cohort: str,
        issues: str,
    ) -> CheckResult:
        """A need past what the ClusterQueue and its cohort tree could ever provide: FAIL, or
        WARN when part of the tree could not be read (never a denial on a guess)."""
        r, v, most, pname = shortfall
        limits = flavor_limits(tree, [(f, r) for f in covered_by[r]])
        breakdown = "; ".join(
            f'flavor "{f}": nominalQuota {format_quantity(limits[(f, r)][0], r)}'
            + (f" + {format_quantity(limits[(f, r)][1], r)} borrowable in {in_cohort}" if tree.path else "")
            for f in covered_by[r]
        )
        what = (
            f'The job needs {r} {format_quantity(v, r)} but ClusterQueue "{cq_name}" can provide at most '
            if pname is None
            else f"The {pname} pods need {r} {format_quantity(v, r)} in one flavor but no flavor of ClusterQueue "
            f'"{cq_name}" holds more than '
        ) + f"{format_quantity(most, r)} ({breakdown})"
        fix = (
            f"reduce the job's pods or requests, or raise nominalQuota/borrowingLimit for {r} in ClusterQueue "
            f'"{cq_name}"' + (f" or the quota {in_cohort} can lend" if tree.path else "") + "."
        )
        if issues:  # the tree is not fully known: never a denial
            return CheckResult(
                self.name,
                Status.WARN,
                f"{what} as far as its cohort tree can be read ({issues}), so Kueue may never admit it. "
                f"Fix: correct the cohort tree, or {fix}",
                details=list(dict.fromkeys(tree.issues)),
            )
        return CheckResult(self.name, Status.FAIL, f"{what}, so Kueue would never admit it. Fix: {fix}")


def _fits_now(ctx: CheckContext, cq: dict[str, Any]) -> bool:
    """The whole job is admitted by `cq` now: every resource covered, nothing short of what is free."""
    assert ctx.view is not None
    covered_by = _covered_by(cq)
    try:
        podsets = _podset_needs(ctx.workload, covered_by)
    except ValueError:
        return False
    total = _total(podsets)
    if any(r not in covered_by for r in total):
        return False
    _, tree = _tree(ctx, cq)
    return not tree.issues and _shortfall(tree, total, podsets, covered_by, free=True) is None


def _tree(ctx: CheckContext, cq: dict[str, Any]) -> tuple[bool, CohortTree]:
    """(whether the Cohort objects can be read, the cohort tree of `cq` over the cached ClusterQueues and
    Cohorts): without the Cohorts cache the tree is read from the ClusterQueues alone, its issues say so."""
    assert ctx.view is not None
    readable = ctx.view.cache_age("cohorts") is not None
    tree = CohortTree(cq, ctx.view.list_cached("clusterqueues"), ctx.view.list_cached("cohorts") if readable else None)
    return readable, tree


def _total(podsets: list[tuple[str, dict[str, Decimal]]]) -> dict[str, Decimal]:
    """The whole job's requests: the pod groups' needs summed per resource (Kueue charges the whole gang)."""
    total: dict[str, Decimal] = {}
    for _, need in podsets:
        for r, v in need.items():
            total[r] = total.get(r, ZERO) + v
    return total


#: (resource, needed, available, pod group or None for the whole job) of a shortfall
Shortfall = tuple[str, Decimal, Decimal, str | None]


def _covered_by(cq: dict[str, Any]) -> dict[str, list[str]]:
    """resource → the flavors of the ClusterQueue's resourceGroup that covers it."""
    covered_by: dict[str, list[str]] = {}
    for rg in (cq.get("spec") or {}).get("resourceGroups") or []:
        flavors = [str(f.get("name")) for f in rg.get("flavors") or []]
        for r in rg.get("coveredResources") or []:
            covered_by[str(r)] = flavors
    return covered_by


def _podset_needs(wl: Workload, covered_by: dict[str, list[str]]) -> list[tuple[str, dict[str, Decimal]]]:
    """(pod group, its total requests) per pod group, as Kueue's podSets count them. Raises ValueError."""
    podsets = []
    for g in (g for g in wl.pod_groups if g.queued):  # an AIPerfSweep's sweep-controller pod is not queued
        per_pod = {r: v for r, v in pod_requests(g.pod_spec).items() if v > 0}
        need = {r: v * g.pods for r, v in per_pod.items()}
        if "pods" in covered_by:
            need["pods"] = Decimal(g.pods)
        podsets.append((g.name, need))
    return podsets


def _shortfall(
    tree: CohortTree,
    total: dict[str, Decimal],
    podsets: list[tuple[str, dict[str, Decimal]]],
    covered_by: dict[str, list[str]],
    *,
    free: bool,
) -> Shortfall | None:
    """The first need past what the flavors provide: free now (`free`), or at most (borrowing all it may)."""

    def cap(f: str, r: str) -> Decimal:
        return tree.available((f, r)) if free else tree.potential_available((f, r))

    for r, v in sorted(total.items()):
        most = sum((max(cap(f, r), ZERO) for f in covered_by[r]), ZERO)
        if v > most:
            return r, v, most, None
    for pname, need in podsets:  # Kueue puts each pod group into one flavor
        for r, v in sorted(need.items()):
            best = max((cap(f, r) for f in covered_by[r]), default=ZERO)
            if v > best:
                return r, v, max(best, ZERO), pname
    return None
