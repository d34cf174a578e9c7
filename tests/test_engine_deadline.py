"""A review never fails open because it is big or slow (issue 33, "Build 2").

The deadline runs out for each part separately: a check still running is named "not verified"
(timed out: timeoutAction decides), while a failure already found still denies in enforce mode.
A sweep whose children cannot all be rendered in the adapter's share of the budget keeps its
cheap deny-capable checks. Time is a fake clock or a check that never finishes: no sleeps, no
timing assertions.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest

import webhook.workloads.aiperf as aiperf
from tests.fakeview import FakeView, meta
from tests.test_server import call, review, widget
from tests.test_workload_aiperf_sweep import sweep_obj
from webhook.checks.base import Check, CheckContext
from webhook.config import Settings
from webhook.deadline import RENDER_SHARE, Deadline
from webhook.preflight import evaluate
from webhook.results import CheckResult, Status
from webhook.workloads.render_cache import CACHE

WIDGET = frozenset({"Widget"})


class Broken(Check):
    name = "Widget Broken"
    kinds = WIDGET
    synchronous = True
    summary = "Always fails."

    async def run(self, ctx: CheckContext) -> CheckResult:
        return CheckResult(self.name, Status.FAIL, 'Secret "s" not found. Fix: create it')


class Stuck(Check):
    """Stands for a check that holds the loop past the budget (a long synchronous computation): the engine
    cannot cut a synchronous check, so only the server's own timeout ends the review."""

    name = "Widget Stuck"
    kinds = WIDGET
    synchronous = True
    summary = "Never finishes."

    async def run(self, ctx: CheckContext) -> CheckResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_failure_found_before_the_servers_own_timeout_still_denies(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(Settings(budgetSeconds=0.2, safetyMarginSeconds=0.2), checks=[Broken(), Stuck()])
    status, body, _ = await call(server, client_ssl, review(widget(), uid="cut-1"))
    assert status == 200
    resp = body["response"]
    assert resp["allowed"] is False
    assert resp["status"]["message"] == (
        'Widget "w1" in namespace "team-a" failed 1 preflight check:\n'
        '[Widget Broken] Secret "s" not found. Fix: create it'
    )
    assert resp["warnings"] == [
        "[Widget Stuck] did not finish within the 0.2s budget; its verdict is unknown (timed out)"
    ]


async def test_with_nothing_found_by_the_servers_timeout_timeout_action_decides(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(Settings(budgetSeconds=0.2, safetyMarginSeconds=0.2), checks=[Stuck()])
    status, body, _ = await call(server, client_ssl, review(widget(), uid="cut-2"))
    resp = body["response"]
    assert (status, resp["allowed"]) == (200, True)  # timeoutAction warn (the default): not verified, said so
    assert resp["warnings"] == [
        "[Widget Stuck] did not finish within the 0.2s budget; its verdict is unknown (timed out)"
    ]


class AsyncBroken(Check):
    """Finds its failure through I/O (a Secrets read): a task of its own."""

    name = "Widget Secrets"
    kinds = WIDGET
    summary = "Fails after one await."

    async def run(self, ctx: CheckContext) -> CheckResult:
        await asyncio.sleep(0)
        return CheckResult(self.name, Status.FAIL, 'Secret "t" not found. Fix: create it')


async def test_a_failure_an_io_check_found_still_denies_when_a_check_holds_the_review_past_its_timeout(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(Settings(budgetSeconds=0.2, safetyMarginSeconds=0.2), checks=[AsyncBroken(), Stuck()])
    status, body, _ = await call(server, client_ssl, review(widget(), uid="cut-3"))
    resp = body["response"]
    assert (status, resp["allowed"]) == (200, False)
    assert resp["status"]["message"] == (
        'Widget "w1" in namespace "team-a" failed 1 preflight check:\n'
        '[Widget Secrets] Secret "t" not found. Fix: create it'
    )


async def test_a_heavy_check_starts_once_the_cheap_ones_have_answered() -> None:
    from tests.test_engine import make, wl

    answered = asyncio.Event()
    seen: list[bool] = []

    async def cheap(ctx: CheckContext) -> CheckResult:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        answered.set()
        return CheckResult("Cheap", Status.PASS, "ok")

    async def heavy(ctx: CheckContext) -> CheckResult:
        await heavy_turn(ctx)  # before its heavy part
        seen.append(answered.is_set())
        await heavy_turn(ctx)  # once a review: the second returns at once
        return CheckResult("Heavy", Status.PASS, "ok")

    from webhook.engine import run_checks
    from webhook.models.context import heavy_turn

    checks = [make("Heavy", heavy, heavy=True), make("Cheap", cheap)]
    res = await run_checks(wl(), checks, settings=Settings(), deadline=Deadline(30.0))
    assert [r.name for r in res.checks] == ["Heavy", "Cheap"]  # registry order kept
    assert seen == [True]


async def test_a_heavy_check_with_nothing_heavy_to_do_answers_with_the_cheap_ones() -> None:
    """Its heavy part done already (the Dry Run of a render seen before, every outcome kept), a heavy check
    does not await its turn and answers at once: at 32 clients, waiting for a moment when no cheap check of
    any review was in flight held every review's Dry Run (docs/benchmarks/vs-kyverno.md)."""
    from tests.test_engine import make, wl
    from webhook.engine import run_checks

    release = asyncio.Event()
    seen: list[bool] = []

    async def cheap(ctx: CheckContext) -> CheckResult:
        await release.wait()  # in flight until the heavy check has answered
        return CheckResult("Cheap", Status.PASS, "ok")

    async def heavy(ctx: CheckContext) -> CheckResult:
        seen.append(release.is_set())
        release.set()
        return CheckResult("Heavy", Status.PASS, "kept")

    checks = [make("Heavy", heavy, heavy=True), make("Cheap", cheap)]
    res = await run_checks(wl(), checks, settings=Settings(), deadline=Deadline(30.0))
    assert [(r.name, r.message) for r in res.checks] == [("Heavy", "kept"), ("Cheap", "ok")]
    assert seen == [False]


# --------------------------------------------------------------------------- a sweep slower than its budget


class Clock:
    """A deadline's clock that only the children's renders move."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def cluster() -> FakeView:
    return FakeView(
        {"namespaces": [{"metadata": meta("team-a")}], "serviceaccounts": [{"metadata": meta("default", "team-a")}]},
        secrets={},
    )


def broken_sweep() -> dict[str, Any]:
    """Ten variations whose pods read a Secret that does not exist."""
    env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-missing", "key": "token"}}}]
    return sweep_obj(name="slow", podTemplate={"env": env})


@pytest.fixture
def slow_children(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Every child render takes 1 s of the deadline's clock (a large sweep, without the wall time)."""
    clock = Clock()
    original = aiperf.build

    def build(obj: dict[str, Any], **kw: Any) -> Any:
        clock.now += 1.0
        return original(obj, **kw)

    monkeypatch.setattr(aiperf, "build", build)
    return clock


async def test_a_broken_sweep_slower_than_its_budget_is_denied_by_what_was_found(slow_children: Clock) -> None:
    CACHE.clear()
    deadline = Deadline(4.0, clock=slow_children)
    ev = await evaluate(broken_sweep(), settings=Settings(), deadline=deadline, view=cluster())
    # the adapter stops at its share of the budget (1.6 of 4 s: two children), the checks get the rest
    assert RENDER_SHARE == 0.4 and [c.name for c in ev.workload.children] == ["slow-v00", "slow-v01"]
    assert ev.decision.allowed is False
    assert '[Secrets] Secret "hf-missing" not found in namespace "team-a"' in ev.decision.message
    by_name = {r.name: r for r in ev.results.checks}
    children = by_name["Sweep Children"]
    assert (children.status, children.timed_out) == (Status.WARN, True)
    assert children.message == (
        "2 of 10 children of AIPerfSweep slow were judged and pass; 8 more were not rendered within the review's "
        "budget and are not verified (timed out): slow-v02 (phases.profiling.concurrency=300), "
        "slow-v03 (phases.profiling.concurrency=400), slow-v04 (phases.profiling.concurrency=500), "
        "slow-v05 (phases.profiling.concurrency=600), slow-v06 (phases.profiling.concurrency=700) and 3 more. "
        "Fix: raise budgetSeconds and the webhook's timeoutSeconds, or check the sweep with "
        "`preflight-webhook check -f` before applying it"
    )
    assert children.details[-1] == "not verified: slow-v09 (phases.profiling.concurrency=1000)"
    # a render cut short by one review's deadline is never served to the next review
    assert len(CACHE) == 0
    # in a review, every child but the heaviest keeps only what the per-child checks read
    slim = [c for c in ev.workload.children if c is not ev.workload.worst]
    assert slim and all(
        set(k for ctr in g.pod_spec["containers"] for k in ctr) <= {"name", "resources", "restartPolicy"}
        for c in slim
        for g in c.workload.pod_groups
    )
    assert any("env" in ctr for g in ev.workload.worst.workload.pod_groups for ctr in g.pod_spec["containers"])


async def test_a_sweep_cut_short_is_not_verified_under_timeout_action(slow_children: Clock) -> None:
    obj = sweep_obj(name="slow")
    view = FakeView({"namespaces": [{"metadata": meta("team-a")}]}, secrets={})
    deny = Settings(timeoutAction="deny")
    ev = await evaluate(obj, settings=deny, deadline=Deadline(4.0, clock=slow_children), view=view)
    assert ev.decision.allowed is False
    assert ev.decision.message.startswith(
        'AIPerfSweep "slow" in namespace "team-a" failed 1 preflight check:\n[Sweep Children] 2 of 10 children'
    )
    slow_children.now = 0.0
    ev = await evaluate(obj, settings=Settings(), deadline=Deadline(4.0, clock=slow_children), view=view)
    assert ev.decision.allowed is True  # timeoutAction warn: said as a warning, never a pass
    assert any(w.startswith("[Sweep Children] 2 of 10 children") for w in ev.decision.warnings)


async def test_without_a_deadline_every_child_is_rendered(slow_children: Clock) -> None:
    from webhook.workloads import build_workload

    wl = build_workload(broken_sweep(), settings=Settings())
    assert len(wl.children) == 10 and not wl.unrendered and not wl.cut_short


# --------------------------------------------------------------------------- large reviews at once


async def test_the_byte_gate_lets_reviews_in_first_come_first_served_by_weight() -> None:
    from webhook.server import ByteGate

    gate = ByteGate(10)
    assert await gate.acquire(6, 0) and gate.used == 6
    order: list[str] = []

    async def take(name: str, weight: int, timeout: float) -> None:
        order.append(f"{name} {'in' if await gate.acquire(weight, timeout) else 'gave up'}")

    heavy = asyncio.ensure_future(take("heavy", 8, 30))
    light = asyncio.ensure_future(take("light", 1, 30))  # would fit now, but waits behind the heavy one
    await asyncio.sleep(0)
    assert (order, gate.waiting) == ([], 2)
    gate.release(6)
    await asyncio.gather(heavy, light)
    assert order == ["heavy in", "light in"] and gate.used == 9
    assert not await gate.acquire(5, 0)  # no room, no time to wait: refused, nothing held
    assert (gate.used, gate.waiting) == (9, 0)
    gate.release(8)
    gate.release(1)
    assert await gate.acquire(1000, 0) and gate.used == 10  # heavier than the whole gate: alone
    gate.release(1000)
    assert gate.used == 0


def large_widget(name: str = "big") -> dict[str, Any]:
    obj = widget(name=name)
    obj["spec"]["pad"] = "x" * 300_000  # over OFF_LOOP_BYTES: a large review
    return obj


@pytest.mark.parametrize("timeout_action", ["warn", "audit"])
async def test_a_large_review_with_no_room_is_503_with_retry_after_never_a_silent_allow(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, timeout_action: str
) -> None:
    server = await start_webhook(Settings(budgetSeconds=0.2, timeoutAction=timeout_action), checks=[Broken()])
    gate = server.webhook.large_reviews
    assert await gate.acquire(gate.capacity, 0)  # the replica is busy with other large reviews
    status, body, headers = await call(server, client_ssl, review(large_widget(), uid="busy-1"))
    assert (status, headers["Retry-After"]) == (503, "1")
    assert body == {
        "error": "not judged: this replica is judging 1.0 MiB of other large reviews (the most it judges at once "
        "is 1.0 MiB) and 0 more are waiting; try again in 1s"
    }
    gate.release(gate.capacity)
    status, body, _ = await call(server, client_ssl, review(large_widget(), uid="busy-2"))
    assert (status, body["response"]["allowed"]) == (200, False)  # room again: judged (and denied by its finding)
    assert "[Widget Broken]" in body["response"]["status"]["message"]
    assert gate.used == 0  # given back once judged


async def test_a_large_review_with_no_room_is_denied_as_not_verified_under_timeout_action_deny(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(Settings(budgetSeconds=0.2, timeoutAction="deny"), checks=[Broken()])
    gate = server.webhook.large_reviews
    assert await gate.acquire(gate.capacity, 0)
    status, body, _ = await call(server, client_ssl, review(large_widget(), uid="busy-3"))
    resp = body["response"]
    assert (status, resp["uid"], resp["allowed"]) == (200, "busy-3", False)
    assert resp["status"]["message"] == (
        'Widget "big" in namespace "team-a" failed 1 preflight check:\n'
        "[Preflight] not judged: this replica is judging 1.0 MiB of other large reviews (the most it judges at "
        "once is 1.0 MiB) and 0 more are waiting; its verdict is unknown. Fix: apply again in a moment"
    )
    gate.release(gate.capacity)
