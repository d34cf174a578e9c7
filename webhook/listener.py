"""The TLS listener under WebhookApp: connections, their bounds, client certificates, drain.

WebhookApp (webhook.server) turns one request into one answer; this module decides which
connections get to ask. Every connection is bounded (head, body and idle timeouts, a
connection count) so a slow or hostile client cannot hold memory or a worker; POST /validate
can require the apiserver's client certificate; SIGTERM drains what is in flight.

Fairness under floods (Slots): a full table of connections does not lock anyone out. A new
connection takes the slot of the oldest connection that is only waiting (for its first
request head, then for the next request on a kept-alive connection, then for the rest of a
body), so connections that hold a slot without sending a request can never keep out a client
that sends its request at once, the apiserver's included. One source address holds at most
maxConnectionsPerPeer; addresses in trustedNetworks are exempt and are made room for last.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import logging
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

from aiohttp import web

from webhook._compat import RequestHandler, server_protocol_kwargs
from webhook.server import BodyTimeout, WebhookApp

log = logging.getLogger("webhook.server")  # one logger for the server, whichever module logs


def loop_name() -> str:
    """The running loop: "uvloop" when it is uvloop's (the `fast` extra), else "asyncio"."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


#: what a connection is waiting for, in the order connections are closed to make room; None: working
#: on a request (its body is in, the handler runs or the answer is being written), never closed for room
NEW, IDLE, BODY = 0, 1, 2
WAITING = {
    NEW: "waiting for its first request head",
    IDLE: "waiting for its next request",
    BODY: "receiving a request body",
}


def _now_and_then(count: int) -> bool:
    """Log the first of a kind and every 1,000th: a flood must not flood the log."""
    return count == 1 or count % 1000 == 0


def peer_address(transport: asyncio.BaseTransport) -> str:
    """The source address of a connection ("" when unknown); an IPv4-mapped IPv6 address as IPv4."""
    peer = transport.get_extra_info("peername")
    host = peer[0] if isinstance(peer, tuple) and peer else ""
    if isinstance(host, str) and host.startswith("::ffff:"):
        try:
            mapped = ipaddress.IPv6Address(host.split("%", 1)[0]).ipv4_mapped
        except ValueError:
            mapped = None
        return str(mapped) if mapped is not None else host
    return host if isinstance(host, str) else ""


class Slots:
    """The open connections, what each waits for, and which one makes room for a new one.

    A connection is in one ordered table per (trusted, waiting-for) pair, entered at the end
    when its state changes, so the first entry of a table is the one waiting longest. Room is
    made from the untrusted tables first (new, idle, body), then the trusted ones in the same
    order. Every operation is O(1) but the per-peer choice, which looks at that peer's own
    connections (at most maxConnectionsPerPeer).
    """

    def __init__(self, max_connections: int, max_per_peer: int, trusted: list[str]) -> None:
        self.max_connections = max_connections
        self.max_per_peer = max_per_peer
        self._trusted = [ipaddress.ip_network(n) for n in trusted]
        self.all: dict[_Connection, None] = {}
        self.by_peer: dict[str, dict[_Connection, None]] = {}
        self._waiting: dict[tuple[bool, int], dict[_Connection, None]] = {
            (trusted, state): {} for trusted in (False, True) for state in (NEW, IDLE, BODY)
        }
        self._order = itertools.count()
        #: counts: refused (nothing to make room from), evicted (closed to make room)
        self.refused = {"maxConnections": 0, "maxConnectionsPerPeer": 0}
        self.evicted = 0

    def __len__(self) -> int:
        return len(self.all)

    def __iter__(self) -> Iterator[_Connection]:
        return iter(list(self.all))

    def is_trusted(self, peer: str) -> bool:
        if not self._trusted or not peer:
            return False
        try:
            address = ipaddress.ip_address(peer.split("%", 1)[0])
        except ValueError:
            return False
        return any(address in net for net in self._trusted)

    def admit(self, conn: _Connection) -> bool:
        """Take a slot for `conn`, closing a waiting connection to make room if need be; False: refused."""
        peer = conn.peer
        own = self.by_peer.get(peer)
        if not conn.trusted and own is not None and len(own) >= self.max_per_peer:
            victim = self._oldest_waiting_of(own)
            if victim is None:
                self._refuse(conn, "maxConnectionsPerPeer", f"{peer} has {len(own)} connections open")
                return False
            self._evict(victim, conn, f"{peer} has {len(own)} connections open (maxConnectionsPerPeer)")
        elif len(self.all) >= self.max_connections:
            victim = self._oldest_waiting()
            if victim is None:
                self._refuse(conn, "maxConnections", f"{len(self.all)} connections are open")
                return False
            self._evict(victim, conn, f"{len(self.all)} connections are open (maxConnections)")
        self.all[conn] = None
        self.by_peer.setdefault(peer, {})[conn] = None
        self.set_state(conn, NEW)
        return True

    def set_state(self, conn: _Connection, state: int | None) -> None:
        """`conn` now waits for `state` (NEW, IDLE, BODY) or works on a request (None)."""
        if conn.state is not None:
            self._waiting[(conn.trusted, conn.state)].pop(conn, None)
        conn.state = state
        conn.since = next(self._order)
        if state is not None and conn in self.all:
            self._waiting[(conn.trusted, state)][conn] = None

    def forget(self, conn: _Connection) -> None:
        if conn.state is not None:
            self._waiting[(conn.trusted, conn.state)].pop(conn, None)
            conn.state = None
        self.all.pop(conn, None)
        own = self.by_peer.get(conn.peer)
        if own is not None:
            own.pop(conn, None)
            if not own:
                del self.by_peer[conn.peer]

    def _oldest_waiting(self) -> _Connection | None:
        for (_, state), table in self._waiting.items():  # untrusted first; new, idle, body
            for conn in list(table):
                if state == BODY and conn.body_done():
                    self.set_state(conn, None)  # its body is in: it is working now
                    continue
                return conn
        return None

    def _oldest_waiting_of(self, own: dict[_Connection, None]) -> _Connection | None:
        best: tuple[int, int, _Connection] | None = None
        for conn in list(own):
            state = conn.state
            if state is None:
                continue
            if state == BODY and conn.body_done():
                self.set_state(conn, None)
                continue
            if best is None or (state, conn.since) < best[:2]:
                best = (state, conn.since, conn)
        return best[2] if best is not None else None

    def _evict(self, victim: _Connection, newcomer: _Connection, why: str) -> None:
        self.evicted += 1
        if _now_and_then(self.evicted):
            log.warning(
                "connection from %s closed to make room for one from %s: %s, and it was %s; %d closed so far",
                victim.peer or "an unknown address",
                newcomer.peer or "an unknown address",
                why,
                WAITING[victim.state] if victim.state is not None else "working",
                self.evicted,
            )
        victim.evict()

    def _refuse(self, conn: _Connection, bound: str, why: str) -> None:
        self.refused[bound] += 1
        if _now_and_then(self.refused[bound]):
            log.warning(
                "connection from %s refused: %s (%s), every one working on a request; %d refused so far",
                conn.peer or "an unknown address",
                why,
                bound,
                self.refused[bound],
            )


class _Connection(RequestHandler):
    """aiohttp's per-connection protocol, with the bounds a hostile client must not escape.

    - first head: a new connection must deliver its first complete request head within
      `first_head_timeout_seconds` (the TLS handshake before it is bounded the same);
    - head: a kept-alive connection whose next request has begun to arrive must deliver a
      complete head within `header_timeout_seconds`;
    - body: once the head is in, the body must have arrived within `body_timeout_seconds`
      (answered 408 with `Connection: close` by the handler reading it);
    - idle: a kept-alive connection with nothing arriving closes after `idle_timeout_seconds`
      (aiohttp's keepalive_timeout);
    - count: `Slots` (maxConnections, maxConnectionsPerPeer, trustedNetworks): a new connection
      takes the slot of one that is only waiting, or is closed right after the handshake.
    A connection that misses a head bound, or is closed to make room, is aborted (no TLS
    close_notify to wait for).
    """

    __slots__ = ("_owner", "_timer", "_busy", "_counted", "_request", "peer", "trusted", "state", "since")

    def __init__(self, owner: WebhookServer, manager: web.Server, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._owner = owner
        self._timer: asyncio.TimerHandle | None = None
        self._busy = False
        self._counted = False
        self._request: web.BaseRequest | None = None
        self.peer = ""
        self.trusted = False
        self.state: int | None = None
        self.since = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        owner = self._owner
        self.peer = peer_address(transport)
        self.trusted = owner.connections.is_trusted(self.peer)
        if not owner.connections.admit(self):
            owner.rejected_connections += 1
            transport.abort()  # type: ignore[attr-defined]
            return
        self._counted = True
        owner.accepted_connections += 1
        super().connection_made(transport)
        self._arm(owner.first_head_timeout, "first request head")

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        self._forget()
        super().connection_lost(exc)

    def _forget(self) -> None:
        if self._counted:
            self._counted = False
            self._owner._forget(self)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if data and not self._busy and self._timer is None:
            self._arm(self._owner.header_timeout, "request head")  # a kept-alive connection's next request began

    def body_done(self) -> bool:
        """The request in progress has all its body (or failed reading it): it is being worked on."""
        request = self._request
        return request is None or request.content.is_eof() or request.content.exception() is not None

    def evict(self) -> None:
        """Closed to make room for a new connection: its slot is free at once."""
        self._forget()
        self.abort()

    # the middleware tells us where a request stands
    def request_started(self, request: web.BaseRequest) -> None:
        self._busy = True
        self._request = request
        self._disarm()
        if not request.content.is_eof():
            self._arm(self._owner.body_timeout, "request body", request)
            self._set_state(BODY)
        else:
            self._set_state(None)

    def request_finished(self) -> None:
        self._busy = False
        self._disarm()
        # still working until the answer is written (finish_response): not closed for room before

    def _set_state(self, state: int | None) -> None:
        if self._counted:
            self._owner.connections.set_state(self, state)

    def _arm(self, seconds: float, what: str, request: web.BaseRequest | None = None) -> None:
        self._disarm()
        self._timer = self._loop.call_later(seconds, self._expired, what, request)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self, what: str, request: web.BaseRequest | None) -> None:
        self._timer = None
        if request is not None and request.content.is_eof():
            return  # the body is complete: the handler is working, the deadline bounds it
        self._owner.timed_out_connections += 1
        if request is not None and request.content.exception() is None:
            # the handler reading this body answers 408 (Connection: close) and logs the refusal;
            # should it not answer within the same time again, the connection is cut
            request.content.set_exception(BodyTimeout(self._owner.body_timeout))
            self._arm(self._owner.body_timeout, "an answer to a request whose body did not arrive")
            return
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        log.debug("closing a connection from %s: %s not received in time", peer, what)
        self.abort()

    async def finish_response(
        self, request: web.BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        """Write the answer; a request whose body failed (bad encoding, timed out) then ends the connection.

        aiohttp would otherwise linger, reading a body that can only raise its error again
        ("Unhandled exception"); the answer already says `Connection: close`.
        """
        written = await super().finish_response(request, resp, start_time)
        self._request = None
        if request.content.exception() is not None and not request.content.is_eof():
            self.force_close()  # after the answer is written: the TLS close flushes it
        elif not self._busy:
            self._set_state(IDLE)  # answered: waiting for the next request on this kept-alive connection
        return written

    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        """A request aiohttp could not parse (bad head, line too long) is the client's mistake: one line, JSON.

        aiohttp logs those with a traceback at ERROR; a 5xx (our bug) still gets aiohttp's own handling.
        """
        if status >= 500 or exc is None or request.writer.output_size > 0:
            return super().handle_error(request, status, exc, message)
        text = getattr(exc, "message", None) or type(exc).__name__
        first = str(text).strip().splitlines()[0].strip().rstrip(":")[:100]
        return self._owner.webhook._client_error(
            status, f"malformed HTTP request: {first}", time.perf_counter(), close=True
        )

    def abort(self) -> None:
        transport = self.transport
        if transport is not None:
            transport.abort()
        self.force_close()


class WebhookServer:
    """Runs a WebhookApp over TLS; `shutdown()` is what SIGTERM triggers.

    Drain (SIGTERM): readiness goes false, the listener closes, and every open connection
    may finish what it carries: a request whose body is still arriving is read and
    answered, and every answer during the drain says `Connection: close`, so a client
    that sends one more request on a kept-alive connection gets its answer and then
    reconnects (to a pod that is still ready) instead of losing the request to a close
    race. Idle kept-alive connections close at their idle timeout; whatever is still open
    after `drain_seconds` is cut.

    Client authentication: with `client_auth.ca_file` set, the TLS context asks for a
    client certificate (optional at the TLS layer, so the kubelet's probes still reach
    /healthz and /readyz) and POST /validate answers 401 without a certificate from that CA
    and 403 when its name is not in `client_auth.allowed_names`.
    """

    def __init__(
        self,
        webhook: WebhookApp,
        *,
        ssl_context: ssl.SSLContext | None,
        host: str = "127.0.0.1",
        port: int = 8443,
        reloader: Any | None = None,
        access_log: bool = False,
    ) -> None:
        s = webhook.settings
        self.webhook = webhook
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.reloader = reloader
        self.first_head_timeout = s.first_head_timeout_seconds
        self.header_timeout = s.header_timeout_seconds
        self.body_timeout = s.body_timeout_seconds
        self.max_connections = s.max_connections
        self.client_auth = s.client_auth if s.client_auth.ca_file else None
        if self.client_auth is not None and ssl_context is not None and ssl_context.verify_mode == ssl.CERT_NONE:
            ssl_context.load_verify_locations(cafile=self.client_auth.ca_file)
            ssl_context.verify_mode = ssl.CERT_OPTIONAL  # see tls.server_context
        self.connections = Slots(s.max_connections, s.max_connections_per_peer, s.trusted_networks)
        self.accepted_connections = 0
        self.rejected_connections = 0
        self.timed_out_connections = 0
        webhook.metrics.track_connections(self.connection_counts)
        self._all_closed = asyncio.Event()
        self._listener: asyncio.base_events.Server | None = None
        webhook.app.middlewares.append(self._track_request)
        webhook.app.on_response_prepare.append(self._close_when_draining)
        self._runner = web.AppRunner(
            webhook.app,
            handle_signals=False,
            access_log=log if access_log else None,
            keepalive_timeout=s.idle_timeout_seconds,
            lingering_time=min(10.0, s.body_timeout_seconds),
            shutdown_timeout=0.001,  # the drain is ours (shutdown()); this only cancels what is left
            # bodies stay as sent: WebhookApp inflates a compressed one in bounded steps (server.inflate);
            # aiohttp's own decoder, after a 413, went on inflating a gzip bomb whole while it lingered
            auto_decompress=False,
        )
        self._stopped = asyncio.Event()

    # ----------------------------------------------------------------- connections

    @property
    def evicted_connections(self) -> int:
        return self.connections.evicted

    def connection_counts(self) -> dict[str, int]:
        """Connections so far by result (preflight_webhook_connections_total)."""
        return {
            "accepted": self.accepted_connections,
            "refused": self.rejected_connections,
            "evicted": self.evicted_connections,
            "timed_out": self.timed_out_connections,
        }

    def _forget(self, conn: _Connection) -> None:
        self.connections.forget(conn)
        if not self.connections:
            self._all_closed.set()

    @web.middleware
    async def _track_request(self, request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
        conn = request.protocol if isinstance(request.protocol, _Connection) else None
        if conn is not None:
            conn.request_started(request)
        try:
            if self.client_auth is not None and request.path == "/validate":
                refusal = self._refuse_client(request)
                if refusal is not None:
                    return refusal
            return await handler(request)
        finally:
            if conn is not None:
                conn.request_finished()

    def _refuse_client(self, request: web.Request) -> web.Response | None:
        """401 without a verified client certificate, 403 for a name not allowed; None to go on."""
        assert self.client_auth is not None
        peer = request.transport.get_extra_info("peercert") if request.transport is not None else None
        if not peer:
            log.info("refused /validate from %s: no client certificate", request.remote)
            return self.webhook._json({"error": "a client certificate is required (clientAuth)"}, status=401)
        names = peer_names(peer)
        allowed = self.client_auth.allowed_names
        if allowed and not names & set(allowed):
            log.info(
                "refused /validate from %s: client certificate names %s are not allowed", request.remote, sorted(names)
            )
            return self.webhook._json({"error": "this client certificate is not allowed to call /validate"}, status=403)
        return None

    async def _close_when_draining(self, request: web.Request, response: web.StreamResponse) -> None:
        if self.webhook.draining:
            # the headers are already built when this signal runs: say it, and close after writing
            response.headers["Connection"] = "close"
            response.force_close()  # the client's next request opens a new connection to a ready pod

    # ----------------------------------------------------------------- life cycle

    async def start(self) -> None:
        await self._runner.setup()
        manager = self._runner.server
        assert manager is not None
        loop = asyncio.get_running_loop()
        kwargs = server_protocol_kwargs(manager)

        def factory() -> _Connection:
            return _Connection(self, manager, loop=loop, **kwargs)

        self._listener = await loop.create_server(
            factory,
            self.host,
            self.port,
            ssl=self.ssl_context,
            backlog=1024,
            ssl_handshake_timeout=self.first_head_timeout if self.ssl_context is not None else None,
        )
        if self.port == 0 and self._listener.sockets:  # an ephemeral port: report the real one
            self.port = self._listener.sockets[0].getsockname()[1]
        self.webhook.tls_loaded = self.ssl_context is not None
        if self.reloader is not None:
            self.reloader.start()
        log.info(
            "serving on https://%s:%d (json: %s, event loop: %s, client authentication: %s)",
            self.host,
            self.port,
            self.webhook.json_name,
            loop_name(),
            "on" if self.client_auth else "off",
        )

    async def shutdown(self) -> None:
        """Readiness false, stop accepting, let open connections finish (≤ drain_seconds)."""
        if self.webhook.draining:
            await self._stopped.wait()
            return
        self.webhook.draining = True
        drain = self.webhook.settings.drain_seconds
        log.info("shutting down: draining %d connection(s) for up to %.1fs", len(self.connections), drain)
        try:
            if self._listener is not None:
                self._listener.close()
            if self.reloader is not None:
                await self.reloader.stop()
            if self.connections:
                # no early close here: a body still arriving is read and answered, and an idle
                # kept-alive connection may carry one more request (answered `Connection: close`)
                # until its idle timeout; the drain bounds both
                self._all_closed.clear()
                try:
                    await asyncio.wait_for(self._all_closed.wait(), drain)
                except TimeoutError:
                    log.warning(
                        "drain ended after %.1fs with %d connection(s) open; closing them", drain, len(self.connections)
                    )
                for conn in list(self.connections):
                    conn.abort()
            await self._runner.cleanup()
        finally:
            self._stopped.set()
        log.info("shut down")

    async def wait_stopped(self) -> None:
        await self._stopped.wait()


def peer_names(peercert: dict[str, Any]) -> set[str]:
    """The names a verified client certificate carries: subject CN and DNS/IP SANs."""
    names: set[str] = set()
    for rdn in peercert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName":
                names.add(value)
    for kind, value in peercert.get("subjectAltName") or ():
        if kind in ("DNS", "IP Address"):
            names.add(value)
    return names


__all__ = ["Slots", "WebhookServer", "peer_address", "peer_names"]
