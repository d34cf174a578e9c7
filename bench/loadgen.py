"""A closed-loop HTTPS load generator: N keep-alive connections, a fixed request count, a time bound.

Each of N workers owns one connection (aiohttp, limit=N) and sends the next request as soon
as the previous answer is read. It stops by itself after `requests` answers or `duration`
seconds, whichever comes first. Loopback only: the target must be 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp


@dataclass
class LoadResult:
    requests: int
    errors: int
    seconds: float
    latencies_ms: list[float] = field(repr=False, default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        xs = sorted(self.latencies_ms)
        k = min(len(xs) - 1, max(0, round(q / 100.0 * len(xs)) - 1))
        return xs[k]


def _local_address(host: str) -> bool:
    """An address of one of this machine's interfaces (the real node's bridge): it can be bound."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.bind((host, 0))
        return True
    except OSError:
        return False


async def run_load(
    url: str,
    body: bytes,
    *,
    ssl_context: ssl.SSLContext,
    connections: int = 32,
    requests: int = 20000,
    duration: float = 30.0,
    warmup: int = 500,
    on_start: Callable[[], None] | None = None,
    ok_statuses: Collection[int] = (200,),
) -> LoadResult:
    """``ok_statuses``: answers counted as successes (e.g. 201 for a dry-run create on the apiserver)."""
    host = urlsplit(url).hostname
    if host not in ("127.0.0.1", "localhost", "::1") and not _local_address(host or ""):
        raise ValueError(f"this machine only (loopback or the node's bridge): refusing to load {host}")
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(ssl=ssl_context, limit=connections, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> tuple[float, int]:
            t0 = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as r:
                await r.read()
                return (time.perf_counter() - t0) * 1000.0, r.status

        # warm-up: open every connection and let caches settle; not measured
        remaining = [warmup]

        async def warm() -> None:
            while remaining[0] > 0:
                remaining[0] -= 1
                await one()

        await asyncio.gather(*(warm() for _ in range(connections)))

        if on_start is not None:
            on_start()
        result = LoadResult(0, 0, 0.0)
        budget = [requests]
        start = time.perf_counter()
        stop_at = start + duration

        async def worker() -> None:
            while budget[0] > 0 and time.perf_counter() < stop_at:
                budget[0] -= 1
                try:
                    ms, status = await one()
                except (TimeoutError, aiohttp.ClientError):
                    result.errors += 1
                    continue
                result.statuses[status] = result.statuses.get(status, 0) + 1
                if status in ok_statuses:
                    result.requests += 1
                    result.latencies_ms.append(ms)
                else:
                    result.errors += 1

        await asyncio.gather(*(worker() for _ in range(connections)))
        result.seconds = time.perf_counter() - start
        return result
