"""The API the manager needs (CertStore: read and write the Secret and the
ValidatingWebhookConfiguration) and its implementation over kubernetes_asyncio."""

from __future__ import annotations

import json
from typing import Any, Protocol

from webhook.kube import ApiError


class CertStore(Protocol):
    """The four reads/writes the manager makes; raises ApiError (404, 409, ...)."""

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def get_webhook_config(self, name: str) -> dict[str, Any] | None: ...

    async def replace_webhook_config(self, name: str, body: dict[str, Any]) -> dict[str, Any]: ...


class KubeCertStore:
    """CertStore over kubernetes_asyncio; objects stay plain dicts (raw JSON in and out)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes_asyncio import client

        self._core = client.CoreV1Api(api_client)
        self._adm = client.AdmissionregistrationV1Api(api_client)

    async def _call(self, fn: Any, *args: Any, missing_ok: bool = False) -> dict[str, Any] | None:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            resp = await fn(*args, _preload_content=False)
            body = await resp.read()
            status = int(getattr(resp, "status", 200))
            # without preloading, kubernetes_asyncio hands back error responses instead of raising
            if status == 404 and missing_ok:
                return None
            if not 200 <= status < 300:
                raise ApiError(status, _status_message(body, status), str(getattr(resp, "reason", "") or ""))
            return json.loads(body)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            raise ApiError(exc.status or 0, _api_message(exc), exc.reason or "") from None
        except (TimeoutError, OSError) as exc:
            raise ApiError(0, f"{type(exc).__name__}: {exc}") from None

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._call(self._core.read_namespaced_secret, name, namespace, missing_ok=True)

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self._core.create_namespaced_secret, namespace, body)  # type: ignore[return-value]

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self._core.replace_namespaced_secret, name, namespace, body)  # type: ignore[return-value]

    async def get_webhook_config(self, name: str) -> dict[str, Any] | None:
        return await self._call(self._adm.read_validating_webhook_configuration, name, missing_ok=True)

    async def replace_webhook_config(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self._adm.replace_validating_webhook_configuration, name, body)  # type: ignore[return-value]


def _status_message(body: bytes, status: int) -> str:
    try:
        return str(json.loads(body).get("message") or f"HTTP {status}")
    except (TypeError, ValueError, AttributeError):
        return f"HTTP {status}"


def _api_message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason or exc.status)
