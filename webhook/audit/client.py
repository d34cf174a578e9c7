"""The audit controller's connection: the webhook's KubeClient, rate-limited, allowed a few writes.

The webhook's client refuses every write (`webhook.cluster.client.assert_no_write`). The audit
controller is the project's one writer, and even it may write only what it owns: Events (core/v1
and events.k8s.io/v1), its coordination.k8s.io Lease, and the Policy Reports (openreports.io,
wgpolicyk8s.io). Everything else still needs dryRun=All, as for the webhook.

Requests are paced by a token bucket, the way client-go paces a rest.Config (`QPS`, `Burst`;
k8s.io/client-go/util/flowcontrol/throttle.go `NewTokenBucketRateLimiter`): a re-check storm
(a Secret read by a thousand jobs is deleted) never floods the apiserver.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from kubernetes_asyncio import client as k8s_client

from webhook.cluster.client import KubeClient, assert_no_write

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


class TokenBucket:
    """`qps` requests a second on average, bursts of up to `burst` (client-go's token bucket)."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._tokens = float(self.burst)
        self._last = clock()
        self._lock = asyncio.Lock()

    def reserve(self) -> float:
        """Take one token; the seconds to wait before using it (0 when one was free)."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def wait(self) -> None:
        async with self._lock:
            delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)


class AuditClient(KubeClient):
    """KubeClient with the audit controller's writes and its QPS limit (`audit.qps`, `audit.burst`)."""

    def __init__(
        self, configuration: k8s_client.Configuration, concurrency: int = 16, *, qps: float = 20.0, burst: int = 40
    ) -> None:
        super().__init__(configuration, concurrency)
        self.limiter = TokenBucket(qps, burst)

    def check_write(self, method: str, path: str, query: dict[str, Any] | None) -> None:
        check_audit_write(method, path, query)

    async def request(self, method: str, path: str, *, timeout: float, **kw: Any) -> dict[str, Any]:
        await self.limiter.wait()
        return await super().request(method, path, timeout=timeout, **kw)

    async def stream(self, path: str, **kw: Any) -> AsyncIterator[dict[str, Any]]:
        await self.limiter.wait()  # opening a watch is a request too; its events are not
        async for event in super().stream(path, **kw):
            yield event
