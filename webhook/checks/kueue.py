"""Kueue: will the queue the job names ever admit it?

Kueue's own webhook does not check that a LocalQueue exists; a job sent to a missing,
inactive or mis-selected queue stays suspended with nothing in its own status. Three
checks, each a separate verdict so policy can tune them:

* Kueue Queue: the LocalQueue exists and is Active; its ClusterQueue exists, is Active
  and its namespaceSelector selects the job's namespace (nil selects none, {} all).
* Kueue Admission Checks: every AdmissionCheck of the ClusterQueue's
  admissionChecksStrategy exists and is Active; optionally (settings.kueue) one of them
  belongs to the configured controller and that controller's Lease is fresh (the seed's
  readmission gate, same wording).
* Kueue Capacity: the job's total requests (all pods at once: Kueue charges the whole
  gang, initializers included) fit nominalQuota + borrowing of some flavor: never → fail,
  not now → warn (it waits in the queue).

The queue is the job's (label `kueue.x-k8s.io/queue-name`, AIPerf `scheduling.queueName`),
else for AIPerfJobs the operator's default (settings.kueue.defaultQueueName or
AIPERF_K8S_JOBSET_KUEUE_DEFAULT_QUEUE_NAME), else the namespace's LocalQueue `default`
if it exists (Kueue's LocalQueue defaulting). `apis` stays empty on purpose: a queue
asked for on a cluster without Kueue is a FAIL here, not a skip. A 403 is never read as
"not installed": lacking list permission lowers the check to skip "not permitted to ...".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from webhook.checks.base import AIPERFJOB, Check, CheckContext, Permission
from webhook.checks.basics import KUEUE_API, cached, with_stale
from webhook.cluster.view import ApiError
from webhook.quantity import format_quantity, parse_quantity
from webhook.results import CheckResult, Status
from webhook.workloads.base import Workload
from webhook.workloads.podspec import pod_requests

GROUP = "kueue.x-k8s.io"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
AIPERF_DEFAULT_QUEUE_ENV = "AIPERF_K8S_JOBSET_KUEUE_DEFAULT_QUEUE_NAME"
ZERO = Decimal(0)

#: clock for Lease ages; tests may replace it
now = time.time


@dataclass
class Queue:
    name: str
    #: where the name comes from, for messages and fixes
    source: str
    implicit: bool = False


# --- queue resolution -----------------------------------------------------------------------


def requested_queue(wl: Workload, settings: Any) -> Queue | None:
    """The queue the job explicitly asks for (or the AIPerf operator's configured default)."""
    labels = (wl.obj.get("metadata") or {}).get("labels") or {}
    sched = ((wl.obj.get("spec") or {}).get("scheduling")) or {}
    if isinstance(labels.get(QUEUE_LABEL), str) and labels[QUEUE_LABEL]:
        return Queue(labels[QUEUE_LABEL], f"label {QUEUE_LABEL}")
    if wl.kind == AIPERFJOB and isinstance(sched.get("queueName"), str) and sched["queueName"]:
        return Queue(sched["queueName"], "spec.scheduling.queueName")
    if wl.queue_name:
        return Queue(wl.queue_name, "the job's queue name")
    if wl.kind == AIPERFJOB:
        default = settings.kueue.default_queue_name or settings.aiperf_env.get(AIPERF_DEFAULT_QUEUE_ENV)
        if default:
            return Queue(default, "the AIPerf operator's default queue (kueue.defaultQueueName)")
    return None


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def _cond_text(c: dict[str, Any]) -> str:
    reason, msg = c.get("reason") or "", (c.get("message") or "").strip().rstrip(".")
    return f"{reason}: {msg}" if reason and msg else (reason or msg or "no reason given")


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector; `{}` matches everything."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key", ""), e.get("operator"), list(e.get("values") or [])
        if op == "In" and not (key in labels and labels[key] in values):
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def selector_text(selector: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for e in selector.get("matchExpressions") or []:
        vals = e.get("values") or []
        parts.append(f"{e.get('key')} {e.get('operator')}" + (f" ({', '.join(map(str, vals))})" if vals else ""))
    return ", ".join(parts) or "{}"


@dataclass
class Resolved:
    queue: Queue
    local_queue: dict[str, Any]
    cluster_queue: dict[str, Any]


def _resolve(ctx: CheckContext) -> tuple[Queue | None, str | None]:
    """(queue, skip reason). The queue is None with a reason when there is nothing to check."""
    assert ctx.view is not None
    wl = ctx.workload
    q = requested_queue(wl, ctx.settings)
    if q is not None:
        return q, None
    if not ctx.view.served(KUEUE_API):
        return None, f"Kueue is not installed ({KUEUE_API} is not served) and the job names no queue"
    if ctx.view.get_cached("localqueues", wl.namespace, "default") is not None:
        return Queue("default", f'Kueue\'s default LocalQueue of namespace "{wl.namespace}"', implicit=True), None
    return None, f'The job names no Kueue queue ({QUEUE_LABEL}) and namespace "{wl.namespace}" has no LocalQueue "default"'


def resolve_queue(ctx: CheckContext) -> tuple[Resolved | None, str | None]:
    """For the follow-up checks: the LocalQueue and ClusterQueue, or why to skip."""
    assert ctx.view is not None
    q, reason = _resolve(ctx)
    if q is None:
        return None, reason
    if not ctx.view.served(KUEUE_API):
        return None, "Kueue is not installed (see Kueue Queue)"
    lq = ctx.view.get_cached("localqueues", ctx.workload.namespace, q.name)
    if lq is None:
        return None, f'LocalQueue "{q.name}" does not exist (see Kueue Queue)'
    cq_name = (lq.get("spec") or {}).get("clusterQueue") or ""
    cq = ctx.view.get_cached("clusterqueues", None, cq_name) if cq_name else None
    if cq is None:
        return None, f'ClusterQueue "{cq_name}" does not exist (see Kueue Queue)'
    return Resolved(q, lq, cq), None


def _result(name: str, fails: list[str], warns: list[str], ok: str, ctx: CheckContext, *caches: str) -> CheckResult | list[CheckResult]:
    """One FAIL (all failures), one WARN (all warnings), both, or one PASS."""
    out: list[CheckResult] = []
    if fails:
        out.append(with_stale(CheckResult(name, Status.FAIL, " ".join(fails), details=list(fails)), ctx, *caches))
    if warns:
        out.append(with_stale(CheckResult(name, Status.WARN, "; ".join(warns), details=list(warns)), ctx, *caches))
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
        q, reason = _resolve(ctx)
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
            known = f" (LocalQueues in the namespace: {', '.join(others)})" if others else " (the namespace has no LocalQueue)"
            return _result(
                self.name,
                [
                    f'LocalQueue "{q.name}" not found in namespace "{ns}" ({q.source}), so Kueue would keep the job '
                    f"suspended{known}. Fix: create LocalQueue \"{q.name}\" in namespace \"{ns}\" pointing at a ClusterQueue, "
                    f"or correct {q.source}."
                ],
                [], "", ctx, *caches,
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
                warns.append(f'Cannot evaluate the namespaceSelector of ClusterQueue "{name}": namespace "{ns}" is not in the cache')
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
            fails.append(f'ClusterQueue "{name}" is not Active ({_cond_text(c)}), so Kueue admits nothing from it. Fix: {fix}.')


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


class KueueAdmissionChecks(Check):
    name = "Kueue Admission Checks"
    needs_cluster = True
    needs_pod_groups = False
    permissions = (*cached("localqueues", GROUP), *cached("clusterqueues", GROUP), *cached("admissionchecks", GROUP))
    optional_permissions = (Permission("get", "leases", "coordination.k8s.io"),)
    summary = (
        "Every AdmissionCheck of the ClusterQueue exists and is Active; optionally one belongs to the configured controller "
        "(kueue.admissionCheckController) whose Lease (kueue.admissionLease) was renewed recently."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        assert ctx.view is not None
        resolved, reason = resolve_queue(ctx)
        if resolved is None:
            return CheckResult(self.name, Status.SKIP, f"Skipped: {reason}")
        view, kcfg = ctx.view, ctx.settings.kueue
        cq = resolved.cluster_queue
        cq_name = (cq.get("metadata") or {}).get("name", "?")
        listed = admission_checks(cq)
        fails: list[str] = []
        warns: list[str] = []
        objs: dict[str, dict[str, Any]] = {}
        for name, _ in listed:
            ac = view.get_cached("admissionchecks", None, name)
            if ac is None:
                fails.append(
                    f'AdmissionCheck "{name}" (listed by ClusterQueue "{cq_name}") does not exist, so Kueue never admits the job. '
                    f'Fix: create AdmissionCheck "{name}", or remove it from spec.admissionChecksStrategy of ClusterQueue "{cq_name}".'
                )
                continue
            objs[name] = ac
            controller = (ac.get("spec") or {}).get("controllerName", "")
            c = condition(ac, "Active")
            if c is None:
                warns.append(f'AdmissionCheck "{name}" has no Active condition yet (is controller "{controller}" running?)')
            elif c.get("status") != "True":
                fails.append(
                    f'AdmissionCheck "{name}" is not Active ({_cond_text(c)}): its controller "{controller}" has not started. '
                    f'Fix: deploy or start the controller "{controller}".'
                )
        gate = "the readmission gate is not proven: "
        want = kcfg.admission_check_controller
        if want:
            mine = [(n, flv) for n, flv in listed if n in objs and (objs[n].get("spec") or {}).get("controllerName") == want]
            if not mine:
                named = ", ".join(f'"{n}" names controller "{(o.get("spec") or {}).get("controllerName", "")}"' for n, o in objs.items())
                fails.append(
                    f'{gate}ClusterQueue "{cq_name}" lists no AdmissionCheck of controller "{want}"'
                    + (f" (AdmissionCheck {named})" if named else "")
                    + f'. Fix: list an AdmissionCheck with controllerName "{want}" in spec.admissionChecksStrategy of ClusterQueue "{cq_name}".'
                )
            elif all(flv for _, flv in mine):
                n, flv = mine[0]
                fails.append(
                    f'{gate}ClusterQueue "{cq_name}" lists AdmissionCheck "{n}" only on flavors {", ".join(flv)}. '
                    "Fix: list it without onFlavors."
                )
        if kcfg.admission_lease and listed:
            await self._lease(ctx, gate, fails, warns)
        if not listed and not fails:
            return with_stale(
                CheckResult(self.name, Status.SKIP, f'ClusterQueue "{cq_name}" uses no AdmissionChecks'), ctx, "clusterqueues"
            )
        ok = f'{len(listed)} AdmissionCheck(s) of ClusterQueue "{cq_name}" exist and are Active: {", ".join(n for n, _ in listed)}'
        return _result(self.name, fails, warns, ok, ctx, "clusterqueues", "admissionchecks")

    @staticmethod
    async def _lease(ctx: CheckContext, gate: str, fails: list[str], warns: list[str]) -> None:
        """The admission controller's Lease: exists, has a holder, renewed within leaseMaxAgeSeconds."""
        assert ctx.view is not None
        kcfg = ctx.settings.kueue
        ref = kcfg.admission_lease or ""
        lns, _, lname = ref.partition("/")
        if not lname:
            lns, lname = "kube-system", lns
        try:
            lease = await ctx.view.get_object("coordination.k8s.io/v1", "leases", lns, lname, ctx.deadline)
        except ApiError as exc:
            if exc.forbidden:
                warns.append(f"Cannot verify the admission controller's Lease {lns}/{lname} (not permitted to get leases)")
            else:
                warns.append(f"Cannot verify the admission controller's Lease {lns}/{lname} ({exc.message})")
            return
        if lease is None:
            fails.append(f"{gate}Lease {lns}/{lname} does not exist. Fix: deploy the admission controller, or correct kueue.admissionLease.")
            return
        spec = lease.get("spec") or {}
        if not spec.get("holderIdentity"):
            fails.append(f"{gate}the admission controller's Lease has no holder. Fix: start the admission controller.")
            return
        renewed = parse_time(spec.get("renewTime") or "") if spec.get("renewTime") else None
        if renewed is None:
            fails.append(f"{gate}the admission controller's Lease has never been renewed. Fix: start the admission controller.")
            return
        age = now() - renewed
        if age > kcfg.lease_max_age_seconds:
            fails.append(
                f"{gate}the admission controller's Lease was last renewed {_age(age)} ago, beyond "
                f"{_age(kcfg.lease_max_age_seconds)}: the controller is down or stalled. Fix: restart it."
            )


# --- Kueue Capacity -----------------------------------------------------------------------


def _flavor_usage(cq: dict[str, Any]) -> dict[tuple[str, str], Decimal]:
    status = cq.get("status") or {}
    rows = status.get("flavorsReservation") or status.get("flavorsUsage") or []
    out: dict[tuple[str, str], Decimal] = {}
    for f in rows:
        for r in f.get("resources") or []:
            try:
                out[(str(f.get("name")), str(r.get("name")))] = parse_quantity(r.get("total", 0))
            except ValueError:
                continue
    return out


def _q(raw: Any) -> Decimal | None:
    if raw is None:
        return None
    try:
        return parse_quantity(raw)
    except ValueError:
        return None


def _cohort(cq: dict[str, Any]) -> str:
    spec = cq.get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")


def flavor_limits(cq: dict[str, Any], all_cqs: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Decimal, Decimal, str]]:
    """(flavor, resource) → (nominal, borrowable, how) for the ClusterQueue.

    Borrowing needs a cohort: borrowingLimit when set, else what the cohort's other
    ClusterQueues can lend (lendingLimit, else their nominalQuota).
    """
    cohort = _cohort(cq)
    name = (cq.get("metadata") or {}).get("name")
    lendable: dict[tuple[str, str], Decimal] = {}
    if cohort:
        for other in all_cqs:
            if (other.get("metadata") or {}).get("name") == name or _cohort(other) != cohort:
                continue
            for rg in (other.get("spec") or {}).get("resourceGroups") or []:
                for f in rg.get("flavors") or []:
                    for r in f.get("resources") or []:
                        amount = _q(r.get("lendingLimit"))
                        if amount is None:
                            amount = _q(r.get("nominalQuota")) or ZERO
                        key = (str(f.get("name")), str(r.get("name")))
                        lendable[key] = lendable.get(key, ZERO) + amount
    out: dict[tuple[str, str], tuple[Decimal, Decimal, str]] = {}
    for rg in (cq.get("spec") or {}).get("resourceGroups") or []:
        for f in rg.get("flavors") or []:
            for r in f.get("resources") or []:
                key = (str(f.get("name")), str(r.get("name")))
                nominal = _q(r.get("nominalQuota")) or ZERO
                limit = _q(r.get("borrowingLimit"))
                if not cohort:
                    out[key] = (nominal, ZERO, "")
                elif limit is not None:
                    out[key] = (nominal, limit, "borrowingLimit")
                else:
                    out[key] = (nominal, lendable.get(key, ZERO), f'lendable in cohort "{cohort}"')
    return out


def _need_text(need: dict[str, Decimal]) -> str:
    return ", ".join(f"{r} {format_quantity(v, r)}" for r, v in sorted(need.items()))


class KueueCapacity(Check):
    name = "Kueue Capacity"
    synchronous = True  # reads only the Workload and cached state
    needs_cluster = True
    permissions = (*cached("localqueues", GROUP), *cached("clusterqueues", GROUP))
    summary = (
        "The job's total requests (the whole gang, initializers included) fit the ClusterQueue's nominalQuota plus borrowing "
        "for some flavor: never → fail; not now → warn (it waits in the queue)."
    )

    async def run(self, ctx: CheckContext) -> CheckResult:
        assert ctx.view is not None
        resolved, reason = resolve_queue(ctx)
        if resolved is None:
            return CheckResult(self.name, Status.SKIP, f"Skipped: {reason}")
        wl = ctx.workload
        cq = resolved.cluster_queue
        cq_name = (cq.get("metadata") or {}).get("name", "?")
        groups = (cq.get("spec") or {}).get("resourceGroups") or []
        covered_by: dict[str, list[str]] = {}
        for rg in groups:
            flavors = [str(f.get("name")) for f in rg.get("flavors") or []]
            for r in rg.get("coveredResources") or []:
                covered_by[str(r)] = flavors
        try:
            podsets = []
            for g in wl.pod_groups:
                per_pod = {r: v for r, v in pod_requests(g.pod_spec).items() if v > 0}
                need = {r: v * g.pods for r, v in per_pod.items()}
                if "pods" in covered_by:
                    need["pods"] = Decimal(g.pods)
                podsets.append((g.name, need))
        except ValueError as exc:
            return CheckResult(self.name, Status.WARN, f"Could not compute the job's requests: {exc}")
        total: dict[str, Decimal] = {}
        for _, need in podsets:
            for r, v in need.items():
                total[r] = total.get(r, ZERO) + v
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
                ctx, "clusterqueues",
            )

        limits = flavor_limits(cq, ctx.view.list_cached("clusterqueues"))
        usage = _flavor_usage(cq)

        def cap(f: str, r: str, free: bool) -> Decimal:
            nominal, borrow, _ = limits.get((f, r), (ZERO, ZERO, ""))
            return nominal + borrow - (usage.get((f, r), ZERO) if free else ZERO)

        def short(free: bool) -> tuple[str, Decimal, Decimal, str | None] | None:
            """(resource, needed, available, pod group or None for the whole job) of the first shortfall."""
            for r, v in sorted(total.items()):
                most = sum((max(cap(f, r, free), ZERO) for f in covered_by[r]), ZERO)
                if v > most:
                    return r, v, most, None
            for pname, need in podsets:  # Kueue puts each pod group into one flavor
                for r, v in sorted(need.items()):
                    best = max((cap(f, r, free) for f in covered_by[r]), default=ZERO)
                    if v > best:
                        return r, v, max(best, ZERO), pname
            return None

        never = short(free=False)
        if never is not None:
            r, v, most, pname = never
            breakdown = "; ".join(
                f'flavor "{f}": nominalQuota {format_quantity(limits.get((f, r), (ZERO, ZERO, ""))[0], r)}'
                + (
                    f" + {limits[(f, r)][2]} {format_quantity(limits[(f, r)][1], r)}"
                    if (f, r) in limits and limits[(f, r)][2]
                    else ""
                )
                for f in covered_by[r]
            )
            return with_stale(
                CheckResult(
                    self.name,
                    Status.FAIL,
                    (
                        f'The job needs {r} {format_quantity(v, r)} but ClusterQueue "{cq_name}" can provide at most '
                        if pname is None
                        else f'The {pname} pods need {r} {format_quantity(v, r)} in one flavor but no flavor of ClusterQueue '
                        f'"{cq_name}" holds more than '
                    )
                    + f"{format_quantity(most, r)} ({breakdown}), so Kueue would never admit it. Fix: reduce the job's pods or "
                    f'requests, or raise nominalQuota/borrowingLimit for {r} in ClusterQueue "{cq_name}".',
                ),
                ctx, "clusterqueues",
            )
        wait = short(free=True)
        if wait is not None:
            r, v, free, _ = wait
            return with_stale(
                CheckResult(
                    self.name,
                    Status.WARN,
                    f'ClusterQueue "{cq_name}" has {r} {format_quantity(free, r)} free now, the job needs '
                    f"{format_quantity(v, r)}: it waits in the queue",
                ),
                ctx, "clusterqueues",
            )
        return with_stale(
            CheckResult(self.name, Status.PASS, f'The job ({_need_text(total)}) fits ClusterQueue "{cq_name}" now'),
            ctx, "clusterqueues",
        )


CHECKS = [KueueQueue(), KueueAdmissionChecks(), KueueCapacity()]
