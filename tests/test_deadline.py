"""The one bounded gather (webhook.deadline.wait_until) the engine, Secrets and Dry Run share."""

from __future__ import annotations

import asyncio

from webhook.deadline import REPORT_MARGIN, Deadline, wait_until


async def test_finished_tasks_are_not_pending() -> None:
    async def quick() -> int:
        return 1

    tasks = {asyncio.ensure_future(quick()), asyncio.ensure_future(quick())}
    assert await wait_until(Deadline(5.0), tasks) == set()
    assert all(t.result() == 1 for t in tasks)


async def test_unfinished_tasks_are_cancelled_reaped_and_returned() -> None:
    never = asyncio.Event()
    started = asyncio.Event()

    async def stuck() -> None:
        started.set()
        await never.wait()

    async def quick() -> str:
        return "done"

    slow, fast = asyncio.ensure_future(stuck()), asyncio.ensure_future(quick())
    pending = await wait_until(Deadline(0.2), {slow, fast})
    assert started.is_set()
    assert pending == {slow}
    assert slow.cancelled()  # reaped: nothing left running on the loop
    assert fast.result() == "done"


async def test_a_deadline_within_the_margin_waits_for_nothing() -> None:
    started = asyncio.Event()

    async def stuck() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.ensure_future(stuck())
    # less budget than the report margin: the check must report at once, not wait
    pending = await wait_until(Deadline(REPORT_MARGIN / 2), {task}, margin=REPORT_MARGIN)
    assert pending == {task} and task.cancelled()


async def test_no_tasks() -> None:
    assert await wait_until(Deadline(0.0), set()) == set()
