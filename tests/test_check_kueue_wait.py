"""Kueue Capacity's "will wait" warning (issue 39): exact wording for each source of the count ahead
(Kueue v0.17.0's visibility API pendingworkloads, or the ClusterQueue status when that API is not
served or not permitted), the job's priority, preemption, alternatives; and zero noise: a job
admitted now gets no warning and costs no visibility read."""

from __future__ import annotations

import pytest

from tests.fakeview import FakeView, container, meta, pod, run_check, workload
from webhook.checks.kueue.capacity import KueueCapacity
from webhook.cluster.reads import DeclaredReads
from webhook.kube import ApiError, Permission
from webhook.results import Status
from webhook.workloads.base import PodGroup

VIS = "visibility.kueue.x-k8s.io/v1beta2"
SERVED = {"v1", "trainer.kubeflow.org/v1alpha1", "kueue.x-k8s.io/v1beta2", VIS}
ACTIVE = {"conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]}
PENDING = ("clusterqueues/pendingworkloads", None, "a100")


def _job(gpus: int = 16, labels: dict | None = None, priority_class: str = "") -> object:
    spec = pod(container("node", {"nvidia.com/gpu": str(gpus // 2)}))
    if priority_class:
        spec["priorityClassName"] = priority_class
    obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "llama-ft",
            "namespace": "team-a",
            "labels": {"kueue.x-k8s.io/queue-name": "main", **(labels or {})},
        },
        "spec": {},
    }
    return workload([PodGroup("node", 2, spec)], obj=obj, queue_name="main")


def _cq(name: str, nominal: str, used: str = "0", reserved: str = "0", pending: int = 0, **spec) -> dict:
    status = {
        **ACTIVE,
        "pendingWorkloads": pending,
        "flavorsUsage": [{"name": "a100-80g", "resources": [{"name": "nvidia.com/gpu", "total": used}]}],
        "flavorsReservation": [{"name": "a100-80g", "resources": [{"name": "nvidia.com/gpu", "total": reserved}]}],
    }
    groups = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "a100-80g", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}],
        }
    ]
    return {
        "metadata": meta(name),
        "spec": {"namespaceSelector": {}, "resourceGroups": groups, **spec},
        "status": status,
    }


def _lq(name: str, cq: str) -> dict:
    return {"metadata": meta(name, "team-a"), "spec": {"clusterQueue": cq}, "status": ACTIVE}


def _pending(*priorities: int) -> dict:
    return {
        "items": [
            {
                "metadata": meta(f"wl-{i}", "team-a"),
                "priority": p,
                "localQueueName": "main",
                "positionInClusterQueue": i,
                "positionInLocalQueue": i,
            }
            for i, p in enumerate(priorities)
        ]
    }


def _view(*objs: tuple[str, dict], served: set[str] = SERVED, live: dict | None = None) -> FakeView:
    v = FakeView(served=served, live=live or {})
    v.add("namespaces", {"metadata": meta("team-a")})
    v.add("localqueues", _lq("main", "a100"))
    for res, o in objs:
        v.add(res, o)
    return v


FULL = _cq("a100", "64", used="56", reserved="64", pending=5)
WAIT_HEAD = (
    'TrainJob "llama-ft" will wait in ClusterQueue "a100": it needs nvidia.com/gpu 16, 0 free now (flavor "a100-80g": '
    "56 of 64 in use and 8 reserved), and "
)
NO_COHORT = '; ClusterQueue "a100" is in no cohort: it cannot borrow; '


async def test_a_job_that_fits_now_gets_no_warning_and_no_visibility_read() -> None:
    view = _view(("clusterqueues", _cq("a100", "64", used="16", reserved="16")), live={PENDING: _pending(100)})
    r = await run_check(KueueCapacity(), _job(), view)
    assert (r.status, r.message) == (Status.PASS, 'The job (nvidia.com/gpu 16) fits ClusterQueue "a100" now')
    assert view.object_reads == []


async def test_the_count_ahead_from_the_visibility_api_at_the_jobs_priority() -> None:
    pc = {"metadata": meta("team-high"), "value": 100}
    view = _view(("clusterqueues", FULL), ("priorityclasses", pc), live={PENDING: _pending(200, 100, 100, 50, 0)})
    r = await run_check(KueueCapacity(), _job(priority_class="team-high"), view)
    assert (r.status, r.message) == (
        Status.WARN,
        WAIT_HEAD + '3 workloads of priority ≥ 100 (PriorityClass "team-high") are pending ahead of it (Kueue\'s '
        "visibility API, read within 5s)" + NO_COHORT + "it preempts nothing (withinClusterQueue Never). Fix: nothing "
        "to fix; it starts once nvidia.com/gpu is released (ClusterQueue status as watched 1s ago).",
    )
    assert view.object_reads == [PENDING]


async def test_a_globaldefault_priority_class_sets_the_priority() -> None:
    pc = {"metadata": meta("base"), "value": 60, "globalDefault": True}
    view = _view(("clusterqueues", FULL), ("priorityclasses", pc), live={PENDING: _pending(200, 50)})
    r = await run_check(KueueCapacity(), _job(), view)
    assert '1 workload of priority ≥ 60 (the globalDefault PriorityClass "base") is pending ahead of it' in r.message


async def test_a_workload_priority_class_not_read_counts_every_pending_workload() -> None:
    view = _view(("clusterqueues", FULL), live={PENDING: _pending(200, 0)})
    r = await run_check(KueueCapacity(), _job(labels={"kueue.x-k8s.io/priority-class": "urgent"}), view)
    assert (
        '2 workloads (its priority, from WorkloadPriorityClass "urgent", is not read: every pending workload counts) '
        "are pending ahead of it (Kueue's visibility API, read within 5s)" in r.message
    )


@pytest.mark.parametrize(
    ("served", "answer", "why"),
    [
        (SERVED - {VIS}, None, "visibility.kueue.x-k8s.io/v1beta2 is not served"),
        (
            SERVED,
            ApiError(403, "forbidden", "Forbidden"),
            "not permitted to get clusterqueues/pendingworkloads.visibility.kueue.x-k8s.io",
        ),
        (SERVED, None, 'the visibility API does not know ClusterQueue "a100"'),
        (
            SERVED,
            ApiError(503, "the server is currently unable to handle the request"),
            "the server is currently unable",
        ),
    ],
    ids=["not served", "forbidden", "not found", "unavailable"],
)
async def test_without_the_visibility_api_the_count_comes_from_the_status(served, answer, why) -> None:
    live = {PENDING: answer} if answer is not None else {}
    r = await run_check(KueueCapacity(), _job(), _view(("clusterqueues", FULL), served=served, live=live))
    assert r.status is Status.WARN
    assert (
        WAIT_HEAD + f"5 workloads are pending ahead of it (ClusterQueue status.pendingWorkloads, every priority: {why}"
    ) in r.message


async def test_preemption_and_a_local_queue_where_it_fits_now() -> None:
    cq = _cq("a100", "64", used="56", reserved="64", preemption={"withinClusterQueue": "LowerPriority"})
    spot = _cq("spot", "32")
    busy = _cq("busy", "8")  # too small: never named
    view = _view(
        ("clusterqueues", cq),
        ("clusterqueues", spot),
        ("clusterqueues", busy),
        ("localqueues", _lq("spot", "spot")),
        ("localqueues", _lq("small", "busy")),
        live={PENDING: _pending()},
    )
    r = await run_check(KueueCapacity(), _job(), view)
    assert r.message.endswith(
        "0 workloads of priority ≥ 0 (no priority class) are pending ahead of it (Kueue's visibility API, read within "
        '5s); ClusterQueue "a100" is in no cohort: it cannot borrow; Kueue may preempt admitted workloads of priority < 0 '
        'in ClusterQueue "a100" for it. Fix: nothing to fix; it starts once nvidia.com/gpu is released; to start '
        'sooner, use LocalQueue "spot" (ClusterQueue "spot"), where it fits now (ClusterQueue status as watched 1s ago).'
    )


async def test_room_left_names_the_most_it_could_ask_now() -> None:
    view = _view(("clusterqueues", _cq("a100", "64", used="52", reserved="52")), live={PENDING: _pending()})
    r = await run_check(KueueCapacity(), _job(), view)
    assert '16, 12 free now (flavor "a100-80g": 52 of 64 in use and 0 reserved)' in r.message
    assert "to start sooner, ask for at most 12 nvidia.com/gpu" in r.message


def test_only_a_declared_subresource_is_read() -> None:
    reads = DeclaredReads([Permission("get", "clusterqueues", "visibility.kueue.x-k8s.io", "pendingworkloads")], [])
    reads.check_get(VIS, "clusterqueues", "", "a100", "pendingworkloads")
    with pytest.raises(ApiError) as err:
        reads.check_get(VIS, "clusterqueues", "", "a100")  # the object itself was not declared
    assert err.value.forbidden
    with pytest.raises(ApiError):
        DeclaredReads([], []).check_get(VIS, "clusterqueues", "", "a100", "pendingworkloads")


async def test_the_live_view_gets_the_pending_workloads_subresource_once_per_ttl() -> None:
    """GET /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/<name>/pendingworkloads, reused PENDING_TTL."""
    from tests.test_cluster_scope import view
    from webhook.deadline import Deadline
    from webhook.models.kueue.wait import PENDING_TTL

    v, rc = view()
    for _ in range(3):
        got = await v.get_object(
            VIS, "clusterqueues", None, "a100", Deadline(5), ttl=PENDING_TTL, subresource="pendingworkloads"
        )
        assert got is not None
    assert rc.paths == ["/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/a100/pendingworkloads"]
    with pytest.raises(ApiError):  # the object itself is not a declared read
        await v.get_object(VIS, "clusterqueues", None, "a100", Deadline(5))


async def test_a_full_page_of_pending_workloads_is_a_lower_bound() -> None:
    """The visibility API answers at most 1000 (its default limit); Kueue lists them highest priority first."""
    view = _view(("clusterqueues", FULL), live={PENDING: _pending(*([5] * 1000))})
    r = await run_check(KueueCapacity(), _job(), view)
    assert "and at least 1000 workloads of priority ≥ 0 (no priority class) are pending ahead of it" in r.message
    view = _view(("clusterqueues", FULL), live={PENDING: _pending(*([9] * 999), 0)})
    pc = {"metadata": meta("mid"), "value": 5}
    view.add("priorityclasses", pc)
    r = await run_check(KueueCapacity(), _job(priority_class="mid"), view)
    assert "and 999 workloads of priority ≥ 5" in r.message  # the last one is below: nothing past it is ahead
