"""Resource Quotas: would the namespace's ResourceQuotas let every pod of the job in?

A ResourceQuota is enforced when each Pod is created, one by one, with no queueing: a
gang that does not fit is created in part and then waits forever. So the projection is
`status.used` + every pod of the job (the whole gang, initializers included) + the
objects the job's controller creates (`count/*`), compared per quota:

* requests.* and limits.* separately (bare `cpu`/`memory` mean requests); a pod without
  a limit for a resource is not counted against limits.* of it;
* but a quota that covers cpu or memory (requests or limits) makes the apiserver reject
  every pod whose containers do not all set that value (`must specify limits.cpu`) —
  a FAIL of its own, after LimitRange defaults are applied as LimitRanger would;
* quota scopes (Terminating/NotTerminating, BestEffort/NotBestEffort, PriorityClass,
  CrossNamespacePodAffinity) decide which pods a quota sees; scoped quotas count pods only.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from webhook.checks.base import AIPERFJOB, Check, CheckContext
from webhook.checks.basics import cached, plural, with_stale
from webhook.quantity import format_quantity, parse_quantity
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup, Workload
from webhook.workloads.podspec import all_containers, pod_limits, pod_requests

ZERO = Decimal(0)

#: the resources whose presence in a quota forces every container to set them
#: (k8s.io/kubernetes pkg/quota/v1/evaluator/core/pods.go, validationSet)
_MUST_SPECIFY = {
    "cpu": ("requests", "cpu"),
    "memory": ("requests", "memory"),
    "requests.cpu": ("requests", "cpu"),
    "requests.memory": ("requests", "memory"),
    "limits.cpu": ("limits", "cpu"),
    "limits.memory": ("limits", "memory"),
}
_BARE_REQUESTS = {"cpu", "memory", "ephemeral-storage"}


# --- which pods a quota sees ------------------------------------------------------------


def _best_effort(pod_spec: dict[str, Any]) -> bool:
    """QoS BestEffort: no container requests or limits cpu or memory."""
    for _, c in all_containers(pod_spec):
        res = c.get("resources") or {}
        for which in ("requests", "limits"):
            if any(r in (res.get(which) or {}) for r in ("cpu", "memory")):
                return False
    return True


def _cross_namespace_affinity(pod_spec: dict[str, Any]) -> bool:
    aff = pod_spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        a = aff.get(kind) or {}
        terms = list(a.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [t.get("podAffinityTerm") or {} for t in a.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


def scope_matches(scope: str, operator: str, values: list[str], pod_spec: dict[str, Any]) -> bool:
    """Does one quota scope (or scopeSelector expression) match this pod?"""
    if scope == "Terminating":
        return pod_spec.get("activeDeadlineSeconds") is not None
    if scope == "NotTerminating":
        return pod_spec.get("activeDeadlineSeconds") is None
    if scope == "BestEffort":
        return _best_effort(pod_spec)
    if scope == "NotBestEffort":
        return not _best_effort(pod_spec)
    if scope == "PriorityClass":
        # the apiserver matches the label set {PriorityClass: <name or "">}
        pcn = pod_spec.get("priorityClassName") or ""
        if operator == "Exists":
            return pcn != ""
        if operator == "In":
            return pcn in values
        if operator == "NotIn":
            return pcn not in values
        return False  # DoesNotExist: the label is always present
    if scope == "CrossNamespacePodAffinity":
        has = _cross_namespace_affinity(pod_spec)
        return not has if operator == "DoesNotExist" else has
    return False  # VolumeAttributesClass and unknown scopes never match a pod


def quota_scopes(quota: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    spec = quota.get("spec") or {}
    out = [(s, "Exists", []) for s in spec.get("scopes") or []]
    for e in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        out.append((e.get("scopeName", ""), e.get("operator", "Exists"), list(e.get("values") or [])))
    return out


def covers(quota: dict[str, Any], pod_spec: dict[str, Any]) -> bool:
    return all(scope_matches(s, op, vals, pod_spec) for s, op, vals in quota_scopes(quota))


# --- what the job adds ------------------------------------------------------------------


def apply_limit_ranges(pod_spec: dict[str, Any], limit_ranges: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod spec as LimitRanger leaves it: Container defaults fill missing limits/requests."""
    defaults: dict[str, Any] = {}
    default_requests: dict[str, Any] = {}
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type") != "Container":
                continue
            for k, v in (item.get("default") or {}).items():
                defaults.setdefault(k, v)
            for k, v in (item.get("defaultRequest") or {}).items():
                default_requests.setdefault(k, v)
    if not defaults and not default_requests:
        return pod_spec
    spec = copy.deepcopy(pod_spec)
    for _, c in all_containers(spec):
        res = c.setdefault("resources", {})
        limits = res.setdefault("limits", {})
        requests = res.setdefault("requests", {})
        for k, v in defaults.items():
            limits.setdefault(k, v)
        for k, v in default_requests.items():
            requests.setdefault(k, v)
        for k, v in limits.items():  # the apiserver defaults requests to limits
            requests.setdefault(k, v)
    return spec


def _missing(pod_spec: dict[str, Any], which: str, resource: str) -> list[str]:
    """Containers that do not set resources.<which>.<resource> (requests default to limits)."""
    out = []
    for _, c in all_containers(pod_spec):
        res = c.get("resources") or {}
        have = set(res.get(which) or {})
        if which == "requests":
            have |= set(res.get("limits") or {})
        if resource not in have:
            out.append(str(c.get("name", "?")))
    return out


def job_objects(wl: Workload) -> dict[str, Decimal]:
    """count/* of the non-pod objects the job's controllers create in the namespace."""
    out: dict[str, Decimal] = {}
    js = wl.derived.get("jobSet")
    if js:
        spec = js.get("spec") or {}
        out["count/jobsets.jobset.x-k8s.io"] = Decimal(1)
        jobs = sum(int(r.get("replicas", 1) or 0) for r in spec.get("replicatedJobs") or [])
        out["count/jobs.batch"] = Decimal(jobs)
        if (spec.get("network") or {}).get("enableDNSHostnames", True) is not False:
            out["count/services"] = Decimal(1)  # JobSet's headless Service
    if wl.derived.get("configMap"):
        out["count/configmaps"] = Decimal(1)
    if wl.managed_secrets:
        out["count/secrets"] = Decimal(len(wl.managed_secrets))
    for bare in ("services", "configmaps", "secrets"):
        if f"count/{bare}" in out:
            out[bare] = out[f"count/{bare}"]
    return out


def group_usage(pod_spec: dict[str, Any], pods: int) -> dict[str, Decimal]:
    """What `pods` copies of this pod add to a quota, by quota resource name."""
    out: dict[str, Decimal] = {"pods": Decimal(pods), "count/pods": Decimal(pods)}
    for r, v in pod_requests(pod_spec).items():
        out[f"requests.{r}"] = v * pods
        if r in _BARE_REQUESTS:
            out[r] = v * pods
    for r, v in pod_limits(pod_spec).items():
        out[f"limits.{r}"] = v * pods
    return out


def _fmt(resource: str, value: Decimal) -> str:
    base = resource.split(".", 1)[1] if resource.startswith(("requests.", "limits.")) else resource
    return format_quantity(value, base)


def _parse_list(raw: dict[str, Any] | None, problems: list[str], where: str) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for k, v in (raw or {}).items():
        try:
            out[str(k)] = parse_quantity(v)
        except ValueError as exc:
            problems.append(f"{where} {k} ignored: {exc}")
    return out


def _fix_for_missing(wl: Workload, which: str, resource: str) -> str:
    hint = ""
    if wl.kind == AIPERFJOB:
        hint = " (AIPerfJob: spec.resourceMode: guaranteed sets limits)" if which == "limits" else " (AIPerfJob: spec.resourceMode burstable or guaranteed)"
    return (
        f"Fix: set resources.{which}.{resource} on every container{hint}, or add a LimitRange with a "
        f'default{"Request" if which == "requests" else ""} for {resource} in namespace "{wl.namespace}"'
    )


def evaluate_quota(
    quota: dict[str, Any], wl: Workload, specs: list[tuple[PodGroup, dict[str, Any]]]
) -> tuple[list[str], list[str]]:
    """(violations, details) of one quota against the job."""
    name = (quota.get("metadata") or {}).get("name", "?")
    ns = wl.namespace
    details: list[str] = []
    hard = _parse_list((quota.get("spec") or {}).get("hard"), details, f'ResourceQuota "{name}": hard')
    used = _parse_list((quota.get("status") or {}).get("used"), details, f'ResourceQuota "{name}": used')
    covered = [(g, s) for g, s in specs if covers(quota, s)]
    scoped = bool(quota_scopes(quota))
    if not covered and scoped:
        details.append(f'ResourceQuota "{name}" does not apply to the job\'s pods (scopes)')
        return [], details

    violations: list[str] = []
    # 1. quotas on cpu/memory reject pods whose containers do not set them
    for res_name in sorted(set(hard) & set(_MUST_SPECIFY)):
        which, resource = _MUST_SPECIFY[res_name]
        lacking = [(g, _missing(s, which, resource)) for g, s in covered]
        lacking = [(g, cs) for g, cs in lacking if cs]
        if lacking:
            where = "; ".join(f"container{'s' if len(cs) > 1 else ''} {', '.join(cs)} of the {g.name} pods" for g, cs in lacking)
            violations.append(
                f'ResourceQuota "{name}" covers {res_name}, so every container must set resources.{which}.{resource}, '
                f"but it is not set on {where}: the apiserver would reject those pods (must specify {res_name}). "
                f"{_fix_for_missing(wl, which, resource)}."
            )

    # 2. projected use
    job: dict[str, Decimal] = {}
    unlimited: dict[str, int] = {}
    for g, s in covered:
        for k, v in group_usage(s, g.pods).items():
            job[k] = job.get(k, ZERO) + v
        lim = pod_limits(s)
        for r in pod_requests(s):
            if r not in lim:
                unlimited[r] = unlimited.get(r, 0) + g.pods
    if not scoped:
        for k, v in job_objects(wl).items():
            job[k] = job.get(k, ZERO) + v
    for res_name in sorted(hard):
        add = job.get(res_name, ZERO)
        if add == 0:
            continue
        if res_name.startswith("limits."):
            r = res_name.split(".", 1)[1]
            if unlimited.get(r):
                details.append(
                    f'ResourceQuota "{name}": {plural(unlimited[r], "pod")} set no limit for {r} and are not counted against {res_name}'
                )
        have = used.get(res_name, ZERO)
        total = have + add
        cap = hard[res_name]
        line = f"{res_name} {_fmt(res_name, total)} of {_fmt(res_name, cap)} (used {_fmt(res_name, have)} + job {_fmt(res_name, add)})"
        if total > cap:
            free_note = "" if add > cap or have == 0 else ", or wait for other workloads in the namespace to free quota"
            violations.append(
                f'ResourceQuota "{name}": {res_name} would be {_fmt(res_name, total)} (used {_fmt(res_name, have)} + '
                f"job {_fmt(res_name, add)}) but hard is {_fmt(res_name, cap)}. Fix: raise hard {res_name} to at least "
                f"{_fmt(res_name, total)} (kubectl edit resourcequota {name} -n {ns}), or reduce the job's pods or "
                f"requests{free_note}."
            )
        else:
            details.append(f'ResourceQuota "{name}": {line}')
    return violations, details


class ResourceQuotas(Check):
    name = "Resource Quotas"
    synchronous = True  # reads only the Workload and cached state
    needs_cluster = True
    local_capacity = True
    permissions = (*cached("resourcequotas"), *cached("limitranges"))
    apis = ("v1",)
    summary = (
        "status.used plus every pod of the job (and the objects it creates) fits each ResourceQuota: "
        "requests and limits separately, count/*, extended resources, scopes; pods lacking required limits are caught."
    )

    async def run(self, ctx: CheckContext) -> CheckResult:
        assert ctx.view is not None
        wl = ctx.workload
        quotas = ctx.view.list_cached("resourcequotas", wl.namespace)
        if not quotas:
            return with_stale(
                CheckResult(self.name, Status.PASS, f'No ResourceQuota in namespace "{wl.namespace}"'), ctx, "resourcequotas"
            )
        limit_ranges = ctx.view.list_cached("limitranges", wl.namespace)
        try:
            specs = [(g, apply_limit_ranges(g.pod_spec, limit_ranges)) for g in wl.pod_groups]
            violations: list[str] = []
            details: list[str] = []
            for q in sorted(quotas, key=lambda q: (q.get("metadata") or {}).get("name", "")):
                v, d = evaluate_quota(q, wl, specs)
                violations += v
                details += d
        except ValueError as exc:
            return CheckResult(self.name, Status.WARN, f"Could not compute the job's resources: {exc}")
        names = ", ".join(sorted((q.get("metadata") or {}).get("name", "?") for q in quotas))
        if violations:
            return with_stale(
                CheckResult(self.name, Status.FAIL, " ".join(violations), details=violations + details),
                ctx, "resourcequotas", "limitranges",
            )
        return with_stale(
            CheckResult(
                self.name,
                Status.PASS,
                f'The job fits {plural(len(quotas), "ResourceQuota")} in namespace "{wl.namespace}": {names}',
                details=details,
            ),
            ctx, "resourcequotas", "limitranges",
        )


CHECKS = [ResourceQuotas()]
