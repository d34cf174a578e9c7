"""The Volume Claims check: each claim's verdict (an existing claim as the scheduler and
pv_controller.go syncUnboundClaim see it, a missing one, a template's class that provisions it or the
PersistentVolumes the job's claims take, smallest request first: binder.go findMatchingVolumes) and
the message that says what, why and the fix.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import cached, fail_and_warn, plural, with_stale
from webhook.checks.storage.claims import Claim, collect
from webhook.checks.storage.classes import (
    DELAYED_REASON,
    IMMEDIATE_REASON,
    NO_PROVISIONER,
    STORAGE_API,
    _dict,
    _str,
    claim_class,
    default_class,
    pv_class,
)
from webhook.checks.storage.match import NODE_AFFINITY, Want, _bound_to, _pv_name, mismatch, pick
from webhook.cluster.view import ClusterView
from webhook.kube import ApiError, Permission
from webhook.models.context import before_deadline, needs_a_task
from webhook.objects import Node, as_nodes
from webhook.results import CheckResult, Status

_SHOWN_PVS = 3  # near misses named in a message


@dataclass
class Verdict:
    status: Status
    text: str


@dataclass
class _Need:
    """A claim that only a PersistentVolume can bind, waiting for the PV assignment."""

    claim: Claim
    want: Want
    count: int
    why: str  # why no provisioner binds it
    fix: str  # the part of the fix that is not "create a PersistentVolume"
    reason: str  # the scheduler's words
    existing: bool  # an existing claim (its failure is a warning)
    delayed: bool = False  # WaitForFirstConsumer: the scheduler binds it, not the PV controller
    pvs: list[str] = field(default_factory=list)  # the PVs it takes


@dataclass
class _Cluster:
    classes: list[dict[str, Any]] | None
    pvs: list[dict[str, Any]] | None
    nodes: list[Node] | None
    class_reason: str = "not permitted to list storageclasses.storage.k8s.io"
    pv_reason: str = "not permitted to list persistentvolumes"

    def storage_class(self, name: str) -> dict[str, Any] | None:
        for c in self.classes or []:
            if _dict(c.get("metadata")).get("name") == name:
                return c
        return None

    def class_names(self) -> list[str]:
        return sorted(_str(_dict(c.get("metadata")).get("name")) for c in self.classes or [])


def _provisioner(sc: dict[str, Any]) -> str:
    return _str(sc.get("provisioner"))


def _wfc(sc: dict[str, Any] | None) -> bool:
    return sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer"


def _plan(
    claim: Claim, ns: str, name: str, meta: dict[str, Any], spec: dict[str, Any], cl: _Cluster, *, existing: bool
) -> Verdict | _Need:
    """How a claim with this metadata and spec binds: a class that provisions it, or a PV (a _Need)."""
    subject = f"{claim.what}: Pending;" if existing else f"{claim.what}:"
    if cl.classes is None:
        return Verdict(Status.WARN, f"Cannot verify {claim.what}: StorageClasses cannot be read ({cl.class_reason})")
    cls = claim_class(meta, spec)
    how = ""
    if cls is None:
        default = default_class(cl.classes)
        if default is not None:
            cls, how = _str(_dict(default.get("metadata")).get("name")), "the default "
        else:
            cls = ""
    sc = cl.storage_class(cls) if cls else None
    if sc is not None and _provisioner(sc) not in ("", NO_PROVISIONER):
        mode = ", WaitForFirstConsumer" if _wfc(sc) else ""
        return Verdict(
            Status.PASS,
            f'{subject} {how}StorageClass "{cls}" provisions it ({_provisioner(sc)}{mode}; provisioner health not judged)',
        )
    want = Want(ns, name, cls, spec, _str(meta.get("uid")))
    others = ", ".join(n for n in cl.class_names() if n != cls)
    use = f" (existing: {others})" if others else ""
    reason = DELAYED_REASON if _wfc(sc) else IMMEDIATE_REASON
    where = "in the claim" if existing else "in the template"
    if sc is not None:
        why = f'{how}StorageClass "{cls}" cannot provision (provisioner {_provisioner(sc) or "none"})'
        fix = f"use a StorageClass that provisions{use}"
    elif cls and not how:
        why = f'StorageClass "{cls}" does not exist'
        fix = f'create StorageClass "{cls}", use an existing one{use}'
    elif claim_class(meta, spec) == "":
        why = 'storageClassName "" asks for a pre-provisioned PersistentVolume'
        fix = f"set storageClassName {where} to a StorageClass that provisions{use}"
    else:
        why = "it names no StorageClass and the cluster has no default StorageClass"
        fix = (
            'mark a StorageClass default (annotation storageclass.kubernetes.io/is-default-class: "true"), '
            f"set storageClassName {where}{use}"
        )
    count = claim.pods if claim.kind == "ephemeral" else 1
    return _Need(claim, want, max(count, 1), why, fix, reason, existing, _wfc(sc))


def _assign(needs: list[_Need], cl: _Cluster) -> dict[int, Verdict]:
    """binder.go findMatchingVolumes: the claims, smallest request first, each take the PV `pick`
    chooses among the matching ones not taken yet."""
    out: dict[int, Verdict] = {}
    if cl.pvs is None:
        for i, n in enumerate(needs):
            out[i] = Verdict(
                Status.WARN,
                f"Cannot verify {n.claim.what}: {n.why}, and PersistentVolumes cannot be read ({cl.pv_reason})",
            )
        return out
    taken: set[str] = set()
    order = sorted(range(len(needs)), key=lambda i: needs[i].want.request)
    for i in order:
        n = needs[i]
        for _ in range(n.count):
            fits = [
                pv
                for pv in cl.pvs
                if _pv_name(pv) not in taken and not mismatch(pv, n.want, cl.nodes, delayed=n.delayed)
            ]
            best = pick(fits, n.want, delayed=n.delayed)
            if best is None:
                break
            taken.add(_pv_name(best))
            n.pvs.append(_pv_name(best))
        out[i] = _need_verdict(n, cl)
    return out


def _need_verdict(n: _Need, cl: _Cluster) -> Verdict:
    subject = n.claim.what
    if len(n.pvs) == n.count:
        which = ", ".join(f'"{p}"' for p in n.pvs)
        state = "Pending; " if n.existing else ""
        pvs = f"PersistentVolume {which} matches" if len(n.pvs) == 1 else f"PersistentVolumes {which} match"
        return Verdict(Status.PASS, f"{subject}: {state}{n.why}; {pvs} it")
    got = f" ({len(n.pvs)} of the {n.count} needed)" if n.pvs else ""
    misses = [
        (pv, why)
        for pv in sorted(cl.pvs or [], key=_pv_name)
        if _pv_name(pv) not in n.pvs
        and (pv_class(pv) == n.want.cls or _bound_to(pv, n.want))
        and (why := mismatch(pv, n.want, cl.nodes, delayed=n.delayed))
    ]
    if misses:
        shown = "; ".join(f'"{_pv_name(pv)}": {why}' for pv, why in misses[:_SHOWN_PVS])
        more = f"; {len(misses) - _SHOWN_PVS} more" if len(misses) > _SHOWN_PVS else ""
        near = f'{plural(len(misses), "PersistentVolume")} of class "{n.want.cls}" do not fit ({shown}{more})'
        if len(misses) == 1:
            near = near.replace(" do not fit", " does not fit", 1)
    else:
        near = f'no PersistentVolume has class "{n.want.cls}"'
    only_nodes = bool(misses) and all(why == NODE_AFFINITY for _, why in misses)
    state = "is Pending and can never bind" if n.existing else "can never bind"
    text = (
        f"{subject} {state}{got}: {n.why}, so only a PersistentVolume can bind it, and none matches "
        f"({n.want.shape}): {near}; the pods would stay Pending ({n.reason}). "
        f"Fix: {n.fix}, or create a PersistentVolume of {n.want.pv_fix}"
    )
    if only_nodes:
        text += " (or a node matching a PersistentVolume's node affinity may still join)"
    return Verdict(Status.WARN if n.existing or only_nodes else Status.FAIL, text)


def _existing(claim: Claim, pvc: dict[str, Any], cl: _Cluster, ns: str) -> Verdict | _Need:
    """An existing claim, as the scheduler and the PV controller (pv_controller.go syncUnboundClaim) see it."""
    meta, spec = _dict(pvc.get("metadata")), _dict(pvc.get("spec"))
    subject = claim.what
    phase = _str(_dict(pvc.get("status")).get("phase")) or "Pending"
    volume = _str(spec.get("volumeName"))
    if meta.get("deletionTimestamp"):
        return Verdict(
            Status.FAIL,
            f'{subject} is being deleted: the scheduler refuses it (persistentvolumeclaim "{claim.name}" is being '
            f"deleted), then it is gone. Fix: wait until it is deleted and create it again, or use another claim",
        )
    if phase == "Bound":
        return Verdict(Status.PASS, f'{subject}: Bound to PersistentVolume "{volume}"')
    if phase == "Lost":
        return Verdict(
            Status.WARN,
            f'{subject} is Lost: its PersistentVolume "{volume}" is gone and the pods would stay Pending '
            f'(bound to non-existent persistentvolume). Fix: recreate PersistentVolume "{volume}", or use another claim',
        )
    if volume:
        if cl.pvs is None:
            return Verdict(
                Status.WARN, f'Cannot verify {subject}: it waits for PersistentVolume "{volume}" ({cl.pv_reason})'
            )
        pv = next((p for p in cl.pvs if _pv_name(p) == volume), None)
        if pv is None:
            return Verdict(
                Status.WARN,
                f'{subject} is Pending: it asks for PersistentVolume "{volume}", which does not exist; the pods would stay '
                f'Pending ({IMMEDIATE_REASON}). Fix: create PersistentVolume "{volume}", or clear spec.volumeName',
            )
        ref = _dict(_dict(pv.get("spec")).get("claimRef"))
        if ref and (ref.get("name"), ref.get("namespace")) != (claim.name, ns):
            return Verdict(
                Status.WARN,
                f'{subject} is Pending: PersistentVolume "{volume}" it asks for is bound to claim '
                f"{ref.get('namespace')}/{ref.get('name')}; the pods would stay Pending ({IMMEDIATE_REASON}). "
                "Fix: use another claim",
            )
        return Verdict(Status.PASS, f'{subject}: Pending, binding to PersistentVolume "{volume}"')
    return _plan(claim, ns, claim.name, meta, spec, cl, existing=True)


def _cannot_read(claim: Claim, ns: str, exc: BaseException) -> Verdict:
    if isinstance(exc, ApiError) and exc.forbidden:
        why = "not permitted to get persistentvolumeclaims"
    elif isinstance(exc, ApiError) and exc.status == 0:
        why = exc.message or "timed out"
    else:
        why = exc.message if isinstance(exc, ApiError) else (str(exc) or type(exc).__name__)
    return Verdict(Status.WARN, f'Cannot verify PersistentVolumeClaim "{claim.name}" in namespace "{ns}" ({why})')


def _missing(claim: Claim, ns: str) -> Verdict:
    return Verdict(
        Status.FAIL,
        f'PersistentVolumeClaim "{claim.name}" not found in namespace "{ns}" (volume "{claim.volume}" of {claim.users}): '
        f'the pods would stay Pending (persistentvolumeclaim "{claim.name}" not found). '
        f'Fix: create PersistentVolumeClaim "{claim.name}" in namespace "{ns}", or correct the claimName',
    )


class VolumeClaims(Check):
    name = "Volume Claims"
    needs_cluster = True
    #: a job with no named claim (none, or ephemeral ones only) is answered in the review's task
    kept_reads = True
    local_capacity = True  # a MultiKueue job's claims are bound in the worker cluster
    permissions = (Permission("get", "persistentvolumeclaims"),)
    #: the caches the binding rules read; without one the verdicts that need it are "cannot verify"
    optional_permissions = (*cached("storageclasses", STORAGE_API), *cached("persistentvolumes"))
    apis = ("v1",)
    summary = (
        "Every PersistentVolumeClaim the pods use exists (claimName) or will be created (JobSet volumeClaimPolicies, "
        "ephemeral volumes), and can bind: a StorageClass (or the default one) that provisions, or a matching "
        "PersistentVolume."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        """Steps: the claims the pods use (`collect`), the cached StorageClasses, PersistentVolumes and Nodes
        (`_cluster`), the named claims read (`_read`), each claim's plan (`_plan_for`), the PersistentVolumes
        the waiting ones take (`_assign`), then one FAIL, one WARN, both, or the PASS (`_verdict`)."""
        assert ctx.view is not None
        ns = ctx.workload.namespace
        claims = collect(ctx.workload)
        if not claims:
            return CheckResult(self.name, Status.SKIP, "No PersistentVolumeClaims used by the pods")
        named = [c for c in claims if c.kind != "ephemeral"]
        if named:  # before the caches are read: a run that goes on as a task does none of it twice
            needs_a_task(ctx, "the named claims")
        cl = _cluster(ctx.view)
        got = dict(zip((c.name for c in named), await asyncio.gather(*(_read(ctx, c) for c in named))))
        plans = [_plan_for(c, got, cl, ns) for c in claims]
        needs = [p for p in plans if isinstance(p, _Need)]
        assigned = _assign(needs, cl)
        verdicts = [assigned[needs.index(p)] if isinstance(p, _Need) else p for p in plans]
        return self._verdict(ctx, verdicts, cl)

    def _verdict(self, ctx: CheckContext, verdicts: list[Verdict], cl: _Cluster) -> list[CheckResult]:
        """One FAIL (every failure), one WARN (every warning, next to the failures, never instead of them),
        both, or the PASS; the age of the caches read noted."""
        fails = [v.text for v in verdicts if v.status is Status.FAIL]
        warns = [v.text for v in verdicts if v.status is Status.WARN]
        passes = [v.text for v in verdicts if v.status is Status.PASS]
        out = fail_and_warn(self.name, fails, warns, fail_details=fails + passes)
        if not out:
            out.append(
                CheckResult(
                    self.name,
                    Status.PASS,
                    "Every claim can bind: " + "; ".join(passes),
                    details=passes,
                )
            )
        cached_read = [
            r for r, objs in (("storageclasses", cl.classes), ("persistentvolumes", cl.pvs)) if objs is not None
        ]
        return [with_stale(r, ctx, *cached_read) for r in out]


def _cluster(view: ClusterView) -> _Cluster:
    """The cached StorageClasses, PersistentVolumes and Nodes; None for a cache that cannot be read."""
    return _Cluster(
        classes=view.list_cached("storageclasses") if view.cache_age("storageclasses") is not None else None,
        pvs=view.list_cached("persistentvolumes") if view.cache_age("persistentvolumes") is not None else None,
        nodes=as_nodes(view.list_cached("nodes")) if view.cache_age("nodes") is not None else None,
    )


async def _read(ctx: CheckContext, c: Claim) -> dict[str, Any] | None | BaseException:
    """A named claim, None when it does not exist, or the ApiError of its read (cut at the deadline)."""
    assert ctx.view is not None
    try:
        return await before_deadline(
            ctx, ctx.view.get_object("v1", "persistentvolumeclaims", ctx.workload.namespace, c.name, ctx.deadline)
        )
    except ApiError as exc:
        return exc


def _plan_for(
    c: Claim, got: dict[str, dict[str, Any] | None | BaseException], cl: _Cluster, ns: str
) -> Verdict | _Need:
    """One claim: an ephemeral volume's or a JobSet template's that does not exist yet planned from its template,
    an existing one as `_existing` sees it, a named one missing or that cannot be read."""
    if c.kind == "ephemeral":
        return _plan(c, ns, "", _dict(c.template.get("metadata")), _dict(c.template.get("spec")), cl, existing=False)
    pvc = got[c.name]
    if isinstance(pvc, BaseException):
        return _cannot_read(c, ns, pvc)
    if pvc is not None:
        v = _existing(c, pvc, cl, ns)
        if c.kind == "template" and isinstance(v, Verdict) and v.status is Status.PASS:
            v.text += " (exists already: JobSet keeps it)"
        return v
    if c.kind == "template":
        meta, spec = _dict(c.template.get("metadata")), _dict(c.template.get("spec"))
        return _plan(c, ns, c.name, meta, spec, cl, existing=False)
    return _missing(c, ns)


CHECKS = [VolumeClaims()]
