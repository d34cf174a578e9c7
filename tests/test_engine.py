"""The engine: one deadline, blocking tier first, nothing dropped, exceptions contained."""

import asyncio

from webhook.checks.base import Check, CheckContext
from webhook.cluster.view import ApiError
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.engine import applicable, run_checks
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup, Workload


def make(name: str, behaviour, *, blocking: bool = False, **attrs) -> Check:
    async def run(self, ctx: CheckContext):
        return await behaviour(ctx)

    cls = type(name.replace(" ", ""), (Check,), {"name": name, "blocking": blocking, "run": run, **attrs})
    return cls()


def result(status: Status, message: str = "ok"):
    async def behaviour(ctx):
        return CheckResult("?", status, message)

    return behaviour


def renamed(status: Status, message: str = "ok"):
    """A behaviour returning a result under the running check's own name."""

    def factory(name: str):
        async def behaviour(ctx):
            return CheckResult(name, status, message)

        return behaviour

    return factory


def wl(**kw) -> Workload:
    return Workload(
        "TrainJob", "trainer.kubeflow.org/v1alpha1", "t", "ns", {}, pod_groups=[PodGroup("node", 1, {})], **kw
    )


async def test_slow_check_is_reported_by_name_and_the_answer_beats_the_deadline():
    never = asyncio.Event()
    started = asyncio.Event()
    cancelled = []

    async def slow(ctx):
        started.set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    checks = [make("Fast", renamed(Status.PASS)("Fast")), make("Slow", slow)]
    deadline = Deadline(0.2)
    # the apiserver waits budget + safety margin; the answer must come inside that, whatever the slow check does
    # (wait_for raises TimeoutError, failing the test, if the engine waited on the never-firing event)
    res = await asyncio.wait_for(run_checks(wl(), checks, settings=Settings(), deadline=deadline), timeout=0.2 + 2.0)
    assert [r.name for r in res.checks] == ["Fast", "Slow"]
    assert res.checks[0].status is Status.PASS
    slow_r = res.checks[1]
    assert started.is_set() and cancelled == [True]
    assert slow_r.timed_out
    assert slow_r.status is Status.WARN
    assert slow_r.message == "did not finish within the 0.2s budget; its verdict is unknown (timed out)"
    assert slow_r.hints == ["Raise budgetSeconds / the webhook's timeoutSeconds, or check apiserver responsiveness"]


async def test_slow_blocking_check_times_out_and_the_rest_still_run_within_budget():
    never = asyncio.Event()

    async def slow(ctx):
        await never.wait()

    checks = [make("Gate", slow, blocking=True), make("After", slow), make("Instant", renamed(Status.PASS)("Instant"))]
    res = await run_checks(wl(), checks, settings=Settings(), deadline=Deadline(0.1))
    # a timed-out blocking check does not stop the rest (its verdict is unknown, not a FAIL);
    # with no time left, a check that needs to wait is reported as timed out, never dropped
    assert [r.name for r in res.checks] == ["Gate", "After", "Instant"]
    assert res.checks[0].timed_out and res.checks[1].timed_out
    assert res.checks[2].status is Status.PASS


async def test_blocking_failure_stops_the_rest():
    ran = []

    async def gate(ctx):
        return CheckResult("Gate", Status.FAIL, "JobSet is not served. Fix: install JobSet")

    async def later(ctx):
        ran.append(True)
        return CheckResult("Later", Status.PASS, "ok")

    checks = [make("Gate", gate, blocking=True), make("Gate2", later, blocking=True), make("Later", later)]
    res = await run_checks(wl(), checks, settings=Settings(), deadline=Deadline(5))
    assert ran == []
    assert [(r.name, r.status, r.message) for r in res.checks] == [
        ("Gate", Status.FAIL, "JobSet is not served. Fix: install JobSet"),
        ("Gate2", Status.SKIP, "Not run: blocking check 'Gate' failed"),
        ("Later", Status.SKIP, "Not run: blocking check 'Gate' failed"),
    ]


async def test_exceptions_are_contained_transient_warns_other_fails():
    async def transient(ctx):
        raise ApiError(503, "etcd leader changed")

    async def timeout(ctx):
        raise TimeoutError()

    async def conn(ctx):
        raise ConnectionResetError("reset by peer")

    async def bug(ctx):
        raise KeyError("spec")

    async def forbidden(ctx):
        raise ApiError(403, "secrets is forbidden")

    checks = [make("A", transient), make("B", timeout), make("C", conn), make("D", bug), make("E", forbidden)]
    res = await run_checks(wl(), checks, settings=Settings(), deadline=Deadline(5))
    assert [(r.name, r.status, r.message) for r in res.checks] == [
        ("A", Status.WARN, "Could not complete (transient error): etcd leader changed"),
        ("B", Status.WARN, "Could not complete (transient error): TimeoutError"),
        ("C", Status.WARN, "Could not complete (transient error): reset by peer"),
        ("D", Status.FAIL, "Check failed with error: 'spec'"),
        ("E", Status.FAIL, "Check failed with error: secrets is forbidden"),
    ]
    assert all(r.duration_ms is not None for r in res.checks)


async def test_blocking_check_exception_fails_and_stops():
    async def bug(ctx):
        raise RuntimeError("boom")

    checks = [make("Gate", bug, blocking=True), make("Later", renamed(Status.PASS)("Later"))]
    res = await run_checks(wl(), checks, settings=Settings(), deadline=Deadline(5))
    assert [(r.status, r.message) for r in res.checks] == [
        (Status.FAIL, "Check failed with error: boom"),
        (Status.SKIP, "Not run: blocking check 'Gate' failed"),
    ]


async def test_skip_preconditions():
    class View:
        def check_capability(self, check):
            return (False, "not permitted to get secrets") if check.name == "NoPerm" else (True, "")

    called = []

    async def body(ctx):
        called.append(True)
        return CheckResult("x", Status.PASS, "ran")

    cluster = make("Cluster", body, needs_cluster=True)
    pods = make("Pods", body)
    capacity = make("Capacity", body, local_capacity=True)
    noperm = make("NoPerm", body, needs_cluster=True)

    offline = await run_checks(wl(), [cluster], settings=Settings(), deadline=Deadline(5))
    assert [(r.status, r.message) for r in offline.checks] == [
        (Status.SKIP, "Skipped: needs a cluster (running offline)")
    ]

    incomplete = wl(incomplete_reason='runtime ClusterTrainingRuntime "torch" not given')
    res = await run_checks(incomplete, [pods], settings=Settings(), deadline=Deadline(5))
    assert [(r.status, r.message) for r in res.checks] == [
        (Status.SKIP, 'Skipped: runtime ClusterTrainingRuntime "torch" not given')
    ]

    multi = wl(managed_by="kueue.x-k8s.io/multikueue")
    res = await run_checks(multi, [capacity], settings=Settings(), deadline=Deadline(5))
    assert [(r.status, r.message) for r in res.checks] == [
        (Status.SKIP, "Skipped: spec.managedBy is kueue.x-k8s.io/multikueue, so the job runs in another cluster")
    ]

    res = await run_checks(wl(), [noperm], settings=Settings(), deadline=Deadline(5), view=View())
    assert [(r.status, r.message) for r in res.checks] == [(Status.SKIP, "Skipped: not permitted to get secrets")]
    assert called == []


async def test_results_keep_registry_order_and_lists_are_flattened():
    async def two(ctx):
        return [CheckResult("Two", Status.FAIL, "a"), CheckResult("Two", Status.WARN, "b")]

    async def one(ctx):
        return CheckResult("One", Status.PASS, "c")

    res = await run_checks(wl(), [make("Two", two), make("One", one)], settings=Settings(), deadline=Deadline(5))
    assert [(r.name, r.message) for r in res.checks] == [("Two", "a"), ("Two", "b"), ("One", "c")]
    assert not res.passed and res.has_warnings


def test_applicable_filters_kind_off_and_skip():
    from webhook.checks import all_checks

    checks = all_checks()
    names = {c.name for c in checks}
    assert {"Image Reference", "Name Length", "Accelerator Limits", "ConfigMap Size"} <= names
    trainjob = [c.name for c in applicable(checks, wl(), Settings())]
    assert "ConfigMap Size" not in trainjob and "Image Reference" in trainjob
    off = [c.name for c in applicable(checks, wl(), Settings(checks={"Image Reference": "off"}))]
    assert "Image Reference" not in off
    skipped = [c.name for c in applicable(checks, wl(), Settings(), {"Name Length"})]
    assert "Name Length" not in skipped


# --------------------------------------------------------------------------- issue 25: no review holds the loop


def sync_check(name: str, behaviour) -> Check:
    return make(name, behaviour, synchronous=True)


async def test_synchronous_checks_give_the_loop_a_turn_once_their_time_slice_is_used(monkeypatch):
    """A large workload's synchronous checks yield between checks, so /healthz and the other reviews are
    answered meanwhile; a small one (all of them within the slice) never yields."""
    import webhook.engine as engine

    seen = []
    other_ran = asyncio.Event()

    def recorder(name: str):
        async def behaviour(ctx):
            seen.append((name, other_ran.is_set()))
            return CheckResult(name, Status.PASS, "ok")

        return behaviour

    async def other_review() -> None:
        other_ran.set()

    checks = [sync_check("A", recorder("A")), sync_check("B", recorder("B"))]
    monkeypatch.setattr(engine, "YIELD_AFTER_SECONDS", 3600.0)  # both within the slice, however busy the machine
    other = asyncio.ensure_future(other_review())  # runs at the loop's next turn
    await run_checks(wl(), checks, settings=Settings(), deadline=Deadline(5))
    assert seen == [("A", False), ("B", False)]  # within the slice: back to back
    await other

    seen.clear()
    other_ran.clear()
    monkeypatch.setattr(engine, "YIELD_AFTER_SECONDS", 0.0)  # every check uses up the slice
    other = asyncio.ensure_future(other_review())
    await run_checks(wl(), checks, settings=Settings(), deadline=Deadline(5))
    assert seen == [("A", False), ("B", True)]  # the other coroutine ran between A and B
    await other


async def test_a_synchronous_check_not_started_by_the_deadline_is_reported_timed_out():
    now = [0.0]
    deadline = Deadline(2.0, clock=lambda: now[0])

    async def slow_cpu(ctx):  # a synchronous check that used up the whole budget
        now[0] = 2.5
        return CheckResult("Slow", Status.PASS, "ok")

    ran = []

    async def after(ctx):
        ran.append(True)
        return CheckResult("After", Status.PASS, "ok")

    res = await run_checks(
        wl(), [sync_check("Slow", slow_cpu), sync_check("After", after)], settings=Settings(), deadline=deadline
    )
    assert ran == []
    assert [(r.name, r.status, r.message, r.timed_out) for r in res.checks] == [
        ("Slow", Status.PASS, "ok", False),
        ("After", Status.WARN, "did not finish within the 2.0s budget; its verdict is unknown (timed out)", True),
    ]
