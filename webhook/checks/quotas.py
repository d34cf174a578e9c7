"""Resource Quotas: would the namespace's ResourceQuotas let every pod of the job in?

A ResourceQuota is enforced when each Pod is created, one by one, with no queueing: a
gang that does not fit is created in part and then waits forever. So the projection is
`status.used` + the job's pods + the objects the job's controllers create, per quota,
computed as the apiserver computes it (each step names the upstream file it follows; steps 1-5
are in webhook/models/quota.py, the verdict here):

1. the pod as ResourceQuota admission sees it (`admitted_pod`): requests default from
   limits at decode (k8s.io/kubernetes pkg/apis/core/v1/defaults.go, SetDefaults_Pod),
   *then* LimitRanger fills what is still missing from the `Container` defaults
   (plugin/pkg/admission/limitranger, mergePodResourceRequirements; the LimitRange items
   themselves defaulted by SetDefaults_LimitRangeItem), then Priority admission gives a pod
   without priorityClassName the cluster's globalDefault PriorityClass
   (plugin/pkg/admission/priority);
2. which quotas see the pod (`covers`): at least one hard resource the pod evaluator
   tracks, and every scope (pkg/quota/v1/evaluator/core/pods.go, podMatchesScopeFunc;
   PriorityClass is a label selector over {PriorityClass: name}, so DoesNotExist and
   NotIn cover pods without a priority class);
3. must-specify (`constraint_error`): a quota tracking cpu or memory rejects a pod whose
   containers do not all set it (pods.go Constraints);
4. what a pod is charged (`pod_usage`): pods.go PodUsageFunc over component-helpers
   PodRequests/PodLimits. Extended resources are charged only as `requests.<name>`
   (a quota on `limits.nvidia.com/gpu` tracks nothing); hugepages as `hugepages-<size>`
   and `requests.hugepages-<size>`; a finished pod only as `count/pods`;
5. stages: JobSet `dependsOn` (PodGroup.depends_on) starts a group only once its
   dependencies are Ready or Complete, and pods that completed stop counting for compute
   and `pods`. So compute and `pods` are the peak over the groups that can run at the same
   time, `count/pods` (kept for finished pods) the sum.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import cached, plural, with_stale
from webhook.kube import Permission
from webhook.models.quota import (
    MAX_STAGE_GROUPS,
    ONE,
    POD_RESOURCES,
    VALIDATION_SET,
    ZERO,
    admitted_pod,
    best_effort,
    concurrent_sets,
    constraint_error,
    covers,
    finishes_before,
    is_extended,
    is_native,
    job_objects,
    limit_range_defaults,
    missing_by_resource,
    pod_level_resources,
    pod_usage,
    quota_hard,
    quota_scopes,
    scope_matches,
    stage_peak,
    tracked,
)
from webhook.quantity import format_quantity, parse_quantity
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup, Workload

PRIORITY_API = "scheduling.k8s.io"

# --- the verdict ----------------------------------------------------------------------------


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
    hint = dict(wl.facts.resources_hint).get(which, "")
    return (
        f"Fix: set resources.{which}.{resource} on every container{hint}, or add a LimitRange with a "
        f'default{"Request" if which == "requests" else ""} for {resource} in namespace "{wl.namespace}"'
    )


def _which(res_name: str) -> tuple[str, str]:
    if res_name.startswith(("requests.", "limits.")):
        which, resource = res_name.split(".", 1)
        return which, resource
    return "requests", res_name


@dataclass
class Projection:
    """One quota against the job: what admission would see and charge."""

    name: str
    hard: dict[str, Decimal]
    used: dict[str, Decimal]
    scoped: bool
    #: the groups whose pods the quota sees, with their admitted pod specs
    covered: list[tuple[PodGroup, dict[str, Any]]]
    #: quota resource (cpu/memory) → [(group, containers that do not set it)]
    lacking: dict[str, list[tuple[PodGroup, list[str]]]]
    #: what the job adds at its peak (count/pods and objects: the total)
    job: dict[str, Decimal]
    #: what the job adds if every group ran at once
    summed: dict[str, Decimal]
    problems: list[str]

    def exceeded(self) -> list[str]:
        """Hard resources the job would push over (only those it adds to: admission checks no others)."""
        return [
            r
            for r in sorted(self.hard)
            if self.job.get(r, ZERO) > 0 and self.used.get(r, ZERO) + self.job[r] > self.hard[r]
        ]


def project(quota: dict[str, Any], wl: Workload, specs: list[tuple[PodGroup, dict[str, Any]]]) -> Projection:
    """The numbers behind one quota's verdict; `specs` are the admitted pod specs (admitted_pod)."""
    name = str((quota.get("metadata") or {}).get("name", "?"))
    problems: list[str] = []
    hard = _parse_list(quota_hard(quota), problems, f'ResourceQuota "{name}": hard')
    used = _parse_list((quota.get("status") or {}).get("used"), problems, f'ResourceQuota "{name}": used')
    scoped = bool(quota_scopes(quota))
    covered = [(g, s) for g, s in specs if g.pods > 0 and covers(quota, s)]
    lacking: dict[str, list[tuple[PodGroup, list[str]]]] = {}
    for g, s in covered:
        for res_name, containers in missing_by_resource(quota, s).items():
            lacking.setdefault(res_name, []).append((g, containers))
    totals = {g.name: {k: v * g.pods for k, v in pod_usage(s).items()} for g, s in covered}
    job = stage_peak([g for g, _ in covered], totals)
    summed: dict[str, Decimal] = {}
    for t in totals.values():
        for k, v in t.items():
            summed[k] = summed.get(k, ZERO) + v
    if not scoped:  # object-count evaluators match no scope
        for k, v in job_objects(wl).items():
            job[k] = job.get(k, ZERO) + v
            summed[k] = summed.get(k, ZERO) + v
    return Projection(name, hard, used, scoped, covered, lacking, job, summed, problems)


def evaluate_quota(
    quota: dict[str, Any], wl: Workload, specs: list[tuple[PodGroup, dict[str, Any]]]
) -> tuple[list[str], list[str]]:
    """(violations, details) of one quota against the job; `specs` are the admitted pod specs."""
    p = project(quota, wl, specs)
    name, ns = p.name, wl.namespace
    details = list(p.problems)
    for r in sorted(p.hard):
        if r.startswith("limits.") and is_extended(r.split(".", 1)[1]):
            details.append(
                f'ResourceQuota "{name}": {r} is not charged for pods (extended resources count only as requests.{r.split(".", 1)[1]})'
            )
    if not p.covered and p.scoped:
        details.append(f'ResourceQuota "{name}" does not apply to the job\'s pods (scopes)')
        return [], details

    violations: list[str] = []
    for res_name, where_list in p.lacking.items():
        which, resource = _which(res_name)
        where = "; ".join(
            f"container{'s' if len(cs) > 1 else ''} {', '.join(cs)} of the {g.name} pods" for g, cs in where_list
        )
        violations.append(
            f'ResourceQuota "{name}" covers {res_name}, so every container must set resources.{which}.{resource}, '
            f"but it is not set on {where}: the apiserver would reject those pods (must specify {res_name}). "
            f"{_fix_for_missing(wl, which, resource)}."
        )
    exceeded = set(p.exceeded())
    for res_name in sorted(p.hard):
        add = p.job.get(res_name, ZERO)
        if add == 0:
            continue
        staged = " at its peak stage" if add < p.summed.get(res_name, ZERO) else ""
        have = p.used.get(res_name, ZERO)
        total = have + add
        cap = p.hard[res_name]
        job_text = f"job {_fmt(res_name, add)}{staged}"
        if res_name in exceeded:
            free_note = "" if add > cap or have == 0 else ", or wait for other workloads in the namespace to free quota"
            violations.append(
                f'ResourceQuota "{name}": {res_name} would be {_fmt(res_name, total)} (used {_fmt(res_name, have)} + '
                f"{job_text}) but hard is {_fmt(res_name, cap)}. Fix: raise hard {res_name} to at least "
                f"{_fmt(res_name, total)} (kubectl edit resourcequota {name} -n {ns}), or reduce the job's pods or "
                f"requests{free_note}."
            )
        else:
            details.append(
                f'ResourceQuota "{name}": {res_name} {_fmt(res_name, total)} of {_fmt(res_name, cap)} '
                f"(used {_fmt(res_name, have)} + {job_text})"
            )
    return violations, details


def default_priority_class(priority_classes: list[dict[str, Any]]) -> str:
    """The globalDefault PriorityClass's name ("" if none); the lowest value wins a tie
    (plugin/pkg/admission/priority getDefaultPriorityClass)."""
    best: tuple[int, str] | None = None
    for pc in priority_classes:
        if pc.get("globalDefault") is True:
            value = pc.get("value", 0)
            key = (value if isinstance(value, int) else 0, str((pc.get("metadata") or {}).get("name", "")))
            if best is None or key[0] < best[0]:
                best = key
    return best[1] if best else ""


def admission_inputs(view: Any, namespace: str) -> tuple[list[dict[str, Any]], bool, str]:
    """What the apiserver's admission chain reads besides the pod, from the watch caches: the
    namespace's LimitRanges by name (LimitRanger applies them in that order), whether
    PriorityClasses can be read, and the globalDefault PriorityClass ("" if none or unknown)."""
    limit_ranges = sorted(
        view.list_cached("limitranges", namespace), key=lambda lr: (lr.get("metadata") or {}).get("name", "")
    )
    pc_known = view.cache_age("priorityclasses") is not None
    default_pc = default_priority_class(view.list_cached("priorityclasses")) if pc_known else ""
    return limit_ranges, pc_known, default_pc


def no_quota(check: str, ctx: CheckContext) -> CheckResult:
    """The PASS of a quota check in a namespace without a ResourceQuota (the cache's age noted)."""
    return with_stale(
        CheckResult(check, Status.PASS, f'No ResourceQuota in namespace "{ctx.workload.namespace}"'),
        ctx,
        "resourcequotas",
    )


def _uses_priority_scope(quota: dict[str, Any]) -> bool:
    return any(s == "PriorityClass" for s, _, _ in quota_scopes(quota))


class ResourceQuotas(Check):
    name = "Resource Quotas"
    synchronous = True  # reads only the Workload and cached state
    needs_cluster = True
    local_capacity = True
    permissions = (*cached("resourcequotas"), *cached("limitranges"))
    #: the globalDefault PriorityClass; without it PriorityClass-scoped quotas are "cannot verify"
    optional_permissions = (
        Permission("list", "priorityclasses", PRIORITY_API),
        Permission("watch", "priorityclasses", PRIORITY_API),
    )
    apis = ("v1",)
    summary = (
        "status.used plus the job's pods (peak over JobSet dependsOn stages) and the objects it creates fit each "
        "ResourceQuota, as the apiserver computes it: v1 defaults then LimitRange, globalDefault PriorityClass, "
        "scopes, requests.<extended> only, must-specify cpu/memory."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        assert ctx.view is not None
        wl = ctx.workload
        view = ctx.view
        quotas = view.list_cached("resourcequotas", wl.namespace)
        if not quotas:
            return no_quota(self.name, ctx)
        limit_ranges, pc_known, default_pc = admission_inputs(view, wl.namespace)
        unnamed = [g.name for g in wl.pod_groups if not g.pod_spec.get("priorityClassName")]
        pod_level = [g.name for g in wl.pod_groups if pod_level_resources(g.pod_spec)]
        if pod_level:
            return CheckResult(
                self.name,
                Status.WARN,
                f"Cannot verify ResourceQuotas: the {', '.join(pod_level)} pods set pod-level resources (spec.resources), "
                "which this check does not model; the Dry Run check still sees the apiserver's answer for one pod",
            )
        violations: list[str] = []
        unverifiable: list[str] = []
        details: list[str] = []
        try:
            specs = [(g, admitted_pod(g.pod_spec, limit_ranges, default_pc)) for g in wl.pod_groups]
            for q in sorted(quotas, key=lambda q: (q.get("metadata") or {}).get("name", "")):
                v, d = evaluate_quota(q, wl, specs)
                qname = (q.get("metadata") or {}).get("name", "?")
                if not pc_known and unnamed and _uses_priority_scope(q):
                    # which quotas see those pods depends on the globalDefault PriorityClass
                    unverifiable.append(
                        f'Cannot verify ResourceQuota "{qname}" (PriorityClass scope) for the {", ".join(unnamed)} pods: '
                        "the cluster's globalDefault PriorityClass cannot be read (not permitted to list "
                        "priorityclasses.scheduling.k8s.io)"
                    )
                    details += v + d
                    continue
                violations += v
                details += d
        except ValueError as exc:
            return CheckResult(self.name, Status.WARN, f"Could not compute the job's resources: {exc}")
        if default_pc and unnamed and any(_uses_priority_scope(q) for q in quotas):
            details.append(
                f"The {', '.join(unnamed)} pods set no priorityClassName: admission gives them the globalDefault "
                f'PriorityClass "{default_pc}", which the PriorityClass scopes see'
            )
        names = ", ".join(sorted((q.get("metadata") or {}).get("name", "?") for q in quotas))
        out: list[CheckResult] = []
        if violations:
            out.append(CheckResult(self.name, Status.FAIL, " ".join(violations), details=violations + details))
        if unverifiable:
            out.append(CheckResult(self.name, Status.WARN, "; ".join(unverifiable), details=unverifiable))
        if not out:
            out.append(
                CheckResult(
                    self.name,
                    Status.PASS,
                    f'The job fits {plural(len(quotas), "ResourceQuota")} in namespace "{wl.namespace}": {names}',
                    details=details,
                )
            )
        for r in out:
            with_stale(r, ctx, "resourcequotas", "limitranges")
        return out if len(out) > 1 else out[0]


CHECKS = [ResourceQuotas()]

#: the admission arithmetic (quota_admission.py) stays importable from here
__all__ = [
    "CHECKS",
    "MAX_STAGE_GROUPS",
    "ONE",
    "POD_RESOURCES",
    "PRIORITY_API",
    "Projection",
    "ResourceQuotas",
    "VALIDATION_SET",
    "ZERO",
    "admitted_pod",
    "best_effort",
    "concurrent_sets",
    "constraint_error",
    "covers",
    "default_priority_class",
    "evaluate_quota",
    "finishes_before",
    "is_extended",
    "is_native",
    "job_objects",
    "limit_range_defaults",
    "missing_by_resource",
    "pod_level_resources",
    "pod_usage",
    "project",
    "quota_hard",
    "quota_scopes",
    "scope_matches",
    "stage_peak",
    "tracked",
]
