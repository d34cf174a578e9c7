"""A loopback TCP proxy that makes the apiserver slow or unreachable, for one client only.

The end-to-end deadline tests put it between the webhook and the kube-apiserver: the
webhook's kubeconfig names ``https://127.0.0.1:<proxy port>``, every other client (kubectl,
the apiserver calling the webhook) keeps talking to the apiserver directly. The proxy is
raw TCP, so TLS passes through untouched: the client verifies the apiserver's own
certificate (which carries 127.0.0.1 as an IP SAN) and presents its client certificate to
the apiserver, exactly as without the proxy.

What it can do to the traffic, changed at run time from the test's thread:

* ``set_delay(up, down)``: every chunk read from one side is written to the other side
  ``up`` (client → apiserver) or ``down`` seconds after it arrived, order preserved. That is
  an added latency per request (and per TLS handshake flight), like ``tc netem delay``, not
  a bandwidth cap; a change applies to bytes read after it.
* ``blackhole()``: connections are still accepted but nothing is forwarded either way: the
  bytes wait (a network partition; TCP would retransmit them). ``forward()`` lets the held
  bytes go.
* ``refuse()``: the listener closes (new connections get ECONNREFUSED) and open connections
  are cut. ``forward()`` listens again on the same port.

It runs its own asyncio loop in a daemon thread, so synchronous tests (kubectl is a
subprocess) drive it with plain method calls. Counters (``connections``, ``chunks_up`` …)
say that the traffic really went through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import yaml

T = TypeVar("T")

Mode = Literal["forward", "blackhole", "refuse"]
CHUNK = 64 * 1024


@dataclass
class ProxyStats:
    """What went through; read from the test thread (plain ints, updated on the proxy's loop)."""

    connections: int = 0  # accepted
    upstream_failures: int = 0  # accepted, but the apiserver could not be reached
    chunks_up: int = 0  # client → apiserver chunks written
    chunks_down: int = 0
    delayed_up: int = 0  # of chunks_up, those held back by an added delay
    resets: int = 0  # connections cut by refuse()


class _Conn:
    """One client connection and its upstream; two pumps, one per direction."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task[None]] = []

    def abort(self) -> None:
        for w in (self.client, self.upstream):
            if w is not None:
                w.transport.abort()
        for t in self.tasks:
            t.cancel()


class DelayProxy:
    """``with DelayProxy("https://127.0.0.1:6443") as proxy: proxy.set_delay(3.0)``."""

    def __init__(self, target: str | tuple[str, int], *, host: str = "127.0.0.1") -> None:
        if isinstance(target, str):
            parts = urlsplit(target if "://" in target else f"tcp://{target}")
            if parts.hostname is None or parts.port is None:
                raise ValueError(f"target {target!r} needs a host and a port")
            target = (parts.hostname, parts.port)
        self.target = target
        self.host = host
        self.port: int = 0
        self.stats = ProxyStats()
        self.mode: Mode = "forward"
        self.delay_up = 0.0
        self.delay_down = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[_Conn] = set()
        self._flowing: asyncio.Event | None = None

    # ----------------------------------------------------------------- life cycle

    def __enter__(self) -> DelayProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def start(self) -> DelayProxy:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="delayproxy", daemon=True)
        self._thread.start()
        self._call(self._init())
        return self

    def stop(self) -> None:
        """Close the listener and every connection, then end the loop's thread. Idempotent."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        loop.close()

    # ----------------------------------------------------------------- controls (any thread)

    def set_delay(self, up: float, down: float = 0.0) -> None:
        """Seconds added to each chunk client → apiserver (`up`) and back (`down`)."""
        self._call(self._set(delay=(up, down)))

    def forward(self) -> None:
        """Normal service: listen (again) and let every held byte go."""
        self._call(self._set(mode="forward"))

    def blackhole(self) -> None:
        """Accept, but forward nothing either way until forward()."""
        self._call(self._set(mode="blackhole"))

    def refuse(self) -> None:
        """Stop listening (ECONNREFUSED) and cut the open connections."""
        self._call(self._set(mode="refuse"))

    def open_connections(self) -> int:
        return self._call(self._count())

    # ----------------------------------------------------------------- the loop's side

    def _call(self, coro: Awaitable[T]) -> T:
        assert self._loop is not None, "start() first"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)  # type: ignore[arg-type]

    async def _count(self) -> int:
        return len(self._conns)

    async def _init(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        await self._listen()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, self.host, self.port or 0, reuse_address=True, family=socket.AF_INET
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close_listener(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _shutdown(self) -> None:
        await self._close_listener()
        for c in list(self._conns):
            c.abort()
        self._conns.clear()

    async def _set(self, *, mode: Mode | None = None, delay: tuple[float, float] | None = None) -> None:
        assert self._flowing is not None
        if delay is not None:
            self.delay_up, self.delay_down = max(0.0, delay[0]), max(0.0, delay[1])
        if mode is None or mode == self.mode:
            return
        self.mode = mode
        if mode == "refuse":
            await self._close_listener()
            for c in list(self._conns):
                c.abort()
                self.stats.resets += 1
            self._conns.clear()
            self._flowing.set()
        elif mode == "blackhole":
            self._flowing.clear()
            if self._server is None:
                await self._listen()
        else:
            if self._server is None:
                await self._listen()
            self._flowing.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        conn = _Conn(writer)
        if self.mode == "refuse":  # accepted in the instant before the listener closed
            conn.abort()
            return
        self._conns.add(conn)
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                self.stats.upstream_failures += 1
                conn.abort()
                return
            conn.upstream = up_writer
            conn.tasks = [
                asyncio.ensure_future(self._pump(reader, up_writer, up=True)),
                asyncio.ensure_future(self._pump(up_reader, writer, up=False)),
            ]
            await asyncio.gather(*conn.tasks, return_exceptions=True)
        finally:
            self._conns.discard(conn)
            for w in (writer, conn.upstream):
                if w is not None:
                    w.close()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, up: bool) -> None:
        """Read as fast as the peer sends; write each chunk when its delay has passed."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read() -> None:
            while True:
                try:
                    data = await src.read(CHUNK)
                except (ConnectionError, OSError):
                    data = b""
                delay = self.delay_up if up else self.delay_down
                queue.put_nowait((loop.time() + delay, data))
                if not data:
                    return

        reading = asyncio.ensure_future(read())
        try:
            while True:
                release, data = await queue.get()
                wait = release - loop.time()
                if wait > 0:
                    if up and data:
                        self.stats.delayed_up += 1
                    await asyncio.sleep(wait)
                assert self._flowing is not None
                await self._flowing.wait()
                if not data:
                    if dst.can_write_eof():
                        with contextlib.suppress(OSError):
                            dst.write_eof()
                    return
                dst.write(data)
                if up:
                    self.stats.chunks_up += 1
                else:
                    self.stats.chunks_down += 1
                await dst.drain()
        except (ConnectionError, OSError):
            return
        finally:
            reading.cancel()


def proxied_kubeconfig(kubeconfig: str | Path, proxy_url: str, out: str | Path) -> Path:
    """A copy of `kubeconfig` whose clusters point at `proxy_url` (same CA, same user)."""
    doc: dict[str, Any] = yaml.safe_load(Path(kubeconfig).read_text())
    for cluster in doc.get("clusters") or []:
        cluster["cluster"]["server"] = proxy_url
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path
