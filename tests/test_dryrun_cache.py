"""The Dry Run cache: keyed by content and by the versions of the watched objects admission reads.

A hit reuses the apiserver's definitive answer; a content change, a changed resourceVersion of
a read object, or the end of the lifetime is a miss; a transient failure is never reused;
concurrent reviews of the same content share one request.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.fakeview import FakeView, container, meta, pod, run_check, workload
from webhook.checks.dryrun import DryRun
from webhook.cluster.view import ApiError
from webhook.config import Settings
from webhook.models.dryrun_cache import DigestMemo, DryRunCache, body_digest, content_key, keyed
from webhook.results import Status
from webhook.workloads.base import PodGroup
from webhook.workloads.render_cache import PerRender


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Calls:
    """A dry-run call that counts itself and fails with ``error`` when set."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.count = 0
        self.error = error

    async def __call__(self) -> None:
        self.count += 1
        if self.error is not None:
            raise self.error


async def test_hit_reuses_acceptance_within_the_lifetime() -> None:
    cache, call = DryRunCache(10, Clock()), Calls()
    await cache.run("k", call)
    await cache.run("k", call)
    assert call.count == 1
    assert (cache.hits, cache.misses) == (1, 1)


async def test_a_rejection_is_reused_and_raised_again() -> None:
    cache, call = DryRunCache(10, Clock()), Calls(ApiError(422, "spec.x: Invalid value", "Invalid"))
    for _ in range(2):
        with pytest.raises(ApiError, match="spec.x: Invalid value"):
            await cache.run("k", call)
    assert call.count == 1


@pytest.mark.parametrize("error", [ApiError(0, "timed out"), ApiError(503, "unavailable"), RuntimeError("boom")])
async def test_transient_failures_are_never_reused(error: BaseException) -> None:
    cache, call = DryRunCache(10, Clock()), Calls(error)
    for _ in range(2):
        with pytest.raises(type(error)):
            await cache.run("k", call)
    assert call.count == 2
    assert len(cache) == 0


async def test_expiry() -> None:
    clock = Clock()
    cache, call = DryRunCache(10, clock), Calls()
    await cache.run("k", call)
    clock.now += 9.9
    await cache.run("k", call)
    assert call.count == 1
    clock.now += 0.1
    await cache.run("k", call)
    assert call.count == 2


async def test_zero_lifetime_remembers_nothing() -> None:
    cache, call = DryRunCache(0, Clock()), Calls()
    await cache.run("k", call)
    await cache.run("k", call)
    assert call.count == 2


async def test_concurrent_callers_share_one_request() -> None:
    cache = DryRunCache(10, Clock())
    release = asyncio.Event()
    count = 0

    async def call() -> None:
        nonlocal count
        count += 1
        await release.wait()

    waiters = [asyncio.ensure_future(cache.run("k", call)) for _ in range(3)]
    await asyncio.sleep(0)  # let all three reach the cache (a scheduling step, not a wait for time)
    release.set()
    await asyncio.gather(*waiters)
    assert count == 1


async def test_a_cancelled_caller_does_not_cancel_the_shared_request() -> None:
    cache = DryRunCache(10, Clock())
    release = asyncio.Event()
    count = 0

    async def call() -> None:
        nonlocal count
        count += 1
        await release.wait()

    first = asyncio.ensure_future(cache.run("k", call))
    second = asyncio.ensure_future(cache.run("k", call))
    await asyncio.sleep(0)
    first.cancel()
    release.set()
    await second
    assert count == 1
    await cache.run("k", call)  # the outcome was kept
    assert count == 1


async def test_settled_reads_a_kept_outcome_without_waiting() -> None:
    """What the check reads at once: a fresh, final, definitive outcome; anything else is `run`'s."""
    clock = Clock()
    cache = DryRunCache(10, clock)
    assert cache.settled("k") is None  # nothing kept
    await cache.run("k", Calls())
    assert cache.settled("k") == (None,)
    rejection = ApiError(422, "spec.x: Invalid value", "Invalid")
    with pytest.raises(ApiError):
        await cache.run("bad", Calls(rejection))
    assert cache.settled("bad") == (rejection,)
    with pytest.raises(ApiError):
        await cache.run("flaky", Calls(ApiError(503, "unavailable", "ServiceUnavailable")))
    assert cache.settled("flaky") is None  # never kept
    release = asyncio.Event()

    async def slow() -> None:
        await release.wait()

    inflight = asyncio.ensure_future(cache.run("slow", slow))
    await asyncio.sleep(0)
    assert cache.settled("slow") is None  # in flight: the caller awaits run, which shares it
    release.set()
    await inflight
    assert cache.settled("slow") == (None,)
    assert cache.hits == 3
    clock.now += 10
    assert cache.settled("k") is None  # expired
    assert DryRunCache(0, clock).settled("k") is None


async def test_an_outcome_used_in_its_last_quarter_is_asked_again_in_the_background_and_replaced() -> None:
    """No review waits for a lifetime's end under steady use: the kept outcome answers it (still within its
    lifetime) while the same dry run is asked again, once; its outcome then stands for a lifetime of its own."""
    clock = Clock()
    cache = DryRunCache(10, clock)
    await cache.run("k", Calls())
    again = Calls(ApiError(422, "spec.x: Invalid value", "Invalid"))  # the cluster changed meanwhile
    clock.now += 7.49
    assert cache.settled_answer("k", again) == (None, None)
    assert cache.renewals == 0  # not yet in the last quarter
    clock.now += 0.01
    assert cache.settled_answer("k", again) == (None, None)  # answered from what is kept, at once
    assert cache.settled_answer("k", again) == (None, None)  # one renewal in flight per key
    await cache.renewed()
    assert (again.count, cache.renewals) == (1, 1)
    got = cache.settled_answer("k")
    assert got is not None and isinstance(got[0], ApiError) and got[0].message == "spec.x: Invalid value"
    clock.now += 9.9  # past the first outcome's end, within the new one's (asked at 7.5)
    assert cache.settled("k") is not None
    assert again.count == 1


async def test_a_renewal_that_fails_transiently_leaves_the_kept_outcome_to_expire_as_it_would_have() -> None:
    clock = Clock()
    cache = DryRunCache(10, clock)
    await cache.run("k", Calls())
    flaky = Calls(ApiError(503, "unavailable", "ServiceUnavailable"))
    clock.now += 9
    assert cache.settled_answer("k", flaky) == (None, None)
    await cache.renewed()
    assert flaky.count == 1
    assert cache.settled("k") == (None,)
    clock.now += 1
    assert cache.settled_answer("k", flaky) is None  # expired: the next review asks for itself
    assert flaky.count == 1


async def test_no_renewal_without_a_lifetime_or_a_call() -> None:
    clock = Clock()
    cache = DryRunCache(10, clock)
    await cache.run("k", Calls())
    clock.now += 9
    assert cache.settled_answer("k") == (None, None)
    assert cache.renewals == 0
    off, call = DryRunCache(0, clock), Calls()
    await off.run("k", call)
    assert off.settled_answer("k", call) is None
    assert call.count == 1


def test_key_covers_content_and_versions() -> None:
    body = {"spec": {"containers": [{"image": "a"}]}}
    versions = [("namespaces", "team-a", "1")]
    k = content_key("Pod", "team-a", body, versions)
    assert k == content_key("Pod", "team-a", {"spec": {"containers": [{"image": "a"}]}}, list(versions))
    assert k != content_key("Pod", "team-a", {"spec": {"containers": [{"image": "b"}]}}, versions)
    assert k != content_key("Pod", "team-b", body, versions)
    assert k != content_key("Pod", "team-a", body, [("namespaces", "team-a", "2")])


def test_key_of_content_marshal_cannot_write_falls_back_to_json() -> None:
    """A value outside JSON's types (here a Decimal) still gets a stable key of its content."""
    from decimal import Decimal

    def body(cpu: str) -> dict[str, Any]:
        return {"spec": {"containers": [{"resources": {"requests": {"cpu": Decimal(cpu)}}}]}}

    assert content_key("Pod", "ns", body("0.5"), []) == content_key("Pod", "ns", body("0.5"), [])
    assert content_key("Pod", "ns", body("0.5"), []) != content_key("Pod", "ns", body("1"), [])


def test_key_is_order_sensitive_a_miss_never_a_false_hit() -> None:
    """The same map in another key order is another key (a dry run asked again), never the same one
    for different content."""
    a = content_key("Pod", "ns", {"metadata": {"labels": {"a": "1", "b": "2"}}}, [])
    assert a != content_key("Pod", "ns", {"metadata": {"labels": {"b": "2", "a": "1"}}}, [])
    assert a != content_key("Pod", "ns", {"metadata": {"labels": {"a": "1", "b": "3"}}}, [])
    assert content_key("Pod", "ns", {"x": 1}, []) != content_key("Pod", "ns", {"x": True}, [])


def test_key_stands_the_jobs_own_uid_for_the_job() -> None:
    """The apiserver draws a new uid per request; the AIPerf operator copies it into env."""
    uid1, uid2 = "11111111-2222-3333-4444-555555555555", "66666666-7777-8888-9999-000000000000"

    def body(uid: str) -> dict[str, Any]:
        return {"spec": {"containers": [{"env": [{"name": "AIPERF_JOB_UID", "value": uid}]}]}}

    assert content_key("Pod", "ns", body(uid1), [], uid1) == content_key("Pod", "ns", body(uid2), [], uid2)
    # another object's uid is content like any other
    assert content_key("Pod", "ns", body(uid1), [], uid2) != content_key("Pod", "ns", body(uid2), [], uid2)


# --- through the check --------------------------------------------------------------------


def _wl(image: str = "img:1") -> Any:
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "llama-ft", "namespace": "team-a"},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 1}]},
    }
    return workload([PodGroup("node", 2, pod(container("node", image=image)))], derived={"jobSet": js})


def _view() -> FakeView:
    view = FakeView()
    view.add("namespaces", {"metadata": meta("team-a", resourceVersion="10")})
    view.add("resourcequotas", {"metadata": meta("compute", "team-a", resourceVersion="20")})
    return view


async def test_check_dry_runs_once_for_the_same_content() -> None:
    view = _view()
    for _ in range(2):
        res = await run_check(DryRun(), _wl(), view)
        assert res.status is Status.PASS
    assert [kind for _, kind, _, _ in view.dry_runs] == ["JobSet", "Pod", "Job"]


async def test_check_misses_when_the_content_changes() -> None:
    view = _view()
    await run_check(DryRun(), _wl("img:1"), view)
    await run_check(DryRun(), _wl("img:2"), view)

    # per object: this derived JobSet does not carry the image, so only the Pod and the Job are dry-run again
    def image(body: dict[str, Any]) -> Any:
        spec = (body["spec"].get("template") or {}).get("spec") or body["spec"]
        return spec.get("containers", [{}])[0].get("image")

    assert [(kind, image(body)) for _, kind, _, body in view.dry_runs] == [
        ("JobSet", None),
        ("Pod", "img:1"),
        ("Job", "img:1"),
        ("Pod", "img:2"),
        ("Job", "img:2"),
    ]


@pytest.mark.parametrize(
    "resource,obj",
    [
        ("resourcequotas", {"metadata": meta("compute", "team-a", resourceVersion="21")}),
        ("namespaces", {"metadata": meta("team-a", resourceVersion="11")}),
    ],
)
async def test_check_misses_when_a_read_object_changes(resource: str, obj: dict[str, Any]) -> None:
    view = _view()
    await run_check(DryRun(), _wl(), view)
    view.objects[resource] = [obj]
    await run_check(DryRun(), _wl(), view)
    assert len(view.dry_runs) == 6


async def test_check_misses_when_a_limitrange_appears() -> None:
    view = _view()
    await run_check(DryRun(), _wl(), view)
    view.add("limitranges", {"metadata": meta("limits", "team-a", resourceVersion="30")})
    await run_check(DryRun(), _wl(), view)
    assert len(view.dry_runs) == 6


async def test_check_reuses_a_rejection_with_the_same_message() -> None:
    err = ApiError(403, 'pods "x" is forbidden: violates PodSecurity "restricted:latest": privileged', "Forbidden")
    view = _view()
    view.dry_run_errors[("Pod", "*")] = err
    first = await run_check(DryRun(), _wl(), view)
    second = await run_check(DryRun(), _wl(), view)
    assert first.status is Status.FAIL
    assert second.message == first.message
    assert len(view.dry_runs) == 3


async def test_check_asks_again_ahead_of_expiry_and_no_review_waits_for_it() -> None:
    """Through the check: a review in the last quarter of the outcomes' lifetime is answered from them and
    the same three dry runs are sent again in the background; a review past the first outcomes' end is
    answered from the new ones, with no dry run of its own."""
    from webhook.checks import dryrun

    clock = Clock()
    view = _view()
    cache = dryrun._CACHES[view] = DryRunCache(Settings().dry_run_cache_seconds, clock)
    assert (await run_check(DryRun(), _wl(), view)).status is Status.PASS
    assert len(view.dry_runs) == 3
    clock.now += 8
    assert (await run_check(DryRun(), _wl(), view)).status is Status.PASS
    await cache.renewed()
    assert [kind for _, kind, _, _ in view.dry_runs] == ["JobSet", "Pod", "Job"] * 2
    clock.now += 4  # 12 s after the first dry runs, 4 after the renewals
    assert (await run_check(DryRun(), _wl(), view)).status is Status.PASS
    assert len(view.dry_runs) == 6


async def test_a_renewal_sends_its_body_only_in_the_turn_of_a_heavy_part() -> None:
    """Asking again sends a body as a review's own dry run does (issue 33: a large one must not starve a cheap
    check that can deny): the renewal waits for the heavy turn the engine gives the review, then sends."""
    from webhook.checks import dryrun
    from webhook.checks.base import CheckContext
    from webhook.deadline import Deadline

    clock = Clock()
    view = _view()
    cache = dryrun._CACHES[view] = DryRunCache(Settings().dry_run_cache_seconds, clock)
    assert (await run_check(DryRun(), _wl(), view)).status is Status.PASS
    clock.now += 8
    cheap_answered = asyncio.Event()
    waiting: list[int] = []

    async def turn() -> None:
        waiting.append(len(view.dry_runs))
        await cheap_answered.wait()

    # the review's own heavy part (this stand-in render is not kept: its probes are built again) had its turn
    ctx = CheckContext(
        workload=_wl(), deadline=Deadline(5.0), settings=Settings(), view=view, heavy_turn=turn, heavy_taken=True
    )
    res = await DryRun().run(ctx)
    assert not isinstance(res, list) and res.status is Status.PASS  # answered from the kept outcomes
    assert cache.renewals == 3
    renewing = asyncio.ensure_future(cache.renewed())
    await asyncio.sleep(0)  # a turn of the loop: each renewal task has taken its first step (to its turn)
    assert waiting == [3, 3, 3] and len(view.dry_runs) == 3  # all three at their turn, none sent
    cheap_answered.set()
    await renewing
    assert len(view.dry_runs) == 6


async def test_check_with_the_cache_off_dry_runs_every_time() -> None:
    view = _view()
    settings = Settings(dryRunCacheSeconds=0)
    await run_check(DryRun(), _wl(), view, settings)
    await run_check(DryRun(), _wl(), view, settings)
    assert len(view.dry_runs) == 6


def test_twin_memo_remembers_a_refusal_for_its_lifetime_only() -> None:
    from webhook.kube import ApiError
    from webhook.models.dryrun_cache import TWIN_MEMO_SECONDS, TwinMemo, twin_key

    now = [100.0]
    memo = TwinMemo(TWIN_MEMO_SECONDS, clock=lambda: now[0])
    owned = {
        "metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": True}]}
    }
    key = twin_key("team-a", "Pod", owned)
    assert key == ("team-a", "Pod", "batch/v1", "Job")
    assert twin_key("team-a", "Pod", {"metadata": {"ownerReferences": [{"kind": "Job", "name": "j"}]}}) is None
    refusal = ApiError(403, 'admission webhook "mpod.kb.io" denied the request: workload owner not found')
    assert memo.get(key) is None
    memo.remember(key, refusal)
    assert memo.get(key) is refusal
    assert memo.get(("team-b", "Pod", "batch/v1", "Job")) is None  # per namespace
    now[0] += TWIN_MEMO_SECONDS - 1
    assert memo.get(key) is refusal
    now[0] += 1
    assert memo.get(key) is None and len(memo) == 0  # expired: asked anew (never extended)
    memo.remember(key, refusal)
    memo.forget(key)
    assert memo.get(key) is None
    memo.remember(None, refusal)
    assert len(memo) == 0
    off = TwinMemo(0)
    off.remember(key, refusal)
    assert off.get(key) is None


def test_twin_memo_is_bounded() -> None:
    from webhook.kube import ApiError
    from webhook.models.dryrun_cache import MAX_ENTRIES, TwinMemo

    memo = TwinMemo(60)
    refusal = ApiError(403, "workload owner not found")
    for i in range(MAX_ENTRIES + 5):
        memo.remember((f"ns-{i}", "Pod", "batch/v1", "Job"), refusal)
    assert len(memo) == MAX_ENTRIES
    assert memo.get(("ns-0", "Pod", "batch/v1", "Job")) is None  # the oldest went first
    assert memo.get((f"ns-{MAX_ENTRIES + 4}", "Pod", "batch/v1", "Job")) is refusal


# --- the probes' digests, memoized by render (DigestMemo, issue 22) ------------------------------


def test_digest_memo_answers_a_seen_probe_and_hashes_the_others() -> None:
    memo = DigestMemo()
    body = {"spec": {"containers": [{"image": "a"}]}}
    first = memo.digest((1, "ns", "Pod", "p", None, False), "Pod", "ns", body, None)
    assert first == body_digest("Pod", "ns", body, None)
    # the same render's probe: the memo answers, whatever the body (it is the same by construction)
    assert memo.digest((1, "ns", "Pod", "p", None, False), "Pod", "ns", {"other": 1}, None) == first
    assert memo.hits == 1
    # another render, no render, a uid body_digest would not stand for "this job": hashed
    other = {"spec": {"containers": [{"image": "b"}]}}
    assert memo.digest((2, "ns", "Pod", "p", None, False), "Pod", "ns", other, None) == body_digest("Pod", "ns", other)
    assert memo.digest(None, "Pod", "ns", other, None) == body_digest("Pod", "ns", other)
    memo.digest((3, "ns", "Pod", "p", None, False), "Pod", "ns", body, "short")
    assert memo.digest((3, "ns", "Pod", "p", None, False), "Pod", "ns", other, "short") == body_digest(
        "Pod", "ns", other, "short"
    )
    assert memo.hits == 1


def test_the_key_is_the_digest_with_the_versions() -> None:
    body, versions = {"x": 1}, [("namespaces", "ns", "1")]
    assert content_key("Pod", "ns", body, versions) == keyed(body_digest("Pod", "ns", body), versions)
    assert keyed(body_digest("Pod", "ns", body), versions) != keyed(body_digest("Pod", "ns", body), [])


def _create(uid: str, at: str, image: str | None = None) -> Any:
    import copy
    from pathlib import Path

    import yaml

    from webhook.workloads import build_workload

    obj = yaml.safe_load((Path(__file__).parent.parent / "e2e" / "samples" / "aiperfjob-good.yaml").read_text())
    obj["metadata"].update(uid=uid, creationTimestamp=at)
    if image is not None:
        obj["spec"]["image"] = image
    return build_workload(copy.deepcopy(obj), settings=Settings())


async def test_a_second_create_reads_its_probes_digests_from_the_memo_and_they_are_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two creates of the same AIPerfJob spec share a render (with their own uids filled in): the
    second review's probe digests come from the memo, and each equals the digest of the body the
    second review built (its own uid in it), so its dry-run outcomes are the first's."""
    from webhook.checks import dryrun

    memo = DigestMemo()
    seen: list[tuple[bytes, bytes]] = []
    plain = memo.digest

    def recording(memo_key: Any, kind: str, ns: str, body: dict[str, Any], own_uid: str | None) -> bytes:
        got = plain(memo_key, kind, ns, body, own_uid)
        seen.append((got, body_digest(kind, ns, body, own_uid)))
        return got

    monkeypatch.setattr(memo, "digest", recording)
    monkeypatch.setattr(dryrun, "DIGESTS", memo)
    view = FakeView()
    view.add("namespaces", {"metadata": meta("demo-bench", resourceVersion="10")})
    first = _create("aaaa-1111-2222-3333", "2026-01-01T00:00:00Z")
    second = _create("bbbb-4444-5555-6666", "2026-01-01T00:05:00Z")
    assert first.render_id is not None and second.render_id == first.render_id
    assert (await run_check(DryRun(), first, view)).status is Status.PASS
    sent, hits = len(view.dry_runs), memo.hits
    assert sent > 0 and hits == 0
    assert (await run_check(DryRun(), second, view)).status is Status.PASS
    assert len(view.dry_runs) == sent  # every outcome kept
    # every digest from the memo, twice: run_check runs the check as the engine first tries it (kept-only, here
    # answered in full) and then as usual (tests/fakeview.py), and compares the two
    assert memo.hits == 2 * sent
    assert all(got == own for got, own in seen)
    # another spec: another render, its probes hashed and dry-run anew
    third = _create("cccc-7777-8888-9999", "2026-01-01T00:06:00Z", image="registry.example/aiperf:other")
    assert third.render_id != first.render_id
    await run_check(DryRun(), third, view)
    assert memo.hits == 2 * sent and len(view.dry_runs) > sent  # none more: a new render is hashed


async def test_a_review_of_a_memoized_render_with_kept_outcomes_gives_the_loop_no_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Dry Run yields to the loop after hashing a probe (tens of milliseconds for a large pod), not after a
    digest read from the memo: the second create of the same spec, every outcome kept, answers in one step,
    never queued behind the other reviews (vs-kyverno.md: five turns a review cost the sample AIPerfJob 6.5 ms
    at 8 clients). Probes hashed again (outcomes kept) still give the loop a turn after each."""
    from webhook.checks import dryrun
    from webhook.checks.base import CheckContext
    from webhook.deadline import Deadline

    monkeypatch.setattr(dryrun, "DIGESTS", DigestMemo())
    view = FakeView()
    view.add("namespaces", {"metadata": meta("demo-bench", resourceVersion="10")})
    # the outcomes are kept for good (a clock that stands still): what is counted is the loop's turns, not the
    # cache's lifetime. On the real clock a loaded machine that stalled this test past dryRunCacheSeconds (10 s)
    # expired them, the second review dry-ran again and waited for its task, and stepping it by hand raised
    # "await wasn't used with future" (the one flake of the full suite)
    dryrun._CACHES[view] = DryRunCache(Settings().dry_run_cache_seconds, clock=lambda: 0.0)

    def steps(wl: Any) -> int:
        """How many times the check's coroutine suspends before it returns (FakeView's dry runs never do)."""
        coro = DryRun().run(CheckContext(workload=wl, deadline=Deadline(5.0), settings=Settings(), view=view))
        n = 0
        while True:
            try:
                coro.send(None)
            except StopIteration as done:
                assert done.value.status is Status.PASS
                return n
            n += 1

    first = _create("aaaa-1111-2222-3333", "2026-01-01T00:00:00Z")
    assert (await run_check(DryRun(), first, view)).status is Status.PASS  # sent: every outcome kept
    second = _create("bbbb-4444-5555-6666", "2026-01-01T00:05:00Z")
    assert steps(second) == 0
    monkeypatch.setattr(dryrun, "DIGESTS", DigestMemo())  # the same outcomes kept, every digest hashed again
    assert steps(second) == len(dryrun._plan(second).probes)


def test_the_probes_of_a_render_are_built_once_and_stand_for_each_create_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """plan_of keeps a render's probes: the second create of the same spec gets the first's (built once), whose
    bodies carry the first create's uid with the probe's uid equal to it, so each body's digest is the one the
    second create's own body has (body_digest reads that uid as "this job"); another spec is planned anew; at
    most PLAN_ENTRIES are kept, the least recently used dropped first."""
    from webhook.checks import dryrun

    monkeypatch.setattr(dryrun, "_PLANS", PerRender(dryrun.PLAN_ENTRIES, keep=dryrun._PLANS.keep))
    built: list[int | None] = []
    plain = dryrun._plan

    def counting(wl: Any) -> Any:
        built.append(wl.render_id)
        return plain(wl)

    monkeypatch.setattr(dryrun, "_plan", counting)
    first = _create("aaaa-1111-2222-3333", "2026-01-01T00:00:00Z")
    second = _create("bbbb-4444-5555-6666", "2026-01-01T00:05:00Z")
    kept = dryrun.plan_of(first)
    assert dryrun.plan_of(second) is kept and built == [first.render_id]
    own = plain(second)
    assert [p.uid for p in kept.probes] == ["aaaa-1111-2222-3333"] * len(kept.probes)
    for mine, theirs in zip(own.probes, kept.probes, strict=True):
        assert body_digest(mine.kind, "demo-bench", mine.body, mine.uid) == body_digest(
            theirs.kind, "demo-bench", theirs.body, theirs.uid
        )
    monkeypatch.setattr(dryrun._PLANS, "entries", 1)
    other = _create("cccc-7777-8888-9999", "2026-01-01T00:06:00Z", image="registry.example/aiperf:other")
    assert dryrun.plan_of(other) is not kept and built == [first.render_id, other.render_id]
    dryrun.plan_of(first)  # dropped when `other` came in over the bound of one
    assert built == [first.render_id, other.render_id, first.render_id] and list(dryrun._PLANS._kept) == [
        first.render_id
    ]


async def test_the_dry_run_awaits_its_turn_only_for_what_it_must_build_hash_or_send(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A heavy check awaits its turn (the engine's wait for the cheap checks in flight) before its heavy part:
    the first create of a render builds its probes (and hashes and sends them); a second create of the same
    render, its probes kept, its digests memoized and its outcomes kept, takes no turn at all. With the probes
    and digests kept but the outcomes gone (their lifetime over), it waits before sending them again."""
    from webhook.checks import dryrun
    from webhook.checks.base import CheckContext
    from webhook.deadline import Deadline

    monkeypatch.setattr(dryrun, "DIGESTS", DigestMemo())
    monkeypatch.setattr(dryrun, "_PLANS", PerRender(dryrun.PLAN_ENTRIES, keep=dryrun._PLANS.keep))
    clock = Clock()
    view = FakeView()
    view.add("namespaces", {"metadata": meta("demo-bench", resourceVersion="10")})
    dryrun._CACHES[view] = DryRunCache(Settings().dry_run_cache_seconds, clock)
    turns: list[int] = []

    async def review(wl: Any) -> list[int]:
        """The number of dry runs sent when the check took its turn (one entry per turn taken)."""
        turns.clear()

        async def turn() -> None:
            turns.append(len(view.dry_runs))

        ctx = CheckContext(workload=wl, deadline=Deadline(5.0), settings=Settings(), view=view, heavy_turn=turn)
        res = await DryRun().run(ctx)
        assert not isinstance(res, list) and res.status is Status.PASS
        return list(turns)

    assert await review(_create("aaaa-1111-2222-3333", "2026-01-01T00:00:00Z")) == [0]  # before building
    sent = len(view.dry_runs)
    assert await review(_create("bbbb-4444-5555-6666", "2026-01-01T00:05:00Z")) == []
    assert len(view.dry_runs) == sent
    clock.now += Settings().dry_run_cache_seconds
    assert await review(_create("cccc-7777-8888-9999", "2026-01-01T00:10:00Z")) == [sent]  # before sending again
