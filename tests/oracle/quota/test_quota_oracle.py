"""Quota oracle: the Resource Quotas arithmetic against Kubernetes' own ResourceQuota admission.

tests/oracle/quota/main.go (built against k8s.io/kubernetes at the e2e version by
tests/oracle/quota/build.sh) applies the v1 defaulting, LimitRanger, the globalDefault
PriorityClass and then `resourcequota.CheckRequest` with the core pod evaluator, one pod
create after another. Here the same generated cases go through webhook.models.quota and
every answer is compared: the admitted pod's priority class, the pod's charge (PodUsageFunc),
which quotas see it (Matches), the must-specify text (Constraints), the verdict of creating
the whole job pod by pod, and the peak of status.used (with JobSet "Complete" stages).

    PREFLIGHT_QUOTA_ORACLE="$(bash tests/oracle/quota/build.sh)" \\
        .venv/bin/python -m pytest tests/oracle/quota -q

`make test` builds the oracle and sets the variable; a bare `pytest tests` skips these.
"""

from __future__ import annotations

import random
import re
from decimal import Decimal
from typing import Any

from tests.oracle._common import GoOracle
from webhook.models import quota as Q
from webhook.quantity import parse_quantity
from webhook.workloads.base import PodGroup, Workload

ORACLE = GoOracle("quota", "the quota oracle")
pytestmark = ORACLE.skip

SEED = 20260105
SINGLE_CASES = 240
GANG_CASES = 80

_VALUES = {
    "cpu": ["0", "100m", "250m", "1", "2", "1500m"],
    "memory": ["64Mi", "1Gi", "512M", "0"],
    "ephemeral-storage": ["1Gi", "500Mi"],
    "nvidia.com/gpu": ["1", "2", "8"],
    "hugepages-2Mi": ["4Mi", "8Mi"],
    "example.com/foo": ["3", "1"],
}
_HARD = {
    "cpu": ["1", "2", "4", "10"],
    "requests.cpu": ["1", "3", "8"],
    "limits.cpu": ["2", "4", "16"],
    "memory": ["1Gi", "4Gi"],
    "requests.memory": ["2Gi", "8Gi"],
    "limits.memory": ["2Gi", "16Gi"],
    "pods": ["1", "2", "4", "10"],
    "count/pods": ["2", "5"],
    "requests.nvidia.com/gpu": ["1", "4", "16"],
    "limits.nvidia.com/gpu": ["0", "1"],
    "requests.hugepages-2Mi": ["8Mi", "64Mi"],
    "hugepages-2Mi": ["16Mi"],
    "ephemeral-storage": ["2Gi"],
    "requests.ephemeral-storage": ["1Gi", "4Gi"],
    "limits.ephemeral-storage": ["4Gi"],
    "requests.example.com/foo": ["3", "10"],
    "count/jobs.batch": ["1"],
}
_SCOPES: list[dict[str, Any]] = [
    {"scopes": ["Terminating"]},
    {"scopes": ["NotTerminating"]},
    {"scopes": ["BestEffort"]},
    {"scopes": ["NotBestEffort"]},
    {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
    {
        "scopeSelector": {
            "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["low", "high"]}]
        }
    },
    {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}},
    {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}},
    {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}},
    {"scopeSelector": {"matchExpressions": [{"scopeName": "CrossNamespacePodAffinity", "operator": "Exists"}]}},
    {
        "scopes": ["NotTerminating"],
        "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]},
    },
]


def _resources(rnd: random.Random, k: int) -> dict[str, str]:
    names = rnd.sample(sorted(_VALUES), k=min(k, len(_VALUES)))
    return {n: rnd.choice(_VALUES[n]) for n in names}


def _container(rnd: random.Random, name: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox"}
    res: dict[str, Any] = {}
    if rnd.random() < 0.75:
        res["requests"] = _resources(rnd, rnd.randint(1, 3))
    if rnd.random() < 0.55:
        res["limits"] = _resources(rnd, rnd.randint(1, 3))
    if res:
        c["resources"] = res
    return c


def _pod(rnd: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [_container(rnd, f"c{i}") for i in range(rnd.randint(1, 3))]}
    inits = []
    for i in range(rnd.choice([0, 0, 1, 2])):
        c = _container(rnd, f"init{i}")
        if rnd.random() < 0.5:
            c["restartPolicy"] = "Always"  # a sidecar
        inits.append(c)
    if inits:
        spec["initContainers"] = inits
    if rnd.random() < 0.25:
        spec["overhead"] = dict(
            rnd.sample([("cpu", "50m"), ("memory", "32Mi"), ("nvidia.com/gpu", "1")], k=rnd.randint(1, 2))
        )
    if rnd.random() < 0.2:
        spec["activeDeadlineSeconds"] = rnd.choice([0, 600])
    if rnd.random() < 0.4:
        spec["priorityClassName"] = rnd.choice(["high", "low"])
    if rnd.random() < 0.1:
        term = {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"a": "b"}},
            "namespaces": ["other"],
        }
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    return pod


def _quota(rnd: random.Random, name: str, generous: bool = False) -> dict[str, Any]:
    hard_names = rnd.sample(sorted(_HARD), k=rnd.randint(1, 4))
    hard = {n: rnd.choice(_HARD[n]) for n in hard_names}
    used = {n: rnd.choice(["0", "0", v]) for n, v in hard.items()}
    if generous:  # room for the whole job, so the peak of status.used is compared, not a refusal
        hard = {n: f"{parse_quantity(v) * 1000}" if n != "limits.nvidia.com/gpu" else v for n, v in hard.items()}
        used = {n: "0" for n in hard}
    spec: dict[str, Any] = {"hard": hard}
    if rnd.random() < 0.45:
        spec.update(rnd.choice(_SCOPES))
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"used": used},
    }


def _limit_range(rnd: random.Random, name: str) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "Container"}
    for key in ("default", "defaultRequest", "max", "min"):
        if rnd.random() < 0.45:
            item[key] = {
                r: v
                for r, v in {"cpu": rnd.choice(["500m", "2", "4"]), "memory": rnd.choice(["256Mi", "2Gi"])}.items()
                if rnd.random() < 0.7
            }
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name}, "spec": {"limits": [item]}}


_FULL_DEFAULTS = {
    "apiVersion": "v1",
    "kind": "LimitRange",
    "metadata": {"name": "defaults"},
    "spec": {
        "limits": [
            {
                "type": "Container",
                "default": {"cpu": "1", "memory": "1Gi"},
                "defaultRequest": {"cpu": "250m", "memory": "256Mi"},
            }
        ]
    },
}


def _case(rnd: random.Random, ident: str, groups: int) -> dict[str, Any]:
    generous = groups > 1 and rnd.random() < 0.6
    case: dict[str, Any] = {
        "id": ident,
        "groups": [],
        "quotas": [_quota(rnd, f"q{i}", generous) for i in range(rnd.choice([1, 1, 2]))],
        "limitRanges": [_limit_range(rnd, f"lr{i}") for i in range(rnd.choice([0, 0, 1, 1, 2]))],
        "defaultPriorityClass": rnd.choice(["", "", "low"]),
    }
    if generous:  # every container gets cpu and memory: no must-specify refusal
        case["limitRanges"].insert(0, _FULL_DEFAULTS)
    names = ["initializer", "launcher", "node"][-groups:] if groups > 1 else ["node"]
    for i, n in enumerate(names):
        pod = _pod(rnd)
        g: dict[str, Any] = {"name": n, "count": rnd.randint(1, 3), "pod": pod, "dependsOn": []}
        if groups == 1 and rnd.random() < 0.06:
            pod["status"] = {"phase": "Succeeded"}  # measured, not created: what a finished pod costs
        if i > 0 and rnd.random() < 0.6:
            g["dependsOn"] = [(names[i - 1], rnd.choice(["Complete", "Complete", "Ready"]))]
        case["groups"].append(g)
    # a JobSet creates a group's pods once its dependencies are Ready/Complete; the oracle
    # recounts the "Complete" ones as finished before admitting the group (chains only here)
    for g in case["groups"]:
        done: list[str] = []
        for dep, status in g["dependsOn"]:
            if status == "Complete":
                done.append(dep)
            done += next(x for x in case["groups"] if x["name"] == dep)["completeBefore"]
        g["completeBefore"] = done
    return case


def _cases() -> list[dict[str, Any]]:
    rnd = random.Random(SEED)
    out = [_case(rnd, f"single-{i}", 1) for i in range(SINGLE_CASES)]
    out += [_case(rnd, f"gang-{i}", rnd.choice([2, 3])) for i in range(GANG_CASES)]
    return out


def _dec(values: dict[str, str]) -> dict[str, Decimal]:
    return {k: Decimal(v) for k, v in values.items()}


def _ours(case: dict[str, Any]) -> dict[str, Any]:
    """Our answers for one case, in the oracle's shape."""
    pods = []
    groups: list[tuple[PodGroup, dict[str, Any]]] = []
    for g in case["groups"]:
        spec = Q.admitted_pod(g["pod"]["spec"], case["limitRanges"], case["defaultPriorityClass"])
        finished = (g["pod"].get("status") or {}).get("phase") == "Succeeded"
        pods.append(
            {
                "priorityClassName": spec.get("priorityClassName", ""),
                "usage": Q.pod_usage(spec, finished=finished),
                "matches": {q["metadata"]["name"]: Q.covers(q, spec) for q in case["quotas"]},
                "constraints": {
                    q["metadata"]["name"]: Q.constraint_error(q, spec)
                    for q in case["quotas"]
                    if Q.covers(q, spec) and Q.constraint_error(q, spec)
                },
            }
        )
        if not finished:
            pg = PodGroup(g["name"], g["count"], g["pod"]["spec"], depends_on=[tuple(d) for d in g["dependsOn"]])
            groups.append((pg, spec))
    wl = Workload(kind="TrainJob", api_version="trainer.kubeflow.org/v1alpha1", name="j", namespace="oracle", obj={})
    projections = [Q.project(q, wl, groups) for q in case["quotas"]]
    return {"pods": pods, "projections": projections}


def _compare(case: dict[str, Any], oracle: dict[str, Any]) -> list[str]:
    """Every difference between our answers and Kubernetes' for one case."""
    cid = case["id"]
    if oracle.get("error"):
        return [f"{cid}: the oracle could not evaluate the case: {oracle['error']}"]
    ours = _ours(case)
    bad: list[str] = []
    for i, (mine, theirs) in enumerate(zip(ours["pods"], oracle["pods"])):
        where = f"{cid} group {case['groups'][i]['name']}"
        if mine["priorityClassName"] != theirs["priorityClassName"]:
            bad.append(f"{where}: priorityClassName {mine['priorityClassName']!r} != {theirs['priorityClassName']!r}")
        if mine["usage"] != _dec(theirs["usage"]):
            bad.append(f"{where}: usage {mine['usage']} != {_dec(theirs['usage'])}")
        if mine["matches"] != theirs["matches"]:
            bad.append(f"{where}: matches {mine['matches']} != {theirs['matches']}")
        if mine["constraints"] != theirs["constraints"]:
            bad.append(f"{where}: constraints {mine['constraints']} != {theirs['constraints']}")
    # the verdict of creating every pod, and the peak of status.used on the way
    running = [g for g in case["groups"] if not (g["pod"].get("status") or {}).get("phase")]
    if not running:
        return bad
    rejected_by = {p.name for p in ours["projections"] if p.lacking or p.exceeded()}
    rejection = oracle.get("rejected", "")
    if bool(rejected_by) != bool(rejection):
        bad.append(
            f"{cid}: we reject via {sorted(rejected_by) or 'nothing'}, the apiserver: {rejection or 'admits every pod'}"
        )
        return bad
    if rejection:
        m = re.search(r"(?:failed|exceeded) quota: ([^:,]+)", rejection)
        if not m or m.group(1) not in rejected_by:
            bad.append(f"{cid}: the apiserver rejects with {rejection!r}, we blame {sorted(rejected_by)}")
        return bad
    for p in ours["projections"]:
        peak = _dec(oracle["peak"][p.name])
        for r in p.hard:
            if not Q.tracked(r):
                continue
            want = p.used.get(r, Decimal(0)) + p.job.get(r, Decimal(0))
            if peak.get(r) != want:
                bad.append(f"{cid}: quota {p.name} {r}: our peak {want} != the apiserver's {peak.get(r)}")
    return bad


def test_quota_arithmetic_matches_kubernetes() -> None:
    cases = _cases()
    doc = {"cases": cases}
    results = ORACLE.run(doc)["results"]
    assert len(results) == len(cases) >= 100
    mismatches = [line for case, res in zip(cases, results) for line in _compare(case, res)]
    judged_rejections = sum(1 for r in results if r.get("rejected"))
    assert not mismatches, f"{len(mismatches)} mismatches in {len(cases)} cases:\n" + "\n".join(mismatches[:40])
    # the generator must exercise both verdicts and the stages, or the comparison proves little
    assert 0 < judged_rejections < len(cases)
    staged = 0
    for case, res in zip(cases, results):
        if not res.get("rejected") and any(g["completeBefore"] for g in case["groups"]):
            staged += any(
                p.job.get(r, 0) < p.summed.get(r, 0) for p in _ours(case)["projections"] for r in p.hard if Q.tracked(r)
            )
    assert staged >= 10, f"only {staged} admitted cases where a Complete stage lowers the peak"
