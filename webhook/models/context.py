"""What a check reads: the job, its deadline, the settings and (online) the ClusterView.

Defined below the checks because the models that read the cluster for them (provisioning, kueue/) take
it too; webhook.checks.base names it for the checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from webhook.deadline import REPORT_MARGIN, Deadline, wait_until
from webhook.kube import ApiError
from webhook.workloads.base import Workload

if TYPE_CHECKING:  # pragma: no cover
    from webhook.cluster.view import ClusterView
    from webhook.config import Settings

_T = TypeVar("_T")


@dataclass
class CheckContext:
    workload: Workload
    deadline: Deadline
    settings: Settings
    view: ClusterView | None = None
    #: what the Dry Run learnt of the pods as admission creates them (webhook.workloads.admitted.Admission),
    #: set by it for the engine, which then judges the pods as admitted (engine.judge_admitted)
    admission: Any = None
    #: a heavy check (Check.heavy) awaits its turn (`heavy_turn`) right before its heavy part: the engine's wait
    #: for the cheap checks in flight in the process; None (outside the engine): no wait
    heavy_turn: Callable[[], Awaitable[None]] | None = None
    #: the review's heavy part has had its turn (`heavy_turn` returns at once from then on)
    heavy_taken: bool = False
    #: a kept-only run (Check.kept_reads: the engine's first try): `read_live` answers from what the view keeps
    #: or raises NotKept, and never awaits
    kept_only: bool = False


async def heavy_turn(ctx: CheckContext) -> None:
    """Wait for a heavy check's turn (CheckContext.heavy_turn) before building, hashing or sending what is in
    proportion to the pod specs; once a review: later calls return at once. A heavy check whose heavy part is
    done already (a render seen before, its outcomes kept) never calls it, and answers with the cheap ones."""
    if ctx.kept_only:  # what is heavy is never kept: the engine runs the check as usual
        raise NotKept("heavy turn")
    if ctx.heavy_turn is not None and not ctx.heavy_taken:
        ctx.heavy_taken = True
        await ctx.heavy_turn()


async def before_deadline(ctx: CheckContext, call: Awaitable[_T]) -> _T:
    """`call`, cut just before the deadline so the check itself says "timed out" (ApiError status 0)
    instead of the engine reporting the whole check unfinished."""
    # asyncio.timeout, not wait_for: the same cut without a task per call (most calls are
    # answered from a cache without suspending)
    try:
        async with asyncio.timeout(max(0.0, ctx.deadline.remaining() - REPORT_MARGIN)):
            return await call
    except TimeoutError:
        raise ApiError(0, "timed out") from None


class NotKept(Exception):
    """A kept-only run (CheckContext.kept_only) needs a live read the view does not keep: run the check as usual."""


def needs_a_task(ctx: CheckContext, what: str) -> None:
    """In a kept-only run (CheckContext.kept_only), raise NotKept(`what`). A Check.kept_reads check calls it right
    before an await that is neither a `read_live` nor a `heavy_turn` (a worker thread, a registry, Kueue's visibility
    API, provisioning): its usual path (nothing to await) is answered in the review's task, and the engine runs it
    as usual, as a task, only when it gets there."""
    if ctx.kept_only:
        raise NotKept(what)


class LiveRead(NamedTuple):
    """One live read of the ClusterView: its member ("secret_keys", "get_object", "list_objects") and arguments."""

    read: str
    args: tuple[Any, ...]
    kw: dict[str, Any] | None = None

    def call(self, view: ClusterView) -> Awaitable[Any]:
        call: Awaitable[Any] = getattr(view, self.read)(*self.args, **(self.kw or {}))
        return call

    def kept(self, view: ClusterView) -> tuple[Any] | None:
        return view.kept(self.read, *self.args, **(self.kw or {}))


async def read_live(ctx: CheckContext, reads: Sequence[LiveRead]) -> list[Any]:
    """Each read's answer, or the exception it raised (one not answered REPORT_MARGIN before the deadline:
    ApiError(0, "timed out"), as `before_deadline` says it).

    What the view keeps (ClusterView.kept: within its ttl) is answered at once, without a task or a timer; the
    others are read concurrently. At 32 clients nearly every read is kept (read again ahead of its expiry,
    webhook/reused.py), and a task and a gather per read cost more than the checks' own work
    (docs/benchmarks/vs-kyverno.md). In a kept-only run (`ctx.kept_only`) a read not kept raises NotKept
    instead: the engine then runs the check as usual."""
    view = ctx.view
    assert view is not None
    out: list[Any] = [None] * len(reads)
    missing: list[int] = []
    for i, r in enumerate(reads):
        hit = r.kept(view)
        if hit is None:
            missing.append(i)
        else:
            out[i] = hit[0]
    if not missing:
        return out
    if ctx.kept_only:
        raise NotKept(reads[missing[0]].read)
    if len(missing) == 1:  # one read: no task, the timer of before_deadline
        i = missing[0]
        try:
            out[i] = await before_deadline(ctx, reads[i].call(view))
        except Exception as exc:  # handed to the check, as a gathered read's
            out[i] = exc
        return out
    tasks = {asyncio.ensure_future(reads[i].call(view)): i for i in missing}
    pending = await wait_until(ctx.deadline, tasks.keys(), margin=REPORT_MARGIN)
    for t, i in tasks.items():
        out[i] = ApiError(0, "timed out") if t in pending else (t.exception() or t.result())
    return out
