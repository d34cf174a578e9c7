"""The TLS listener under WebhookApp: connections, their bounds, client certificates, drain.

WebhookApp (webhook.server) turns one request into one answer; this module decides which
connections get to ask. Every connection is bounded (head, body and idle timeouts, a
connection count) so a slow or hostile client cannot hold memory or a worker; POST /validate
can require the apiserver's client certificate; SIGTERM drains what is in flight.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from webhook.server import BodyTimeout, WebhookApp

log = logging.getLogger("webhook.server")  # one logger for the server, whichever module logs


def loop_name() -> str:
    """The running loop: "uvloop" when it is uvloop's (the `fast` extra), else "asyncio"."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


class _Connection(RequestHandler):
    """aiohttp's per-connection protocol, with the bounds a hostile client must not escape.

    - head: a new connection, or a kept-alive one whose next request has begun to arrive,
      must deliver a complete request head within `header_timeout_seconds`;
    - body: once the head is in, the body must have arrived within `body_timeout_seconds`;
    - idle: a kept-alive connection with nothing arriving closes after `idle_timeout_seconds`
      (aiohttp's keepalive_timeout, which also bounds a head that never completes);
    - count: above `max_connections` a new connection is closed right after the handshake.
    A connection that misses a bound is aborted (no TLS close_notify to wait for).
    """

    __slots__ = ("_owner", "_timer", "_busy", "_counted")

    def __init__(self, owner: WebhookServer, manager: web.Server, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._owner = owner
        self._timer: asyncio.TimerHandle | None = None
        self._busy = False
        self._counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        owner = self._owner
        if len(owner.connections) >= owner.max_connections:
            owner.rejected_connections += 1
            if owner.rejected_connections == 1 or owner.rejected_connections % 1000 == 0:  # no log flood
                log.warning(
                    "connection closed: %d connections open (maxConnections); %d refused so far",
                    len(owner.connections),
                    owner.rejected_connections,
                )
            transport.abort()  # type: ignore[attr-defined]
            return
        self._counted = True
        owner.connections.add(self)
        super().connection_made(transport)
        self._arm(owner.header_timeout, "request head")

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        if self._counted:
            self._counted = False
            self._owner._forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if data and not self._busy and self._timer is None:
            self._arm(self._owner.header_timeout, "request head")  # a kept-alive connection's next request began

    # the middleware tells us where a request stands
    def request_started(self, request: web.BaseRequest) -> None:
        self._busy = True
        self._disarm()
        if not request.content.is_eof():
            self._arm(self._owner.body_timeout, "request body", request)

    def request_finished(self) -> None:
        self._busy = False
        self._disarm()

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
        if request.content.exception() is not None and not request.content.is_eof():
            self.force_close()  # after the answer is written: the TLS close flushes it
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
        self.header_timeout = s.header_timeout_seconds
        self.body_timeout = s.body_timeout_seconds
        self.max_connections = s.max_connections
        self.client_auth = s.client_auth if s.client_auth.ca_file else None
        if self.client_auth is not None and ssl_context is not None and ssl_context.verify_mode == ssl.CERT_NONE:
            ssl_context.load_verify_locations(cafile=self.client_auth.ca_file)
            ssl_context.verify_mode = ssl.CERT_OPTIONAL  # see tls.server_context
        self.connections: set[_Connection] = set()
        self.rejected_connections = 0
        self.timed_out_connections = 0
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
        )
        self._stopped = asyncio.Event()

    # ----------------------------------------------------------------- connections

    def _forget(self, conn: _Connection) -> None:
        self.connections.discard(conn)
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
        kwargs = dict(manager._kwargs)

        def factory() -> _Connection:
            return _Connection(self, manager, loop=loop, **kwargs)

        self._listener = await loop.create_server(
            factory,
            self.host,
            self.port,
            ssl=self.ssl_context,
            backlog=1024,
            ssl_handshake_timeout=self.header_timeout if self.ssl_context is not None else None,
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


__all__ = ["WebhookServer", "peer_names"]
