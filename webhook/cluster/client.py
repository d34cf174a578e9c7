"""One shared connection to the apiserver, bounded and coalesced.

Everything the webhook sends goes through `KubeClient`: one aiohttp session (one TLS setup, the
credentials of webhook/cluster/kubeconfig.py, refreshed as they expire), a semaphore
that caps how many request/response calls are in flight (Settings.api_concurrency), a
per-call timeout taken from the request's deadline, and `Coalescer` so identical reads
issued during a burst share one request. Long-lived watch streams do not take a
semaphore slot (they would starve it); they have their own connections.

Objects stay plain JSON dicts. The requests are the ones kubernetes_asyncio's
`ApiClient.call_api` sent for us before (client/api_client.py, client/rest.py: the host plus the
path, the query urlencoded, a JSON body, the Authorization header), without importing the library,
whose package imports every generated model (docs/benchmarks/import-weight.md).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

import aiohttp

from webhook import __version__
from webhook.cluster.kubeconfig import (
    ClusterConfig,
    KubeconfigError,
    from_kubeconfig,
    from_library,
    in_cluster,
    uses_auth_provider,
)
from webhook.kube import ApiError, warning_texts

log = logging.getLogger(__name__)

T = TypeVar("T")

#: extra connections kept for watch streams on top of api_concurrency
WATCH_CONNECTIONS = 24
USER_AGENT = f"preflight-webhook/{__version__}"
#: aiohttp's read buffer: a watch event of a large object exceeds its default (kubernetes_asyncio client/rest.py)
READ_BUFSIZE = 2**21


def default_kubeconfig() -> str:
    """$KUBECONFIG (may list several files) or ~/.kube/config, read at call time."""
    return os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")


async def load_configuration(kubeconfig: str | None = None, context: str | None = None) -> ClusterConfig:
    """In-cluster config when no kubeconfig (nor context) is given and we run in a pod; else the kubeconfig,
    at `context` or its current-context (webhook/cluster/kubeconfig.py). A user with an `auth-provider`
    (gcp, oidc) is left to kubernetes_asyncio, imported for that process only."""
    if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster()
    paths = kubeconfig or default_kubeconfig()
    if uses_auth_provider(paths, context):
        from kubernetes_asyncio import client as k8s_client
        from kubernetes_asyncio import config as k8s_config

        cfg = k8s_client.Configuration()
        await k8s_config.load_kube_config(config_file=paths, context=context, client_configuration=cfg)
        return from_library(cfg)
    return await from_kubeconfig(paths, context)


def status_message(status: int, body: bytes | str) -> tuple[str, str]:
    """(message, reason) from an apiserver error body: the Status message text exactly as sent."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        return str(doc.get("message") or ""), str(doc.get("reason") or "")
    return (text.strip()[:500] or f"HTTP {status}"), ""


class Coalescer(Generic[T]):
    """Identical in-flight reads share one call.

    The call runs as its own task with the first caller's timeout; every caller waits
    (shielded) with its own timeout. A caller that joined late and still has time left
    when the shared call timed out runs it again instead of inheriting the leader's
    shorter budget.
    """

    def __init__(self) -> None:
        self._inflight: dict[Hashable, asyncio.Task[T]] = {}
        self.calls = 0  # calls actually started (for tests and benchmarks)

    def inflight(self) -> int:
        return len(self._inflight)

    async def run(self, key: Hashable, timeout: float, fn: Callable[[float], Awaitable[T]]) -> T:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            task = self._inflight.get(key)
            mine = task is None
            if task is None:
                task = asyncio.ensure_future(fn(max(0.0, end - loop.time())))
                self._inflight[key] = task
                self.calls += 1
                task.add_done_callback(functools.partial(self._forget, key))
            left = end - loop.time()
            if left <= 0:
                raise ApiError(0, "timed out waiting for the apiserver")
            try:
                return await asyncio.wait_for(asyncio.shield(task), left)
            except TimeoutError:
                raise ApiError(0, "timed out waiting for the apiserver") from None
            except ApiError as exc:
                if exc.status == 0 and not mine and end - loop.time() > 0.05:
                    continue  # the leader's budget ran out, ours has not: try again ourselves
                raise

    def _forget(self, key: Hashable, task: asyncio.Task[T]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled():
            task.exception()  # retrieved: nobody may be left waiting for it


# --------------------------------------------------------------------------- names in URLs


def check_path(path: str) -> None:
    """Refuse a path with an empty, "." or ".." segment: it would address another resource.

    `/api/v1/namespaces/ns/secrets/.` is normalised by HTTP clients to `.../secrets/`, a LIST
    of every Secret in the namespace, values included (k8s.io/apimachinery/pkg/api/validation/
    path: IsValidPathSegmentName refuses these names for the same reason). Callers validate
    names per kind first; this is the last guard before a request leaves.
    """
    segments = path.split("?", 1)[0].split("/")[1:]
    if not path.startswith("/") or any(seg in ("", ".", "..") for seg in segments):
        raise ValueError(f"refusing the request path {path!r}: an empty, '.' or '..' segment")


#: POSTs that write nothing: reviews are answered, never stored
NON_PERSISTED_POSTS = ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",)


def assert_no_write(method: str, path: str, query: dict[str, Any] | None) -> None:
    """The webhook never writes: every request that could write must carry dryRun=All."""
    if method in ("GET", "HEAD"):
        return
    if method == "POST" and path in NON_PERSISTED_POSTS:
        return
    if (query or {}).get("dryRun") == "All":
        return
    raise ValueError(f"refusing {method} {path} without dryRun=All: the webhook never writes")


class KubeClient:
    """Transport: JSON in, JSON out, ApiError for everything that is not a 2xx."""

    def __init__(self, configuration: Any, concurrency: int = 16, *, watches: int = WATCH_CONNECTIONS) -> None:
        """`configuration`: a ClusterConfig (load_configuration), or a kubernetes_asyncio client.Configuration,
        read through its public attributes (kubeconfig.from_library)."""
        # each open watch holds a connection of the pool: `watches` of them on top of the requests' `concurrency`
        configuration.connection_pool_maxsize = concurrency + max(watches, WATCH_CONNECTIONS)
        self.configuration = configuration
        self.cluster = configuration if isinstance(configuration, ClusterConfig) else from_library(configuration)
        self._ssl = self.cluster.ssl_context()  # a bad certificate or key fails here, at start-up
        self._pool = configuration.connection_pool_maxsize  # read now: two clients may share one configuration
        self._session: aiohttp.ClientSession | None = None
        self.semaphore = asyncio.BoundedSemaphore(concurrency)
        self.requests: Counter[str] = Counter()  # "GET /api/v1/secrets" style keys, no names
        self._closed = False

    def check_write(self, method: str, path: str, query: dict[str, Any] | None) -> None:
        """Refuse a request that could write: the webhook's client never writes (`assert_no_write`).

        The audit controller's client (webhook/audit/client.py) narrows this to the few writes it
        owns (Events, its Lease, reports); nothing else may override it."""
        assert_no_write(method, path, query)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._session is not None:
                await self._session.close()

    def session(self) -> aiohttp.ClientSession:
        """The one session, made inside the loop on first use (kubernetes_asyncio client/rest.py's settings:
        the pool's limit, trust_env for HTTP(S)_PROXY, a 2 MiB read buffer)."""
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._pool, ssl=self._ssl)
            self._session = aiohttp.ClientSession(connector=connector, trust_env=True, read_bufsize=READ_BUFSIZE)
        return self._session

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        accept: str = "application/json",
        timeout: aiohttp.ClientTimeout | float | None = None,
    ) -> aiohttp.ClientResponse:
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        url = self.cluster.host + path + (f"?{urlencode(params)}" if params else "")
        headers = {"Accept": accept, "Content-Type": "application/json", "User-Agent": USER_AGENT}
        authorization = await self.cluster.authorization()
        if authorization:
            headers["Authorization"] = authorization
        data = body if body is None or isinstance(body, bytes | str) else json.dumps(body)
        if isinstance(timeout, int | float):
            timeout = aiohttp.ClientTimeout(total=timeout)
        kw: dict[str, Any] = {"timeout": timeout or aiohttp.ClientTimeout(), "headers": headers, "data": data}
        if self.cluster.proxy:
            kw["proxy"] = self.cluster.proxy
        if self.cluster.tls_server_name:
            kw["server_hostname"] = self.cluster.tls_server_name
        return await self.session().request(method, url, **kw)

    async def request(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        query: dict[str, Any] | None = None,
        body: Any = None,
        accept: str = "application/json",
        kind: str = "",
        warnings: list[str] | None = None,
    ) -> dict[str, Any]:
        """One bounded call. `timeout` covers the wait for a slot and the whole exchange. `warnings`: filled
        with the texts of the answer's `Warning` headers (webhook.kube.warning_texts), which an ApiError
        carries too."""
        self.check_write(method, path, query)
        check_path(path)
        if timeout <= 0:
            raise ApiError(0, "no time left before the deadline")
        self.requests[kind or f"{method} {path}"] += 1
        try:
            async with asyncio.timeout(timeout):
                async with self.semaphore:
                    resp = await self._send(method, path, query=query, body=body, accept=accept)
                    try:
                        raw = await resp.read()
                    finally:
                        resp.release()
                    said = warning_texts(resp.headers.getall("Warning", ())) if warnings is not None else ()
        except ApiError:
            raise
        except TimeoutError:
            raise ApiError(0, f"timed out after {timeout:.1f}s waiting for the apiserver") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise ApiError(0, f"cannot reach the apiserver: {type(exc).__name__}: {exc}") from None
        except KubeconfigError as exc:  # the credentials could not be had (an exec plugin failed)
            raise ApiError(0, f"no credentials for the apiserver: {exc}") from None
        if warnings is not None:
            warnings.extend(said)
        if not 200 <= resp.status < 300:
            message, reason = status_message(resp.status, raw)
            raise ApiError(resp.status, message, reason, said)
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            raise ApiError(resp.status, "the apiserver answered with something that is not JSON") from None
        return doc if isinstance(doc, dict) else {"items": doc}

    async def stream(
        self,
        path: str,
        *,
        query: dict[str, Any],
        read_timeout: float,
        accept: str = "application/json",
        kind: str = "",
    ) -> AsyncIterator[dict[str, Any]]:
        """A watch: yields decoded events (one JSON object per line) until the server ends it.

        Raises ApiError when the watch cannot be opened or the connection breaks.
        `read_timeout` detects a silent (half-open) connection.
        """
        check_path(path)
        self.requests[kind or f"WATCH {path}"] += 1
        timeout = aiohttp.ClientTimeout(total=None, connect=30, sock_connect=30, sock_read=read_timeout)
        try:
            resp = await self._send("GET", path, query=query, accept=accept, timeout=timeout)
        except TimeoutError:
            raise ApiError(0, "timed out opening a watch") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise ApiError(0, f"cannot reach the apiserver: {type(exc).__name__}: {exc}") from None
        except KubeconfigError as exc:
            raise ApiError(0, f"no credentials for the apiserver: {exc}") from None
        try:
            if not 200 <= resp.status < 300:
                message, reason = status_message(resp.status, await resp.read())
                raise ApiError(resp.status, message, reason)
            while True:
                try:
                    line = await resp.content.readline()
                except TimeoutError:
                    raise ApiError(0, "watch stream went silent") from None
                except (aiohttp.ClientError, OSError) as exc:
                    raise ApiError(0, f"watch stream broke: {type(exc).__name__}: {exc}") from None
                if not line:
                    return
                line = line.strip()
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    raise ApiError(0, "watch stream sent a line that is not JSON") from None
                if isinstance(event, dict):
                    yield event
        finally:
            resp.release()
            resp.close()
