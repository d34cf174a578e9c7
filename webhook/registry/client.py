"""The OCI distribution API, as far as "can this image be pulled?" needs it.

Follows the OCI distribution spec (spec.md): "Pulling manifests" (HEAD /v2/<name>/manifests/<reference>,
200 or 404), "Listing tags" (GET /v2/<name>/tags/list) and the token flow distribution documents
(docs/spec/auth/token.md: a 401 whose WWW-Authenticate names a Bearer realm, service and scope;
GET the realm with Basic credentials, retry with the token; a Basic challenge is answered with
Basic credentials). Docker Hub's repository host is the one containerd resolves docker.io to.

Around each lookup:
- a cache per (registry, repository, reference, credential digest) of definite answers (found,
  manifest unknown, unauthorized), for `cache_seconds`;
- identical lookups in flight are coalesced: one request, every caller waits for its answer,
  each only as long as its own deadline allows (the request is shielded from a caller leaving);
- a circuit breaker per registry: after `breaker_failures` failures in a row (unreachable,
  timeout, 5xx) the registry is not asked for `breaker_open_seconds`, then once more.

Answers name no credential: only the outcome, the HTTP status and what the registry said.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp

from webhook.imageref import DEFAULT_DOMAIN, ImageRef
from webhook.registry import challenge
from webhook.registry.keyring import Credential
from webhook.registry.platform import ACCEPT, INDEX_TYPES, MANIFEST_MAX, index_platforms

#: Docker Hub's repository host. distribution/reference normalises a Docker Hub image to
#: "docker.io" (webhook.imageref.DEFAULT_DOMAIN); containerd then resolves that name to this host
#: (containerd/core/remotes/docker/config/hosts.go: `if host == "docker.io"`). The one place the
#: mapping is written, composed from the normalised name.
DOCKER_HUB_HOST = "registry-1." + DEFAULT_DOMAIN

FOUND = "found"
UNKNOWN = "manifest unknown"
UNAUTHORIZED = "unauthorized"
FORBIDDEN = "forbidden"
UNREACHABLE = "unreachable"
#: the detail of an UNREACHABLE answer whose TLS certificate no trusted CA signed (the caller names the fix)
UNTRUSTED_CERTIFICATE = "its TLS certificate is not trusted"
#: answers that say something about the image (cached); the rest only about the registry's health
DEFINITE = frozenset({FOUND, UNKNOWN, UNAUTHORIZED, FORBIDDEN})
#: the most tags read from a repository to name the nearby ones
TAGS_MAX = 1000
TAGS_BODY_MAX = 1024 * 1024
TOKEN_BODY_MAX = 64 * 1024


@dataclass(frozen=True)
class Answer:
    outcome: str
    status: int = 0
    #: why a registry could not be asked (unreachable): e.g. "connection refused", "HTTP 503"
    detail: str = ""
    media_type: str = ""
    digest: str = ""
    #: (os, arch) of an index's manifests; None when the reference names a single manifest
    platforms: tuple[tuple[str, str], ...] | None = None
    #: the repository's tags (read on "manifest unknown" when permitted), else None
    tags: tuple[str, ...] | None = None


def registry_host(ref: ImageRef) -> str:
    """The host to ask for an image's registry (docker.io → Docker Hub's repository host)."""
    return DOCKER_HUB_HOST if ref.registry == DEFAULT_DOMAIN else ref.registry


def _basic(cred: Credential) -> str:
    """The Authorization header of a Basic credential (RFC 7617: base64 of user:password, UTF-8)."""
    return "Basic " + base64.b64encode(f"{cred.username}:{cred.password}".encode()).decode()


class _Breaker:
    def __init__(self) -> None:
        self.failures = 0
        self.open_until = 0.0


class RegistryClient:
    def __init__(
        self,
        *,
        timeout: float = 2.0,
        cache_seconds: float = 30.0,
        breaker_failures: int = 3,
        breaker_open_seconds: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.cache_seconds = cache_seconds
        self.breaker_failures = breaker_failures
        self.breaker_open_seconds = breaker_open_seconds
        self.ssl_context = ssl_context or make_ssl_context(None)
        self._clock = clock
        self._cache: dict[tuple[str, str, str, str], tuple[float, Answer]] = {}
        self._inflight: dict[tuple[str, str, str, str], asyncio.Task[Answer]] = {}
        self._breakers: dict[str, _Breaker] = {}
        #: requests sent (for tests of coalescing and caching: a count, no content)
        self.requests = 0

    # ------------------------------------------------------------------ the lookup

    async def manifest(self, ref: ImageRef, cred: Credential | None, wait: float) -> Answer:
        """Whether `ref`'s manifest exists, asked with `cred` (None: anonymously), waiting at most `wait` s."""
        host = registry_host(ref)
        reference = ref.digest or ref.tag or "latest"
        key = (host, ref.path, reference, cred.digest if cred else "")
        now = self._clock()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        breaker = self._breakers.setdefault(host, _Breaker())
        if breaker.open_until > now and key not in self._inflight:
            return Answer(
                UNREACHABLE, detail=f"not asked for {breaker.open_until - now:.0f}s after {breaker.failures} failures"
            )
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._fetch(host, ref.path, reference, cred))
            self._inflight[key] = task
            task.add_done_callback(lambda t: self._settle(key, host, t))
        if wait <= 0:
            return Answer(UNREACHABLE, detail="no time left before the admission deadline")
        try:
            return await asyncio.wait_for(asyncio.shield(task), wait)
        except TimeoutError:
            return Answer(UNREACHABLE, detail=f"no answer within {wait:.1f}s")

    def _settle(self, key: tuple[str, str, str, str], host: str, task: asyncio.Task[Answer]) -> None:
        self._inflight.pop(key, None)
        if task.cancelled():
            return
        exc = task.exception()
        answer = Answer(UNREACHABLE, detail=type(exc).__name__) if exc else task.result()
        breaker = self._breakers.setdefault(host, _Breaker())
        now = self._clock()
        if answer.outcome in DEFINITE:
            breaker.failures = 0
            breaker.open_until = 0.0
            if self.cache_seconds > 0:
                if len(self._cache) > 4096:
                    self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
                self._cache[key] = (now + self.cache_seconds, answer)
        else:
            breaker.failures += 1
            if breaker.failures >= self.breaker_failures:
                breaker.open_until = now + self.breaker_open_seconds

    # ------------------------------------------------------------------ HTTP

    async def _fetch(self, host: str, path: str, reference: str, cred: Credential | None) -> Answer:
        base = f"https://{host}/v2/{path}"
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        connector = aiohttp.TCPConnector(ssl=self.ssl_context, limit=4)
        try:
            async with aiohttp.ClientSession(timeout=timeout, connector=connector, trust_env=False) as session:
                scope = f"repository:{path}:pull"
                url = f"{base}/manifests/{quote(reference, safe=':')}"
                status, headers, auth = await self._authorized(session, "HEAD", url, cred, scope)
                if status == 200:
                    media_type = headers.get("Content-Type", "").split(";")[0].strip()
                    digest = headers.get("Docker-Content-Digest", "")
                    platforms = None
                    if media_type in INDEX_TYPES:
                        platforms = await self._platforms(session, url, auth)
                    return Answer(FOUND, 200, media_type=media_type, digest=digest, platforms=platforms)
                if status == 404:
                    return Answer(UNKNOWN, 404, tags=await self._tags(session, base, auth))
                if status == 401:
                    return Answer(UNAUTHORIZED, 401)
                if status == 403:
                    return Answer(FORBIDDEN, 403)
                return Answer(UNREACHABLE, status, detail=f"HTTP {status}")
        except TimeoutError:
            return Answer(UNREACHABLE, detail=f"no answer within {self.timeout:.1f}s")
        except aiohttp.ClientConnectorCertificateError:
            return Answer(UNREACHABLE, detail=UNTRUSTED_CERTIFICATE)
        except aiohttp.ClientSSLError:
            return Answer(UNREACHABLE, detail="TLS handshake failed")
        except aiohttp.ClientConnectorError as exc:
            code = exc.os_error.errno if exc.os_error else None
            reason = os.strerror(code).lower() if code else "connection failed"
            return Answer(UNREACHABLE, detail=reason)
        except (aiohttp.ClientError, ValueError, OSError) as exc:
            return Answer(UNREACHABLE, detail=type(exc).__name__)

    async def _send(
        self, session: aiohttp.ClientSession, method: str, url: str, auth: str | None
    ) -> tuple[int, Any, bytes]:
        headers = {"Accept": ACCEPT}
        if auth:
            headers["Authorization"] = auth
        self.requests += 1
        async with session.request(method, url, headers=headers, allow_redirects=method != "HEAD") as r:
            body = b"" if method == "HEAD" else await r.content.read(MANIFEST_MAX + 1)
            return r.status, r.headers, body

    async def _authorized(
        self, session: aiohttp.ClientSession, method: str, url: str, cred: Credential | None, scope: str
    ) -> tuple[int, Any, str | None]:
        """Send; on a 401 answer the challenge it names (Bearer: get a token; Basic: the credential) and
        send once more. Returns (status, headers, the Authorization header that was used)."""
        status, headers, _ = await self._send(session, method, url, None)
        if status != 401:
            return status, headers, None
        challenges = challenge.parse(headers.get("WWW-Authenticate", ""))
        auth: str | None = None
        for c in challenges:
            if c.scheme == "bearer" and c.params.get("realm"):
                token = await self._token(session, c.params, scope, cred)
                if token is None:
                    return 401, headers, None
                auth = f"Bearer {token}"
                break
            if c.scheme == "basic" and cred is not None:
                auth = _basic(cred)
                break
        if auth is None:
            return 401, headers, None
        status, headers, _ = await self._send(session, method, url, auth)
        return status, headers, auth

    async def _token(
        self, session: aiohttp.ClientSession, params: dict[str, str], scope: str, cred: Credential | None
    ) -> str | None:
        """distribution docs/spec/auth/token.md: GET realm?service=…&scope=…, Basic auth when we have a
        credential; the answer's "token" (or "access_token"). None when the realm refuses (401/403)."""
        query = {"scope": params.get("scope") or scope}
        if params.get("service"):
            query["service"] = params["service"]
        realm = params["realm"]
        url = realm + ("&" if "?" in realm else "?") + urlencode(query)
        self.requests += 1
        async with session.get(url, headers={"Authorization": _basic(cred)} if cred else None) as r:
            if r.status in (401, 403):
                return None
            if r.status != 200:
                raise aiohttp.ClientResponseError(
                    r.request_info, (), status=r.status, message=f"token realm HTTP {r.status}"
                )
            body = await r.content.read(TOKEN_BODY_MAX + 1)
        doc = json.loads(body)
        token = doc.get("token") or doc.get("access_token") if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token:
            raise ValueError("the token realm answered no token")
        return token

    async def _platforms(
        self, session: aiohttp.ClientSession, url: str, auth: str | None
    ) -> tuple[tuple[str, str], ...] | None:
        status, _, body = await self._send(session, "GET", url, auth)
        if status != 200 or len(body) > MANIFEST_MAX:
            return None
        try:
            return index_platforms(body)
        except ValueError:
            return None

    async def _tags(self, session: aiohttp.ClientSession, base: str, auth: str | None) -> tuple[str, ...] | None:
        """The repository's tags (spec.md "Listing tags", the first TAGS_MAX), or None when not readable."""
        try:
            status, _, body = await self._send(session, "GET", f"{base}/tags/list?n={TAGS_MAX}", auth)
        except (aiohttp.ClientError, TimeoutError):
            return None
        if status == 404:
            return ()  # NAME_UNKNOWN: the repository has no tags at all
        if status != 200 or len(body) > TAGS_BODY_MAX:
            return None
        try:
            doc = json.loads(body)
        except ValueError:
            return None
        tags = doc.get("tags") if isinstance(doc, dict) else None
        if not isinstance(tags, list):
            return ()
        return tuple(t for t in tags[:TAGS_MAX] if isinstance(t, str))


def make_ssl_context(ca_file: str | None) -> ssl.SSLContext:
    """The system's trust, plus `ca_file`'s CAs (a private registry's); TLS 1.2 or newer."""
    ctx = ssl.create_default_context()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca_file:
        ctx.load_verify_locations(cafile=ca_file)
    return ctx
