"""A monotonic deadline shared by everything that runs for one admission request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

#: time a check keeps free at the end of the budget to report what it could not finish (the engine
#: itself waits to the end: what is unfinished then is reported by name as timed out)
REPORT_MARGIN = 0.05


class Deadline:
    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.budget = max(0.0, seconds)
        self.started = clock()
        self.at = self.started + self.budget

    def remaining(self) -> float:
        return max(0.0, self.at - self._clock())

    @property
    def expired(self) -> bool:
        return self._clock() >= self.at

    def elapsed(self) -> float:
        return self._clock() - self.started

    def timeout(self, ceiling: float | None = None) -> float:
        """Seconds an API call may take: what is left, capped by `ceiling`."""
        left = self.remaining()
        return left if ceiling is None else min(left, ceiling)


#: the share of a review's budget an adapter may spend on the renders it can leave out (an AIPerfSweep's
#: children after the heaviest so far): the rest is kept for the checks, so a big object that renders
#: slowly still gets its cheap deny-capable checks (Secrets, Job Render) judged within the budget
RENDER_SHARE = 0.4

#: the deadline of the review whose object is being rendered (set by preflight.evaluate around the
#: adapter; copied into the worker thread of a large object's render)
_RENDERING: ContextVar[Deadline | None] = ContextVar("rendering", default=None)


@contextmanager
def rendering_within(deadline: Deadline | None) -> Iterator[None]:
    """Within the block, `render_time_left()` answers for `deadline` (None: no bound, as for the CLI's plan)."""
    token = _RENDERING.set(deadline)
    try:
        yield
    finally:
        _RENDERING.reset(token)


def rendering_for_review() -> bool:
    """True while an adapter renders for a review with a deadline (not for a plain `build`, as the plan,
    the audit's child list and the oracles call it): it may then keep only what the checks read."""
    return _RENDERING.get() is not None


def render_time_left() -> bool:
    """False once the review being rendered has spent RENDER_SHARE of its budget: an adapter stops the
    renders it can leave out and says what it left (those parts are "not verified", never passed)."""
    deadline = _RENDERING.get()
    return deadline is None or deadline.elapsed() < deadline.budget * RENDER_SHARE


async def wait_until(
    deadline: Deadline, tasks: Collection[asyncio.Future[Any]], *, margin: float = 0.0
) -> set[asyncio.Future[Any]]:
    """Wait for `tasks` until `margin` seconds before the deadline; the ones still running then are
    cancelled and reaped (so nothing is left pending on the loop) and returned. The one bounded
    gather of the project: the engine (margin 0), Secrets' reads and Dry Run's requests
    (margin REPORT_MARGIN, so the check itself names what it could not read)."""
    if all(t.done() for t in tasks):  # answered already (from the caches): no waiter, timer or turn of the loop
        return set()
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline.remaining() - margin))
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    return pending


def budget_seconds(apiserver_timeout: float | None, configured: float, margin: float) -> float:
    """The smaller of the configured budget and the apiserver's timeout minus a safety margin."""
    if apiserver_timeout is None:
        return configured
    return max(0.0, min(configured, apiserver_timeout - margin))


def parse_go_duration(text: str | None) -> float | None:
    """Parse the apiserver's `?timeout=` value (a Go duration such as `10s`, `2.5s`, `1m0s`, `500ms`)."""
    if not text:
        return None
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    total, num, i = 0.0, "", 0
    s = text.strip()
    if not s:
        return None
    while i < len(s):
        ch = s[i]
        if ch.isdigit() or ch == ".":
            num += ch
            i += 1
            continue
        unit = ""
        while i < len(s) and not (s[i].isdigit() or s[i] == "."):
            unit += s[i]
            i += 1
        if not num or unit not in units:
            return None
        try:
            total += float(num) * units[unit]
        except ValueError:
            return None
        num = ""
    if num:  # a bare number: seconds
        try:
            total += float(num)
        except ValueError:
            return None
    return total
