"""Resource Quotas: projected use per quota, requests vs limits, must-specify, count/*,
extended resources, scopes, LimitRange defaults, exact wording."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from tests.fakeview import FakeView, container, meta, pod, run_check, workload
from webhook.checks.quotas import ResourceQuotas
from webhook.models.quota import (
    admitted_pod,
    concurrent_sets,
    constraint_error,
    covers,
    default_priority_class,
    finishes_before,
    job_objects,
    limit_range_defaults,
    pod_usage,
    stage_peak,
)
from webhook.results import Status
from webhook.workloads.base import PodGroup


def _quota(name: str, hard: dict, used: dict | None = None, **spec) -> dict:
    q = {"metadata": meta(name, "team-a"), "spec": {"hard": hard, **spec}}
    if used is not None:
        q["status"] = {"hard": hard, "used": used}
    return q


def _gang() -> object:
    """4 trainer pods (8 cpu, 32Gi, 8 GPUs each; GPU limit only) + 1 initializer (2 cpu)."""
    node = pod(container("node", {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"}))
    init = pod(container("model-initializer", {"cpu": "2", "memory": "4Gi"}))
    js = {
        "metadata": {"name": "llama-ft"},
        "spec": {"replicatedJobs": [{"name": "model-initializer", "replicas": 1}, {"name": "node", "replicas": 1}]},
    }
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
    assert r.message.endswith(
        "or reduce the job's pods or requests, or wait for other workloads in the namespace to free quota."
    )
    assert r.message.startswith('ResourceQuota "team-quota": cpu would be 44 (used 10 + job 34) but hard is 40.')


async def test_pass_lists_quotas_with_detail() -> None:
    view = FakeView(
        {
            "resourcequotas": [
                _quota("team-quota", {"requests.cpu": "64", "requests.nvidia.com/gpu": "32"}, {"requests.cpu": "4"})
            ]
        }
    )
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
    lr = {
        "metadata": meta("defaults", "team-a"),
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "10"}, "defaultRequest": {"cpu": "1"}}]},
    }
    view = FakeView({"resourcequotas": [_quota("lim", {"limits.cpu": "100"}, {})], "limitranges": [lr]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.PASS
    assert r.details == ['ResourceQuota "lim": limits.cpu 50 of 100 (used 0 + job 50)']


async def test_limits_of_extended_resources_charge_nothing() -> None:
    """pods.go: extended resources are charged only as requests.<name>; limits.nvidia.com/gpu is not tracked."""
    view = FakeView(
        {"resourcequotas": [_quota("lim", {"limits.nvidia.com/gpu": "0", "limits.ephemeral-storage": "1Gi"}, {})]}
    )
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert (r.status, r.message) == (Status.PASS, 'The job fits 1 ResourceQuota in namespace "team-a": lim')
    assert r.details == [
        'ResourceQuota "lim": limits.nvidia.com/gpu is not charged for pods (extended resources count only as requests.nvidia.com/gpu)'
    ]


def test_pod_usage_names_follow_the_pod_evaluator() -> None:
    spec = pod(
        container(
            "a", {"cpu": "1", "hugepages-2Mi": "4Mi", "example.com/foo": "2"}, {"cpu": "2", "nvidia.com/gpu": "1"}
        ),
        overhead={"cpu": "100m", "memory": "32Mi"},
    )
    usage = pod_usage(admitted_pod(spec))
    assert usage == {
        "pods": 1,
        "count/pods": 1,
        "cpu": D("1.1"),
        "requests.cpu": D("1.1"),
        "limits.cpu": D("2.1"),  # overhead: on every request, on set limits
        "memory": 32 * 1024**2,
        "requests.memory": 32 * 1024**2,  # no memory limit: none charged
        "hugepages-2Mi": 4 * 1024**2,
        "requests.hugepages-2Mi": 4 * 1024**2,
        "requests.example.com/foo": 2,
        "requests.nvidia.com/gpu": 1,  # the GPU request defaulted from its limit
    }
    assert pod_usage(spec, finished=True) == {"count/pods": 1}


def test_requests_default_from_limits_before_limit_range_default_request() -> None:
    """SetDefaults_Pod (decode) runs before LimitRanger: a limit-only container requests its limit."""
    lr = {
        "metadata": meta("defaults", "team-a"),
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}, "default": {"cpu": "1"}}]},
    }
    spec = admitted_pod(pod(container("a", None, {"cpu": "2"}), container("b")), [lr])
    assert spec["containers"][0]["resources"] == {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}}
    assert spec["containers"][1]["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "100m"}}


def test_admitted_pod_leaves_the_workload_pod_spec_as_it_was() -> None:
    """It copies what it changes (resources, priorityClassName), not the rest of the pod."""
    import copy

    lr = {
        "metadata": meta("defaults", "team-a"),
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}, "default": {"memory": "1Gi"}}]},
    }
    original = pod(container("a", None, {"cpu": "2"}), container("b", {"cpu": "1"}))
    original["initContainers"] = [container("init")]
    before = copy.deepcopy(original)
    spec = admitted_pod(original, [lr], "high")
    assert original == before
    assert spec["priorityClassName"] == "high"
    # defaultRequest takes what it lacks from default (SetDefaults_LimitRangeItem)
    init = {"limits": {"memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "1Gi"}}
    assert spec["initContainers"][0]["resources"] == init
    assert spec["containers"][1]["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"memory": "1Gi"},
    }


def test_limit_range_item_defaults_and_first_limit_range_wins() -> None:
    """SetDefaults_LimitRangeItem: default from max, defaultRequest from default; then from min."""
    a = {
        "metadata": meta("a"),
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "4"}, "min": {"memory": "64Mi"}}]},
    }
    b = {"metadata": meta("b"), "spec": {"limits": [{"type": "Container", "default": {"cpu": "1", "memory": "1Gi"}}]}}
    assert limit_range_defaults(a) == ({"cpu": "4"}, {"cpu": "4", "memory": "64Mi"})
    spec = admitted_pod(pod(container("a")), [a, b])
    assert spec["containers"][0]["resources"] == {
        "limits": {"cpu": "4", "memory": "1Gi"},
        "requests": {"cpu": "4", "memory": "64Mi"},
    }


async def test_limit_range_default_request_does_not_override_a_limit_only_container() -> None:
    lr = {
        "metadata": meta("defaults", "team-a"),
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "1"}}]},
    }
    wl = workload([PodGroup("node", 2, pod(container("node", None, {"cpu": "4"})))])
    view = FakeView({"resourcequotas": [_quota("q", {"requests.cpu": "6"}, {})], "limitranges": [lr]})
    r = await run_check(ResourceQuotas(), wl, view)
    assert r.status is Status.FAIL
    assert r.message.startswith('ResourceQuota "q": requests.cpu would be 8 (used 0 + job 8) but hard is 6.')


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
            "jobSet": {
                "spec": {
                    "replicatedJobs": [{"name": "a", "replicas": 2}, {"name": "b"}],
                    "network": {"enableDNSHostnames": False},
                }
            },
            "configMap": {"metadata": {"name": "cm"}},
        }
    )
    assert job_objects(wl) == {
        "count/jobsets.jobset.x-k8s.io": 1,
        "count/jobs.batch": 3,
        "count/configmaps": 1,
        "configmaps": 1,
    }


@pytest.mark.parametrize(
    "spec,pod_spec,expected",
    [
        ({"scopes": ["BestEffort"]}, pod(container("c")), True),
        ({"scopes": ["BestEffort"]}, pod(container("c", {"cpu": "1"})), False),
        ({"scopes": ["NotBestEffort"]}, pod(container("c", {"cpu": "1"})), True),
        ({"scopes": ["Terminating"]}, pod(container("c")), False),
        ({"scopes": ["NotTerminating"]}, pod(container("c")), True),
        ({"scopes": ["Terminating"]}, pod(container("c"), activeDeadlineSeconds=60), True),
        (
            {
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
                }
            },
            pod(container("c"), priorityClassName="high"),
            True,
        ),
        (
            {
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
                }
            },
            pod(container("c")),
            False,
        ),
        (
            {
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]
                }
            },
            pod(container("c")),
            True,
        ),
        (
            {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}},
            pod(container("c")),
            False,
        ),
        (
            {
                "scopes": ["NotBestEffort"],
                "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]},
            },
            pod(container("c", {"cpu": "1"}), priorityClassName="x"),
            True,
        ),
        # DoesNotExist covers the pods without a priority class (a label selector on an absent label)
        (
            {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}},
            pod(container("c")),
            True,
        ),
        (
            {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}},
            pod(container("c"), priorityClassName="high"),
            False,
        ),
        (
            {
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]
                }
            },
            pod(container("c"), priorityClassName="high"),
            False,
        ),
        # a zero cpu request is still BestEffort (qos.ComputePodQOS counts positive amounts only)
        ({"scopes": ["BestEffort"]}, pod(container("c", {"cpu": "0"})), True),
        # activeDeadlineSeconds 0 is terminating too
        ({"scopes": ["Terminating"]}, pod(container("c"), activeDeadlineSeconds=0), True),
        # a quota with no resource the pod evaluator tracks never sees a pod
        ({"scopes": ["NotTerminating"], "hard": {"limits.nvidia.com/gpu": "1"}}, pod(container("c")), False),
    ],
)
def test_scopes(spec: dict, pod_spec: dict, expected: bool) -> None:
    assert covers({"spec": {"hard": {"pods": "10"}, **spec}}, pod_spec) is expected


async def test_scoped_quota_ignores_uncovered_pods_and_objects() -> None:
    q = _quota(
        "high",
        {"requests.cpu": "1", "count/jobsets.jobset.x-k8s.io": "0"},
        {},
        scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]},
    )
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
    wl = workload(
        [PodGroup("workers", 2, pod(container("worker", {"cpu": "1"})))], kind="AIPerfJob", namespace="team-a"
    )
    view = FakeView({"resourcequotas": [_quota("lim", {"limits.memory": "10Gi"}, {})]})
    r = await run_check(ResourceQuotas(), wl, view)
    assert r.status is Status.FAIL
    assert (
        "Fix: set resources.limits.memory on every container (AIPerfJob: spec.resourceMode: guaranteed sets limits)"
        in r.message
    )


async def test_unparseable_quota_value_is_ignored_with_detail() -> None:
    view = FakeView({"resourcequotas": [_quota("bad", {"requests.cpu": "lots"}, {})]})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.PASS
    assert r.details[0].startswith("ResourceQuota \"bad\": hard requests.cpu ignored: quantity 'lots' does not match")


def test_constraint_error_is_the_apiservers_text() -> None:
    q = {"spec": {"hard": {"limits.cpu": "4", "memory": "1Gi", "requests.nvidia.com/gpu": "1"}}}
    spec = pod(
        container("b", {"memory": "1Gi"}),
        container("a"),
        initContainers=[container("side", {"cpu": "1"}, restartPolicy="Always")],
    )
    assert constraint_error(q, spec) == "must specify limits.cpu for: a,b,side; memory for: a,side"
    # pod-level resources replace the per-container rule (PodLevelResources, on since 1.34)
    assert constraint_error(q, {**spec, "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}) == ""


async def test_global_default_priority_class_is_set_on_pods_without_one() -> None:
    scoped = _quota(
        "low-only",
        {"requests.cpu": "10"},
        {},
        scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["low"]}]},
    )
    pcs = [{"metadata": meta("low"), "value": 10, "globalDefault": True}, {"metadata": meta("high"), "value": 1000}]
    r = await run_check(ResourceQuotas(), _gang(), FakeView({"resourcequotas": [scoped], "priorityclasses": pcs}))
    assert r.status is Status.FAIL
    assert r.message.startswith('ResourceQuota "low-only": requests.cpu would be 34 (used 0 + job 34) but hard is 10.')
    assert r.details[-1] == (
        "The model-initializer, node pods set no priorityClassName: admission gives them the globalDefault "
        'PriorityClass "low", which the PriorityClass scopes see'
    )
    r = await run_check(ResourceQuotas(), _gang(), FakeView({"resourcequotas": [scoped], "priorityclasses": pcs[1:]}))
    assert r.status is Status.PASS


def test_default_priority_class_lowest_value_wins() -> None:
    pcs = [
        {"metadata": meta("b"), "value": 5, "globalDefault": True},
        {"metadata": meta("a"), "value": 7, "globalDefault": True},
    ]
    assert default_priority_class(pcs) == "b"
    assert default_priority_class([{"metadata": meta("x"), "value": 1}]) == ""


async def test_priority_classes_unreadable_warns_cannot_verify_never_denies() -> None:
    scoped = _quota(
        "no-class",
        {"requests.cpu": "1"},
        {},
        scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}]},
    )
    view = FakeView({"resourcequotas": [scoped]}, cache_ages={"priorityclasses": None})
    r = await run_check(ResourceQuotas(), _gang(), view)
    assert r.status is Status.WARN
    assert r.message == (
        'Cannot verify ResourceQuota "no-class" (PriorityClass scope) for the model-initializer, node pods: the cluster\'s '
        "globalDefault PriorityClass cannot be read (not permitted to list priorityclasses.scheduling.k8s.io)"
    )


async def test_pod_level_resources_warn_cannot_verify() -> None:
    wl = workload([PodGroup("node", 1, pod(container("node"), resources={"requests": {"cpu": "1"}}))])
    r = await run_check(ResourceQuotas(), wl, FakeView({"resourcequotas": [_quota("q", {"requests.cpu": "0"}, {})]}))
    assert (r.status, r.message) == (
        Status.WARN,
        "Cannot verify ResourceQuotas: the node pods set pod-level resources (spec.resources), which this check does not "
        "model; the Dry Run check still sees the apiserver's answer for one pod",
    )


def _staged() -> object:
    """initializer (1 pod, 4 cpu) must Complete before node (2 pods, 8 cpu each) starts."""
    init = PodGroup("initializer", 1, pod(container("init", {"cpu": "4", "memory": "40Gi"})))
    node = PodGroup(
        "node", 2, pod(container("node", {"cpu": "8", "memory": "8Gi"})), depends_on=[("initializer", "Complete")]
    )
    return workload([init, node])


async def test_stages_compute_and_pods_are_the_peak_count_pods_the_sum() -> None:
    hard = {"requests.cpu": "16", "requests.memory": "40Gi", "pods": "2", "count/pods": "3"}
    r = await run_check(ResourceQuotas(), _staged(), FakeView({"resourcequotas": [_quota("q", hard, {})]}))
    assert r.status is Status.PASS, r.message
    assert r.details == [
        'ResourceQuota "q": count/pods 3 of 3 (used 0 + job 3)',
        'ResourceQuota "q": pods 2 of 2 (used 0 + job 2 at its peak stage)',
        'ResourceQuota "q": requests.cpu 16 of 16 (used 0 + job 16 at its peak stage)',
        'ResourceQuota "q": requests.memory 40Gi of 40Gi (used 0 + job 40Gi at its peak stage)',
    ]
    r = await run_check(
        ResourceQuotas(), _staged(), FakeView({"resourcequotas": [_quota("q", {**hard, "count/pods": "2"}, {})]})
    )
    assert r.status is Status.FAIL
    assert r.message.startswith('ResourceQuota "q": count/pods would be 3 (used 0 + job 3) but hard is 2.')


async def test_ready_dependency_runs_together() -> None:
    wl = _staged()
    wl.pod_groups[1].depends_on = [("initializer", "Ready")]
    r = await run_check(ResourceQuotas(), wl, FakeView({"resourcequotas": [_quota("q", {"requests.cpu": "16"}, {})]}))
    assert r.status is Status.FAIL
    assert r.message.startswith('ResourceQuota "q": requests.cpu would be 20 (used 0 + job 20) but hard is 16.')


def test_finishes_before_is_transitive_through_ready() -> None:
    groups = [
        PodGroup("a", 1, {}),
        PodGroup("b", 1, {}, depends_on=[("a", "Complete")]),
        PodGroup("c", 1, {}, depends_on=[("b", "Ready")]),
        PodGroup("d", 1, {}, depends_on=[("a", "Ready")]),
    ]
    assert finishes_before(groups) == {("a", "b"), ("a", "c")}
    one = {"cpu": D(1), "count/pods": D(1)}
    totals = {"a": {"cpu": D(5), "count/pods": D(1)}, "b": one, "c": one, "d": {"cpu": D(2), "count/pods": D(1)}}
    # a runs with d (7), or b, c and d together (4): the peak is 7; all four pods are counted
    assert stage_peak(groups, totals) == {"cpu": D(7), "count/pods": D(4)}


def test_objects_only_those_the_workload_says_exist() -> None:
    js = {"spec": {"replicatedJobs": [{"name": "node", "replicas": 1}]}}
    assert "count/secrets" not in job_objects(workload(derived={"jobSet": js}))
    mpi = job_objects(
        workload(
            derived={"jobSet": js, "configMap": {"metadata": {"name": "x-mpi-hostfile"}}},
            managed_secrets={"x-mpi-ssh-auth"},
        )
    )
    assert (mpi["count/secrets"], mpi["secrets"], mpi["count/configmaps"]) == (1, 1, 1)


def test_objects_counted_by_kind_and_secrets_once() -> None:
    wl = workload(
        derived={
            "hostfile": {"kind": "ConfigMap", "metadata": {"name": "x-mpi-hostfile"}},
            "sshSecret": {"kind": "Secret", "metadata": {"name": "x-mpi-ssh-auth"}},
        },
        managed_secrets={"x-mpi-ssh-auth"},
    )
    assert job_objects(wl) == {"count/configmaps": 1, "configmaps": 1, "count/secrets": 1, "secrets": 1}


def test_concurrent_sets_are_the_maximal_overlapping_groups() -> None:
    order = {("init", "a"), ("init", "b"), ("init", "c"), ("a", "c")}
    assert sorted(concurrent_sets(["init", "a", "b", "c"], order)) == [["a", "b"], ["b", "c"], ["init"]]
    assert concurrent_sets(["x", "y"], set()) == [["x", "y"]]


def test_a_trainjob_counts_its_runtime_snapshot_configmap() -> None:
    """Trainer applies `<name>-runtime-snapshot` for every TrainJob: a count/configmaps quota sees it,
    and an MPI job's hostfile comes on top (two ConfigMaps)."""
    snapshot = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x-runtime-snapshot"}}
    js = {"spec": {"replicatedJobs": [{"name": "node", "replicas": 1}]}}
    torch = job_objects(workload(derived={"jobSet": js, "runtimeSnapshot": snapshot}))
    assert (torch["count/configmaps"], torch["configmaps"]) == (1, 1)
    mpi = job_objects(
        workload(
            derived={
                "jobSet": js,
                "runtimeSnapshot": snapshot,
                "configMap": {"kind": "ConfigMap", "metadata": {"name": "x-mpi-hostfile"}},
            }
        )
    )
    assert (mpi["count/configmaps"], mpi["configmaps"]) == (2, 2)
