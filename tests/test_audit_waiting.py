"""A job waiting in its Kueue queue, judged by the audit controller (issue 39, item 2): Kueue
Capacity finds the job's own pending Workload in Kueue v0.17.0's visibility API (its
ownerReferences carry the job's uid: pkg/visibility/storage/utils.go newPendingWorkload) and says
its position and what blocks it; the Events sink writes a Normal PreflightWaiting when what blocks
it changes, never when only the position moves, and reads its state back after a restart."""

from __future__ import annotations

import datetime as dt
from typing import Any

from tests.fakeview import EventClient, FakeView, container, meta, pod, run_check, workload
from tests.test_check_kueue_wait import FULL, PENDING, SERVED, _lq
from webhook.audit.events import (
    PASSED,
    WAITING,
    EventSink,
    blocking_of,
    latest_states,
    waiting_of,
    waiting_to_write,
)
from webhook.audit.sink import JobRef, Judgement
from webhook.checks.kueue.capacity import KueueCapacity
from webhook.config import Settings
from webhook.policy import Decision
from webhook.preflight import Evaluation
from webhook.results import CheckResult, PreflightResults, Status
from webhook.workloads.base import PodGroup

REF = JobRef("trainer.kubeflow.org/v1alpha1", "TrainJob", "team-a", "llama-ft", "u-1")
NOW = dt.datetime(2026, 12, 5, 14, 0, tzinfo=dt.UTC)


def _existing_job() -> object:
    obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "llama-ft",
            "namespace": "team-a",
            "uid": "u-1",
            "labels": {"kueue.x-k8s.io/queue-name": "main"},
        },
        "spec": {},
    }
    return workload([PodGroup("node", 2, pod(container("node", {"nvidia.com/gpu": "8"})))], obj=obj, queue_name="main")


def _item(name: str, at: int, owner_uid: str, priority: int = 0) -> dict[str, Any]:
    m = meta(name, "team-a")
    m["ownerReferences"] = [
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": name, "uid": owner_uid}
    ]
    return {
        "metadata": m,
        "priority": priority,
        "localQueueName": "main",
        "positionInClusterQueue": at,
        "positionInLocalQueue": at,
    }


async def test_a_pending_job_gets_its_position_and_what_blocks_it() -> None:
    items = [
        _item("a", 0, "u-a", 100),
        _item("b", 1, "u-b"),
        _item("trainjob-llama-ft-x", 2, "u-1"),
        _item("c", 3, "u-c"),
    ]
    view = FakeView(served=SERVED, live={PENDING: {"items": items}})
    view.add("namespaces", {"metadata": meta("team-a")})
    view.add("localqueues", _lq("main", "a100"))
    view.add("clusterqueues", FULL)
    r = await run_check(KueueCapacity(), _existing_job(), view)
    assert r.status is Status.WARN
    assert r.message.startswith(
        'TrainJob "llama-ft" waits at position 3 in ClusterQueue "a100": it needs nvidia.com/gpu 16, 0 free now '
        '(flavor "a100-80g": 56 of 64 in use and 8 reserved), and 2 workloads are ahead of it (Kueue\'s visibility '
        "API, read within 5s);"
    )
    # `preflight-webhook report` (its table cuts a message at 160 characters) shows the position and the need
    from webhook.cli.report import Answer, Row, render_table

    row = Row("team-a", "TrainJob", "llama-ft", "Kueue Capacity", "warn", r.message)
    table = render_table(Answer("reports", [row]), "team-a")
    assert 'waits at position 3 in ClusterQueue "a100": it needs nvidia.com/gpu 16, 0 free now' in table
    assert r.details[:2] == [
        'blocking: ClusterQueue "a100" has too little nvidia.com/gpu free for the job',
        'position: 3 in ClusterQueue "a100", 3 in LocalQueue "main"',
    ]


def test_kueue_capacity_is_judged_in_the_cheap_pass() -> None:
    """One pending list per ClusterQueue per PENDING_TTL, shared by every waiting job of it."""
    from webhook.audit.passes import request_free

    assert request_free(KueueCapacity(), Settings())


def _judgement(blocking: str | None, position: str = "3") -> Judgement:
    checks = []
    if blocking is not None:
        details = [f"blocking: {blocking}", f'position: {position} in ClusterQueue "a100", 1 in LocalQueue "main"']
        checks.append(CheckResult("Kueue Capacity", Status.WARN, 'TrainJob "llama-ft" waits …', details=details))
    else:
        checks.append(CheckResult("Kueue Capacity", Status.PASS, 'The job fits ClusterQueue "a100" now'))
    ev = Evaluation(None, PreflightResults(checks), Decision(True))
    return Judgement(REF, ev, "1", NOW, "scan")


GPU = 'ClusterQueue "a100" has too little nvidia.com/gpu free for the job'
CPU = 'ClusterQueue "a100" has too little cpu free for the job'


async def test_preflight_waiting_only_when_what_blocks_changes() -> None:
    client = EventClient()
    sink = EventSink(client, Settings(), instance="a")
    await sink.publish(_judgement(GPU, "3"))
    await sink.publish(_judgement(GPU, "2"))  # the position moved: no Event
    await sink.publish(_judgement(GPU, "1"))
    assert [(b["reason"], b["type"]) for b in client.bodies] == [(WAITING, "Normal")]
    assert client.bodies[0]["message"] == (
        f'TrainJob llama-ft waits: {GPU} (position 3 in ClusterQueue "a100", 1 in LocalQueue "main"). '
        'TrainJob "llama-ft" waits …'
    )
    await sink.publish(_judgement(CPU, "1"))  # what blocks it changed
    assert [b["reason"] for b in client.bodies] == [WAITING, WAITING]
    await sink.publish(_judgement(None))  # fits now: waits no more, no Event (it passed from the start)
    await sink.publish(_judgement(CPU, "1"))  # blocked again: said again
    assert len(client.bodies) == 3
    await sink.forget(REF, "started")
    assert sink.waiting == {}


def test_what_blocks_is_read_back_from_the_latest_waiting_event() -> None:
    message = f'TrainJob llama-ft waits: {GPU} (position 3 in ClusterQueue "a100", 1 in LocalQueue "main"). Rest.'
    events = [
        {"reason": WAITING, "message": message, "reportingComponent": "preflight-webhook-audit",
         "involvedObject": {"uid": "u-1"}, "lastTimestamp": "2026-12-05T14:00:00Z"},
        {"reason": PASSED, "message": "", "reportingComponent": "preflight-webhook-audit",
         "involvedObject": {"uid": "u-1"}, "lastTimestamp": "2026-12-05T14:01:00Z"},
    ]  # fmt: skip
    waiting = latest_states(events, reasons=(WAITING,))
    assert {k: blocking_of(m) for k, (_, m) in waiting.items()} == {"u-1": GPU}
    assert latest_states(events) == {"u-1": (PASSED, "")}  # the failed/passed sequence is its own
    assert waiting_to_write(GPU, waiting_of(_judgement(GPU, "9"))) is None


# --------------------------------------------------------------------------- past Kueue's first page


def _queue(n: int, mine: int | None = None) -> dict[str, Any]:
    """A ClusterQueue's whole pending queue of `n` (FakeView answers it page by page, as Kueue v0.17.0
    does: limit 1000 unless asked, positions those in the whole queue); the job's own at `mine`."""
    return {"items": [_item(f"wl-{i}", i, "u-1" if i == mine else f"u-{i}x") for i in range(n)]}


def _paged_view(queue: dict[str, Any], pages: int) -> FakeView:
    view = FakeView(served=SERVED, live={PENDING: queue})
    view.add("namespaces", {"metadata": meta("team-a")})
    view.add("localqueues", _lq("main", "a100"))
    view.add("clusterqueues", FULL)
    view.max_pages = pages
    return view


def _page(offset: int) -> dict[str, str]:
    return {"offset": str(offset), "limit": "1000"}


async def test_a_job_past_the_first_page_gets_its_position_from_the_second() -> None:
    from webhook.models.kueue.wait import AUDIT_PENDING_PAGES

    view = _paged_view(_queue(1500, mine=1200), AUDIT_PENDING_PAGES)
    r = await run_check(KueueCapacity(), _existing_job(), view)
    assert r.message.startswith(
        'TrainJob "llama-ft" waits at position 1201 in ClusterQueue "a100": it needs nvidia.com/gpu 16, 0 free now '
        '(flavor "a100-80g": 56 of 64 in use and 8 reserved), and 1200 workloads are ahead of it (Kueue\'s '
        "visibility API, 2 pages read within 5s);"
    )
    assert r.details[1] == 'position: 1201 in ClusterQueue "a100", 1201 in LocalQueue "main"'
    assert view.object_queries == [None, _page(1000)]


async def test_a_short_page_ends_the_paging_and_the_count_is_exact() -> None:
    from webhook.models.kueue.wait import AUDIT_PENDING_PAGES

    view = _paged_view(_queue(1500), AUDIT_PENDING_PAGES)  # the job's Workload is not pending (yet)
    r = await run_check(KueueCapacity(), _existing_job(), view)
    assert (
        "and 1500 workloads of priority ≥ 0 (no priority class) are pending ahead of it (Kueue's visibility API, "
        "2 pages read within 5s);" in r.message
    )
    assert r.message.startswith('TrainJob "llama-ft" will wait in ClusterQueue "a100"')
    assert [d for d in r.details if d.startswith("position: ")] == []
    assert view.object_queries == [None, _page(1000)]


async def test_past_the_page_bound_the_count_stays_a_lower_bound() -> None:
    from webhook.models.kueue.wait import AUDIT_PENDING_PAGES

    assert AUDIT_PENDING_PAGES == 10
    view = _paged_view(_queue(10_500, mine=10_200), AUDIT_PENDING_PAGES)
    r = await run_check(KueueCapacity(), _existing_job(), view)
    assert (
        "and at least 10000 workloads of priority ≥ 0 (no priority class) are pending ahead of it (Kueue's "
        "visibility API, 10 pages read within 5s);" in r.message
    )
    assert [d for d in r.details if d.startswith("position: ")] == []
    assert view.object_queries == [None, *(_page(k * 1000) for k in range(1, 10))]


async def test_the_apply_path_reads_one_page() -> None:
    """A review's view allows one page (its deadline): an update of a job waiting past 1000 says "at least"."""
    view = _paged_view(_queue(1500, mine=1200), 1)
    r = await run_check(KueueCapacity(), _existing_job(), view)
    assert (
        "and at least 1000 workloads of priority ≥ 0 (no priority class) are pending ahead of it (Kueue's "
        "visibility API, read within 5s);" in r.message
    )
    assert view.object_queries == [None]


async def test_a_failed_later_page_keeps_what_was_read() -> None:
    from webhook.kube import ApiError

    class FailsPageTwo(FakeView):
        async def get_object(self, *args: Any, **kw: Any) -> dict[str, Any] | None:
            if kw.get("query"):
                raise ApiError(0, "timed out")
            return await super().get_object(*args, **kw)

    view = FailsPageTwo(served=SERVED, live={PENDING: _queue(1500)})
    view.add("namespaces", {"metadata": meta("team-a")})
    view.add("localqueues", _lq("main", "a100"))
    view.add("clusterqueues", FULL)
    view.max_pages = 10
    r = await run_check(KueueCapacity(), _existing_job(), view)
    assert (
        "and at least 1000 workloads of priority ≥ 0 (no priority class) are pending ahead of it (Kueue's "
        "visibility API, read within 5s);" in r.message
    )


async def test_each_page_is_a_request_paced_by_the_audit_clients_qps(monkeypatch: Any) -> None:
    """The audit controller's client (AuditClient) takes a token of its audit.qps bucket for every
    request, so each page is a budgeted read; a page is reused PENDING_TTL by its own query."""
    from kubernetes_asyncio import client as k8s_client

    from tests.test_cluster_scope import LOCK
    from webhook.audit.client import AuditClient, TokenBucket
    from webhook.checks import all_checks
    from webhook.cluster.client import KubeClient
    from webhook.cluster.live import LiveClusterView
    from webhook.deadline import Deadline
    from webhook.models.kueue.wait import PENDING_TTL, VISIBILITY_API

    sent: list[tuple[str, dict[str, Any] | None]] = []

    async def answer(self: Any, method: str, path: str, **kw: Any) -> dict[str, Any]:
        sent.append((path, kw.get("query")))
        return {"items": []}

    monkeypatch.setattr(KubeClient, "request", answer)
    cfg = k8s_client.Configuration()
    cfg.host = "https://127.0.0.1:1"
    client = AuditClient(cfg, 16, qps=1, burst=40)
    client.limiter = TokenBucket(1, 40, clock=lambda: 0.0)  # no refill: the tokens taken stay counted
    try:
        v = LiveClusterView(LOCK, client, checks=all_checks(), own_ns="preflight-system")
        assert v.max_pages == 1  # a review's view: one page; the audit's runner sets AUDIT_PENDING_PAGES
        for _ in range(2):
            for query in (None, _page(1000), _page(2000)):
                await v.get_object(
                    VISIBILITY_API, "clusterqueues", None, "a100", Deadline(5), ttl=PENDING_TTL,
                    subresource="pendingworkloads", query=query,
                )  # fmt: skip
        path = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/a100/pendingworkloads"
        assert sent == [(path, None), (path, _page(1000)), (path, _page(2000))]
        assert client.limiter.reserve() == 0.0 and client.limiter._tokens == 40 - 3 - 1
    finally:
        await client.close()
