"""Resource Quotas: projected use per quota, requests vs limits, must-specify, count/*,
extended resources, scopes, LimitRange defaults, exact wording."""

from __future__ import annotations

import pytest

from webhook.checks.quotas import ResourceQuotas, covers, job_objects
from webhook.results import Status
from webhook.workloads.base import PodGroup

from tests.fakeview import FakeView, container, meta, pod, run_check, workload


def _quota(name: str, hard: dict, used: dict | None = None, **spec) -> dict:
    q = {"metadata": meta(name, "team-a"), "spec": {"hard": hard, **spec}}
    if used is not None:
        q["status"] = {"hard": hard, "used": used}
    return q


def _gang() -> object:
    """4 trainer pods (8 cpu, 32Gi, 8 GPUs each; GPU limit only) + 1 initializer (2 cpu)."""
    node = pod(container("node", {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"}))
    init = pod(container("model-initializer", {"cpu": "2", "memory": "4Gi"}))
    js = {"metadata": {"name": "llama-ft"}, "spec": {"replicatedJobs": [{"name": "model-initializer", "replicas": 1}, {"name": "node", "replicas": 1}]}}
    return workload([PodGroup("model-initializer", 1, init), PodGroup("node", 4, node)], derived={"jobSet": js})


async def test_no_quota_passes() -> None:
    r = await run_check(ResourceQuotas(), _gang(), FakeView())
    assert (r.status, r.message) == (Status.PASS, 'No ResourceQuota in namespace "team-a"')


async def test_requests_cpu_exceeded_names_quota_needed_and_hard() -> None:
    view = FakeView({"resourcequotas": [_quota("team-quota", {"requests.cpu": "16"}, {"requests.cpu": "4"})]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.FAIL
    assert r.message == (
        'ResourceQuota "team-quota": requests.cpu would be 38 (used 4 + job 34) but hard is 16. '
        "Fix: raise hard requests.cpu to at least 38 (kubectl edit resourcequota team-quota -n team-a), "
        "or reduce the job's pods or requests."
    )


async def test_fits_now_unless_others_free_quota() -> None:
    view = FakeView({"resourcequotas": [_quota("team-quota", {"cpu": "40"}, {"cpu": "10"})]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.FAIL
    assert r.message.endswith("or reduce the job's pods or requests, or wait for other workloads in the namespace to free quota.")
    assert r.message.startswith('ResourceQuota "team-quota": cpu would be 44 (used 10 + job 34) but hard is 40.')


async def test_pass_lists_quotas_with_detail() -> None:
    view = FakeView({"resourcequotas": [_quota("team-quota", {"requests.cpu": "64", "requests.nvidia.com/gpu": "32"}, {"requests.cpu": "4"})]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert (r.status, r.message) == (Status.PASS, 'The job fits 1 ResourceQuota in namespace "team-a": team-quota')
    assert r.details == [
        'ResourceQuota "team-quota": requests.cpu 38 of 64 (used 4 + job 34)',
        'ResourceQuota "team-quota": requests.nvidia.com/gpu 32 of 32 (used 0 + job 32)',
    ]


async def test_extended_resource_and_memory_formatting() -> None:
    view = FakeView({"resourcequotas": [_quota("gpu", {"requests.nvidia.com/gpu": "16", "requests.memory": "64Gi"})]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.FAIL
    assert 'ResourceQuota "gpu": requests.memory would be 132Gi (used 0 + job 132Gi) but hard is 64Gi.' in r.message
    assert 'ResourceQuota "gpu": requests.nvidia.com/gpu would be 32 (used 0 + job 32) but hard is 16.' in r.message


async def test_limits_cpu_in_quota_rejects_pods_without_cpu_limits() -> None:
    view = FakeView({"resourcequotas": [_quota("lim", {"limits.cpu": "100"}, {})]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.FAIL
    assert r.message == (
        'ResourceQuota "lim" covers limits.cpu, so every container must set resources.limits.cpu, but it is not set on '
        "container model-initializer of the model-initializer pods; container node of the node pods: the apiserver would "
        "reject those pods (must specify limits.cpu). Fix: set resources.limits.cpu on every container, or add a LimitRange "
        'with a default for cpu in namespace "team-a".'
    )


async def test_limit_range_defaults_satisfy_must_specify_and_count() -> None:
    lr = {"metadata": meta("defaults", "team-a"), "spec": {"limits": [{"type": "Container", "default": {"cpu": "10"}, "defaultRequest": {"cpu": "1"}}]}}
    view = FakeView({"resourcequotas": [_quota("lim", {"limits.cpu": "100"}, {})], "limitranges": [lr]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.PASS
    assert r.details == ['ResourceQuota "lim": limits.cpu 50 of 100 (used 0 + job 50)']


async def test_limits_counted_only_for_pods_that_set_them() -> None:
    view = FakeView({"resourcequotas": [_quota("lim", {"limits.nvidia.com/gpu": "64", "limits.ephemeral-storage": "1Gi"}, {})]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.PASS
    assert r.details == ['ResourceQuota "lim": limits.nvidia.com/gpu 32 of 64 (used 0 + job 32)']


async def test_count_objects_and_pods() -> None:
    hard = {"pods": "4", "count/jobsets.jobset.x-k8s.io": "1", "count/jobs.batch": "10", "services": "0"}
    view = FakeView({"resourcequotas": [_quota("counts", hard, {"count/jobsets.jobset.x-k8s.io": "1"})]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.FAIL
    assert r.details[:3] == [
        'ResourceQuota "counts": count/jobsets.jobset.x-k8s.io would be 2 (used 1 + job 1) but hard is 1. Fix: raise hard '
        "count/jobsets.jobset.x-k8s.io to at least 2 (kubectl edit resourcequota counts -n team-a), or reduce the job's pods "
        "or requests, or wait for other workloads in the namespace to free quota.",
        'ResourceQuota "counts": pods would be 5 (used 0 + job 5) but hard is 4. Fix: raise hard pods to at least 5 '
        "(kubectl edit resourcequota counts -n team-a), or reduce the job's pods or requests.",
        'ResourceQuota "counts": services would be 1 (used 0 + job 1) but hard is 0. Fix: raise hard services to at least 1 '
        "(kubectl edit resourcequota counts -n team-a), or reduce the job's pods or requests.",
    ]


def test_job_objects() -> None:
    wl = workload(
        derived={
            "jobSet": {"spec": {"replicatedJobs": [{"name": "a", "replicas": 2}, {"name": "b"}], "network": {"enableDNSHostnames": False}}},
            "configMap": {"metadata": {"name": "cm"}},
        }
    )
    assert job_objects(wl) == {"count/jobsets.jobset.x-k8s.io": 1, "count/jobs.batch": 3, "count/configmaps": 1, "configmaps": 1}


@pytest.mark.parametrize(
    "spec,pod_spec,expected",
    [
        ({"scopes": ["BestEffort"]}, pod(container("c")), True),
        ({"scopes": ["BestEffort"]}, pod(container("c", {"cpu": "1"})), False),
        ({"scopes": ["NotBestEffort"]}, pod(container("c", {"cpu": "1"})), True),
        ({"scopes": ["Terminating"]}, pod(container("c")), False),
        ({"scopes": ["NotTerminating"]}, pod(container("c")), True),
        ({"scopes": ["Terminating"]}, pod(container("c"), activeDeadlineSeconds=60), True),
        ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
         pod(container("c"), priorityClassName="high"), True),
        ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
         pod(container("c")), False),
        ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}},
         pod(container("c")), True),
        ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}},
         pod(container("c")), False),
        ({"scopes": ["NotBestEffort"], "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}},
         pod(container("c", {"cpu": "1"}), priorityClassName="x"), True),
    ],
)
def test_scopes(spec: dict, pod_spec: dict, expected: bool) -> None:
    assert covers({"spec": spec}, pod_spec) is expected


async def test_scoped_quota_ignores_uncovered_pods_and_objects() -> None:
    q = _quota("high", {"requests.cpu": "1", "count/jobsets.jobset.x-k8s.io": "0"}, {},
               scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]})
    view = FakeView({"resourcequotas": [q]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.PASS
    assert r.details == ['ResourceQuota "high" does not apply to the job\'s pods (scopes)']
    wl = _gang()
    for g in wl.pod_groups:
        g.pod_spec["priorityClassName"] = "high"
    r = await run_check(ResourceQuotas(), wl, view)
    assert r.status is Status.FAIL
    assert r.message.startswith('ResourceQuota "high": requests.cpu would be 34 (used 0 + job 34) but hard is 1.')
    assert "count/jobsets" not in r.message


async def test_aiperf_fix_mentions_resource_mode() -> None:
    wl = workload([PodGroup("workers", 2, pod(container("worker", {"cpu": "1"})))], kind="AIPerfJob", namespace="team-a")
    view = FakeView({"resourcequotas": [_quota("lim", {"limits.memory": "10Gi"}, {})]})
    r = await run_check(ResourceQuotas(), wl, view)
    assert r.status is Status.FAIL
    assert "Fix: set resources.limits.memory on every container (AIPerfJob: spec.resourceMode: guaranteed sets limits)" in r.message


async def test_unparseable_quota_value_is_ignored_with_detail() -> None:
    view = FakeView({"resourcequotas": [_quota("bad", {"requests.cpu": "lots"}, {})]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.PASS
    assert r.details[0].startswith('ResourceQuota "bad": hard requests.cpu ignored: quantity \'lots\' does not match')
