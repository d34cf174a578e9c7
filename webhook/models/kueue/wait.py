"""Why a job waits in its ClusterQueue, and behind whom (issue 39): the facts of Kueue Capacity's
"will wait" warning. Only a job that would not be admitted now gets it (the zero-noise rule:
webhook/checks/kueue/capacity.py decides that with Kueue v0.17.0's `available` over the cohort tree).

What it says, each from Kueue v0.17.0's own view:

* in use and reserved per flavor of what the job waits for: ClusterQueue status.flavorsUsage
  (admitted workloads) and status.flavorsReservation (quota reserved, admitted or still in their
  admission checks), apis/kueue/v1beta2/clusterqueue_types.go;
* the pending workloads ahead of it: those of priority ≥ its own (Kueue orders a ClusterQueue's
  heap by priority, then creation time: pkg/queue/cluster_queue.go queueOrderingFunc), from the
  visibility API (apis/visibility/v1beta2/types.go, pkg/visibility/storage/pending_workloads_cq.go:
  GET /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/<name>/pendingworkloads, limit 1000
  by default), else from status.pendingWorkloads (every priority), and the message says which;
* the job's priority as Kueue sets it (pkg/util/priority/priority.go): the WorkloadPriorityClass
  of label kueue.x-k8s.io/priority-class (not cached here: then every pending workload counts),
  else the pods' PriorityClass, else the globalDefault PriorityClass, else 0;
* preemption by the ClusterQueue's spec.preemption (apis/kueue/v1beta2/clusterqueue_types.go
  ClusterQueuePreemption; defaults withinClusterQueue Never, reclaimWithinCohort Never);
* other LocalQueues of the namespace where the whole job fits now.

The pending list is read at most once per PENDING_TTL seconds per ClusterQueue (the view reuses
the answer), so a burst of applies costs one GET; a missing or forbidden API is a stated fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webhook.kube import ApiError, Permission
from webhook.models.context import CheckContext
from webhook.models.kueue.cohort import ZERO, CohortTree
from webhook.models.kueue.queue import condition, selector_matches
from webhook.quantity import format_quantity, parse_quantity
from webhook.workloads.base import Workload

VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_API = f"{VISIBILITY_GROUP}/v1beta2"
#: the visibility read of a ClusterQueue's pending workloads: optional (without it, the status count)
PENDING_PERMISSION = Permission("get", "clusterqueues", VISIBILITY_GROUP, "pendingworkloads")
#: seconds a ClusterQueue's pending list is reused at apply
PENDING_TTL = 5.0
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: the visibility API's page when no limit is asked (apis/visibility/v1beta2/defaults.go): a full
#: page may hide more pending workloads behind it
PENDING_PAGE = 1000
#: pages of PENDING_PAGE the audit controller reads at most to find a waiting job's position (its
#: view's max_pages, webhook/audit/runner.py), each one request paced by audit.qps like every audit
#: read: 10,000 pending workloads; past them the count ahead stays "at least". The apply path reads
#: one page (its deadline).
AUDIT_PENDING_PAGES = 10

FR = tuple[str, str]


@dataclass
class Ahead:
    """The pending workloads ahead of the job: how many, and where the number comes from."""

    count: int
    source: str
    #: True when the count is of priority ≥ the job's (else: every priority)
    by_priority: bool
    #: the job's own Workload is pending (the audit controller judges a waiting job): its
    #: (positionInClusterQueue, LocalQueue name, positionInLocalQueue), counted from 0 as Kueue does
    position: tuple[int, str, int] | None = None
    #: the page was full and what is past it may be ahead too: the count is a lower bound
    at_least: bool = False


def job_priority(wl: Workload, ctx: CheckContext) -> tuple[int | None, str]:
    """(priority, where from) as Kueue v0.17.0 sets a Workload's (pkg/util/priority/priority.go);
    None when the WorkloadPriorityClass it names is not read here."""
    assert ctx.view is not None
    labels = (wl.obj.get("metadata") or {}).get("labels") or {}
    wpc = labels.get(PRIORITY_LABEL)
    if isinstance(wpc, str) and wpc:
        return None, f'WorkloadPriorityClass "{wpc}"'
    classes = {str((o.get("metadata") or {}).get("name")): o for o in ctx.view.list_cached("priorityclasses")}
    for g in wl.pod_groups:
        name = g.pod_spec.get("priorityClassName")
        if isinstance(name, str) and name and name in classes:
            return int(classes[name].get("value") or 0), f'PriorityClass "{name}"'
    for name, pc in sorted(classes.items()):
        if pc.get("globalDefault"):
            return int(pc.get("value") or 0), f'the globalDefault PriorityClass "{name}"'
    return 0, "no priority class"


def _owned_by(item: dict[str, Any], uid: str) -> bool:
    refs = (item.get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any(isinstance(r, dict) and r.get("uid") == uid for r in refs)


async def _pending_pages(ctx: CheckContext, name: str, uid: str) -> tuple[list[dict[str, Any]], int] | None:
    """The pending workloads of ClusterQueue `name`, page by page (None: the API does not know it):
    the first page as the apply path reads it; then, up to `ctx.view.max_pages` pages (1 at apply:
    its deadline; AUDIT_PENDING_PAGES in the audit controller, whose every request is paced by
    audit.qps), the next one (`offset`, `limit`: Kueue v0.17.0 pkg/visibility/storage/pending_workloads_cq.go,
    whose positions stay those in the whole queue) while the job's own Workload is not found and the
    last page was full. A failed read of a later page ends the paging: what was read stands.
    Returns (the items read, the pages read)."""
    assert ctx.view is not None
    pages = 0
    items: list[dict[str, Any]] = []
    while True:
        query = {"offset": str(pages * PENDING_PAGE), "limit": str(PENDING_PAGE)} if pages else None
        try:
            doc = await ctx.view.get_object(
                VISIBILITY_API,
                "clusterqueues",
                None,
                name,
                ctx.deadline,
                ttl=PENDING_TTL,
                subresource="pendingworkloads",
                query=query,
            )
        except ApiError:
            if not pages:
                raise
            return items, pages
        if doc is None:
            return (items, pages) if pages else None
        page = [i for i in doc.get("items") or [] if isinstance(i, dict)]
        items += page
        pages += 1
        found = any(_owned_by(i, uid) for i in page)
        if found or len(page) < PENDING_PAGE or pages >= max(1, ctx.view.max_pages):
            return items, pages


async def pending_ahead(ctx: CheckContext, cq: dict[str, Any], priority: int | None) -> Ahead:
    """The count of pending workloads ahead: the visibility API when served and permitted, else the
    ClusterQueue's status (every priority). Never raises: a failed read is the stated fallback.

    A job that exists already (the audit controller's) and whose Workload is in the list (its
    ownerReferences carry the job's uid, pkg/visibility/storage/utils.go newPendingWorkload) has
    its own position: the workloads ahead are exactly those before it. The audit controller reads
    past the first page to find it (`_pending_pages`); past its last page, the count is a lower bound."""
    assert ctx.view is not None
    name = str((cq.get("metadata") or {}).get("name", "?"))
    status_count = int((cq.get("status") or {}).get("pendingWorkloads") or 0)
    why = ""
    uid = str((ctx.workload.obj.get("metadata") or {}).get("uid") or "")
    if not ctx.view.served(VISIBILITY_API):
        why = f"{VISIBILITY_API} is not served"
    else:
        try:
            got = await _pending_pages(ctx, name, uid)
        except ApiError as exc:
            why = f"not permitted to get {PENDING_PERMISSION.what}" if exc.forbidden else exc.message
        else:
            if got is not None:
                items, pages = got
                read = f"{pages} pages read" if pages > 1 else "read"
                source = f"Kueue's visibility API, {read} within {PENDING_TTL:.0f}s"
                mine = next((i for i in items if _owned_by(i, uid)), None)
                if mine is not None:
                    at = int(mine.get("positionInClusterQueue") or 0)
                    lq = (int(mine.get("positionInLocalQueue") or 0), str(mine.get("localQueueName") or ""))
                    return Ahead(at, source, False, (at, lq[1], lq[0]))
                full = len(items) >= pages * PENDING_PAGE
                if priority is None:
                    return Ahead(len(items), source, False, at_least=full)
                ahead = sum(1 for i in items if int(i.get("priority") or 0) >= priority)
                # Kueue lists by priority, highest first: past a full page, only if its last one is ≥ the job's
                more = full and int(items[-1].get("priority") or 0) >= priority
                return Ahead(ahead, source, True, at_least=more)
            why = f'the visibility API does not know ClusterQueue "{name}"'
    return Ahead(status_count, f"ClusterQueue status.pendingWorkloads, every priority: {why}", False)


def flavor_state(cq: dict[str, Any], flavor: str, resource: str) -> tuple[Decimal, Decimal, Decimal]:
    """(nominalQuota, in use, reserved beyond use) of one flavor/resource of the ClusterQueue."""

    def total(field_: str) -> Decimal:
        for f in (cq.get("status") or {}).get(field_) or []:
            if f.get("name") == flavor:
                for r in f.get("resources") or []:
                    if r.get("name") == resource:
                        try:
                            return parse_quantity(r.get("total", 0))
                        except ValueError:
                            return ZERO
        return ZERO

    nominal = ZERO
    for rg in (cq.get("spec") or {}).get("resourceGroups") or []:
        for f in rg.get("flavors") or []:
            if f.get("name") == flavor:
                for r in f.get("resources") or []:
                    if r.get("name") == resource:
                        try:
                            nominal = parse_quantity(r.get("nominalQuota", 0))
                        except ValueError:
                            nominal = ZERO
    used = total("flavorsUsage")
    reserved = total("flavorsReservation")
    return nominal, used, max(ZERO, reserved - used)


def preemption_text(cq: dict[str, Any], in_cohort: bool, priority: int | None) -> str:
    """What Kueue may preempt for the job, by the ClusterQueue's spec.preemption."""
    p = (cq.get("spec") or {}).get("preemption") or {}
    within = p.get("withinClusterQueue") or "Never"
    reclaim = p.get("reclaimWithinCohort") or "Never"
    name = (cq.get("metadata") or {}).get("name", "?")
    at = f"priority < {priority}" if priority is not None else "lower priority"
    parts = []
    if within == "LowerPriority":
        parts.append(f'admitted workloads of {at} in ClusterQueue "{name}"')
    elif within == "LowerOrNewerEqualPriority":
        parts.append(f'admitted workloads of {at}, or newer of equal priority, in ClusterQueue "{name}"')
    if in_cohort and reclaim in ("LowerPriority", "Any"):
        parts.append(
            "workloads of other ClusterQueues borrowing from the cohort"
            + (f" ({at})" if reclaim == "LowerPriority" else "")
        )
    if not parts:
        return f"it preempts nothing (withinClusterQueue {within}" + (
            f", reclaimWithinCohort {reclaim})" if in_cohort else ")"
        )
    return f"Kueue may preempt {' and '.join(parts)} for it"


def alternatives(
    ctx: CheckContext,
    cq_name: str,
    fits_now: Any,
) -> list[str]:
    """Other LocalQueues of the job's namespace whose ClusterQueue is Active, selects the namespace
    and has room for the whole job now (`fits_now(cq) -> bool`)."""
    assert ctx.view is not None
    ns = ctx.workload.namespace
    nso = ctx.view.get_cached("namespaces", None, ns)
    labels = ((nso or {}).get("metadata") or {}).get("labels") or {}
    out = []
    for lq in sorted(ctx.view.list_cached("localqueues", ns), key=lambda o: str((o.get("metadata") or {}).get("name"))):
        other = (lq.get("spec") or {}).get("clusterQueue") or ""
        if not other or other == cq_name:
            continue
        lqc = condition(lq, "Active")
        if lqc is None or lqc.get("status") != "True" or ((lq.get("spec") or {}).get("stopPolicy") or "None") != "None":
            continue
        cq = ctx.view.get_cached("clusterqueues", None, other)
        if cq is None or ((cq.get("spec") or {}).get("stopPolicy") or "None") != "None":
            continue
        c = condition(cq, "Active")
        selector = (cq.get("spec") or {}).get("namespaceSelector")
        if c is None or c.get("status") != "True" or selector is None or nso is None:
            continue
        if not selector_matches(selector, labels):
            continue
        if fits_now(cq):
            out.append(f'LocalQueue "{(lq.get("metadata") or {}).get("name")}" (ClusterQueue "{other}")')
    return out


def _sooner(r: str, free: Decimal, others: list[str]) -> str:
    """What would start the job sooner. Free now: a smaller ask would start at once; none free: it
    starts when some is released, and only another LocalQueue where it fits now would start it sooner."""
    ways = [f"ask for at most {format_quantity(free, r)} {r}"] if free > ZERO else []
    if others:
        ways.append(f"use {' or '.join(others)}, where it fits now")
    sooner = f"to start sooner, {', or '.join(ways)}" if ways else ""
    if free <= ZERO:
        sooner = f"it starts once {r} is released" + (f"; {sooner}" if sooner else "")
    return sooner


def wait_message(
    ctx: CheckContext,
    cq: dict[str, Any],
    tree: CohortTree,
    shortfall: tuple[str, Decimal, Decimal, str | None],
    flavors: list[str],
    ahead: Ahead,
    priority: tuple[int | None, str],
    others: list[str],
) -> tuple[str, list[str]]:
    """The "will wait" warning: what is in use and reserved, who is ahead, borrowing and
    preemption, and what would start it sooner; and its details: `blocking: <why>` (what the
    audit controller's PreflightWaiting Event follows: it does not change when only the position
    or the amounts free do) and, for a job already pending, `position: <where>`."""
    assert ctx.view is not None
    wl = ctx.workload
    r, v, free, pname = shortfall
    cq_name = (cq.get("metadata") or {}).get("name", "?")
    who = f"the {pname} pods need" if pname else "it needs"
    per_flavor = "; ".join(
        f'flavor "{f}": {format_quantity(used, r)} of {format_quantity(nominal, r)} in use and '
        f"{format_quantity(reserved, r)} reserved"
        for f in flavors
        for nominal, used, reserved in [flavor_state(cq, f, r)]
    )
    prio, prio_from = priority
    at = f" of priority ≥ {prio} ({prio_from})" if ahead.by_priority and prio is not None else ""
    if prio is None:
        at = f" (its priority, from {prio_from}, is not read: every pending workload counts)"
    n = ahead.count
    pending = f"{'at least ' if ahead.at_least else ''}{n} workload{'' if n == 1 else 's'}{at} {'is' if n == 1 else 'are'} pending ahead of it ({ahead.source})"
    verb = "will wait"
    details = [
        f'blocking: ClusterQueue "{cq_name}" has too little {r} free for '
        + (f"the {pname} pods" if pname else "the job")
    ]
    if ahead.position is not None:
        at_cq, lq, at_lq = ahead.position
        verb = f"waits at position {at_cq + 1}"
        pending = f"{n} workload{'' if n == 1 else 's'} {'is' if n == 1 else 'are'} ahead of it ({ahead.source})"
        details.append(f'position: {at_cq + 1} in ClusterQueue "{cq_name}", {at_lq + 1} in LocalQueue "{lq}"')
    if tree.path:
        names = " → ".join(f'"{c}"' for c in tree.cohort_names)
        borrow = f"borrowing from cohort {names} leaves {format_quantity(free, r)} free, not enough"
    else:
        borrow = f'ClusterQueue "{cq_name}" is in no cohort: it cannot borrow'
    sooner = _sooner(r, free, others)
    cache_age = ctx.view.cache_age("clusterqueues")
    fresh = f"ClusterQueue status as watched {cache_age:.0f}s ago" if cache_age is not None else "ClusterQueue status"
    return (
        f'{wl.kind} "{wl.name}" {verb} in ClusterQueue "{cq_name}": {who} {r} '
        f"{format_quantity(v, r)}, {format_quantity(free, r)} free now ({per_flavor}), and {pending}; {borrow}; "
        f"{preemption_text(cq, bool(tree.path), prio)}. Fix: nothing to fix; {sooner} ({fresh})."
    ), details
