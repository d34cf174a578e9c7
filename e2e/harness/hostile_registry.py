"""A hostile container registry: a real TLS (or plain-HTTP) server on 127.0.0.1 that answers what a test tells it.

The Image Pull check's client must hold against a registry a job author controls
(`registryAccess.mode: all`): a token realm that points at an internal plain-HTTP service, redirects
to other hosts and to 169.254.169.254, tags with terminal escapes, a malformed WWW-Authenticate, a
registry that never answers. :class:`HostileServer` answers each route with a :class:`Reply` (or a
function of the request), records every request it gets (method, path, headers: whether a
credential arrived, and where), and serves TLS with a trustme certificate for 127.0.0.1, ::1,
localhost and the test names ``*.test`` (the client under test is given the CA, and a resolver
that maps those names to 127.0.0.1). With ``tls=False`` it is the "internal service" an attack
aims at: a plain-HTTP server that records what reaches it.

Each connection's TLS handshake runs in its own thread, so a client that connects and says
nothing holds up no one. A reply with ``hang=True`` answers nothing until the server closes.
"""

from __future__ import annotations

import hashlib
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trustme

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
#: the names the certificate holds besides the loopback addresses (a test's resolver maps them to 127.0.0.1)
TEST_NAMES = ("localhost", "registry.test", "realm.test", "other.test", "*.test")


@dataclass(frozen=True)
class Seen:
    """One request the server got."""

    method: str
    path: str
    headers: dict[str, str]

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    #: answer nothing until the server closes (a registry slower than any budget)
    hang: bool = False


Route = Reply | Callable[[Seen], Reply]


def json_reply(doc: Any, status: int = 200, content_type: str = "application/json", **headers: str) -> Reply:
    return Reply(status, {"Content-Type": content_type, **headers}, json.dumps(doc).encode())


def index_reply(platforms: list[tuple[str, str]]) -> tuple[Reply, str]:
    """An OCI image index over one (empty) manifest per platform, and its digest."""
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": "sha256:" + "0" * 64, "size": 2,
             "platform": {"os": os_, "architecture": arch}}
            for os_, arch in platforms
        ],
    }  # fmt: skip
    body = json.dumps(doc).encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return Reply(200, {"Content-Type": OCI_INDEX, "Docker-Content-Digest": digest}, body), digest


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, owner: HostileServer, ctx: ssl.SSLContext | None, family: socket.AddressFamily) -> None:
        self.address_family = family
        self.owner = owner
        self.ctx = ctx
        host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
        super().__init__((host, 0), _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.ctx is None:
            self.RequestHandlerClass(request, client_address, self)
            return
        try:
            tls = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return  # a client that does not trust the certificate, or a port scan
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            tls.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
        with owner.lock:
            owner.seen.append(seen)
            route = owner.find(self.command, self.path)
        reply = route(seen) if callable(route) else route
        if reply.hang:
            owner.closing.wait(60)
            self.close_connection = True
            return
        self.send_response(reply.status)
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    do_GET = do_HEAD = do_POST = _answer


class HostileServer:
    """A server on 127.0.0.1 (or ::1) whose answers a test sets: `route(method, path, reply)`.

    A path is matched without its query first, then with it; an unrouted request gets `default`,
    else 404 NAME_UNKNOWN. `seen` holds every request, in order."""

    def __init__(
        self,
        ca: trustme.CA | None = None,
        *,
        tls: bool = True,
        family: socket.AddressFamily = socket.AF_INET,
    ) -> None:
        self.ca = ca if ca is not None or not tls else trustme.CA()
        self.tls = tls
        self.family = family
        self.routes: dict[tuple[str, str], Route] = {}
        #: the answer to a request no route matches (None: 404 NAME_UNKNOWN)
        self.default: Route | None = None
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ setup

    def route(self, method: str, path: str, reply: Route) -> None:
        with self.lock:
            self.routes[(method, path)] = reply

    def find(self, method: str, path: str) -> Route:
        bare = path.split("?", 1)[0]
        for key in ((method, bare), (method, path), ("*", bare)):
            if key in self.routes:
                return self.routes[key]
        if self.default is not None:
            return self.default
        return json_reply({"errors": [{"code": "NAME_UNKNOWN", "message": "repository name not known"}]}, 404)

    def write_ca(self, path: Path) -> Path:
        """The CA's PEM, as registryAccess.caFile reads it."""
        assert self.ca is not None
        self.ca.cert_pem.write_to_path(str(path))
        return path

    def __enter__(self) -> HostileServer:
        ctx = None
        if self.tls:
            assert self.ca is not None
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.ca.issue_cert("127.0.0.1", "::1", *TEST_NAMES).configure_cert(ctx)
        self._server = _Server(self, ctx, self.family)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="hostile-registry", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)

    # ------------------------------------------------------------------ addresses

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def address(self) -> str:
        """host:port as an image reference names this registry."""
        host = "[::1]" if self.family == socket.AF_INET6 else "127.0.0.1"
        return f"{host}:{self.port}"

    def url(self, path: str = "", host: str | None = None) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host or self.address.rsplit(':', 1)[0]}:{self.port}{path}"

    def requests_for(self, prefix: str) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.path.startswith(prefix)]


@contextmanager
def hostile_pair(ca: trustme.CA | None = None) -> Iterator[tuple[HostileServer, HostileServer]]:
    """A hostile TLS registry and the plain-HTTP "internal" service its answers point at."""
    with HostileServer(ca or trustme.CA()) as reg, HostileServer(tls=False) as internal:
        yield reg, internal
