"""Controllers: are the controllers this job needs running?

A job admitted while its controller is down is stored and then nothing happens: no JobSet,
no pods, no condition that says why. So the webhook looks at the controllers the job needs —
JobSet (every kind: AIPerfJobs, AIPerfSweeps and TrainJobs all become JobSets), Trainer
(TrainJobs), the AIPerf operator (AIPerfJobs, AIPerfSweeps) and Kueue (when the job is
queued) — where their upstream manifests install them (settings.controllers, defaults named
there with the upstream file each comes from):

* the leader-election **Lease** (coordination.k8s.io/v1), when the controller elects one:
  renewed within its `leaseDurationSeconds` → running; a holder that stopped renewing, or
  a released Lease (no holderIdentity), → down. This is client-go's own expiry rule
  (k8s.io/client-go tools/leaderelection/leaderelection.go: a record is expired once
  renewTime + leaseDuration has passed), the one AIPerf also uses for its own Leases
  (aiperf/kubernetes/lease.py lease_holder_if_live);
* the **Deployment** (apps/v1): `status.readyReplicas` ≥ 1 → running (AIPerf's own preflight
  reads the JobSet Deployment's ready replicas, operator/preflight/_infra.py); 0 → down.

A fresh Lease wins over the Deployment (a leader that renews is working, whatever its
Deployment is called); a stale Lease is "down" even next to a Ready Deployment (a hung
leader). A read that fails (no permission, timeout) is "cannot verify". Every finding is a
warning: a controller that is down now may be back in a minute, and the job then runs, so
this check never denies on its own (default action warn).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from webhook.checks.base import Check, CheckContext, Permission
from webhook.config import ControllerRef, Settings
from webhook.kube import MULTIKUEUE, ApiError
from webhook.models.context import LiveRead, read_live
from webhook.models.kueue.queue import find_queue
from webhook.results import CheckResult, Status

#: clock for Lease ages; tests may replace it
now = time.time

#: client-go's default when a Lease carries no leaseDurationSeconds (controller-runtime: 15 s)
DEFAULT_LEASE_SECONDS = 15


def _parse_time(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (TypeError, ValueError):
        return None


def _age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


@dataclass
class Verdict:
    """One controller: running (True), down (False) or unknown (None), and what was read."""

    label: str
    running: bool | None
    text: str


def needed(ctx: CheckContext) -> list[tuple[str, ControllerRef]]:
    """(label, where it runs) for every controller this job needs, in report order."""
    wl, cfg = ctx.workload, ctx.settings.controllers
    remote = wl.managed_by == MULTIKUEUE  # runs in another cluster: only Kueue acts here
    # the controllers the kind's adapter names (webhook/workloads/base.py KindFacts)
    out: list[tuple[str, ControllerRef]] = [(label, getattr(cfg, _key(label))) for label in wl.facts.controllers]
    q, _ = find_queue(ctx)
    if q is not None or remote:
        out.append(("Kueue", cfg.kueue))
    return out


def controller_permissions(settings: Settings) -> tuple[Permission, ...]:
    """`get` of each configured controller's Lease and Deployment, in its namespace, by name."""
    out: list[Permission] = []
    cfg = settings.controllers
    for ref in (cfg.jobset, cfg.trainer, cfg.kueue, cfg.aiperf):
        if ref.lease:
            out.append(Permission("get", "leases", "coordination.k8s.io", namespace=ref.namespace, name=ref.lease))
        if ref.deployment:
            out.append(Permission("get", "deployments", "apps", namespace=ref.namespace, name=ref.deployment))
    return tuple(out)


def _why(exc: ApiError, resource: str) -> str:
    return f"not permitted to get {resource}" if exc.forbidden else exc.message


def judge(label: str, ref: ControllerRef, lease: Any, dep: Any, reused_for: float = 0.0) -> Verdict:
    """Combine the Lease and Deployment reads (a dict, None for not found, or an ApiError).

    `reused_for`: how long a read may have been reused (controllers.ttlSeconds); a Lease is
    stale only past leaseDurationSeconds plus that, so a reused read never looks stale by itself."""
    ns = ref.namespace
    facts: list[str] = []
    lease_fresh: bool | None = None  # None: no Lease to judge by
    if ref.lease:
        where = f"Lease {ns}/{ref.lease}"
        if isinstance(lease, ApiError):
            facts.append(f"{where} unreadable: {_why(lease, 'leases')}")
        elif lease is None:
            facts.append(f"no {where}")
        else:
            spec = lease.get("spec") or {}
            stamp = _parse_time(str(spec.get("renewTime") or spec.get("acquireTime") or ""))
            duration = int(spec.get("leaseDurationSeconds") or DEFAULT_LEASE_SECONDS)
            if not spec.get("holderIdentity"):
                facts.append(f"{where} has no holder (released)")
                lease_fresh = False
            elif stamp is None:
                facts.append(f"{where} was never renewed")
                lease_fresh = False
            else:
                age = now() - stamp
                lease_fresh = age <= duration + reused_for
                facts.append(
                    f"{where} renewed {_age(age)} ago"
                    + ("" if lease_fresh else f" (leaseDurationSeconds {duration}): its leader stopped renewing")
                )
    ready: int | None = None
    if ref.deployment:
        where = f"Deployment {ns}/{ref.deployment}"
        if isinstance(dep, ApiError):
            facts.append(f"{where} unreadable: {_why(dep, 'deployments')}")
        elif dep is None:
            facts.append(f"no {where}")
            ready = 0 if lease_fresh is None and not ref.lease else None
        else:
            want = (dep.get("spec") or {}).get("replicas", 1)
            ready = int((dep.get("status") or {}).get("readyReplicas") or 0)
            facts.append(f"{where} {ready}/{want} ready")
    read = "; ".join(facts)
    if lease_fresh:
        return Verdict(label, True, f"{label} ({read})")
    if lease_fresh is False:
        return Verdict(label, False, f"{label} controller looks down ({read})")
    if ready is not None and ready > 0:
        return Verdict(label, True, f"{label} ({read})")
    found_nothing = all(f.startswith("no ") for f in facts)
    if found_nothing:
        return Verdict(label, False, f"{label} controller not found ({read})")
    if ready == 0:
        return Verdict(label, False, f"{label} controller looks down ({read})")
    return Verdict(label, None, f"Cannot verify the {label} controller ({read})")


class Controllers(Check):
    name = "Controllers"
    default_action = "warn"  # a controller down now may be back in a minute: never a deny on its own
    needs_cluster = True
    needs_pod_groups = False
    # the Deployment and Lease of each controller in settings.controllers, by name (a Role each):
    # lowered only when not one of them may be read
    named_permissions_required = True
    kept_reads = True
    summary = (
        "The controllers the job needs (JobSet; Trainer for TrainJobs; the AIPerf operator for AIPerfJobs; Kueue "
        "when queued) are running: leader-election Lease renewed within its duration, or Deployment Ready."
    )

    def named_permissions(self, settings: Settings) -> tuple[Permission, ...]:
        return controller_permissions(settings)

    def shares_reads(self, settings: Settings) -> bool:
        """Every job reads the same few Leases and Deployments (settings.controllers), each answer reused
        for controllers.ttlSeconds: N jobs cost at most two GETs per controller per ttl window."""
        return settings.controllers.ttl_seconds > 0

    async def run(self, ctx: CheckContext) -> CheckResult:
        ttl = ctx.settings.controllers.ttl_seconds
        wanted = needed(ctx)
        reads = [
            LiveRead("get_object", (api, resource, ref.namespace, name, ctx.deadline), {"ttl": ttl})
            for _, ref in wanted
            for api, resource, name in (
                ("coordination.k8s.io/v1", "leases", ref.lease),
                ("apps/v1", "deployments", ref.deployment),
            )
            if name
        ]
        answers = iter(await read_live(ctx, reads))
        # a controller without a Lease (or a Deployment) configured: None, as not found
        reads_of = [
            (next(answers) if ref.lease else None, next(answers) if ref.deployment else None) for _, ref in wanted
        ]
        for lease, dep in reads_of:
            for got in (lease, dep):
                if isinstance(got, BaseException) and not isinstance(got, ApiError):
                    raise got  # not an answer of the apiserver: the engine reports it
        verdicts = [judge(label, ref, lease, dep, ttl) for (label, ref), (lease, dep) in zip(wanted, reads_of)]
        down = [v for v in verdicts if v.running is False]
        unknown = [v for v in verdicts if v.running is None]
        if not down and not unknown:
            return CheckResult(self.name, Status.PASS, "Running: " + ", ".join(v.text for v in verdicts))
        lines = [
            f"{v.text}: {_an(ctx.workload.kind)} admitted now waits until it runs. "
            f"Fix: kubectl get pods -n {ref.namespace}, or set controllers.{_key(v.label)} to where it runs"
            for v, (_, ref) in zip(verdicts, wanted)
            if v.running is False
        ]
        lines += [v.text for v in unknown]
        details = lines + [v.text for v in verdicts if v.running]
        return CheckResult(self.name, Status.WARN, "; ".join(lines), details=details)


def _an(kind: str) -> str:
    return f"{'an' if kind[:1] in 'AEIOU' else 'a'} {kind}"


def _key(label: str) -> str:
    return {"AIPerf operator": "aiperf", "Trainer": "trainer", "JobSet": "jobset", "Kueue": "kueue"}[label]


CHECKS = [Controllers()]
