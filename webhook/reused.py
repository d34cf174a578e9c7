"""Answers of on-demand reads kept for their TTL, read again ahead of their expiry while in use.

A read kept for `ttl` seconds (a Secret's keys, a Deployment, a Lease, a Service's EndpointSlices)
used to expire under the reviews using it: the first review after the expiry waited for the
apiserver, and at 32 clients so did every review that arrived during that read (the p99 of
bench/vs_kyverno.py, docs/benchmarks/vs-kyverno.md). Here an answer asked for in the last quarter
of its lifetime (`RENEW_AT`) is read again in the background, once, and the review is answered
from what is kept: still within its TTL, so no answer is ever older than before. When the new
read lands it replaces the kept one (its own TTL from then); when it fails, the kept answer
expires as it would have, and the next review reads for itself (and sees the error).

An answer nobody asks for in its last quarter is not read again: the extra reads are at most one
per key per lifetime, and only while the key is in use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: the share of a kept answer's lifetime after which a use of it reads it again in the background
RENEW_AT = 0.75


class Reused(Generic[T]):
    """Kept answers by key: (expiry, when to renew, the answer); at most `max_entries` (the expired
    ones go first when full, then the oldest)."""

    def __init__(self, clock: Callable[[], float], max_entries: int) -> None:
        self.clock = clock
        self.max_entries = max_entries
        self._kept: dict[Hashable, tuple[float, float, T]] = {}
        self._renewing: dict[Hashable, asyncio.Task[Any]] = {}
        self.renewals = 0  # background reads started (for tests and benchmarks)

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: Hashable, renew: Callable[[], Awaitable[Any]] | None = None) -> tuple[T] | None:
        """(the answer,) while within its TTL, else None. In the last quarter of its lifetime, `renew`
        (a read that `put`s its answer) is started in the background unless one for `key` runs."""
        hit = self._kept.get(key)
        if hit is None:
            return None
        now = self.clock()
        if hit[0] <= now:
            return None
        if renew is not None and now >= hit[1] and key not in self._renewing:
            self._renew(key, renew)
        return (hit[2],)

    def put(self, key: Hashable, answer: T, ttl: float) -> None:
        """Keep `answer` for `ttl` seconds from now (nothing when ttl <= 0)."""
        if ttl <= 0:
            return
        now = self.clock()
        self._kept.pop(key, None)
        if len(self._kept) >= self.max_entries:
            for k in [k for k, (exp, _, _) in self._kept.items() if exp <= now]:
                del self._kept[k]
            while len(self._kept) >= self.max_entries:
                self._kept.pop(next(iter(self._kept)))
        self._kept[key] = (now + ttl, now + ttl * RENEW_AT, answer)

    def forget(self, key: Hashable) -> None:
        self._kept.pop(key, None)

    def _renew(self, key: Hashable, renew: Callable[[], Awaitable[Any]]) -> None:
        task = asyncio.ensure_future(renew())
        self._renewing[key] = task
        self.renewals += 1

        def done(t: asyncio.Task[Any]) -> None:
            if self._renewing.get(key) is t:
                del self._renewing[key]
            if not t.cancelled() and (exc := t.exception()) is not None:
                # the kept answer expires as it would have; the next review reads for itself
                log.debug("reading %s again ahead of its expiry failed: %s", key, exc)

        task.add_done_callback(done)

    async def renewed(self) -> None:
        """Wait for the background reads in flight to land (their answers kept, or their errors dropped)."""
        await asyncio.gather(*self._renewing.values(), return_exceptions=True)

    async def close(self) -> None:
        """Cancel the background reads still running."""
        tasks = list(self._renewing.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
