"""What a check is: a name, what it needs, and an async `run` that returns results.

Checks are small and honest: they read the Workload and (when they need one) the
ClusterView, respect the deadline, and return CheckResult(s). Expected API answers are
results, not exceptions (404 → the check's verdict, 403 → warn "cannot verify …",
5xx/timeout → warn). Anything that escapes is contained by the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from webhook.kube import Permission as Permission  # re-exported: a check declares its permissions with it
from webhook.models.context import CheckContext as CheckContext  # what run() reads (models read it too)
from webhook.results import CheckResult
from webhook.workloads import known_kinds

if TYPE_CHECKING:  # pragma: no cover
    from webhook.config import Settings

AIPERFJOB = "AIPerfJob"
AIPERFSWEEP = "AIPerfSweep"
TRAINJOB = "TrainJob"


class Check:
    #: the name users see, e.g. "Image Reference"
    name: ClassVar[str] = ""
    #: blocking checks run first, one by one; the first FAIL stops the rest
    blocking: ClassVar[bool] = False
    #: kinds this check applies to; None: every kind an adapter handles (a new kind gets every such check)
    kinds: ClassVar[frozenset[str] | None] = None
    #: needs a ClusterView (skipped offline)
    needs_cluster: ClassVar[bool] = False
    #: needs the pod groups (skipped when the Workload is incomplete, e.g. TrainJob without runtime)
    needs_pod_groups: ClassVar[bool] = True
    #: judges local capacity (skipped for jobs that run in another cluster, e.g. MultiKueue)
    local_capacity: ClassVar[bool] = False
    #: RBAC the check needs, proven at start-up; a missing one lowers the check to skip
    permissions: ClassVar[tuple[Permission, ...]] = ()
    #: RBAC the check uses when configured for it (e.g. the Kueue admission Lease); granted by the
    #: chart, but a missing one only turns that part of the check into "cannot verify"
    optional_permissions: ClassVar[tuple[Permission, ...]] = ()
    #: True: the check is lowered to skip when not one of its named_permissions is permitted (it has
    #: nothing left to read); False: a missing one only turns that read into "cannot verify"
    named_permissions_required: ClassVar[bool] = False
    #: group/versions that must be served ("v1", "kueue.x-k8s.io/v1beta2")
    apis: ClassVar[tuple[str, ...]] = ()
    #: a one-line description for docs, `--help` and /capabilities
    summary: ClassVar[str] = ""
    #: the action when the config names none; "warn" for checks whose FAIL can be wrong in
    #: clusters they cannot fully see (e.g. node pools that autoscale from zero)
    default_action: ClassVar[Literal["deny", "warn", "audit", "off"]] = "deny"
    #: run() never awaits: it reads only the Workload and cached cluster state. The engine then
    #: runs it in the request's own task instead of a task per check (that costs more than most
    #: checks do). A check that awaits I/O must leave this False so the deadline can cut it off.
    synchronous: ClassVar[bool] = False
    #: every input run() has besides the Workload and the settings is a read of ctx.view (no registry, no state
    #: of its own, not the Dry Run's outcomes): when a run read only the watch caches, the webhook's check memo
    #: (webhook/checkmemo.py) keeps its results like a synchronous check's. A synchronous check is so anyway.
    reads_only_the_view: ClassVar[bool] = False
    #: its requests are heavy for our loop and the apiserver (bodies in proportion to the pod specs: the
    #: Dry Run's writes). Before that heavy part it awaits `heavy_turn(ctx)` (webhook/models/context.py): until
    #: the other checks have answered (or half the time left has passed), so it never starves a cheap check
    #: that can deny (issue 33: a Secrets read waiting behind three dry runs of 17 MB JobSets timed out, and
    #: timeoutAction warn admitted the job). What it answers without that part (a render seen before, every
    #: outcome kept) it answers at once, with the cheap checks
    heavy: ClassVar[bool] = False
    #: it dry-runs the pods and sets CheckContext.admission: the engine judges the pods as admitted after it
    admits: ClassVar[bool] = False
    #: every await of run() is a `read_live` (webhook/models/context.py) of the view's live reads, or comes after
    #: a `heavy_turn` or a `needs_a_task` (all raise NotKept in a kept-only run): the engine first runs it kept-only
    #: (CheckContext.kept_only), in the review's task and one step, and only when a read is not kept or the
    #: heavy part is needed does it run it as usual, as a task (what is kept needs neither)
    kept_reads: ClassVar[bool] = False
    #: what the check cannot verify on any cluster, by design: (id, what and why). Said once, not
    #: on every apply: logged at start-up, at /capabilities, in the metric
    #: preflight_webhook_check_unverified{check,what} and in docs/checks.md
    unverified: ClassVar[tuple[tuple[str, str], ...]] = ()

    def shares_reads(self, settings: Settings) -> bool:
        """True: every request run() sends reads one of a fixed few objects named by `settings`, the same
        for every job, and the view reuses each answer for a ttl: judging N jobs costs those few requests
        per ttl window, not N times as many. The audit controller's cheap pass runs such a check on every
        job (webhook/audit/passes.py `request_free`); a check that reads per job leaves this False."""
        return False

    def named_permissions(self, settings: Settings) -> tuple[Permission, ...]:
        """The single objects, by namespace and name, that `settings` make this check read (a
        Permission with `namespace` and `name` each): granted by a Role with `resourceNames` in
        that namespace, probed one by one, and the only objects of their kind the client reads."""
        return ()

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<Check {self.name}>"


def applies_to(check: Check, kind: str) -> bool:
    return check.kinds is None or kind in check.kinds


def covered_kinds(check: Check) -> list[str]:
    """The kinds the check judges, sorted: its own list, or every kind an adapter handles."""
    return sorted(known_kinds() if check.kinds is None else check.kinds)


def describe(check: Check) -> dict[str, Any]:
    return {
        "name": check.name,
        "blocking": check.blocking,
        "kinds": covered_kinds(check),
        "needsCluster": check.needs_cluster,
        "permissions": [str(p) for p in check.permissions],
        "apis": list(check.apis),
        "summary": check.summary,
        "defaultAction": check.default_action,
        **({"unverified": [text for _, text in check.unverified]} if check.unverified else {}),
    }
