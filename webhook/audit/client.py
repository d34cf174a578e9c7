"""The audit controller's connection: the webhook's KubeClient, rate-limited, allowed a few writes.

The webhook's client refuses every write (`webhook.cluster.client.assert_no_write`). The audit
controller is the project's one writer, and even it may write only what it owns: Events (core/v1
and events.k8s.io/v1), its coordination.k8s.io Lease, and the Policy Reports (openreports.io,
wgpolicyk8s.io). Everything else still needs dryRun=All, as for the webhook.

Requests are paced by a token bucket, the way client-go paces a rest.Config (`QPS`, `Burst`;
k8s.io/client-go/util/flowcontrol/throttle.go `NewTokenBucketRateLimiter`): a re-check storm
(a Secret read by a thousand jobs is deleted) never floods the apiserver.

The bucket serves two lanes in one pace. Requests sent inside `background_requests()` (the
Report sink's reads and writes) get a token only while no other request waits. A judging read
(a Lease the Controllers check shares between jobs for five seconds) used to queue behind a
whole scan's Report writes: at 10,000 jobs in 1,000 namespaces, 2,000 of them, 100 s at qps 20,
and every job of the cheap pass waited with it (301 s on the control plane, 33 s in process).
client-go has one FIFO bucket a client; the apiserver's priority and fairness queues by flow
(staging/src/k8s.io/apiserver/pkg/util/flowcontrol): the lanes do that inside our one client,
without raising what the controller sends a second.

The background lane is never starved: while both lanes wait, one token in `BACKGROUND_EVERY` goes to
it. Under Secret churn the judging reads never stopped waiting, no Report write got a token, and the
Reports kept false DENYs for minutes after the Secret was back (issue 33: 776 jobs at the end of a churn).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from typing import Any

from webhook.cluster.client import WATCH_CONNECTIONS, KubeClient, assert_no_write

#: the paths the audit controller may write (POST, PUT, PATCH, DELETE): its Events, its Lease, its reports
WRITABLE = re.compile(
    r"^(/api/v1/namespaces/[^/]+/events(/[^/]+)?"
    r"|/apis/events\.k8s\.io/v1/namespaces/[^/]+/events(/[^/]+)?"
    r"|/apis/coordination\.k8s\.io/v1/namespaces/[^/]+/leases(/[^/]+)?"
    r"|/apis/(openreports\.io|wgpolicyk8s\.io)/[^/]+(/namespaces/[^/]+)?/[a-z]+(/[^/]+)?)$"
)


def check_audit_write(method: str, path: str, query: dict[str, Any] | None) -> None:
    """A write the audit controller owns passes; any other needs dryRun=All (ValueError)."""
    if method in ("POST", "PUT", "PATCH", "DELETE") and WRITABLE.match(path.split("?", 1)[0]):
        return
    assert_no_write(method, path, query)


#: set inside `background_requests()`: this task's requests take the background lane
_BACKGROUND: ContextVar[bool] = ContextVar("audit_background_requests", default=False)
#: while both lanes wait, every this many tokens one goes to the background lane (at qps 20: 4 a second)
BACKGROUND_EVERY = 5


@contextlib.contextmanager
def background_requests() -> Iterator[None]:
    """Requests sent inside this block (in this task) wait while any foreground request waits."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


class TokenBucket:
    """`qps` requests a second on average, bursts of up to `burst` (client-go's token bucket),
    handed out to the foreground lane first, then to the background lane, each in arrival order; while
    both wait, one token in `BACKGROUND_EVERY` goes to the background lane."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._tokens = float(self.burst)
        self._last = clock()
        #: waiters by lane: foreground, background
        self._lanes: tuple[deque[asyncio.Future[None]], deque[asyncio.Future[None]]] = (deque(), deque())
        self._pump: asyncio.Future[None] | None = None
        #: tokens granted to the foreground lane in a row while the background lane waited
        self._streak = 0

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def reserve(self) -> float:
        """Take one token now, ahead of every waiter; the seconds to wait before using it (0 when
        one was free). Later requests wait until the bucket has refilled past it."""
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def waiting(self) -> tuple[int, int]:
        """Requests waiting for a token: (foreground, background)."""
        fg, bg = self._lanes
        return sum(not f.done() for f in fg), sum(not f.done() for f in bg)

    async def wait(self, *, background: bool | None = None) -> None:
        """Wait for a token. `background` defaults to whether the caller is inside `background_requests()`."""
        lane = self._lanes[1 if (_BACKGROUND.get() if background is None else background) else 0]
        self._refill()
        if self._tokens >= 1.0 and not any(self._lanes):
            self._tokens -= 1.0
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane.append(fut)
        if self._pump is None or self._pump.done():
            self._pump = asyncio.ensure_future(self._grant())
        await fut  # cancelled: the pump skips it, its token stays in the bucket

    async def _grant(self) -> None:
        """Hand out tokens as they come: the foreground lane's oldest waiter first, but one token in
        `BACKGROUND_EVERY` to the background lane's oldest while both wait."""
        while True:
            for lane in self._lanes:
                while lane and lane[0].done():
                    lane.popleft()
            fg, bg = self._lanes
            if not fg and not bg:
                return
            self._refill()
            if self._tokens < 1.0:
                await asyncio.sleep((1.0 - self._tokens) / self.qps)
                continue
            self._tokens -= 1.0
            if fg and (not bg or self._streak < BACKGROUND_EVERY - 1):
                self._streak = self._streak + 1 if bg else 0
                fg.popleft().set_result(None)
            else:
                self._streak = 0
                bg.popleft().set_result(None)

    async def close(self) -> None:
        """Stop handing out tokens (the client is closing): the waiters are cancelled."""
        for lane in self._lanes:
            while lane:
                lane.popleft().cancel()
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump


class AuditClient(KubeClient):
    """KubeClient with the audit controller's writes and its QPS limit (`audit.qps`, `audit.burst`)."""

    def __init__(
        self,
        configuration: Any,  # a ClusterConfig, or kubernetes_asyncio's Configuration (KubeClient)
        concurrency: int = 16,
        *,
        qps: float = 20.0,
        burst: int = 40,
        watches: int = WATCH_CONNECTIONS,
    ) -> None:
        super().__init__(configuration, concurrency, watches=watches)
        self.limiter = TokenBucket(qps, burst)

    def check_write(self, method: str, path: str, query: dict[str, Any] | None) -> None:
        check_audit_write(method, path, query)

    async def close(self) -> None:
        await self.limiter.close()
        await super().close()

    async def request(self, method: str, path: str, *, timeout: float, **kw: Any) -> dict[str, Any]:
        await self.limiter.wait()
        return await super().request(method, path, timeout=timeout, **kw)

    async def stream(self, path: str, **kw: Any) -> AsyncIterator[dict[str, Any]]:
        await self.limiter.wait()  # opening a watch is a request too; its events are not
        async for event in super().stream(path, **kw):
            yield event
