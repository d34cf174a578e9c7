"""Accelerator Limits: extended resources (nvidia.com/gpu, …) need a limit equal to the request.

Kubernetes cannot overcommit extended resources or hugepages, so pod validation rejects a
container that requests one without a limit ("Limit must be set for non overcommitable
resources"), with a request different from its limit, or with a fractional amount of an
extended resource ("must be an integer"). For a TrainJob or an AIPerfJob that rejection
happens when the JobSet controller creates the Job's pods — after admission, visible only
in controller logs (kubeflow/trainer#2363). We refuse it at apply time.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.objects import Container
from webhook.quantity import format_quantity, is_extended_resource, parse_quantity
from webhook.results import CheckResult, Status
from webhook.workloads.base import KindFacts

NAME = "Accelerator Limits"


def not_overcommittable(resource: str) -> bool:
    """Extended resources (a domain other than kubernetes.io) and hugepages-*."""
    return is_extended_resource(resource) or resource.startswith("hugepages-")


#: resources Kubernetes overcommits and that are not extended: a container with only these has no finding
_OVERCOMMITTABLE = frozenset({"cpu", "memory", "ephemeral-storage"})


def _plain(amounts: Any) -> bool:
    """No resource in `amounts` (requests or limits) that this check judges."""
    return not amounts or (isinstance(amounts, dict) and amounts.keys() <= _OVERCOMMITTABLE)


def _where(group: str, container: str, is_init: bool) -> str:
    noun = "Init container" if is_init else "Container"
    return f'{noun} "{container}" in pod group "{group}"'


def _fix_location(facts: KindFacts, container: str) -> str:
    return facts.resources_of(container)


def _parse(raw: Any) -> Decimal | None:
    try:
        return parse_quantity(raw)
    except ValueError:
        return None


def container_findings(facts: KindFacts, group: str, container: Container, is_init: bool) -> list[tuple[str, str]]:
    """(what, fix) for every non-overcommittable resource of one container that Kubernetes would reject."""
    res = container.get("resources") or {}
    requests = res.get("requests") or {}
    limits = res.get("limits") or {}
    cname = str(container.get("name") or "?")
    out: list[tuple[str, str]] = []
    for resource in sorted(set(requests) | set(limits)):
        resource = str(resource)
        if not not_overcommittable(resource):
            continue
        where = _where(group, cname, is_init)  # here, not per container: most have no such resource
        req_raw, lim_raw = requests.get(resource), limits.get(resource)
        req = _parse(req_raw) if req_raw is not None else None
        lim = _parse(lim_raw) if lim_raw is not None else None
        if (req_raw is not None and req is None) or (lim_raw is not None and lim is None):
            bad = req_raw if req_raw is not None and req is None else lim_raw
            out.append(
                (
                    f'{where} sets {resource} to "{bad}", which is not a Kubernetes quantity',
                    "use a whole number such as 1",
                )
            )
            continue
        amount = lim if req is None else req  # the apiserver defaults a missing request to the limit
        if amount is not None and is_extended_resource(resource) and amount != amount.to_integral_value():
            out.append(
                (
                    f"{where} asks for {resource}: {req_raw if req is not None else lim_raw}, but extended resources "
                    "must be whole numbers, so Kubernetes rejects its pods at Job creation",
                    f"request a whole number of {resource} (e.g. {max(int(amount.to_integral_value(rounding='ROUND_CEILING')), 1)})",
                )
            )
            continue
        if req is not None and lim is None:
            out.append(
                (
                    f"{where} requests {resource}: {format_quantity(req, resource)} with no limit; Kubernetes rejects "
                    'its pods at Job creation ("Limit must be set for non overcommitable resources")',
                    f"set limits {resource}: {format_quantity(req, resource)} in {_fix_location(facts, cname)}",
                )
            )
        elif req is not None and lim is not None and req != lim:
            out.append(
                (
                    f"{where} requests {resource}: {format_quantity(req, resource)} but limits it to "
                    f"{format_quantity(lim, resource)}; Kubernetes requires the request to equal the limit and rejects "
                    "its pods at Job creation",
                    f"set request and limit of {resource} to the same value in {_fix_location(facts, cname)}",
                )
            )
    return out


def _combine(status: Status, findings: list[tuple[str, str]]) -> CheckResult:
    fixes: list[str] = []
    for _, f in findings:
        if f not in fixes:
            fixes.append(f)
    message = "; ".join(w for w, _ in findings) + ". Fix: " + "; ".join(fixes)
    return CheckResult(NAME, status, message, details=[f"{w}. Fix: {f}" for w, f in findings])


class AcceleratorLimits(Check):
    name = NAME
    synchronous = True  # reads only the Workload and cached state
    summary = (
        "Extended resources (nvidia.com/gpu, …) and hugepages are requested with an equal limit, in whole numbers."
    )

    async def run(self, ctx: CheckContext) -> CheckResult:
        wl = ctx.workload
        findings: list[tuple[str, str]] = []
        seen: dict[str, Decimal] = {}
        for group in wl.pod_groups:
            inits = group.pod_spec.get("initContainers") or []
            for is_init, containers in ((True, inits), (False, group.pod_spec.get("containers") or [])):
                for c in containers:
                    res = c.get("resources") or {}
                    if _plain(res.get("requests")) and _plain(res.get("limits")):
                        continue  # most containers: only cpu/memory, nothing this check judges
                    findings.extend(container_findings(wl.facts, group.name, c, is_init))
                    for resource, raw in ((c.get("resources") or {}).get("limits") or {}).items():
                        if is_extended_resource(str(resource)):
                            q = _parse(raw)
                            if q is not None:
                                seen[str(resource)] = seen.get(str(resource), Decimal(0)) + q * group.pods
        if findings:
            return _combine(Status.FAIL, findings)
        if not seen:
            return CheckResult(
                self.name, Status.PASS, "No container requests an extended resource such as nvidia.com/gpu"
            )
        totals = ", ".join(f"{r}: {format_quantity(q, r)}" for r, q in sorted(seen.items()))
        return CheckResult(
            self.name, Status.PASS, f"Extended resources have limits equal to requests ({totals} in total)"
        )


CHECKS = [AcceleratorLimits()]
