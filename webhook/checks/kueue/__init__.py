"""Kueue: will the queue the job names ever admit it?

Kueue's own webhook does not check that a LocalQueue exists; a job sent to a missing,
inactive or mis-selected queue stays suspended with nothing in its own status. Three
checks, each a separate verdict so policy can tune them:

* Kueue Queue: the LocalQueue exists and is Active; its ClusterQueue exists, is Active
  and its namespaceSelector selects the job's namespace (nil selects none, {} all).
* Kueue Admission Checks: every AdmissionCheck of the ClusterQueue's
  admissionChecksStrategy exists and is Active; optionally (settings.kueue) one of them
  belongs to the configured controller and that controller's Lease is fresh (a controller that
  stopped renewing its Lease readmits nothing: the job would wait forever). The Lease read is
  reused for kueue.leaseTtlSeconds, so the audit controller judges this check in its cheap pass.
* Kueue Capacity (capacity.py): the job's total requests (all pods at once: Kueue charges the whole
  gang, initializers included) fit what the ClusterQueue could ever get in some flavor —
  Kueue v0.17.0's potentialAvailable over the whole cohort tree (pkg/cache/scheduler/
  resource_node.go: Cohort objects' own nominalQuota, nested Cohorts, lending and borrowing
  limits): never → fail, or warn where the tree cannot be read fully; not now (Kueue's
  available, every ClusterQueue's reservation counted) → warn (it waits in the queue).

The queue is the job's (label `kueue.x-k8s.io/queue-name`, AIPerf `scheduling.queueName`),
else for AIPerfJobs the operator's default (settings.kueue.defaultQueueName or
AIPERF_K8S_JOBSET_KUEUE_DEFAULT_QUEUE_NAME), else the namespace's LocalQueue `default`
if it exists (Kueue's LocalQueue defaulting). `apis` stays empty on purpose: a queue
asked for on a cluster without Kueue is a FAIL here, not a skip. A 403 is never read as
"not installed": lacking list permission lowers the check to skip "not permitted to ...".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import cached, fail_and_warn, with_stale
from webhook.checks.kueue.capacity import KueueCapacity
from webhook.config import Settings
from webhook.kube import ApiError, Permission
from webhook.models.apis import KUEUE_API
from webhook.models.context import needs_a_task
from webhook.models.kueue.queue import (
    GROUP,
    Queue,
    _cond_text,
    condition,
    find_queue,
    resolve_queue,
    selector_matches,
    selector_text,
)
from webhook.results import CheckResult, Status

#: clock for Lease ages; tests may replace it
now = time.time


def _result(
    name: str, fails: list[str], warns: list[str], ok: str, ctx: CheckContext, *caches: str
) -> CheckResult | list[CheckResult]:
    """One FAIL (all failures), one WARN (all warnings), both, or one PASS."""
    out = [with_stale(r, ctx, *caches) for r in fail_and_warn(name, fails, warns)]
    if not out:
        return with_stale(CheckResult(name, Status.PASS, ok), ctx, *caches)
    return out[0] if len(out) == 1 else out


# --- Kueue Queue -------------------------------------------------------------------------


class KueueQueue(Check):
    name = "Kueue Queue"
    synchronous = True  # reads only the Workload and cached state
    needs_cluster = True
    needs_pod_groups = False
    permissions = (*cached("localqueues", GROUP), *cached("clusterqueues", GROUP), *cached("namespaces"))
    summary = (
        "The job's Kueue LocalQueue (label, AIPerf scheduling.queueName, or the namespace default) exists and is Active, "
        "and its ClusterQueue exists, is Active and selects the namespace."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        assert ctx.view is not None
        view, wl = ctx.view, ctx.workload
        ns = wl.namespace
        q, reason = find_queue(ctx)
        if q is None:
            return CheckResult(self.name, Status.SKIP, reason or "No Kueue queue")
        if not view.served(KUEUE_API):
            if view.served(f"{GROUP}/v1beta1"):
                return CheckResult(
                    self.name,
                    Status.FAIL,
                    f'The job asks for LocalQueue "{q.name}" ({q.source}) but the installed Kueue is too old: only '
                    f"{GROUP}/v1beta1 is served. Fix: upgrade Kueue to v0.15 or later.",
                )
            return CheckResult(
                self.name,
                Status.FAIL,
                f'The job asks for LocalQueue "{q.name}" ({q.source}) but Kueue is not installed ({KUEUE_API} is not served), '
                f"so nothing would ever admit it. Fix: install Kueue, or remove {q.source}.",
            )
        caches = ("localqueues", "clusterqueues", "namespaces")
        lq = view.get_cached("localqueues", ns, q.name)
        if lq is None:
            others = sorted((o.get("metadata") or {}).get("name", "?") for o in view.list_cached("localqueues", ns))
            known = (
                f" (LocalQueues in the namespace: {', '.join(others)})"
                if others
                else " (the namespace has no LocalQueue)"
            )
            return _result(
                self.name,
                [
                    f'LocalQueue "{q.name}" not found in namespace "{ns}" ({q.source}), so Kueue would keep the job '
                    f'suspended{known}. Fix: create LocalQueue "{q.name}" in namespace "{ns}" pointing at a ClusterQueue, '
                    f"or correct {q.source}."
                ],
                [],
                "",
                ctx,
                *caches,
            )
        fails: list[str] = []
        warns: list[str] = []
        cq_name = (lq.get("spec") or {}).get("clusterQueue") or ""
        cq = view.get_cached("clusterqueues", None, cq_name) if cq_name else None
        if cq is None:
            fails.append(
                f'ClusterQueue "{cq_name}" of LocalQueue "{q.name}" does not exist, so Kueue never admits the job. '
                f'Fix: create ClusterQueue "{cq_name}", or recreate LocalQueue "{q.name}" with an existing spec.clusterQueue.'
            )
        else:
            self._cluster_queue(cq, ctx, fails, warns)
        if not fails:
            self._local_queue(lq, q, warns, fails)
        label = f'LocalQueue "{q.name}"' + (" (Kueue's namespace default)" if q.implicit else "")
        ok = f'{label} → ClusterQueue "{cq_name}": both Active, and the ClusterQueue selects namespace "{ns}"'
        return _result(self.name, fails, warns, ok, ctx, *caches)

    @staticmethod
    def _local_queue(lq: dict[str, Any], q: Queue, warns: list[str], fails: list[str]) -> None:
        c = _stopped_or_inactive(lq, f'LocalQueue "{q.name}"', warns)
        if c is not None:
            fails.append(
                f'LocalQueue "{q.name}" is not Active ({_cond_text(c)}), so Kueue does not admit from it. '
                f"Fix: kubectl describe localqueue {q.name} -n {(lq.get('metadata') or {}).get('namespace', '')} and correct what it names."
            )

    @staticmethod
    def _cluster_queue(cq: dict[str, Any], ctx: CheckContext, fails: list[str], warns: list[str]) -> None:
        assert ctx.view is not None
        name = (cq.get("metadata") or {}).get("name", "?")
        ns = ctx.workload.namespace
        spec = cq.get("spec") or {}
        selector = spec.get("namespaceSelector")
        if selector is None:
            fails.append(
                f'ClusterQueue "{name}" has no namespaceSelector, so it admits workloads from no namespace. '
                f'Fix: set spec.namespaceSelector of ClusterQueue "{name}" to {{}} (all) or to a selector matching namespace "{ns}".'
            )
        else:
            nso = ctx.view.get_cached("namespaces", None, ns)
            if nso is None:
                warns.append(
                    f'Cannot evaluate the namespaceSelector of ClusterQueue "{name}": namespace "{ns}" is not in the cache'
                )
            else:
                labels = (nso.get("metadata") or {}).get("labels") or {}
                if not selector_matches(selector, labels):
                    fails.append(
                        f'ClusterQueue "{name}" does not select namespace "{ns}" (namespaceSelector {selector_text(selector)}), '
                        "so Kueue never admits the job. Fix: label the namespace to match "
                        f'(kubectl label namespace {ns} <key>=<value>) or widen the selector of ClusterQueue "{name}".'
                    )
        c = _stopped_or_inactive(cq, f'ClusterQueue "{name}"', warns)
        if c is not None:
            reason = c.get("reason") or ""
            fix = {
                "FlavorNotFound": "create the ResourceFlavors it names",
                "AdmissionCheckNotFound": "create the AdmissionChecks it names (see Kueue Admission Checks)",
                "AdmissionCheckInactive": "start the AdmissionChecks' controllers (see Kueue Admission Checks)",
            }.get(reason, f"kubectl describe clusterqueue {name} and correct what it names")
            fails.append(
                f'ClusterQueue "{name}" is not Active ({_cond_text(c)}), so Kueue admits nothing from it. Fix: {fix}.'
            )


def _stopped_or_inactive(queue: dict[str, Any], label: str, warns: list[str]) -> dict[str, Any] | None:
    """A Local/ClusterQueue's state: stopped or not yet reporting → a warning (the job waits);
    an Active condition that is not True → that condition, for the caller's failure; else None."""
    stop = (queue.get("spec") or {}).get("stopPolicy") or "None"
    if stop != "None":
        warns.append(f"{label} is stopped (stopPolicy {stop}): the job waits until it is resumed")
        return None
    c = condition(queue, "Active")
    if c is None:
        warns.append(f"{label} has no Active condition yet (is Kueue's controller running?)")
        return None
    return c if c.get("status") != "True" else None


# --- Kueue Admission Checks ---------------------------------------------------------------


def admission_checks(cq: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(name, onFlavors) of the ClusterQueue's admission checks (v1beta2 strategy, v1beta1 flat list)."""
    spec = cq.get("spec") or {}
    out = [
        (str(a.get("name")), list(a.get("onFlavors") or []))
        for a in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
        if a.get("name")
    ]
    out += [(str(n), []) for n in spec.get("admissionChecks") or [] if isinstance(n, str)]
    return out


def parse_time(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (TypeError, ValueError):
        return None


def _age(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}m"


def admission_lease_ref(settings: Settings) -> tuple[str, str] | None:
    """(namespace, name) of kueue.admissionLease ("namespace/name", or a name in kube-system)."""
    ref = settings.kueue.admission_lease or ""
    if not ref:
        return None
    lns, _, lname = ref.partition("/")
    if not lname:
        lns, lname = "kube-system", lns
    return lns, lname


@dataclass
class _Listed:
    """The AdmissionChecks a ClusterQueue lists, those that exist, and what the steps found."""

    cq_name: str
    #: (name, onFlavors), as admission_checks reads them
    listed: list[tuple[str, list[str]]]
    objs: dict[str, dict[str, Any]] = field(default_factory=dict)
    fails: list[str] = field(default_factory=list)
    warns: list[str] = field(default_factory=list)


class KueueAdmissionChecks(Check):
    name = "Kueue Admission Checks"
    #: its one await is the Lease's read (kueue.admissionLease): without it, answered in the review's task
    kept_reads = True
    needs_cluster = True
    needs_pod_groups = False
    permissions = (*cached("localqueues", GROUP), *cached("clusterqueues", GROUP), *cached("admissionchecks", GROUP))
    summary = (
        "Every AdmissionCheck of the ClusterQueue exists and is Active; optionally one belongs to the configured controller "
        "(kueue.admissionCheckController) whose Lease (kueue.admissionLease) was renewed recently."
    )

    def shares_reads(self, settings: Settings) -> bool:
        """Its only live read is the admission controller's Lease (kueue.admissionLease), the same for every
        job and reused for kueue.leaseTtlSeconds: N jobs cost at most one GET per window. Without a Lease to
        read it sends no request at all. As the Controllers check (checks/controllers.py)."""
        return not settings.kueue.admission_lease or settings.kueue.lease_ttl_seconds > 0

    def named_permissions(self, settings: Settings) -> tuple[Permission, ...]:
        """`get` of the admission controller's Lease (kueue.admissionLease), when configured."""
        ref = admission_lease_ref(settings)
        return (
            () if ref is None else (Permission("get", "leases", "coordination.k8s.io", namespace=ref[0], name=ref[1]),)
        )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        """Steps: each AdmissionCheck the ClusterQueue lists exists and is Active (`_exist`), one of them is
        the configured controller's (`_controller`), that controller's Lease is fresh (`_lease`), then the verdict."""
        assert ctx.view is not None
        resolved, reason = resolve_queue(ctx)
        if resolved is None:
            return CheckResult(self.name, Status.SKIP, f"Skipped: {reason}")
        cq = resolved.cluster_queue
        found = _Listed((cq.get("metadata") or {}).get("name", "?"), admission_checks(cq))
        self._exist(ctx, found)
        gate = "the readmission gate is not proven: "
        self._controller(ctx.settings.kueue.admission_check_controller, found, gate)
        if ctx.settings.kueue.admission_lease and found.listed:
            needs_a_task(ctx, "the admission controller's Lease")
            await self._lease(ctx, gate, found.fails, found.warns)
        cq_name, listed = found.cq_name, found.listed
        if not listed and not found.fails:
            return with_stale(
                CheckResult(self.name, Status.SKIP, f'ClusterQueue "{cq_name}" uses no AdmissionChecks'),
                ctx,
                "clusterqueues",
            )
        ok = f'{len(listed)} AdmissionCheck(s) of ClusterQueue "{cq_name}" exist and are Active: {", ".join(n for n, _ in listed)}'
        return _result(self.name, found.fails, found.warns, ok, ctx, "clusterqueues", "admissionchecks")

    @staticmethod
    def _exist(ctx: CheckContext, found: _Listed) -> None:
        """Each listed AdmissionCheck exists (else FAIL) and is Active (no condition yet: WARN; not True: FAIL)."""
        assert ctx.view is not None
        cq_name = found.cq_name
        for name, _ in found.listed:
            ac = ctx.view.get_cached("admissionchecks", None, name)
            if ac is None:
                found.fails.append(
                    f'AdmissionCheck "{name}" (listed by ClusterQueue "{cq_name}") does not exist, so Kueue never admits the job. '
                    f'Fix: create AdmissionCheck "{name}", or remove it from spec.admissionChecksStrategy of ClusterQueue "{cq_name}".'
                )
                continue
            found.objs[name] = ac
            controller = (ac.get("spec") or {}).get("controllerName", "")
            c = condition(ac, "Active")
            if c is None:
                found.warns.append(
                    f'AdmissionCheck "{name}" has no Active condition yet (is controller "{controller}" running?)'
                )
            elif c.get("status") != "True":
                found.fails.append(
                    f'AdmissionCheck "{name}" is not Active ({_cond_text(c)}): its controller "{controller}" has not started. '
                    f'Fix: deploy or start the controller "{controller}".'
                )

    @staticmethod
    def _controller(want: str | None, found: _Listed, gate: str) -> None:
        """With kueue.admissionCheckController set: an existing AdmissionCheck of that controller is listed,
        and not only on some flavors (else FAIL: the readmission gate is not proven)."""
        if not want:
            return
        cq_name, listed, objs = found.cq_name, found.listed, found.objs
        mine = [
            (n, flv) for n, flv in listed if n in objs and (objs[n].get("spec") or {}).get("controllerName") == want
        ]
        if not mine:
            named = ", ".join(
                f'"{n}" names controller "{(o.get("spec") or {}).get("controllerName", "")}"' for n, o in objs.items()
            )
            found.fails.append(
                f'{gate}ClusterQueue "{cq_name}" lists no AdmissionCheck of controller "{want}"'
                + (f" (AdmissionCheck {named})" if named else "")
                + f'. Fix: list an AdmissionCheck with controllerName "{want}" in spec.admissionChecksStrategy of ClusterQueue "{cq_name}".'
            )
        elif all(flv for _, flv in mine):
            n, flv = mine[0]
            found.fails.append(
                f'{gate}ClusterQueue "{cq_name}" lists AdmissionCheck "{n}" only on flavors {", ".join(flv)}. '
                "Fix: list it without onFlavors."
            )

    @staticmethod
    async def _lease(ctx: CheckContext, gate: str, fails: list[str], warns: list[str]) -> None:
        """The admission controller's Lease: exists, has a holder, renewed within leaseMaxAgeSeconds.

        The read is reused for kueue.leaseTtlSeconds (found or not found; the view never reuses an error),
        so the Lease is stale only past leaseMaxAgeSeconds plus that: a reused read never looks stale by
        itself (the rule of checks/controllers.py `judge(..., reused_for=...)`)."""
        assert ctx.view is not None
        kcfg = ctx.settings.kueue
        ttl = kcfg.lease_ttl_seconds
        lns, lname = admission_lease_ref(ctx.settings) or ("kube-system", "")
        try:
            lease = await ctx.view.get_object("coordination.k8s.io/v1", "leases", lns, lname, ctx.deadline, ttl=ttl)
        except ApiError as exc:
            if exc.forbidden:
                warns.append(
                    f"Cannot verify the admission controller's Lease {lns}/{lname} (not permitted to get leases)"
                )
            else:
                warns.append(f"Cannot verify the admission controller's Lease {lns}/{lname} ({exc.message})")
            return
        if lease is None:
            fails.append(
                f"{gate}Lease {lns}/{lname} does not exist. Fix: deploy the admission controller, or correct kueue.admissionLease."
            )
            return
        spec = lease.get("spec") or {}
        if not spec.get("holderIdentity"):
            fails.append(f"{gate}the admission controller's Lease has no holder. Fix: start the admission controller.")
            return
        renewed = parse_time(spec.get("renewTime") or "") if spec.get("renewTime") else None
        if renewed is None:
            fails.append(
                f"{gate}the admission controller's Lease has never been renewed. Fix: start the admission controller."
            )
            return
        age = now() - renewed
        if age > kcfg.lease_max_age_seconds + ttl:
            fails.append(
                f"{gate}the admission controller's Lease was last renewed {_age(age)} ago, beyond "
                f"{_age(kcfg.lease_max_age_seconds)}: the controller is down or stalled. Fix: restart it."
            )


CHECKS = [KueueQueue(), KueueAdmissionChecks(), KueueCapacity()]

#: the family's checks (Kueue Capacity lives in capacity.py; the cohort tree and queue resolution they read
#: are webhook/models/kueue/)
__all__ = ["CHECKS", "KueueAdmissionChecks", "KueueCapacity", "KueueQueue", "admission_checks", "now", "parse_time"]
