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
