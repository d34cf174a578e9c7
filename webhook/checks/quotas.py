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

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import fail_and_warn, no_quota, plural, with_stale
from webhook.models.quota import (
    PRIORITY_CLASS_READS,
    QUOTA_READS,
    ZERO,
    admission_inputs,
    admitted_pod,
    is_extended,
    pod_level_resources,
    project,
    quota_scopes,
)
from webhook.quantity import format_quantity
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup, Workload

# --- the verdict ----------------------------------------------------------------------------


def _fmt(resource: str, value: Decimal) -> str:
    base = resource.split(".", 1)[1] if resource.startswith(("requests.", "limits.")) else resource
    return format_quantity(value, base)


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


def _uses_priority_scope(quota: dict[str, Any]) -> bool:
    return any(s == "PriorityClass" for s, _, _ in quota_scopes(quota))


class ResourceQuotas(Check):
    name = "Resource Quotas"
    synchronous = True  # reads only the Workload and cached state
    needs_cluster = True
    local_capacity = True
    permissions = QUOTA_READS
    #: the globalDefault PriorityClass; without it PriorityClass-scoped quotas are "cannot verify"
    optional_permissions = PRIORITY_CLASS_READS
    apis = ("v1",)
    summary = (
        "status.used plus the job's pods (peak over JobSet dependsOn stages) and the objects it creates fit each "
        "ResourceQuota, as the apiserver computes it: v1 defaults then LimitRange, globalDefault PriorityClass, "
        "scopes, requests.<extended> only, must-specify cpu/memory."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        """Steps: what admission reads besides the pod (`_Admission`), each quota against the admitted pods
        (`_evaluate`), then one FAIL, one WARN, both, or the PASS (`_verdict`)."""
        assert ctx.view is not None
        wl = ctx.workload
        quotas = ctx.view.list_cached("resourcequotas", wl.namespace)
        if not quotas:
            return no_quota(self.name, ctx)
        unnamed = [g.name for g in wl.pod_groups if not g.pod_spec.get("priorityClassName")]
        adm = _Admission(*admission_inputs(ctx.view, wl.namespace), unnamed=unnamed)
        pod_level = [g.name for g in wl.pod_groups if pod_level_resources(g.pod_spec)]
        if pod_level:
            return CheckResult(
                self.name,
                Status.WARN,
                f"Cannot verify ResourceQuotas: the {', '.join(pod_level)} pods set pod-level resources (spec.resources), "
                "which this check does not model; the Dry Run check still sees the apiserver's answer for one pod",
            )
        try:
            found = _evaluate(quotas, wl, adm)
        except ValueError as exc:
            return CheckResult(self.name, Status.WARN, f"Could not compute the job's resources: {exc}")
        if adm.default_pc and unnamed and any(_uses_priority_scope(q) for q in quotas):
            found.details.append(
                f"The {', '.join(unnamed)} pods set no priorityClassName: admission gives them the globalDefault "
                f'PriorityClass "{adm.default_pc}", which the PriorityClass scopes see'
            )
        return self._verdict(ctx, quotas, found)

    def _verdict(
        self, ctx: CheckContext, quotas: list[dict[str, Any]], found: _Found
    ) -> CheckResult | list[CheckResult]:
        """One FAIL (every violation), one WARN (every quota that cannot be verified), both, or the PASS."""
        names = ", ".join(sorted((q.get("metadata") or {}).get("name", "?") for q in quotas))
        out = fail_and_warn(
            self.name, found.violations, found.unverifiable, fail_details=found.violations + found.details
        )
        if not out:
            out.append(
                CheckResult(
                    self.name,
                    Status.PASS,
                    f'The job fits {plural(len(quotas), "ResourceQuota")} in namespace "{ctx.workload.namespace}": {names}',
                    details=found.details,
                )
            )
        for r in out:
            with_stale(r, ctx, "resourcequotas", "limitranges")
        return out if len(out) > 1 else out[0]


@dataclass
class _Admission:
    """What admission reads besides the pod (models/quota.py admission_inputs: the LimitRanges, whether
    PriorityClasses can be read, the globalDefault PriorityClass), and the pod groups without a priorityClassName."""

    limit_ranges: list[dict[str, Any]]
    pc_known: bool
    default_pc: str
    unnamed: list[str]


@dataclass
class _Found:
    """The violations, the quotas that cannot be verified, and the details of every quota."""

    violations: list[str] = field(default_factory=list)
    unverifiable: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def _evaluate(quotas: list[dict[str, Any]], wl: Workload, adm: _Admission) -> _Found:
    """Each quota, by name, against the admitted pods (`evaluate_quota`); a PriorityClass-scoped one is "cannot
    verify" for pods without a priorityClassName while the globalDefault PriorityClass cannot be read. Raises
    ValueError."""
    found = _Found()
    specs = [(g, admitted_pod(g.pod_spec, adm.limit_ranges, adm.default_pc)) for g in wl.pod_groups]
    for q in sorted(quotas, key=lambda q: (q.get("metadata") or {}).get("name", "")):
        v, d = evaluate_quota(q, wl, specs)
        qname = (q.get("metadata") or {}).get("name", "?")
        if not adm.pc_known and adm.unnamed and _uses_priority_scope(q):
            # which quotas see those pods depends on the globalDefault PriorityClass
            found.unverifiable.append(
                f'Cannot verify ResourceQuota "{qname}" (PriorityClass scope) for the {", ".join(adm.unnamed)} pods: '
                "the cluster's globalDefault PriorityClass cannot be read (not permitted to list "
                "priorityclasses.scheduling.k8s.io)"
            )
            found.details += v + d
            continue
        found.violations += v
        found.details += d
    return found


CHECKS = [ResourceQuotas()]
