"""The check memo (webhook/checkmemo.py): a synchronous check's results for one render, kept while every
cache it read is unchanged. Pure logic on a fake view whose caches count their changes (the live view's
ClusterView.cache_version); the samples go through the real adapters, render cache, checks and policy."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from tests.fakeview import FakeView, meta
from webhook.checkmemo import CheckMemo
from webhook.checks import all_checks
from webhook.checks.base import Check, CheckContext
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.engine import run_checks
from webhook.preflight import Evaluation, evaluate
from webhook.results import CheckResult, Status
from webhook.workloads import render_cache
from webhook.workloads.admitted import admitted_workload
from webhook.workloads.base import Workload

SAMPLES = Path(__file__).resolve().parent.parent / "e2e" / "samples"


class VersionedView(FakeView):
    """A FakeView whose caches have versions: each change of a resource's objects is a new one."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.versions: dict[str, int] = {}

    def add(self, resource: str, obj: dict[str, Any]) -> None:
        self.versions[resource] = self.versions.get(resource, 0) + 1
        stored = copy.deepcopy(obj)  # as the watch cache holds it: with a resourceVersion
        stored["metadata"].setdefault("resourceVersion", str(sum(self.versions.values())))
        super().add(resource, stored)

    def cache_version(self, resource: str) -> tuple[int, int] | None:
        return (1, self.versions.get(resource, 0))


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d]


def _view() -> VersionedView:
    """The e2e samples' prerequisites (namespaces, Secrets, Services, ServiceAccounts, the runtime), a
    ResourceQuota per namespace and a Node, as the live view's caches would hold them."""
    view = VersionedView(served={"v1", "batch/v1", "jobset.x-k8s.io/v1alpha2", "trainer.kubeflow.org/v1alpha1"})
    for doc in _docs("00-prerequisites.yaml") + _docs("01-clustertrainingruntime.yaml"):
        kind = doc["kind"]
        if kind == "Secret":
            view.secrets[(doc["metadata"]["namespace"], doc["metadata"]["name"])] = set(doc.get("stringData") or {})
            continue
        resource = {"ClusterTrainingRuntime": "clustertrainingruntimes"}.get(kind, kind.lower() + "s")
        view.add(resource, doc)
    for ns in ("demo-train", "demo-bench"):
        view.add(
            "resourcequotas",
            {"metadata": meta("compute", namespace=ns), "spec": {"hard": {"requests.cpu": "64", "pods": "50"}}},
        )
    view.add(
        "nodes",
        {
            "metadata": meta("node-a"),
            "status": {
                "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    return view


def _create(sample: str, n: int) -> dict[str, Any]:
    """A new create of the sample: its own uid and creationTimestamp, as the apiserver gives each."""
    obj = copy.deepcopy(_docs(sample)[0])
    obj["metadata"]["uid"] = str(uuid.UUID(int=n + 1, version=4))
    obj["metadata"]["creationTimestamp"] = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"
    return obj


async def _evaluate(obj: dict[str, Any], view: Any, settings: Settings, memo: CheckMemo | None) -> Evaluation:
    return await evaluate(
        obj,
        settings=settings,
        deadline=Deadline(10.0),
        view=view,
        namespace=obj["metadata"]["namespace"],
        checks=CHECKS,
        memo=memo,
    )


#: one list of checks for every evaluation (the memo keys by the check object, as the server's one list)
CHECKS = all_checks()


def _said(ev: Evaluation) -> tuple[Any, ...]:
    """Everything a user reads of an evaluation: the verdicts (without durations) and the decision."""
    results = [(r.name, r.status, r.message, r.details, r.hints, r.caveats, r.timed_out) for r in ev.results.checks]
    d = ev.decision
    return (results, d.allowed, d.outcome, d.message, d.warnings, d.audit_annotations)


@pytest.fixture(autouse=True)
def _fresh_render_cache() -> None:
    render_cache.CACHE.clear()


@pytest.mark.parametrize("sample", ["aiperfjob-good.yaml", "trainjob-good.yaml", "aiperfjob-warns.yaml"])
async def test_the_memo_gives_what_judging_again_gives(sample: str) -> None:
    view, settings, memo = _view(), Settings(), CheckMemo()
    for n in range(3):  # three creates of the same spec: each its own uid (an AIPerfJob's is in its pods)
        obj = _create(sample, n)
        with_memo = await _evaluate(obj, view, settings, memo)
        without = await _evaluate(obj, view, settings, None)
        assert _said(with_memo) == _said(without)
    assert memo.hits > 0  # the second and third creates were answered from it


async def test_a_hit_does_not_run_the_check_and_a_changed_cache_does(monkeypatch: pytest.MonkeyPatch) -> None:
    view, settings, memo = _view(), Settings(), CheckMemo()
    quotas = next(c for c in CHECKS if c.name == "Resource Quotas")
    runs: list[int] = []
    real = type(quotas).run

    async def counted(self: Check, ctx: CheckContext) -> Any:
        runs.append(1)
        return await real(self, ctx)  # type: ignore[arg-type]

    monkeypatch.setattr(type(quotas), "run", counted)
    await _evaluate(_create("trainjob-good.yaml", 0), view, settings, memo)
    await _evaluate(_create("trainjob-good.yaml", 1), view, settings, memo)
    assert len(runs) == 1
    # another quota in the namespace: the resourcequotas cache changed, so it is judged again (and says so)
    view.add(
        "resourcequotas", {"metadata": meta("tight", namespace="demo-train"), "spec": {"hard": {"requests.cpu": "1"}}}
    )
    ev = await _evaluate(_create("trainjob-good.yaml", 2), view, settings, memo)
    assert len(runs) == 2
    said = next(r for r in ev.results.checks if r.name == "Resource Quotas")
    assert said.status is Status.FAIL and 'ResourceQuota "tight"' in said.message
    # a cache it never read changed: still a hit
    view.add("networkpolicies", {"metadata": meta("np", namespace="other")})
    await _evaluate(_create("trainjob-good.yaml", 3), view, settings, memo)
    assert len(runs) == 2


class _Counting(Check):
    """A synchronous check that lists the namespace's ResourceQuotas and looks at that cache's age."""

    name = "Counting"
    synchronous = True
    needs_cluster = True
    runs: ClassVar[list[str]] = []
    says = "{n} quota(s)"

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        from webhook.checks.common import with_stale

        assert ctx.view is not None
        type(self).runs.append(ctx.workload.name)
        n = len(ctx.view.list_cached("resourcequotas", ctx.workload.namespace))
        return with_stale(CheckResult(self.name, Status.PASS, self.says.format(n=n)), ctx, "resourcequotas")


def _wl(render_id: int | None = 7, uid: str = "u-1", name: str = "job") -> Workload:
    return Workload(
        api_version="trainer.kubeflow.org/v1alpha1",
        kind="TrainJob",
        name=name,
        namespace="demo-train",
        obj={"metadata": {"name": name, "namespace": "demo-train", "uid": uid}},
        render_id=render_id,
    )


async def _run(check: Check, wl: Workload, view: Any, settings: Settings, memo: CheckMemo, budget: float = 10.0) -> Any:
    got = await run_checks(wl, [check], settings=settings, deadline=Deadline(budget), view=view, memo=memo)
    return got.checks


async def test_what_invalidates_a_kept_result() -> None:
    check, view, settings, memo = _Counting(), _view(), Settings(), CheckMemo()
    _Counting.runs.clear()
    first = await _run(check, _wl(), view, settings, memo)
    assert first[0].message == "1 quota(s)"
    await _run(check, _wl(), view, settings, memo)
    assert len(_Counting.runs) == 1  # kept
    await _run(check, _wl(render_id=8), view, settings, memo)
    assert len(_Counting.runs) == 2  # another render
    await _run(check, _wl(), view, Settings(), memo)
    assert len(_Counting.runs) == 3  # another settings object (a reload)
    await _run(check, _wl(), view, settings, memo)
    assert len(_Counting.runs) == 4  # the entry of the first settings was replaced
    view.add("resourcequotas", {"metadata": meta("more", namespace="demo-train"), "spec": {"hard": {}}})
    again = await _run(check, _wl(), view, settings, memo)
    assert len(_Counting.runs) == 5 and again[0].message == "2 quota(s)"  # the cache it read changed
    # the cache grew stale: judged again, with the stale note, word for word; a stale result is not kept
    view.cache_ages["resourcequotas"] = 900.0
    stale = await _run(check, _wl(), view, settings, memo)
    note = "cached resourcequotas are 900s old (over cacheStaleSeconds 120); this verdict may be out of date"
    assert len(_Counting.runs) == 6 and stale[0].details == [note] and stale[0].caveats == [note]
    view.cache_ages["resourcequotas"] = 1.0
    fresh = await _run(check, _wl(), view, settings, memo)
    assert len(_Counting.runs) == 6 and fresh[0].caveats == []  # fresh again: the kept result, without the note
    view.cache_ages["resourcequotas"] = None  # unsynced (a relist under way): the note again
    unsynced = await _run(check, _wl(), view, settings, memo)
    assert len(_Counting.runs) == 7 and unsynced[0].caveats == [
        "cached resourcequotas have not synced yet; this verdict may miss objects"
    ]


async def test_a_hit_is_a_copy() -> None:
    check, view, settings, memo = _Counting(), _view(), Settings(), CheckMemo()
    _Counting.runs.clear()
    (first,) = await _run(check, _wl(), view, settings, memo)
    first.details.append("changed by a caller")
    first.message = "changed"
    (second,) = await _run(check, _wl(), view, settings, memo)
    second.details.append("changed again")
    (third,) = await _run(check, _wl(), view, settings, memo)
    assert len(_Counting.runs) == 1 and (third.message, third.details) == ("1 quota(s)", [])


def test_a_copy_has_every_field_and_lists_of_its_own() -> None:
    """checkmemo._copy builds the copy field by field: a field CheckResult gains must be copied too."""
    import dataclasses

    from webhook.checkmemo import _copy

    r = CheckResult("N", Status.WARN, "m", ["d"], ["h"], 1.5, ["c"], True)
    assert {f.name for f in dataclasses.fields(r)} == {
        "name", "status", "message", "details", "hints", "duration_ms", "caveats", "timed_out"
    }  # fmt: skip
    c = _copy(r)
    assert c == r
    assert all(getattr(c, f) is not getattr(r, f) for f in ("details", "hints", "caveats"))


class _Discovery(_Counting):
    name = "Discovery"

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        assert ctx.view is not None
        type(self).runs.append(ctx.workload.name)
        return CheckResult(self.name, Status.PASS, f"served: {ctx.view.served('v1')}")


class _Uid(_Counting):
    name = "Uid"
    says = "{n} quota(s)"

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        type(self).runs.append(ctx.workload.name)
        return CheckResult(self.name, Status.PASS, f"job uid {ctx.workload.obj['metadata']['uid']}")


class _Uncached(_Counting):
    name = "Uncached"

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        assert ctx.view is not None
        type(self).runs.append(ctx.workload.name)
        return CheckResult(self.name, Status.PASS, str(ctx.view.get_cached("leases", "x", "y")))


class _Raises(_Counting):
    name = "Raises"

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        type(self).runs.append(ctx.workload.name)
        raise ValueError("broken")


@pytest.mark.parametrize("check", [_Discovery(), _Uid(), _Raises()], ids=lambda c: c.name)
async def test_what_is_never_kept(check: _Counting) -> None:
    """A read of discovery (no version), a verdict that names the job's uid (an AIPerfJob's render is shared
    by its creates), an error: judged every time, each time the same as without the memo."""
    view, settings, memo = _view(), Settings(), CheckMemo()
    type(check).runs.clear()
    for uid in ("u-1", "u-2", "u-3"):
        got = await _run(check, _wl(uid=uid), view, settings, memo)
        plain = await _run(check, _wl(uid=uid), view, settings, None)  # type: ignore[arg-type]
        assert [(r.status, r.message) for r in got] == [(r.status, r.message) for r in plain]
    assert len(type(check).runs) == 6 and memo.hits == 0


async def test_a_read_of_an_uncached_resource_is_never_kept() -> None:
    view, settings, memo = _view(), Settings(), CheckMemo()
    view.cache_version = lambda resource: None if resource == "leases" else (1, 0)  # type: ignore[method-assign]
    _Uncached.runs.clear()
    for _ in range(3):
        await _run(_Uncached(), _wl(), view, settings, memo)
    assert len(_Uncached.runs) == 3 and memo.hits == 0


async def test_a_result_made_after_the_deadline_is_not_kept() -> None:
    check, view, settings, memo = _Counting(), _view(), Settings(), CheckMemo()
    _Counting.runs.clear()
    spent = Deadline(0.0)
    await run_checks(_wl(), [check], settings=settings, deadline=spent, view=view, memo=memo)
    await _run(check, _wl(), view, settings, memo)
    assert len(_Counting.runs) >= 1 and memo.hits == 0


async def test_without_a_render_or_a_view_nothing_is_kept() -> None:
    check, view, settings, memo = _Counting(), _view(), Settings(), CheckMemo()
    _Counting.runs.clear()
    for _ in range(2):
        await _run(check, _wl(render_id=None), view, settings, memo)
    assert len(_Counting.runs) == 2 and len(memo) == 0


def test_the_pods_as_admitted_are_not_the_render() -> None:
    """The memo keys by render_id: the Workload of the pods as admitted (engine.judge_admitted) has none."""
    wl = _wl(render_id=7)
    assert admitted_workload(wl, {}).render_id is None and wl.render_id == 7


async def test_the_memo_is_bounded() -> None:
    check, view, settings = _Counting(), _view(), Settings()
    memo = CheckMemo(entries=3)
    for rid in range(10):
        await _run(check, _wl(render_id=rid), view, settings, memo)
    assert len(memo) == 3


class _Awaits(_Counting):
    """A check that awaits between two reads of the quota cache (Check.reads_only_the_view)."""

    name = "Awaits"
    synchronous = False
    reads_only_the_view = True
    between: ClassVar[list[Any]] = []

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        import asyncio

        assert ctx.view is not None
        type(self).runs.append(ctx.workload.name)
        n = len(ctx.view.list_cached("resourcequotas", ctx.workload.namespace))
        await asyncio.sleep(0)
        for change in type(self).between:  # another task changes the caches meanwhile
            change()
        nodes = len(ctx.view.list_cached("nodes"))
        return CheckResult(self.name, Status.PASS, f"{n} quota(s), {nodes} node(s)")


class _Live(_Awaits):
    name = "Live"

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        assert ctx.view is not None
        type(self).runs.append(ctx.workload.name)
        got = await ctx.view.get_object("v1", "configmaps", "demo-train", "x", ctx.deadline, ttl=5.0)
        return CheckResult(self.name, Status.PASS, f"found: {got is not None}")


class _NotDeclared(_Awaits):
    name = "Not declared"
    reads_only_the_view = False


async def test_a_check_that_awaits_and_reads_only_caches_is_kept_and_answered_without_a_task() -> None:
    check, view, settings, memo = _Awaits(), _view(), Settings(), CheckMemo()
    _Awaits.runs.clear()
    _Awaits.between = []
    first = await _run(check, _wl(), view, settings, memo)
    second = await _run(check, _wl(), view, settings, memo)
    assert len(_Awaits.runs) == 1 and [r.message for r in second] == [r.message for r in first] == [
        "1 quota(s), 1 node(s)"
    ]
    view.add("nodes", {"metadata": meta("node-b"), "status": {}})
    third = await _run(check, _wl(), view, settings, memo)
    assert len(_Awaits.runs) == 2 and third[0].message == "1 quota(s), 2 node(s)"


async def test_a_cache_changed_while_a_check_awaited_is_not_kept() -> None:
    check, view, settings, memo = _Awaits(), _view(), Settings(), CheckMemo()
    _Awaits.runs.clear()
    _Awaits.between = [lambda: view.add("resourcequotas", {"metadata": meta("late", namespace="demo-train")})]
    try:
        got = await _run(check, _wl(), view, settings, memo)
        assert got[0].message == "1 quota(s), 1 node(s)"  # read before the change: not what the caches hold now
        _Awaits.between = []
        again = await _run(check, _wl(), view, settings, memo)
        assert len(_Awaits.runs) == 2 and again[0].message == "2 quota(s), 1 node(s)"
    finally:
        _Awaits.between = []


@pytest.mark.parametrize("check", [_Live(), _NotDeclared()], ids=lambda c: c.name)
async def test_a_live_read_or_a_check_with_inputs_of_its_own_is_never_kept(check: _Awaits) -> None:
    view, settings, memo = _view(), Settings(), CheckMemo()
    type(check).runs.clear()
    for _ in range(3):
        await _run(check, _wl(), view, settings, memo)
    assert len(type(check).runs) == 3 and memo.hits == 0
