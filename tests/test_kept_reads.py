"""Answers the view keeps, without a task: `read_live` and the engine's kept-only first run (Check.kept_reads).

At 32 clients nearly every live read is kept (webhook/reused.py); a task per check and a gather per read
cost more than the checks' own work. These tests pin what that path must never change: the same results
as the run that reads (tests/fakeview.py `run_check_all` compares the two for every Secrets, Controllers
and Endpoint Service test), a read not kept made as before, and a check that breaks the contract still
judged."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from tests.fakeview import FakeView, container, pod, workload
from webhook.checks.base import Check, CheckContext
from webhook.checks.controllers import Controllers
from webhook.checks.secrets import Secrets
from webhook.cluster.recording import Dep, RecordingView
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.engine import run_checks
from webhook.kube import ApiError
from webhook.models.context import LiveRead, NotKept, read_live
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup

ALL = {"secret_keys", "get_object", "list_objects"}


def _env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def _job() -> Any:
    spec = pod(container("node", env=[_env("A", "hf", "token"), _env("B", "s3", "key")]))
    return workload([PodGroup("node", 1, spec)])


def _ctx(view: Any, budget: float = 5.0) -> CheckContext:
    return CheckContext(workload=_job(), deadline=Deadline(budget), settings=Settings(), view=view)


def _secrets(**kw: Any) -> FakeView:
    return FakeView(secrets={("team-a", "hf"): {"token"}, ("team-a", "s3"): {"other"}}, **kw)


def _secret_reads(*names: str) -> list[LiveRead]:
    return [LiveRead("secret_keys", ("team-a", n, Deadline(5))) for n in names]


# --------------------------------------------------------------------------- read_live


def test_kept_answers_come_without_a_wait() -> None:
    view = _secrets()
    view.keeps = set(ALL)
    run = read_live(_ctx(view), _secret_reads("hf", "s3", "gone"))
    with pytest.raises(StopIteration) as done:  # one step: it never suspended
        run.send(None)
    assert done.value.value == [{"token"}, {"other"}, None]
    assert view.secret_reads == []
    assert [r[:3] for r in view.kept_reads] == [("secret_keys", "team-a", n) for n in ("hf", "s3", "gone")]


async def test_only_the_reads_not_kept_are_made() -> None:
    view = _secrets(live={("deployments", "ns", "d"): {"metadata": {"name": "d"}}})
    view.keeps = {"get_object"}
    reads = [*_secret_reads("hf", "s3"), LiveRead("get_object", ("apps/v1", "deployments", "ns", "d", Deadline(5)))]
    assert await read_live(_ctx(view), reads) == [{"token"}, {"other"}, {"metadata": {"name": "d"}}]
    assert view.secret_reads == [("team-a", "hf"), ("team-a", "s3")]
    assert view.object_reads == []


async def test_an_error_is_the_answer_of_its_read() -> None:
    forbidden = ApiError(403, "secrets is forbidden", "Forbidden")
    view = FakeView(secrets={("team-a", "hf"): forbidden, ("team-a", "s3"): {"key"}})
    one = await read_live(_ctx(view), _secret_reads("hf"))  # one read: no task
    two = await read_live(_ctx(view), _secret_reads("hf", "s3"))
    assert one == [forbidden] and two == [forbidden, {"key"}]


class _Slow(FakeView):
    async def secret_keys(self, namespace: str, name: str, deadline: Deadline) -> set[str] | None:
        if name == "slow":
            await asyncio.Event().wait()  # never answers: the deadline ends it
        return await super().secret_keys(namespace, name, deadline)


@pytest.mark.parametrize("names", [("slow",), ("slow", "s3")], ids=["one read", "two reads"])
async def test_a_read_not_answered_by_the_deadline_is_timed_out(names: tuple[str, ...]) -> None:
    view = _Slow(secrets={("team-a", "s3"): {"key"}})
    got = await read_live(_ctx(view, budget=0.2), _secret_reads(*names))
    assert isinstance(got[0], ApiError) and (got[0].status, got[0].message) == (0, "timed out")
    assert got[1:] == [{"key"}][: len(names) - 1]


def test_a_kept_only_run_raises_not_kept_for_a_read_not_kept() -> None:
    view = _secrets()
    view.keeps = {"get_object"}
    ctx = _ctx(view)
    ctx.kept_only = True
    run = read_live(ctx, _secret_reads("hf"))
    with pytest.raises(NotKept):
        run.send(None)
    assert view.secret_reads == []  # nothing read: the engine runs the check as usual


def test_the_recording_view_writes_down_what_a_kept_answer_stands_on() -> None:
    view = _secrets()
    view.keeps = set(ALL)
    rec = RecordingView(view)
    assert rec.kept("secret_keys", "team-a", "hf", Deadline(5)) == ({"token"},)
    rec.kept("get_object", "apps/v1", "deployments", "ns", "d", Deadline(5), ttl=5.0)
    assert rec.reads == {Dep("secrets", "team-a", "hf"), Dep("deployments", "ns", "d")}


# --------------------------------------------------------------------------- the engine


async def test_a_check_whose_reads_are_kept_is_answered_without_reading() -> None:
    view = _secrets()
    view.keeps = set(ALL)
    res = await run_checks(_job(), [Secrets()], settings=Settings(), deadline=Deadline(5), view=view)
    (r,) = res.checks
    assert (r.status, r.message) == (
        Status.FAIL,
        'Secret "s3" in namespace "team-a" has no key "key" (referenced by env B of container node). '
        'Fix: kubectl patch secret s3 -n team-a --type merge -p \'{"stringData":{"key":"…"}}\'',
    )
    assert r.duration_ms is not None
    assert view.secret_reads == [] and len(view.kept_reads) == 2


async def test_a_check_with_one_read_not_kept_runs_as_usual() -> None:
    view = _secrets()
    view.keeps = {"get_object"}  # the Controllers' reads; not the Secrets'
    res = await run_checks(_job(), [Secrets(), Controllers()], settings=Settings(), deadline=Deadline(5), view=view)
    assert [r.status for r in res.checks] == [Status.FAIL, Status.WARN]
    assert view.secret_reads == [("team-a", "hf"), ("team-a", "s3")]
    assert view.object_reads == []  # every Lease and Deployment read was kept (all not found here)


class _Awaits(Check):
    """Breaks the contract: awaits outside read_live."""

    name = "Awaits"
    kept_reads = True

    async def run(self, ctx: CheckContext) -> CheckResult:
        await asyncio.sleep(0)
        return CheckResult(self.name, Status.PASS, "judged")


async def test_a_check_that_awaits_outside_read_live_is_still_judged(caplog: pytest.LogCaptureFixture) -> None:
    view = FakeView()
    with caplog.at_level(logging.ERROR, logger="webhook.engine"):
        res = await run_checks(_job(), [_Awaits()], settings=Settings(), deadline=Deadline(5), view=view)
    assert [(r.status, r.message) for r in res.checks] == [(Status.PASS, "judged")]
    assert [m.getMessage() for m in caplog.records] == [
        "check Awaits awaited outside read_live in a kept-only run; it runs as usual"
    ]


async def test_the_dry_run_of_a_render_seen_before_is_answered_without_a_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first create of a spec builds, hashes and sends its probes: it needs its heavy turn, which ends the
    kept-only run, so it runs as a task. A second create of the same spec (its probes, digests and outcomes
    kept) is answered in the kept-only run, with the same verdict and nothing sent."""
    from tests.fakeview import meta
    from tests.test_dryrun_cache import _create
    from webhook import engine
    from webhook.checks import dryrun
    from webhook.checks.dryrun import DryRun
    from webhook.models.dryrun_cache import DigestMemo

    monkeypatch.setattr(dryrun, "DIGESTS", DigestMemo())
    as_tasks: list[str] = []
    plain = engine._run_one

    def counted(check: Check, ctx: CheckContext, memo: Any = None) -> Any:
        as_tasks.append(check.name)
        return plain(check, ctx, memo)

    monkeypatch.setattr(engine, "_run_one", counted)
    view = FakeView(served={"v1", "batch/v1", "jobset.x-k8s.io/v1alpha2"})
    view.add("namespaces", {"metadata": meta("demo-bench", resourceVersion="10")})
    verdicts = []
    for uid in ("aaaa-1111-2222-3333", "bbbb-4444-5555-6666"):
        res = await run_checks(
            _create(uid, "2026-01-01T00:00:00Z"), [DryRun()], settings=Settings(), deadline=Deadline(5), view=view
        )
        verdicts.append([(r.status, r.message) for r in res.checks])
        if uid.startswith("aaaa"):
            sent = len(view.dry_runs)
    assert as_tasks == ["Dry Run"] and sent > 0 and len(view.dry_runs) == sent
    assert verdicts[0] == verdicts[1] and verdicts[0][0][0] is Status.PASS
