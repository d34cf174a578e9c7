"""ResourceQuota admission as the apiserver computes it, for one pod and one quota: steps 1-5
of webhook.checks.quotas (the pod as admission sees it, which quotas see it, must-specify,
what a pod is charged, and the stages of a job whose pod groups start one after another).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webhook.kube import Permission
from webhook.quantity import parse_quantity, parse_resources, pod_resources
from webhook.workloads.base import PodGroup, Workload
from webhook.workloads.podspec import all_containers, containers_copy

ZERO = Decimal(0)
ONE = Decimal(1)


# --- resource names (pkg/quota/v1/evaluator/core/pods.go, pkg/apis/core/v1/helper) ---------

#: the resources the pod evaluator tracks by name (pods.go podResources)
POD_RESOURCES = frozenset(
    {
        "count/pods",
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
    }
)
#: a quota on one of these makes every container set it (pods.go validationSet)
VALIDATION_SET = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def is_native(name: str) -> bool:
    """helper.IsNativeResource: no domain, or a *kubernetes.io/ one."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended(name: str) -> bool:
    """helper.IsExtendedResourceName: a container resource charged as requests.<name>."""
    if is_native(name) or name.startswith("requests."):
        return False
    qualified = f"requests.{name}"
    prefix, _, short = qualified.rpartition("/")
    return len(short) <= 63 and len(prefix) <= 253 and bool(_QUALIFIED.match(qualified))  # bounded first


def tracked(hard_name: str) -> bool:
    """pods.go MatchingResources: does the pod evaluator count this quota resource?"""
    if hard_name in POD_RESOURCES or hard_name.startswith(("hugepages-", "requests.hugepages-")):
        return True
    return not is_native(hard_name) and hard_name.startswith("requests.")


def _compute_usage(requests: dict[str, Decimal], limits: dict[str, Decimal]) -> dict[str, Decimal]:
    """pods.go podComputeUsageHelper: requests and limits → quota resource names."""
    out: dict[str, Decimal] = {"pods": ONE}
    for r in ("cpu", "memory", "ephemeral-storage"):
        if r in requests:
            out[r] = out[f"requests.{r}"] = requests[r]
        if r in limits:
            out[f"limits.{r}"] = limits[r]
    for r, v in requests.items():
        if r.startswith("hugepages-"):
            out[r] = out[f"requests.{r}"] = v
        if is_extended(r):  # only requests.<name>: extended resources are not overcommitted
            out[f"requests.{r}"] = v
    return out


# --- 1. the pod as ResourceQuota admission sees it ------------------------------------------


def limit_range_defaults(limit_range: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(default limits, default requests) of a LimitRange's Container items, as LimitRanger reads
    them (defaultContainerResourceRequirements: a later item wins) after SetDefaults_LimitRangeItem
    (default ← max; defaultRequest ← default, then ← min)."""
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        default = dict(item.get("default") or {})
        for k, v in (item.get("max") or {}).items():
            default.setdefault(k, v)
        default_request = dict(item.get("defaultRequest") or {})
        for k, v in default.items():
            default_request.setdefault(k, v)
        for k, v in (item.get("min") or {}).items():
            default_request.setdefault(k, v)
        requests.update(default_request)
        limits.update(default)
    return limits, requests


def admitted_pod(
    pod_spec: Mapping[str, Any], limit_ranges: Iterable[dict[str, Any]] = (), default_priority_class: str = ""
) -> dict[str, Any]:
    """The pod spec ResourceQuota admission sees (see the module docstring, step 1).

    A new spec: what this changes (each container's `resources` and its `requests`/`limits`,
    the `priorityClassName`) is copied, everything else is shared with `pod_spec`, which is
    left as it was (a deep copy of a ~15-container pod was most of an AIPerfJob review)."""
    spec = containers_copy(pod_spec, resources=True)
    # decode: SetDefaults_Pod, requests default from limits (containers and init containers)
    for _, c in all_containers(spec):
        res = c.get("resources") or {}
        if res.get("limits"):
            requests = res.setdefault("requests", {})
            for k, v in res["limits"].items():
                requests.setdefault(k, v)
            c["resources"] = res
    # LimitRanger: every LimitRange in turn fills only what is still missing
    for lr in limit_ranges:
        limits, requests = limit_range_defaults(lr)
        if not limits and not requests:
            continue
        for _, c in all_containers(spec):
            res = c.setdefault("resources", {})
            for k, v in limits.items():
                res.setdefault("limits", {}).setdefault(k, v)
            for k, v in requests.items():
                res.setdefault("requests", {}).setdefault(k, v)
    # Priority admission: no name → the globalDefault PriorityClass's name
    if not spec.get("priorityClassName") and default_priority_class:
        spec["priorityClassName"] = default_priority_class
    return spec


def pod_level_resources(pod_spec: Mapping[str, Any]) -> bool:
    """spec.resources set (PodLevelResources, on by default since 1.34): not modelled here."""
    res = pod_spec.get("resources") or {}
    return bool(res.get("requests") or res.get("limits"))


# --- 2. which quotas see the pod ------------------------------------------------------------


def _positive(values: dict[str, Any] | None) -> bool:
    return any(parse_quantity(v) > 0 for r, v in (values or {}).items() if r in ("cpu", "memory"))


def best_effort(pod_spec: Mapping[str, Any]) -> bool:
    """QoS BestEffort (pkg/apis/core/v1/helper/qos): no positive cpu or memory request or limit."""
    for _, c in all_containers(pod_spec):
        res = c.get("resources") or {}
        if _positive(res.get("requests")) or _positive(res.get("limits")):
            return False
    return True


def _cross_namespace_affinity(pod_spec: Mapping[str, Any]) -> bool:
    aff = pod_spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        a = aff.get(kind) or {}
        terms = list(a.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [
            t.get("podAffinityTerm") or {} for t in a.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        ]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


def scope_matches(scope: str, operator: str, values: list[str], pod_spec: Mapping[str, Any]) -> bool:
    """pods.go podMatchesScopeFunc: does one quota scope (or scopeSelector expression) match?"""
    if scope in ("Terminating", "NotTerminating"):
        ads = pod_spec.get("activeDeadlineSeconds")
        terminating = isinstance(ads, int) and ads >= 0
        return terminating if scope == "Terminating" else not terminating
    if scope == "BestEffort":
        return best_effort(pod_spec)
    if scope == "NotBestEffort":
        return not best_effort(pod_spec)
    if scope == "PriorityClass":
        # a label selector over {"PriorityClass": name}, the label absent without a name
        pcn = pod_spec.get("priorityClassName") or ""
        if operator == "Exists":
            return pcn != ""
        if operator == "DoesNotExist":
            return pcn == ""
        if operator == "In":
            return pcn != "" and pcn in values
        if operator == "NotIn":
            return pcn == "" or pcn not in values
        return False
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(pod_spec)
    return False  # VolumeAttributesClass and unknown scopes never match a pod


def quota_scopes(quota: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    spec = quota.get("spec") or {}
    out: list[tuple[str, str, list[str]]] = [(s, "Exists", []) for s in spec.get("scopes") or []]
    for e in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        out.append((e.get("scopeName", ""), e.get("operator", "Exists"), list(e.get("values") or [])))
    return out


def quota_hard(quota: dict[str, Any]) -> dict[str, Any]:
    return dict((quota.get("spec") or {}).get("hard") or {})


def covers(quota: dict[str, Any], pod_spec: Mapping[str, Any]) -> bool:
    """generic.Matches with the pod evaluator: a tracked hard resource, and every scope matches."""
    if not any(tracked(r) for r in quota_hard(quota)):
        return False
    return all(scope_matches(s, op, vals, pod_spec) for s, op, vals in quota_scopes(quota))


# --- 3. must-specify ------------------------------------------------------------------------


def missing_by_resource(quota: dict[str, Any], pod_spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """pods.go Constraints: {quota resource: containers that do not set it}, for the quota's
    cpu/memory resources. Empty when pod-level resources are set (they replace the rule)."""
    required = {r for r in quota_hard(quota) if r in VALIDATION_SET}
    if not required or pod_level_resources(pod_spec):
        return {}
    out: dict[str, list[str]] = {}
    for _, c in all_containers(pod_spec):
        res = c.get("resources") or {}
        have = _compute_usage(parse_resources(res.get("requests")), parse_resources(res.get("limits")))
        for r in sorted(required - set(have)):
            out.setdefault(r, []).append(str(c.get("name", "?")))
    return {r: sorted(set(cs)) for r, cs in sorted(out.items())}


def constraint_error(quota: dict[str, Any], pod_spec: Mapping[str, Any]) -> str:
    """The apiserver's own text (`must specify limits.cpu for: a,b; ...`), or ""."""
    missing = missing_by_resource(quota, pod_spec)
    if not missing:
        return ""
    return "must specify " + "; ".join(f"{r} for: {','.join(cs)}" for r, cs in missing.items())


# --- 4. what a pod is charged ---------------------------------------------------------------


def pod_usage(pod_spec: Mapping[str, Any], *, finished: bool = False) -> dict[str, Decimal]:
    """pods.go PodUsageFunc of an admitted pod: count/pods always, the rest while it runs.

    Raises ValueError on an unparseable quantity."""
    if finished:
        return {"count/pods": ONE}
    out = _compute_usage(pod_resources(pod_spec, "requests"), pod_resources(pod_spec, "limits"))
    out["count/pods"] = ONE
    return out


#: derived-object keys of adapters that carry no "kind" of their own
_DERIVED_KINDS = {"jobSet": "JobSet", "configMap": "ConfigMap", "secret": "Secret", "service": "Service"}
#: object kind → the quota resources one such object counts in (generic object count
#: evaluator `count/<resource>.<group>`, plus the legacy bare names of core kinds)
_OBJECT_COUNTS = {
    "ConfigMap": ("count/configmaps", "configmaps"),
    "Secret": ("count/secrets", "secrets"),
    "Service": ("count/services", "services"),
}


def job_objects(wl: Workload) -> dict[str, Decimal]:
    """count/* of the non-pod objects the job's controllers create in the namespace: what the
    Workload says will exist (its derived manifests and managed Secrets; the adapter decides,
    e.g. the MPI SSH Secret and hostfile ConfigMap only for MPI)."""
    out: dict[str, Decimal] = {}

    def count(*names: str, n: int = 1) -> None:
        for name in names:
            out[name] = out.get(name, ZERO) + n

    secrets: set[str] = set(wl.managed_secrets)
    for key, obj in wl.derived.items():
        kind = obj.get("kind") or _DERIVED_KINDS.get(key, "")
        if kind == "JobSet":
            spec = obj.get("spec") or {}
            count("count/jobsets.jobset.x-k8s.io")
            count("count/jobs.batch", n=sum(int(r.get("replicas", 1) or 0) for r in spec.get("replicatedJobs") or []))
            if (spec.get("network") or {}).get("enableDNSHostnames", True) is not False:
                count(*_OBJECT_COUNTS["Service"])  # JobSet's headless Service
        elif kind == "Secret":
            secrets.add(str((obj.get("metadata") or {}).get("name") or key))
        elif kind in _OBJECT_COUNTS:
            count(*_OBJECT_COUNTS[kind])
    if secrets:
        count(*_OBJECT_COUNTS["Secret"], n=len(secrets))
    return out


# --- 5. stages ------------------------------------------------------------------------------

#: beyond this many groups the peak is not searched: every group counts at once
MAX_STAGE_GROUPS = 24


def finishes_before(groups: list[PodGroup]) -> set[tuple[str, str]]:
    """(a, b): group a has completed before group b starts. b waits for a "Complete", or starts
    after (Ready or Complete) some group that starts only after a completed."""
    deps = {g.name: [(d, s) for d, s in g.depends_on] for g in groups}
    memo: dict[str, set[str]] = {}

    def before(b: str, seen: frozenset[str]) -> set[str]:
        if b in memo:
            return memo[b]
        out: set[str] = set()
        for d, status in deps.get(b, []):
            if d in seen:  # a cycle: JobSet rejects it; count conservatively
                continue
            if status == "Complete":
                out.add(d)
            out |= before(d, seen | {d})
        memo[b] = out
        return out

    return {(a, g.name) for g in groups for a in before(g.name, frozenset({g.name}))}


def concurrent_sets(names: list[str], order: set[tuple[str, str]]) -> list[list[str]]:
    """The maximal sets of groups that can run at the same time: no member completes before
    another starts (maximal cliques of the "may overlap" graph, Bron-Kerbosch with pivoting)."""
    overlap = {a: {b for b in names if b != a and (a, b) not in order and (b, a) not in order} for a in names}
    out: list[list[str]] = []

    def grow(current: list[str], candidates: set[str], excluded: set[str]) -> None:
        if not candidates and not excluded:
            out.append(sorted(current))
            return
        pivot = max(candidates | excluded, key=lambda v: len(overlap[v] & candidates))
        for v in sorted(candidates - overlap[pivot]):
            grow(current + [v], candidates & overlap[v], excluded & overlap[v])
            candidates = candidates - {v}
            excluded = excluded | {v}

    grow([], set(names), set())
    return out


def stage_peak(groups: list[PodGroup], totals: dict[str, dict[str, Decimal]]) -> dict[str, Decimal]:
    """Per resource, the most the groups that can run at the same time use together (the
    heaviest of `concurrent_sets`). `count/pods` is the sum: finished pods are still counted."""
    names = [g.name for g in groups if g.name in totals]
    summed: dict[str, Decimal] = {}
    for n in names:
        for k, v in totals[n].items():
            summed[k] = summed.get(k, ZERO) + v
    order = finishes_before(groups)
    if not order or len(names) > MAX_STAGE_GROUPS:
        return summed
    peak: dict[str, Decimal] = {}
    for subset in concurrent_sets(names, order):
        together: dict[str, Decimal] = {}
        for n in subset:
            for k, v in totals[n].items():
                together[k] = together.get(k, ZERO) + v
        for k, v in together.items():
            if v > peak.get(k, ZERO):
                peak[k] = v
    peak["count/pods"] = summed.get("count/pods", ZERO)
    return {k: v for k, v in peak.items() if k in summed}


# --- one quota against the job, and what admission reads besides the quotas ------------------------------

PRIORITY_API = "scheduling.k8s.io"
#: the cached reads a projection needs (list and watch): the namespace's ResourceQuotas and LimitRanges
QUOTA_READS = (
    Permission("list", "resourcequotas"),
    Permission("watch", "resourcequotas"),
    Permission("list", "limitranges"),
    Permission("watch", "limitranges"),
)
#: the globalDefault PriorityClass (Priority admission); without it PriorityClass scopes are unknown
PRIORITY_CLASS_READS = (
    Permission("list", "priorityclasses", PRIORITY_API),
    Permission("watch", "priorityclasses", PRIORITY_API),
)


def _parse_list(raw: dict[str, Any] | None, problems: list[str], where: str) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for k, v in (raw or {}).items():
        try:
            out[str(k)] = parse_quantity(v)
        except ValueError as exc:
            problems.append(f"{where} {k} ignored: {exc}")
    return out


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
