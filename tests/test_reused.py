"""Answers kept for their TTL and read again ahead of their expiry while in use (webhook/reused.py).

An answer is served only within its TTL; one asked for in the last quarter of its lifetime starts one
background read, whose answer replaces it when it lands; a failed one leaves the kept answer to expire
as it would have. The view's on-demand reads (e2e/test_stack_checks_live.py) and the Dry Run's
outcomes (tests/test_dryrun_cache.py) are read again the same way.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.test_dryrun_cache import Clock
from webhook.kube import ApiError
from webhook.reused import RENEW_AT, Reused


class Reads:
    """A read that puts `answer` under "k" (as the view's reads do), counting itself; it waits for `gate` when set."""

    def __init__(self, kept: Reused[Any], answer: Any = "new", error: BaseException | None = None) -> None:
        self.kept, self.answer, self.error = kept, answer, error
        self.count = 0
        self.gate: asyncio.Event | None = None
        self.started = asyncio.Event()
        self.cancelled = False

    async def __call__(self) -> None:
        self.count += 1
        self.started.set()
        if self.gate is not None:
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        if self.error is not None:
            raise self.error
        self.kept.put("k", self.answer, 10)


def gated(at: float) -> tuple[Clock, Reused[str], Reads]:
    """ "old" kept under "k" for 10 s, the clock `at` seconds into its lifetime, and a read that waits for its gate."""
    clock = Clock()
    kept: Reused[str] = Reused(clock, 16)
    reads = Reads(kept)
    reads.gate = asyncio.Event()
    kept.put("k", "old", 10)
    clock.now += at
    return clock, kept, reads


def test_an_answer_is_served_within_its_ttl_only() -> None:
    clock = Clock()
    kept: Reused[str] = Reused(clock, 16)
    kept.put("k", "old", 10)
    assert kept.get("k") == ("old",)
    clock.now += 9.99
    assert kept.get("k") == ("old",)
    clock.now += 0.01
    assert kept.get("k") is None


def test_a_none_answer_is_kept_as_an_answer_and_nothing_kept_without_a_ttl() -> None:
    kept: Reused[Any] = Reused(Clock(), 16)
    kept.put("absent", None, 10)
    kept.put("unkept", "x", 0)
    assert kept.get("absent") == (None,)
    assert kept.get("unkept") is None


async def test_no_read_before_the_last_quarter_of_the_lifetime() -> None:
    clock = Clock()
    kept: Reused[str] = Reused(clock, 16)
    reads = Reads(kept)
    kept.put("k", "old", 10)
    clock.now += 10 * RENEW_AT - 0.01
    assert kept.get("k", reads) == ("old",)
    assert (reads.count, kept.renewals) == (0, 0)


async def test_a_use_in_the_last_quarter_reads_again_once_and_the_new_answer_replaces_the_kept_one() -> None:
    clock, kept, reads = gated(10 * RENEW_AT)
    assert reads.gate is not None
    # the review is answered from what is kept, at once; the read runs in the background
    assert kept.get("k", reads) == ("old",)
    assert kept.get("k", reads) == ("old",)  # one read in flight per key, however many use it meanwhile
    await reads.started.wait()  # the background read runs (and waits for its gate)
    assert (reads.count, kept.renewals) == (1, 1)
    reads.gate.set()
    await kept.renewed()
    assert kept.get("k", reads) == ("new",)
    # the new answer has a lifetime of its own, from when it landed: past the old one's expiry it stands
    clock.now += 10 * (1 - RENEW_AT) + 1
    assert kept.get("k") == ("new",)
    assert reads.count == 1


async def test_a_failed_read_leaves_the_kept_answer_to_expire_as_it_would_have() -> None:
    clock = Clock()
    kept: Reused[str] = Reused(clock, 16)
    reads = Reads(kept, error=ApiError(0, "timed out waiting for the apiserver"))
    kept.put("k", "old", 10)
    clock.now += 9
    assert kept.get("k", reads) == ("old",)
    await kept.renewed()
    assert kept.get("k") == ("old",)
    clock.now += 1
    assert kept.get("k", reads) is None  # expired: the next review reads for itself (and sees the error)
    assert reads.count == 1
    # and a use in the last quarter of a later answer reads again (nothing is left marked as in flight)
    kept.put("k", "later", 10)
    clock.now += 9
    kept.get("k", reads)
    await kept.renewed()
    assert reads.count == 2


def test_the_expired_entries_go_first_when_full_then_the_oldest() -> None:
    clock = Clock()
    kept: Reused[str] = Reused(clock, 3)
    kept.put("short", "s", 1)
    kept.put("a", "a", 10)
    kept.put("b", "b", 10)
    clock.now += 2
    kept.put("c", "c", 10)
    assert [kept.get(k) for k in ("short", "a", "b", "c")] == [None, ("a",), ("b",), ("c",)]
    kept.put("d", "d", 10)
    assert kept.get("a") is None and len(kept) == 3


async def test_close_cancels_the_reads_in_flight() -> None:
    _, kept, reads = gated(9)
    kept.get("k", reads)
    await reads.started.wait()
    await kept.close()
    assert reads.cancelled
    assert kept.get("k") == ("old",)
