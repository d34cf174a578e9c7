"""Slow and hostile clients, graceful drain, caller authentication: over real TLS on 127.0.0.1.

Bounds are configured small and every test waits for an outcome (the connection is closed,
the answer arrives) under a generous cap; nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import re
import ssl
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from webhook.checks.base import Check, CheckContext
from webhook.config import Settings
from webhook.results import CheckResult, Status
from webhook.tls import generate_ca, issue_cert

#: the cap on every wait: a bound that never fires makes the test fail here, not hang
CAP = 15.0


class Pass(Check):
    name = "Widget Pass"
    kinds = frozenset({"Widget"})
    summary = "Always passes."

    async def run(self, ctx: CheckContext) -> CheckResult:
        return CheckResult(self.name, Status.PASS, "fine")


def review_bytes(uid: str = "hostile-1") -> bytes:
    req = {
        "uid": uid,
        "kind": {"group": "example.com", "version": "v1", "kind": "Widget"},
        "resource": {"group": "example.com", "version": "v1", "resource": "widgets"},
        "namespace": "team-a",
        "name": "w1",
        "operation": "CREATE",
        "userInfo": {"username": "alice"},
        "object": {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w1", "namespace": "team-a"},
            "spec": {"image": "good"},
        },
        "dryRun": False,
    }
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}).encode()


def head(body_len: int, path: str = "/validate", extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {body_len}\r\n\r\n"
    ).encode()


async def connect(server: Any, client_ssl: ssl.SSLContext | None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(
        asyncio.open_connection(
            "127.0.0.1", server.port, ssl=client_ssl, server_hostname="127.0.0.1" if client_ssl else None
        ),
        CAP,
    )


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """True once the server has closed the connection (EOF or reset); fails the test at CAP."""
    try:
        while await asyncio.wait_for(reader.read(65536), CAP):
            pass
    except (ConnectionError, ssl.SSLError):
        pass
    return True


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], Any]:
    status_line = await asyncio.wait_for(reader.readline(), CAP)
    headers: dict[str, str] = {}
    while True:
        line = await asyncio.wait_for(reader.readline(), CAP)
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), CAP)
    return int(status_line.split()[1]), headers, json.loads(body) if body else None


@pytest.fixture
def head_arrived(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set once a request head has been parsed and handed to the app (its body may still be arriving)."""
    from webhook import listener as server_module

    ev = asyncio.Event()
    original = server_module._Connection.request_started

    def started(self: Any, request: Any) -> None:
        original(self, request)
        ev.set()

    monkeypatch.setattr(server_module._Connection, "request_started", started)
    return ev


# --------------------------------------------------------------------------- slow clients


@pytest.mark.parametrize(
    ("settings", "sent"),
    [
        pytest.param(
            Settings(firstHeadTimeoutSeconds=0.2, headerTimeoutSeconds=60),
            lambda: b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
            id="first-head-at-the-short-timeout",
        ),
        pytest.param(
            Settings(bodyTimeoutSeconds=0.2),
            lambda: head(len(review_bytes())) + review_bytes()[:10],
            id="body",
        ),
    ],
)
async def test_a_request_that_never_completes_is_closed(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, settings: Settings, sent: Any
) -> None:
    server = await start_webhook(settings, checks=[Pass()])
    reader, writer = await connect(server, client_ssl)
    writer.write(sent())  # and never more
    await writer.drain()
    assert await closed_by_server(reader)
    assert server.timed_out_connections == 1
    writer.close()


async def test_the_next_request_head_on_a_kept_alive_connection_has_header_timeout(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(
        Settings(firstHeadTimeoutSeconds=60, headerTimeoutSeconds=0.2, idleTimeoutSeconds=60), checks=[Pass()]
    )
    reader, writer = await connect(server, client_ssl)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    status, _, _ = await read_response(reader)
    assert status == 200
    writer.write(b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # and never more
    await writer.drain()
    assert await closed_by_server(reader)
    assert server.timed_out_connections == 1
    writer.close()


async def test_a_connection_that_never_starts_tls_is_closed(start_webhook: Any, widget_adapter: str) -> None:
    server = await start_webhook(Settings(firstHeadTimeoutSeconds=0.2), checks=[Pass()])
    reader, writer = await connect(server, None)  # plain TCP: no ClientHello ever
    assert await closed_by_server(reader)
    writer.close()


async def test_an_idle_kept_alive_connection_is_closed(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(Settings(idleTimeoutSeconds=0.2), checks=[Pass()])
    body = review_bytes()
    reader, writer = await connect(server, client_ssl)
    writer.write(head(len(body)) + body)
    status, headers, answer = await read_response(reader)
    assert status == 200 and answer["response"]["allowed"] is True
    assert headers.get("connection", "keep-alive").lower() != "close"
    assert await closed_by_server(reader)  # nothing more was sent
    writer.close()


class Gate(Check):
    """Holds every review until released, so connections can be kept working on a request."""

    name = "Widget Gate"
    kinds = frozenset({"Widget"})
    summary = "Waits for the test."

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.arrived = 0
        self.all_in = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self, ctx: CheckContext) -> CheckResult:
        self.arrived += 1
        if self.arrived == self.expected:
            self.all_in.set()
        await self.release.wait()
        return CheckResult(self.name, Status.PASS, "released")


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        pytest.param(
            Settings(maxConnections=2, budgetSeconds=30), "2 connections are open (maxConnections)", id="pool"
        ),
        pytest.param(
            Settings(maxConnectionsPerPeer=2, budgetSeconds=30),
            "127.0.0.1 has 2 connections open (maxConnectionsPerPeer)",
            id="peer",
        ),
    ],
)
async def test_a_new_connection_is_refused_only_when_every_slot_is_working(
    start_webhook: Any,
    widget_adapter: str,
    client_ssl: ssl.SSLContext,
    caplog: pytest.LogCaptureFixture,
    settings: Settings,
    why: str,
) -> None:
    """The pool (maxConnections) or one peer's share of it (maxConnectionsPerPeer) is full of
    connections working on a request: the newcomer is refused, none is closed for it."""
    gate = Gate(expected=2)
    server = await start_webhook(settings, checks=[gate])
    working = []
    for i in range(2):
        reader, writer = await connect(server, client_ssl)
        body = review_bytes(f"working-{i}")
        writer.write(head(len(body)) + body)
        working.append((reader, writer))
    await asyncio.wait_for(gate.all_in.wait(), CAP)
    caplog.clear()
    reader, writer = await connect(server, client_ssl)
    assert await closed_by_server(reader)
    assert server.connection_counts() == {"accepted": 2, "refused": 1, "evicted": 0, "timed_out": 0}
    assert log_lines(caplog) == [
        ("webhook.server", "WARNING", f"connection from 127.0.0.1 refused: {why}, every one working on a request; "
         "1 refused so far"),
    ]  # fmt: skip
    gate.release.set()
    for i, (r, w) in enumerate(working):
        status, _, answer = await read_response(r)
        assert (status, answer["response"]["uid"], answer["response"]["allowed"]) == (200, f"working-{i}", True)
        w.close()
    writer.close()


async def test_a_new_connection_takes_the_slot_of_the_oldest_idle_one(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_webhook(Settings(maxConnections=2, idleTimeoutSeconds=60), checks=[Pass()])
    held = []
    for _ in range(2):
        reader, writer = await connect(server, client_ssl)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, _, _ = await read_response(reader)
        assert status == 200
        held.append((reader, writer))
    caplog.clear()
    reader, writer = await connect(server, client_ssl)
    body = review_bytes("newcomer")
    writer.write(head(len(body)) + body)
    status, _, answer = await read_response(reader)
    assert (status, answer["response"]["uid"]) == (200, "newcomer")
    assert await closed_by_server(held[0][0])  # the oldest idle one made room
    assert server.connection_counts() == {"accepted": 3, "refused": 0, "evicted": 1, "timed_out": 0}
    text = server.webhook.metrics.render()[0].decode()
    assert 'preflight_webhook_connections_total{result="accepted"} 3.0' in text
    assert 'preflight_webhook_connections_total{result="evicted"} 1.0' in text
    assert log_lines(caplog) == [
        ("webhook.server", "WARNING", "connection from 127.0.0.1 closed to make room for one from 127.0.0.1: "
         "2 connections are open (maxConnections), and it was waiting for its next request; 1 closed so far"),
    ]  # fmt: skip
    held[1][1].write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # the newer idle one still works
    status, _, _ = await read_response(held[1][0])
    assert status == 200
    for _, w in (*held, (reader, writer)):
        w.close()


# --------------------------------------------------------------------------- drain


async def test_drain_finishes_a_body_that_is_still_arriving(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, head_arrived: asyncio.Event
) -> None:
    server = await start_webhook(Settings(drainSeconds=30, bodyTimeoutSeconds=30), checks=[Pass()])
    body = review_bytes("drain-body")
    reader, writer = await connect(server, client_ssl)
    writer.write(head(len(body)) + body[:20])
    await writer.drain()
    await asyncio.wait_for(head_arrived.wait(), CAP)

    stopping = asyncio.ensure_future(server.shutdown())
    await asyncio.sleep(0)  # let shutdown flip readiness and close the listener
    assert server.webhook.readiness() == (False, "shutting down")
    writer.write(body[20:])
    await writer.drain()
    status, headers, answer = await read_response(reader)
    assert status == 200
    assert answer["response"]["uid"] == "drain-body" and answer["response"]["allowed"] is True
    assert headers.get("connection", "").lower() == "close", headers
    assert await closed_by_server(reader)
    await asyncio.wait_for(stopping, CAP)  # every connection closed: the drain ends early
    writer.close()


async def test_drain_answers_the_next_request_on_a_kept_alive_connection_with_connection_close(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext
) -> None:
    server = await start_webhook(Settings(drainSeconds=30), checks=[Pass()])
    reader, writer = await connect(server, client_ssl)
    first = review_bytes("before")
    writer.write(head(len(first)) + first)
    status, headers, _ = await read_response(reader)
    assert status == 200 and headers.get("connection", "").lower() != "close"

    stopping = asyncio.ensure_future(server.shutdown())
    await asyncio.sleep(0)
    assert server.webhook.draining
    second = review_bytes("during-drain")
    writer.write(head(len(second)) + second)
    status, headers, answer = await read_response(reader)
    assert status == 200 and answer["response"]["uid"] == "during-drain"
    assert headers.get("connection", "").lower() == "close", headers
    assert await closed_by_server(reader)
    await asyncio.wait_for(stopping, CAP)
    writer.close()


# --------------------------------------------------------------------------- caller authentication


@pytest.fixture
def client_ca(tmp_path: Path) -> Any:
    ca = generate_ca("apiserver-client-ca")
    path = tmp_path / "client-ca.crt"
    path.write_bytes(ca.cert_pem)
    return ca, path


def client_context(client_ssl: ssl.SSLContext, pair: Any, tmp_path: Path, name: str) -> ssl.SSLContext:
    crt, key = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    crt.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    client_ssl.load_cert_chain(crt, key)
    return client_ssl


async def post(server: Any, ctx: ssl.SSLContext) -> tuple[int, Any]:
    body = review_bytes()
    reader, writer = await connect(server, ctx)
    writer.write(head(len(body)) + body)
    status, _, answer = await read_response(reader)
    writer.close()
    return status, answer


async def test_validate_without_a_client_certificate_is_401_but_probes_work(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, client_ca: Any
) -> None:
    _, ca_path = client_ca
    server = await start_webhook(Settings(clientAuth={"caFile": str(ca_path)}), checks=[Pass()])
    status, answer = await post(server, client_ssl)
    assert status == 401
    assert answer == {"error": "a client certificate is required (clientAuth)"}
    reader, writer = await connect(server, client_ssl)
    writer.write(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    status, _, _ = await read_response(reader)
    assert status == 200
    writer.close()


async def test_validate_with_an_allowed_client_certificate_is_judged(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, client_ca: Any, tmp_path: Path
) -> None:
    ca, ca_path = client_ca
    server = await start_webhook(
        Settings(clientAuth={"caFile": str(ca_path), "allowedNames": ["kube-apiserver-webhook-client"]}),
        checks=[Pass()],
    )
    ok = issue_cert(ca, "kube-apiserver-webhook-client", server=False, client=True)
    status, answer = await post(server, client_context(client_ssl, ok, tmp_path, "ok"))
    assert status == 200 and answer["response"]["allowed"] is True


async def test_validate_with_a_certificate_name_not_allowed_is_403(
    start_webhook: Any, widget_adapter: str, ca: Any, client_ca: Any, tmp_path: Path
) -> None:
    issuer, ca_path = client_ca
    server = await start_webhook(
        Settings(clientAuth={"caFile": str(ca_path), "allowedNames": ["kube-apiserver-webhook-client"]}),
        checks=[Pass()],
    )
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    other = issue_cert(issuer, "someone-else", server=False, client=True)
    status, answer = await post(server, client_context(ctx, other, tmp_path, "other"))
    assert status == 403
    assert answer == {"error": "this client certificate is not allowed to call /validate"}


async def test_a_client_certificate_from_another_ca_fails_the_handshake(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, client_ca: Any, tmp_path: Path
) -> None:
    _, ca_path = client_ca
    server = await start_webhook(Settings(clientAuth={"caFile": str(ca_path)}), checks=[Pass()])
    stranger = issue_cert(generate_ca("stranger"), "kube-apiserver-webhook-client", server=False, client=True)
    ctx = client_context(client_ssl, stranger, tmp_path, "stranger")
    body = review_bytes()
    try:
        reader, writer = await connect(server, ctx)
        writer.write(head(len(body)) + body)
        first_line = await asyncio.wait_for(reader.readline(), CAP)  # TLS 1.3: the alert comes after the handshake
        writer.close()
    except (ssl.SSLError, ConnectionError):
        first_line = b""
    assert first_line == b""  # no answer at all


def test_serve_refuses_a_client_ca_it_cannot_load(
    tmp_path: Path, cert_files: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from webhook.cli import serve as cmd_serve

    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"clientAuth:\n  caFile: {tmp_path / 'missing-ca.crt'}\n")
    parser = argparse.ArgumentParser()
    cmd_serve.add_parser(parser.add_subparsers())
    crt, key = cert_files
    args = parser.parse_args(["serve", f"--tls-cert={crt}", f"--tls-key={key}", f"--config={cfg}", "--offline"])
    assert cmd_serve.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot load the client CA {tmp_path / 'missing-ca.crt'} (clientAuth.caFile): ")


def test_peer_names_are_the_subject_cn_and_dns_ip_sans() -> None:
    from webhook.listener import peer_names

    peer = {
        "subject": ((("organizationName", "system:masters"),), (("commonName", "kube-apiserver-webhook-client"),)),
        "subjectAltName": (("DNS", "apiserver.local"), ("IP Address", "10.0.0.1"), ("URI", "spiffe://x")),
    }
    assert peer_names(peer) == {"kube-apiserver-webhook-client", "apiserver.local", "10.0.0.1"}


@pytest.mark.parametrize(
    "field, value",
    [
        ("maxConnections", 0),
        ("maxConnectionsPerPeer", 0),
        ("firstHeadTimeoutSeconds", 0),
        ("headerTimeoutSeconds", 0),
        ("bodyTimeoutSeconds", -1),
        ("idleTimeoutSeconds", 0),
    ],
)
def test_connection_bounds_must_be_positive(field: str, value: float) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Settings.model_validate({field: value})


# --------------------------------------------------------------------------- clean protocol handling

#: loggers whose lines an operator reads; asyncio's own debug chatter is not one of them
_OURS = ("webhook", "aiohttp")


def log_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str]]:
    """(logger, level, message) of every line at info or above from the server and aiohttp."""
    return [
        (r.name, r.levelname, r.getMessage())
        for r in caplog.records
        if r.levelno >= logging.INFO and r.name.startswith(_OURS)
    ]


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.exc_info or r.exc_text or r.stack_info]


def _gzip_claimed(body: bytes) -> bytes:
    return head(len(body), extra="Content-Encoding: gzip\r\n") + body


def _bomb(inflated: int) -> bytes:
    """A gzip body that inflates to `inflated` bytes of spaces (about 1,000 times its size)."""
    return gzip.compress(b" " * inflated, compresslevel=9)


@pytest.mark.parametrize(
    ("settings", "sent", "status", "message", "timed_out"),
    [
        pytest.param(
            Settings(),
            lambda: _gzip_claimed(review_bytes()),
            400,
            "the request body is not valid gzip, as its Content-Encoding says it is",
            0,
            id="not-the-gzip-it-claims",
        ),
        pytest.param(
            Settings(),
            lambda: _gzip_claimed(gzip.compress(review_bytes()) + gzip.compress(b" ") * 5000),
            400,
            "the request body has more gzip members than the 1024 the server decodes; compress it as one",
            0,
            id="5000-gzip-members",
        ),
        pytest.param(
            Settings(maxBodyBytes=65536),
            lambda: _gzip_claimed(_bomb(8 * 2**20)),
            413,
            "the request body inflates to more than the limit of 65536 bytes (maxBodyBytes; Content-Encoding gzip); "
            "it was not decoded further",
            0,
            id="gzip-bomb",
        ),
        pytest.param(
            Settings(),
            lambda: head(len(review_bytes()), extra="Content-Encoding: br\r\n") + review_bytes(),
            415,
            "Content-Encoding 'br' is not supported; send gzip, deflate or none",
            0,
            id="an-encoding-not-decoded",
        ),
        pytest.param(
            Settings(),
            lambda: _gzip_claimed(gzip.compress(review_bytes())[:-12]),
            400,
            "the request body is not valid gzip, as its Content-Encoding says it is",
            0,
            id="truncated-gzip",
        ),
        pytest.param(
            Settings(bodyTimeoutSeconds=0.2),
            lambda: head(len(review_bytes())) + review_bytes()[:10],
            408,
            "the request body did not arrive within 0.2s (bodyTimeoutSeconds)",
            1,
            id="stalled-body",
        ),
        pytest.param(
            Settings(),
            lambda: b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n",
            400,
            "malformed HTTP request: Invalid header token",
            0,
            id="malformed-head",
        ),
    ],
)
async def test_a_bad_request_is_answered_saying_why_closed_and_logged_once_without_a_traceback(
    start_webhook: Any,
    widget_adapter: str,
    client_ssl: ssl.SSLContext,
    caplog: pytest.LogCaptureFixture,
    settings: Settings,
    sent: Any,
    status: int,
    message: str,
    timed_out: int,
) -> None:
    server = await start_webhook(settings, checks=[Pass()])
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    reader, writer = await connect(server, client_ssl)
    writer.write(sent())
    got, headers, answer = await read_response(reader)
    assert (got, headers["connection"], answer) == (status, "close", {"error": message})
    assert await closed_by_server(reader)
    assert server.timed_out_connections == timed_out
    assert log_lines(caplog) == [("webhook.server", "INFO", f"rejected request: HTTP {status}: {message}")]
    assert tracebacks(caplog) == []
    writer.close()


async def test_an_object_too_large_to_parse_leaves_one_decision_line(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_webhook(Settings(objectLimits={"maxBytes": 65536}), checks=[Pass()])
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    review = json.loads(review_bytes("too-big"))
    review["request"]["object"]["spec"]["pad"] = "x" * 70_000
    body = json.dumps(review).encode()
    reader, writer = await connect(server, client_ssl)
    writer.write(head(len(body)) + body)
    status, headers, answer = await read_response(reader)
    assert status == 200 and answer["response"]["allowed"] is False
    assert headers.get("connection", "keep-alive") != "close"  # a decision: the connection goes on
    assert log_lines(caplog) == [("webhook.decisions", "INFO", "admission decision")]
    [record] = [r for r in caplog.records if r.name == "webhook.decisions"]
    fields = dict(record.fields)  # type: ignore[attr-defined]
    assert fields.pop("ms") >= 0
    assert fields == {
        "uid": "too-big",
        "kind": "Widget",
        "namespace": "team-a",
        "name": "w1",
        "operation": "CREATE",
        "dryRun": None,  # not read: the body is not parsed
        "user": None,
        "decision": "denied",
        "allowed": False,
        "warnings": 0,
        "failedChecks": answer["response"]["auditAnnotations"]["failed-checks"],
    }
    assert tracebacks(caplog) == []
    writer.close()


async def until(condition: Any) -> None:
    """Wait for `condition()` to hold (checked every 10 ms); fails the test at CAP."""

    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), CAP)


async def test_a_body_abandoned_by_its_client_is_logged_once(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_webhook(checks=[Pass()])
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    body = review_bytes()
    reader, writer = await connect(server, client_ssl)
    writer.write(head(len(body)) + body[:10])
    await writer.drain()
    await until(lambda: any(c._busy for c in server.connections))
    writer.transport.abort()
    line = (
        "webhook.server",
        "INFO",
        "rejected request: the connection closed before the request body arrived; no answer sent",
    )
    await until(lambda: log_lines(caplog))
    await until(lambda: not server.connections)
    assert log_lines(caplog) == [line]
    assert tracebacks(caplog) == []


async def test_an_unknown_path_is_logged_once(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_webhook(checks=[Pass()])
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    reader, writer = await connect(server, client_ssl)
    writer.write(b"GET /nope?" + b"x" * 200 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    status, headers, answer = await read_response(reader)
    assert (status, answer) == (404, {"error": "Not Found"})
    assert headers.get("connection", "keep-alive") != "close"
    assert log_lines(caplog) == [
        ("webhook.server", "INFO", "rejected request: HTTP 404: Not Found (GET /nope?" + "x" * 93 + "…)")
    ]
    writer.close()


# --------------------------------------------------------------------------- fairness under floods

HALF_OPEN_HEAD = b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Slow: "


async def hold_half_open(
    server: Any, client_ssl: ssl.SSLContext, sources: list[str], n: int
) -> list[asyncio.StreamWriter]:
    """`n` TLS connections, from `sources` in turn, each sending part of a request head and no more.

    Returns once the server has seen every one of them (holding it, or having closed it to make room).
    """
    seen_before = len(server.connections) + server.evicted_connections + server.rejected_connections

    async def one(i: int) -> asyncio.StreamWriter:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(
                "127.0.0.1",
                server.port,
                ssl=client_ssl,
                server_hostname="127.0.0.1",
                local_addr=(sources[i % len(sources)], 0),
            ),
            CAP,
        )
        writer.write(HALF_OPEN_HEAD)
        return writer

    writers: list[asyncio.StreamWriter] = []
    for start in range(0, n, 50):  # 50 handshakes at a time
        writers += await asyncio.gather(*(one(i) for i in range(start, min(n, start + 50))))
    await until(
        lambda: len(server.connections) + server.evicted_connections + server.rejected_connections >= seen_before + n
    )
    return writers


async def valid_reviews(server: Any, client_ssl: ssl.SSLContext, n: int) -> list[tuple[int, str, bool]]:
    """`n` AdmissionReviews from 127.0.0.1, each on a new connection, the way the apiserver sends them."""

    async def one(i: int) -> tuple[int, str, bool]:
        reader, writer = await connect(server, client_ssl)
        body = review_bytes(f"valid-{i}")
        writer.write(head(len(body)) + body)
        status, _, answer = await read_response(reader)
        writer.close()
        return status, answer["response"]["uid"], answer["response"]["allowed"]

    return list(await asyncio.gather(*(one(i) for i in range(n))))


@pytest.fixture
def held(start_webhook: Any) -> Iterator[list[asyncio.StreamWriter]]:
    """Connections a test holds open; aborted before the server's drain (so it does not wait for them)."""
    writers: list[asyncio.StreamWriter] = []
    yield writers
    for w in writers:
        w.transport.abort()


async def test_300_half_open_connections_from_many_addresses_cost_valid_reviews_nothing(
    start_webhook: Any,
    widget_adapter: str,
    client_ssl: ssl.SSLContext,
    held: list[asyncio.StreamWriter],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The issue's flood: more half-open connections than maxConnections (256), from 10 addresses
    (30 each, under maxConnectionsPerPeer), held far longer than the test (firstHeadTimeoutSeconds 60):
    every new connection takes the slot of the oldest one still waiting for its head."""
    server = await start_webhook(Settings(firstHeadTimeoutSeconds=60, headerTimeoutSeconds=60), checks=[Pass()])
    caplog.clear()
    held += await hold_half_open(server, client_ssl, [f"127.0.0.{i}" for i in range(2, 12)], 300)
    assert len(server.connections) == 256
    assert (server.evicted_connections, server.rejected_connections) == (44, 0)

    answers = await valid_reviews(server, client_ssl, 20)
    assert answers == [(200, f"valid-{i}", True) for i in range(20)]
    assert server.rejected_connections == 0
    assert 236 <= sum(len(c) for p, c in server.connections.by_peer.items() if p != "127.0.0.1") <= 256  # still held
    assert server.timed_out_connections == 0  # the eviction did it, not a timeout
    [warning] = [line for line in log_lines(caplog) if line[1] == "WARNING"]  # the first; the next at the 1000th
    assert re.fullmatch(
        r"connection from 127\.0\.0\.\d+ closed to make room for one from 127\.0\.0\.\d+: 256 connections are open "
        r"\(maxConnections\), and it was waiting for its first request head; 1 closed so far",
        warning[2],
    ), warning


async def test_300_half_open_connections_from_one_address_hold_at_most_max_connections_per_peer(
    start_webhook: Any,
    widget_adapter: str,
    client_ssl: ssl.SSLContext,
    held: list[asyncio.StreamWriter],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await start_webhook(Settings(firstHeadTimeoutSeconds=60, headerTimeoutSeconds=60), checks=[Pass()])
    caplog.clear()
    held += await hold_half_open(server, client_ssl, ["127.0.0.2"], 300)
    assert len(server.connections.by_peer["127.0.0.2"]) == 64  # maxConnectionsPerPeer's default
    assert (server.evicted_connections, server.rejected_connections) == (236, 0)  # its own oldest made room

    answers = await valid_reviews(server, client_ssl, 20)
    assert answers == [(200, f"valid-{i}", True) for i in range(20)]
    assert server.evicted_connections == 236  # the pool was never full: the reviews took free slots
    assert [line for line in log_lines(caplog) if line[1] == "WARNING"] == [
        ("webhook.server", "WARNING", "connection from 127.0.0.2 closed to make room for one from 127.0.0.2: "
         "127.0.0.2 has 64 connections open (maxConnectionsPerPeer), and it was waiting for its first request head; "
         "1 closed so far"),
    ]  # fmt: skip


async def test_trusted_networks_are_exempt_from_the_peer_cap_and_made_room_for_last(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, held: list[asyncio.StreamWriter]
) -> None:
    server = await start_webhook(
        Settings(
            maxConnections=4, maxConnectionsPerPeer=1, trustedNetworks=["127.0.0.1/32"], firstHeadTimeoutSeconds=60
        ),
        checks=[Pass()],
    )
    held += await hold_half_open(server, client_ssl, ["127.0.0.1"], 3)  # 3 > maxConnectionsPerPeer: exempt
    assert len(server.connections.by_peer["127.0.0.1"]) == 3
    held += await hold_half_open(server, client_ssl, ["127.0.0.2"], 1)  # the newest of the four
    assert server.evicted_connections == 0
    held += await hold_half_open(
        server, client_ssl, ["127.0.0.3"], 1
    )  # full: the untrusted one makes room, not the oldest
    assert server.evicted_connections == 1
    assert "127.0.0.2" not in server.connections.by_peer
    assert len(server.connections.by_peer["127.0.0.1"]) == 3


def test_peer_address_reads_ipv4_mapped_addresses_as_ipv4() -> None:
    from webhook.listener import peer_address

    class T:
        def __init__(self, peer: Any) -> None:
            self.peer = peer

        def get_extra_info(self, key: str) -> Any:
            return self.peer

    assert peer_address(T(("::ffff:10.1.2.3", 443, 0, 0))) == "10.1.2.3"  # type: ignore[arg-type]
    assert peer_address(T(("fd00::1", 443, 0, 0))) == "fd00::1"  # type: ignore[arg-type]
    assert peer_address(T(None)) == ""  # type: ignore[arg-type]


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "nope", "10.0.0.0/8 "])
def test_trusted_networks_must_be_cidrs(entry: str) -> None:
    from pydantic import ValidationError

    if entry.strip() == "10.0.0.0/8":
        assert Settings.model_validate({"trustedNetworks": [entry]}).trusted_networks == ["10.0.0.0/8"]
        return
    with pytest.raises(ValidationError, match="is not an IP address or CIDR"):
        Settings.model_validate({"trustedNetworks": [entry]})


async def test_a_body_still_arriving_makes_room_last_and_leaves_one_line(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    from webhook.listener import BODY

    server = await start_webhook(Settings(maxConnections=2, bodyTimeoutSeconds=60), checks=[Pass()])
    caplog.set_level(logging.DEBUG)
    slow = []
    body = review_bytes("slow")

    def bodies_arriving() -> int:
        return sum(c.state == BODY for c in server.connections)

    for _ in range(2):  # one after the other, so the first is the one waiting longest
        reader, writer = await connect(server, client_ssl)
        writer.write(head(len(body)) + body[:10])
        slow.append((reader, writer))
        await until(lambda: bodies_arriving() == len(slow))
    caplog.clear()
    answers = await valid_reviews(server, client_ssl, 1)
    assert answers == [(200, "valid-0", True)]
    assert await closed_by_server(slow[0][0])  # the one waiting longest for its body made room
    await until(lambda: len(log_lines(caplog)) == 2)
    assert sorted(log_lines(caplog)) == [
        ("webhook.server", "INFO", "rejected request: the connection closed before the request body arrived; no answer sent"),
        ("webhook.server", "WARNING", "connection from 127.0.0.1 closed to make room for one from 127.0.0.1: 2 connections "
         "are open (maxConnections), and it was receiving a request body; 1 closed so far"),
    ]  # fmt: skip
    assert tracebacks(caplog) == []
    slow[1][1].write(body[10:])  # the other one goes on
    status, _, answer = await read_response(slow[1][0])
    assert (status, answer["response"]["uid"]) == (200, "slow")
    for _, w in slow:
        w.close()


# --------------------------------------------------------------------------- compressed bodies


async def test_a_gzip_bomb_is_inflated_in_steps_that_yield_and_stops_one_step_past_the_limit() -> None:
    from webhook.server import BodyError, inflate

    steps = 0
    done = False

    async def count_turns() -> None:
        nonlocal steps
        while not done:
            steps += 1
            await asyncio.sleep(0)

    counter = asyncio.ensure_future(count_turns())
    with pytest.raises(BodyError) as err:
        await inflate(_bomb(64 * 2**20), "gzip", 2**20, chunk=64 * 1024)
    done = True
    await counter
    assert err.value.status == 413
    # 1 MiB in 64 KiB steps: the loop got a turn between every two (the bomb's other 63 MiB never inflated)
    assert steps >= 16


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        pytest.param("gzip", gzip.compress, id="gzip"),
        pytest.param("GZip", lambda b: gzip.compress(b[:100]) + gzip.compress(b[100:]), id="two-gzip-members"),
        pytest.param("deflate", zlib.compress, id="deflate"),
        pytest.param("deflate", lambda b: zlib.compress(b)[2:-4], id="raw-deflate"),
        pytest.param("identity", lambda b: b, id="identity"),
    ],
)
async def test_a_compressed_review_is_judged_like_a_plain_one(
    start_webhook: Any, widget_adapter: str, client_ssl: ssl.SSLContext, encoding: str, encode: Any
) -> None:
    server = await start_webhook(checks=[Pass()])
    body = encode(review_bytes())
    reader, writer = await connect(server, client_ssl)
    writer.write(head(len(body), extra=f"Content-Encoding: {encoding}\r\n") + body)
    status, _, answer = await read_response(reader)
    assert (status, answer["response"]["uid"], answer["response"]["allowed"]) == (200, "hostile-1", True)
    writer.close()
