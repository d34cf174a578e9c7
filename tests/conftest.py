"""Shared fixtures: a trustme CA and real-TLS webhook servers bound to 127.0.0.1."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trustme


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def client_ssl(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    return ctx


@pytest.fixture
def cert_files(ca: trustme.CA, tmp_path: Path) -> tuple[Path, Path]:
    """A serving cert for 127.0.0.1/localhost written as tls.crt / tls.key."""
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    crt, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    crt.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key.write_bytes(leaf.private_key_pem.bytes())
    return crt, key


@pytest.fixture
async def start_webhook(cert_files: tuple[Path, Path]) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    """Factory: `server = await start_webhook(settings=..., view=..., checks=...)`; stopped at teardown.

    The server has `.url` (https://127.0.0.1:PORT) and `.reloader` (a CertReloader on cert_files).
    """
    from webhook.config import Settings
    from webhook.listener import WebhookServer
    from webhook.server import WebhookApp
    from webhook.tls import CertReloader, server_context

    servers: list[WebhookServer] = []

    async def start(settings: Settings | None = None, **kw: Any) -> WebhookServer:
        crt, key = cert_files
        ctx = server_context(crt, key)
        reloader = CertReloader(ctx, crt, key, interval=3600)
        reloader.load_initial()
        app = WebhookApp(settings or Settings(), **kw)
        server = WebhookServer(app, ssl_context=ctx, host="127.0.0.1", port=0, reloader=reloader)
        await server.start()
        server.url = f"https://127.0.0.1:{server.port}"  # type: ignore[attr-defined]
        servers.append(server)
        return server

    yield start
    for s in servers:
        await s.shutdown()


def _build_widget(
    obj: dict[str, Any], *, settings: Any, runtime_lookup: Any = None, namespace: str | None = None
) -> Any:
    from webhook.workloads.base import AdapterError, PodGroup, Workload

    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise AdapterError("spec must be an object")
    meta = obj.get("metadata") or {}
    return Workload(
        kind="Widget",
        api_version=obj["apiVersion"],
        name=meta.get("name", ""),
        namespace=meta.get("namespace") or namespace or "default",
        obj=obj,
        pod_groups=[PodGroup("main", 1, {"containers": [{"name": "main", "image": str(spec.get("image", ""))}]})],
    )


@pytest.fixture
def widget_adapter(monkeypatch: pytest.MonkeyPatch) -> str:
    """Registers a test-only kind example.com/v1 Widget (a KindSpec, no state: not audited); returns the kind."""
    from webhook.workloads.kinds import KindSpec, registry

    spec = KindSpec(kind="Widget", group="example.com", version="v1", plural="widgets", adapter=_build_widget)
    monkeypatch.setitem(registry(), spec.group_kind, spec)
    return "Widget"
