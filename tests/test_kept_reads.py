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
    from webhook.checks import dryrun
    from webhook.checks.dryrun import DryRun
    from webhook.models.dryrun_cache import DigestMemo

    monkeypatch.setattr(dryrun, "DIGESTS", DigestMemo())
    as_tasks = _tasks(monkeypatch)
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


# --------------------------------------------------------------------------- checks whose usual path awaits nothing


def _tasks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the checks the engine runs as a task (engine._run_one), recorded."""
    from webhook import engine

    as_tasks: list[str] = []
    plain = engine._run_one

    def counted(check: Check, ctx: CheckContext, memo: Any = None) -> Any:
        as_tasks.append(check.name)
        return plain(check, ctx, memo)

    monkeypatch.setattr(engine, "_run_one", counted)
    return as_tasks


def _aiperf(config_bytes: int) -> Any:
    """An AIPerfJob of one pod whose derived ConfigMap holds `config_bytes` of data."""
    job = workload([PodGroup("node", 1, pod(container("node")))])
    job.kind = "AIPerfJob"
    job.derived = {"configMap": {"metadata": {"name": "demo-config"}, "data": {"c": "x" * (config_bytes - 1)}}}
    return job


NO_QUEUE = 'Skipped: The job names no Kueue queue (kueue.x-k8s.io/queue-name) and namespace "team-a" has no LocalQueue "default"'


def _served() -> FakeView:
    return FakeView(served={"v1", "resource.k8s.io/v1", "kueue.x-k8s.io/v1beta2"})


def _awaiting_checks() -> list[Check]:
    """The checks that await only off their usual path (a worker thread, a registry, a read not kept)."""
    from webhook.checks.configmap import ConfigMapSize
    from webhook.checks.dra.check import DeviceAllocation
    from webhook.checks.imagepull import ImagePull
    from webhook.checks.kueue import KueueAdmissionChecks
    from webhook.checks.kueue.capacity import KueueCapacity
    from webhook.checks.storage.check import VolumeClaims

    return [ConfigMapSize(), ImagePull(), VolumeClaims(), DeviceAllocation(), KueueCapacity(), KueueAdmissionChecks()]


async def test_checks_with_nothing_to_await_are_answered_without_a_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """ConfigMap Size within the limit, Image Pull with registry access off, Volume Claims without a named claim,
    Device Allocation without claims, the Kueue checks without a queue: each answered in the review's task, with
    what its run as a task says."""
    as_tasks = _tasks(monkeypatch)
    checks = _awaiting_checks()
    res = await run_checks(_aiperf(2048), checks, settings=Settings(), deadline=Deadline(5), view=_served())
    assert as_tasks == []
    by_task = [await c.run(CheckContext(_aiperf(2048), Deadline(5), Settings(), _served())) for c in checks]
    usual = [r for out in by_task for r in (out if isinstance(out, list) else [out])]
    assert [(r.name, r.status, r.message) for r in res.checks] == [(r.name, r.status, r.message) for r in usual]
    assert [(r.name, r.status, r.message) for r in res.checks] == [
        ("ConfigMap Size", Status.PASS, 'ConfigMap "demo-config" is 2.0 KiB of the 1024 KiB limit'),
        ("Image Pull", Status.SKIP, "Registry access is off (registryAccess.mode); images are not looked up"),
        ("Volume Claims", Status.SKIP, "No PersistentVolumeClaims used by the pods"),
        ("Device Allocation", Status.SKIP, "No pod uses a DRA ResourceClaim"),
        ("Kueue Capacity", Status.SKIP, NO_QUEUE),
        ("Kueue Admission Checks", Status.SKIP, NO_QUEUE),
    ]


async def test_what_must_be_awaited_ends_the_kept_only_run_and_runs_as_a_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ConfigMap over the limit (its largest parts measured in a worker thread) and an image to look up in a
    registry: each check's kept-only run ends (NotKept, nothing logged) and it runs as a task, as before."""
    from webhook.checks.configmap import CONFIGMAP_MAX_BYTES, ConfigMapSize
    from webhook.checks.imagepull import ImagePull
    from webhook.engine import _answered_from_kept

    job = _aiperf(CONFIGMAP_MAX_BYTES + 1)
    settings = Settings(registryAccess={"mode": "all"})
    ctx = CheckContext(job, Deadline(5), settings, FakeView())
    assert _answered_from_kept(ConfigMapSize(), ctx) is None and not ctx.kept_only
    assert _answered_from_kept(ImagePull(), ctx) is None and not ctx.kept_only
    as_tasks = _tasks(monkeypatch)
    res = await run_checks(job, [ConfigMapSize()], settings=settings, deadline=Deadline(5), view=FakeView())
    assert as_tasks == ["ConfigMap Size"]
    assert res.checks[0].status is Status.FAIL
    assert res.checks[0].message.startswith('ConfigMap "demo-config" that the AIPerf operator renders from this spec')


async def test_a_check_that_must_run_as_a_task_does_nothing_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A named claim ends Volume Claims' kept-only run before it reads the caches (5,000 Nodes at the
    thresholds): they are read once, by its run as a task."""
    from webhook.checks.storage import check as storage

    reads: list[int] = []
    plain = storage._cluster

    def counted(view: Any) -> Any:
        reads.append(1)
        return plain(view)

    monkeypatch.setattr(storage, "_cluster", counted)
    as_tasks = _tasks(monkeypatch)
    spec = pod(container("node"))
    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    job = workload([PodGroup("node", 1, spec)])
    res = await run_checks(job, [storage.VolumeClaims()], settings=Settings(), deadline=Deadline(5), view=_served())
    assert as_tasks == ["Volume Claims"] and len(reads) == 1
    assert res.checks[0].status is Status.FAIL and '"data"' in res.checks[0].message
