"""What a check reads: the job, its deadline, the settings and (online) the ClusterView.

Defined below the checks because the models that read the cluster for them (provisioning, kueue/) take
it too; webhook.checks.base names it for the checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from webhook.deadline import REPORT_MARGIN, Deadline
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


async def heavy_turn(ctx: CheckContext) -> None:
    """Wait for a heavy check's turn (CheckContext.heavy_turn) before building, hashing or sending what is in
    proportion to the pod specs; once a review: later calls return at once. A heavy check whose heavy part is
    done already (a render seen before, its outcomes kept) never calls it, and answers with the cheap ones."""
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
