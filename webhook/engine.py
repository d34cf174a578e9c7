"""The one engine: run the checks that apply to a Workload under one deadline.

Blocking checks run first, one by one, and the first FAIL stops the rest (no point
probing quotas on a cluster that does not serve JobSet). The others run concurrently, the
heavy ones (Check.heavy: the Dry Run's writes) once the cheap ones have answered.
Nothing is dropped at the deadline: a check still running then is reported by name as
timed out, and policy decides what that means (default: warn). An exception inside a
check is contained: transient → warn, otherwise fail, with the error text.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import weakref
from collections.abc import Iterable, Sequence, Set

import aiohttp

from webhook.checkmemo import CheckMemo, covers
from webhook.checks.base import Check, CheckContext, applies_to
from webhook.cluster.view import ClusterView
from webhook.config import Settings
from webhook.deadline import Deadline, wait_until
from webhook.kube import MULTIKUEUE, ApiError
from webhook.results import CheckResult, PreflightResults, Status
from webhook.workloads.admitted import Admission, AdmittedGroup, admitted_group, admitted_workload, summary
from webhook.workloads.base import Workload

log = logging.getLogger(__name__)

_TRANSIENT = (asyncio.TimeoutError, TimeoutError, ConnectionError)
#: the time a heavy check (Check.heavy) is sure to get: it waits for the cheap checks of every review
#: in flight until this much of its own review's budget is left (or half of what is left, if less)
HEAVY_RESERVE = 1.0
#: synchronous checks run back to back until this much time has passed, then the loop gets a turn
YIELD_AFTER_SECONDS = 0.005


class _Cheap:
    """The cheap I/O checks in flight in this process, all reviews together: a heavy check (Check.heavy)
    waits until there are none, or until half its review's time left is gone. A Dry Run of one review
    holds the loop for hundreds of milliseconds on a large pod spec (its bodies are built and digested
    on the loop): started while another review's Secrets read is in flight, it starved that read past
    its deadline, and timeoutAction warn admitted a job that had to be denied (e2e/test_hostile.py)."""

    def __init__(self) -> None:
        self.count = 0
        self.idle = asyncio.Event()
        self.idle.set()

    def enter(self) -> None:
        self.count += 1
        self.idle.clear()

    def leave(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.idle.set()


#: per event loop (each test runs its own)
_CHEAP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Cheap] = weakref.WeakKeyDictionary()


def _cheap() -> _Cheap:
    loop = asyncio.get_running_loop()
    state = _CHEAP.get(loop)
    if state is None:
        state = _CHEAP[loop] = _Cheap()
    return state


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ApiError):
        return exc.transient
    if isinstance(exc, _TRANSIENT):
        return True
    return isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ServerTimeoutError))


def timed_out_result(name: str, budget: float) -> CheckResult:
    return CheckResult(
        name,
        Status.WARN,
        f"did not finish within the {budget:.1f}s budget; its verdict is unknown (timed out)",
        hints=["Raise budgetSeconds / the webhook's timeoutSeconds, or check apiserver responsiveness"],
        timed_out=True,
    )


def applicable(
    checks: Iterable[Check], workload: Workload, settings: Settings, skip: Set[str] = frozenset()
) -> list[Check]:
    return [
        c
        for c in checks
        if applies_to(c, workload.kind)
        and settings.action_for(c.name, c.default_action) != "off"
        and c.name not in skip
    ]


def _precondition(check: Check, ctx: CheckContext) -> CheckResult | None:
    """Why a check cannot run for this request (a skip result), or None."""
    wl = ctx.workload
    if check.needs_cluster and ctx.view is None:
        return CheckResult(check.name, Status.SKIP, "Skipped: needs a cluster (running offline)")
    if check.needs_pod_groups and wl.incomplete_reason:
        return CheckResult(check.name, Status.SKIP, f"Skipped: {wl.incomplete_reason}")
    if check.local_capacity and wl.managed_by == MULTIKUEUE:
        return CheckResult(
            check.name,
            Status.SKIP,
            "Skipped: spec.managedBy is kueue.x-k8s.io/multikueue, so the job runs in another cluster",
        )
    if check.needs_cluster and ctx.view is not None:
        ok, reason = ctx.view.check_capability(check)
        if not ok:
            return CheckResult(check.name, Status.SKIP, f"Skipped: {reason}")
    return None


async def _run_one(check: Check, ctx: CheckContext, memo: CheckMemo | None = None) -> list[CheckResult]:
    """The check's results (an exception contained as one), each with its duration; `memo`: a synchronous
    check's results kept for the same render and unchanged caches (webhook/checkmemo.py)."""
    start = time.perf_counter()
    try:
        if memo is not None and covers(check):
            results = memo.lookup(check, ctx) or await memo.run(check, ctx)
        else:
            out = await check.run(ctx)
            results = out if isinstance(out, list) else [out]
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # contained: a check never takes the request down
        text = str(exc) or type(exc).__name__
        if is_transient(exc):
            results = [CheckResult(check.name, Status.WARN, f"Could not complete (transient error): {text}")]
        else:
            log.exception("check %s raised", check.name)
            results = [CheckResult(check.name, Status.FAIL, f"Check failed with error: {text}")]
    ms = (time.perf_counter() - start) * 1000.0
    for r in results:
        if r.duration_ms is None:
            r.duration_ms = ms
    return results


async def run_checks(
    workload: Workload,
    checks: Sequence[Check],
    *,
    settings: Settings,
    deadline: Deadline,
    view: ClusterView | None = None,
    found: dict[str, list[CheckResult]] | None = None,
    memo: CheckMemo | None = None,
) -> PreflightResults:
    """Run `checks` (already filtered for the workload) and return every result, in registry order.

    `found`: filled with each check's results as they come in, so a caller whose own timeout
    ends the run still has the failures found by then (`so_far`). `memo`: the synchronous checks'
    results kept for the same render while the caches they read are unchanged (the webhook's)."""
    ctx = CheckContext(workload=workload, deadline=deadline, settings=settings, view=view)
    by_check: dict[str, list[CheckResult]] = {} if found is None else found
    runnable = _preconditions(checks, ctx, by_check)
    blocking = [c for c in runnable if c.blocking]
    rest = [c for c in runnable if not c.blocking]
    stopped_by = await _run_blocking(blocking, ctx, by_check, memo)
    if stopped_by is not None:
        for c in rest:
            by_check[c.name] = [_not_run(c, stopped_by)]
    elif rest:
        await _run_rest(rest, ctx, by_check, memo)
    changed = await judge_admitted(ctx, checks, rest, by_check) if stopped_by is None else {}
    out = _ordered(checks, by_check)
    out.admitted = {name: [c.said() for c in a.changes] for name, a in changed.items()}
    return out


def _preconditions(checks: Sequence[Check], ctx: CheckContext, by_check: dict[str, list[CheckResult]]) -> list[Check]:
    """The checks that can run for this request; each one that cannot gets its skip result in `by_check`."""
    runnable: list[Check] = []
    for c in checks:
        pre = _precondition(c, ctx)
        if pre is not None:
            pre.duration_ms = 0.0
            by_check[c.name] = [pre]
        else:
            runnable.append(c)
    return runnable


def _not_run(check: Check, stopped_by: str) -> CheckResult:
    """The result of a check not run because the blocking check `stopped_by` failed."""
    return CheckResult(check.name, Status.SKIP, f"Not run: blocking check {stopped_by!r} failed", duration_ms=0.0)


def _late(name: str, deadline: Deadline) -> CheckResult:
    """The timed-out result of a check still running at the deadline (its duration: the time elapsed)."""
    r = timed_out_result(name, deadline.budget)
    r.duration_ms = deadline.elapsed() * 1000.0
    return r


async def _run_blocking(
    blocking: Sequence[Check], ctx: CheckContext, by_check: dict[str, list[CheckResult]], memo: CheckMemo | None
) -> str | None:
    """Run the blocking checks one by one: the name of the first that failed (the others are not run), or None."""
    stopped_by: str | None = None
    for c in blocking:
        if stopped_by is not None:
            by_check[c.name] = [_not_run(c, stopped_by)]
            continue
        if c.synchronous:  # never suspends: a task would only add its own cost
            res = await _run_one(c, ctx, memo)
        else:
            task = asyncio.ensure_future(_run_one(c, ctx))
            res = [_late(c.name, ctx.deadline)] if await wait_until(ctx.deadline, {task}) else task.result()
        by_check[c.name] = res
        if any(r.status is Status.FAIL for r in res):
            stopped_by = c.name
    return stopped_by


async def _run_rest(
    rest: Sequence[Check], ctx: CheckContext, by_check: dict[str, list[CheckResult]], memo: CheckMemo | None
) -> None:
    """Run the checks that do not block, cheap before heavy, each reported by the deadline.

    The checks that await I/O run as tasks, and get to send their requests first (one yield); the
    synchronous ones then run here, in this task, while that I/O is in flight. A heavy check starts with
    them, and awaits its turn (`ctx.heavy_turn`) before its heavy part: once the cheap ones have answered
    (or half the time left is gone). What it answers without that part (the Dry Run of a render seen
    before, every outcome kept) it answers at once: at 32 clients, waiting for the moment no cheap check
    of any review was in flight held every review's Dry Run (docs/benchmarks/vs-kyverno.md). A check whose
    results `memo` kept for this render and these caches gets them without a task."""
    cheap = _cheap()
    ctx.heavy_turn = functools.partial(_cheap_answered, cheap, ctx.deadline)

    def start(c: Check) -> asyncio.Future[list[CheckResult]] | None:
        if memo is not None and (kept := _kept(c, ctx, memo)) is not None:
            by_check[c.name] = kept  # the same render, the same caches: no task to find that out
            return None
        if (answered := _answered_from_kept(c, ctx)) is not None:
            by_check[c.name] = answered  # every live read it makes is kept: no task either
            return None
        task = asyncio.ensure_future(_run_one(c, ctx, memo))
        task.add_done_callback(lambda t: _record(by_check, c.name, t))  # found as soon as it answers
        if not c.heavy:
            cheap.enter()
            task.add_done_callback(lambda _: cheap.leave())
        return task

    tasks = {t: c for c in rest if not c.synchronous and (t := start(c)) is not None}
    if tasks:
        await asyncio.sleep(0)
    await _run_synchronous(rest, ctx, by_check, memo)
    if tasks:
        pending = await wait_until(ctx.deadline, tasks.keys())
        for t, c in tasks.items():
            by_check[c.name] = t.result() if t not in pending else [_late(c.name, ctx.deadline)]


def _answered_from_kept(check: Check, ctx: CheckContext) -> list[CheckResult] | None:
    """A Check.kept_reads check run kept-only, in this task and one step: its results when every live read it
    makes is one the view keeps (each with the run's duration), else None (then it runs as usual, as a task)."""
    if not check.kept_reads or ctx.view is None:
        return None
    start = time.perf_counter()
    ctx.kept_only = True
    run = check.run(ctx)
    try:
        run.send(None)
    except StopIteration as done:
        out = done.value
    except Exception:  # NotKept, or what the run as usual raises again and the engine contains there
        return None
    else:  # it awaited something else: a bug of the check, never a reason to lose its verdict
        run.close()
        log.error("check %s awaited outside read_live in a kept-only run; it runs as usual", check.name)
        return None
    finally:
        ctx.kept_only = False
    results: list[CheckResult] = out if isinstance(out, list) else [out]
    ms = (time.perf_counter() - start) * 1000.0
    for r in results:
        if r.duration_ms is None:
            r.duration_ms = ms
    return results


def _kept(check: Check, ctx: CheckContext, memo: CheckMemo) -> list[CheckResult] | None:
    """A check's results kept in `memo` for this render and unchanged caches (each with the lookup's duration), or None."""
    start = time.perf_counter()
    kept = memo.lookup(check, ctx)
    if kept:
        ms = (time.perf_counter() - start) * 1000.0
        for r in kept:
            if r.duration_ms is None:
                r.duration_ms = ms
    return kept or None


async def _run_synchronous(
    rest: Sequence[Check], ctx: CheckContext, by_check: dict[str, list[CheckResult]], memo: CheckMemo | None
) -> None:
    """Run the synchronous checks of `rest` back to back, giving the loop a turn every YIELD_AFTER_SECONDS."""
    slice_start = time.perf_counter()
    for c in rest:
        if c.synchronous:
            if ctx.deadline.expired:
                # bounded by the deadline: a check that has not started is reported as timed out
                r = timed_out_result(c.name, ctx.deadline.budget)
                r.duration_ms = 0.0
                by_check[c.name] = [r]
                continue
            by_check[c.name] = await _run_one(c, ctx, memo)
            if time.perf_counter() - slice_start > YIELD_AFTER_SECONDS:
                # a large workload: let the loop answer the others between checks (a small one, ~1 ms
                # for all of them, never yields here)
                await asyncio.sleep(0)
                slice_start = time.perf_counter()


async def _cheap_answered(cheap: _Cheap, deadline: Deadline) -> None:
    """Wait until no cheap check is in flight, at the latest until HEAVY_RESERVE (or half the time left) remains.

    The cheap ones first, this review's and the others': a heavy check's CPU and requests must not starve them."""
    if cheap.idle.is_set():  # none in flight: no task, timer or turn of the loop to find that out
        return
    left = deadline.remaining()
    try:
        await asyncio.wait_for(cheap.idle.wait(), timeout=left - min(HEAVY_RESERVE, left / 2))
    except TimeoutError:
        pass


#: the one detail of a verdict that did not see the pods as admission creates them (the Dry Run's result)
UNSEEN = (
    "The verdict read the pod templates as written, not the pods as admission creates them (mutating webhooks "
    "and policies, LimitRanger and the apiserver's other mutating plugins)"
)
#: the sentence a denial found only on the pods as admitted ends with
ADMITTED = "Judged on the pods as admission creates them"


async def judge_admitted(
    ctx: CheckContext, checks: Sequence[Check], rest: Sequence[Check], by_check: dict[str, list[CheckResult]]
) -> dict[str, AdmittedGroup]:
    """Judge the pods as admission creates them, once the Dry Run (Check.admits) has answered.

    The checks first judge the templates as written, and the Dry Run starts once they have answered (the
    cheap-before-heavy order above, kept: its bodies must not starve a deny-capable read). When the
    apiserver's answer shows that admission changes the pods (webhook.workloads.admitted: a container
    added, resources filled, a selector, a toleration, an image...), every other check that ran judges
    again the Workload whose pod groups are the pods as admitted, within what is left of the deadline,
    and its verdict replaces the template's. A check that does not finish in time keeps its verdict on
    the templates: it never loses the ability to deny because the dry run was slow. A FAIL found only on
    the pods as admitted ends with what admission changed ("…, set by admission"). When the pods could
    not be seen as admitted (offline, not permitted, timed out, refused) the Dry Run's result carries one
    detail saying so (UNSEEN), never a warning on each job. Returns the pod groups admission changed."""
    dry = next((c for c in checks if c.admits), None)
    results = by_check.get(dry.name) if dry is not None else None
    if dry is None or not results:
        return {}
    adm = ctx.admission
    if not isinstance(adm, Admission):
        first = results[0]
        why = "its dry run did not finish in time" if first.timed_out else first.message
        results[0].details.append(f"{UNSEEN}: {why}")
        return {}
    wl = ctx.workload
    lrs = ctx.view.list_cached("limitranges", wl.namespace) if ctx.view is not None else []
    changed: dict[str, AdmittedGroup] = {}
    for g in wl.pod_groups:
        pair = adm.pods.get(g.name)
        if pair is not None and (a := admitted_group(g, pair[0], pair[1], lrs)).changes:
            changed[g.name] = a
    unseen = list(adm.unseen)
    if changed:
        lines = summary(changed)
        results[0].details.append(
            "Admission changes the pods, and the other checks judged them as admitted: " + "; ".join(lines)
        )
        late = await _judge_again(
            ctx, admitted_workload(wl, changed), rest, by_check, f"{ADMITTED}: {'; '.join(lines)}."
        )
        if late:
            unseen.append(
                f"{', '.join(late)} did not finish on the pods as admitted in time (their verdict is on the templates)"
            )
    if unseen:
        results[0].details.append(f"{UNSEEN}: " + "; ".join(unseen))
    return changed


async def _judge_again(
    ctx: CheckContext, admitted: Workload, rest: Sequence[Check], by_check: dict[str, list[CheckResult]], said: str
) -> list[str]:
    """Run the checks of `rest` but the Dry Run and the other heavy ones on `admitted`; their results replace
    the templates' (a FAIL not found on the templates ends with `said`). The names of those that did not
    finish by the deadline (their results on the templates stay)."""
    actx = CheckContext(workload=admitted, deadline=ctx.deadline, settings=ctx.settings, view=ctx.view)
    again = [c for c in rest if not c.heavy and not c.admits]
    got: dict[str, list[CheckResult]] = {}
    for c in again:
        if not c.synchronous and (answered := _answered_from_kept(c, actx)) is not None:
            got[c.name] = answered
    tasks = {asyncio.ensure_future(_run_one(c, actx)): c for c in again if not c.synchronous and c.name not in got}
    if tasks:
        await asyncio.sleep(0)
    for c in again:
        if c.synchronous and not ctx.deadline.expired:
            got[c.name] = await _run_one(c, actx)
    if tasks:
        pending = await wait_until(ctx.deadline, tasks.keys())
        for t, c in tasks.items():
            if t in pending:
                t.cancel()
            else:
                got[c.name] = t.result()
    for name, new in got.items():
        before = {r.message for r in by_check.get(name, []) if r.status is Status.FAIL}
        for r in new:
            if r.status is Status.FAIL and r.message not in before:
                r.message = f"{r.message} {said}"
        by_check[name] = new
    return [c.name for c in again if c.name not in got]


def _record(by_check: dict[str, list[CheckResult]], name: str, task: asyncio.Future[list[CheckResult]]) -> None:
    """A check's results into `by_check` the moment its task ends (a cancelled one leaves nothing)."""
    if not task.cancelled() and task.exception() is None:
        by_check[name] = task.result()


def so_far(checks: Sequence[Check], found: dict[str, list[CheckResult]], deadline: Deadline) -> PreflightResults:
    """The results of a run cut short from outside (the server's own timeout): what each check found
    by then, and every other one reported by name as timed out (timeoutAction decides about those;
    a FAIL already found denies as usual)."""
    by_check = dict(found)
    for c in checks:
        if c.name not in by_check:
            r = timed_out_result(c.name, deadline.budget)
            r.duration_ms = deadline.elapsed() * 1000.0
            by_check[c.name] = [r]
    return _ordered(checks, by_check)


def _ordered(checks: Sequence[Check], by_check: dict[str, list[CheckResult]]) -> PreflightResults:
    ordered: list[CheckResult] = []
    for c in checks:
        ordered.extend(by_check.get(c.name, []))
    return PreflightResults(ordered, {c.name: c.default_action for c in checks})
