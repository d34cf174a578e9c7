"""`serve --metrics-port`: /metrics alone, over plain HTTP, on a port of its own (for Prometheus)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from webhook.cli.serve import start_metrics_listener
from webhook.metrics import Metrics


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_listener_serves_metrics_and_nothing_else():
    metrics = Metrics(known_kinds=["AIPerfJob"])
    metrics.requests.labels("AIPerfJob", "CREATE", "allowed").inc()
    port = _free_port()
    runner = await start_metrics_listener(metrics, "127.0.0.1", port)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/metrics") as r:
                body = await r.text()
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
                assert (
                    'preflight_webhook_requests_total{decision="allowed",kind="AIPerfJob",operation="CREATE"} 1.0'
                    in body
                )
            for path in ("/validate", "/healthz", "/capabilities"):
                async with session.get(f"http://127.0.0.1:{port}{path}") as r:
                    assert r.status == 404, path
            async with session.post(f"http://127.0.0.1:{port}/metrics", data=b"x") as r:
                assert r.status == 405
    finally:
        await runner.cleanup()


async def test_a_port_in_use_is_an_oserror_and_nothing_is_left_listening():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(OSError):
            await start_metrics_listener(Metrics(), "127.0.0.1", port)


def test_serve_with_metrics_port_answers_plain_http(tmp_path: Path):
    """The real command: TLS on --port, plain /metrics on --metrics-port; SIGTERM stops both."""
    tls_port, metrics_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--offline",
            "--self-signed",
            "--certs-dir",
            str(tmp_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(tls_port),
            "--metrics-port",
            str(metrics_port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        body = None
        while body is None:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the metrics port did not answer within 60 s"
            try:
                with socket.create_connection(("127.0.0.1", metrics_port), timeout=2) as c:
                    c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    body = b""
                    while chunk := c.recv(65536):
                        body += chunk
            except OSError:
                time.sleep(0.1)  # retry pacing only: the loop waits on the port answering, with a deadline
        assert body.startswith(b"HTTP/1.1 200 OK")
        assert b"preflight_webhook_certificate_expiry_timestamp_seconds " in body
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_cache_state_is_read_at_scrape_time():
    ages: dict[str, float | None] = {"nodes": None, "resourcequotas": 3.5}
    metrics = Metrics()
    metrics.track_caches(lambda: list(ages.items()))
    body = metrics.render()[0].decode()
    assert 'preflight_webhook_cache_synced{resource="nodes"} 0.0' in body
    assert 'preflight_webhook_cache_synced{resource="resourcequotas"} 1.0' in body
    assert 'preflight_webhook_cache_age_seconds{resource="resourcequotas"} 3.5' in body
    assert 'preflight_webhook_cache_age_seconds{resource="nodes"}' not in body
    ages["nodes"] = 0.25
    body = metrics.render()[0].decode()
    assert 'preflight_webhook_cache_synced{resource="nodes"} 1.0' in body
    assert 'preflight_webhook_cache_age_seconds{resource="nodes"} 0.25' in body
