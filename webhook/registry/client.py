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
  timeout, 5xx) the registry is not asked for `breaker_open_seconds`, then once more;
- one HTTP session (one connection pool) per event loop, and at most `max_concurrent` lookups
  in flight at once: a lookup waits for a slot within its own deadline, else is not asked.

What a registry can make the client do is bounded (docs/security.md, "Registry access"):
- it connects only over https, to addresses `webhook.registry.address` checked (internal ones only
  for hosts in `internal_registries`), and to exactly the addresses checked (no DNS rebinding);
- a token realm must be https, on the registry's own host name or in `token_realms`; the pull
  Secret's credentials go only to the registry and that realm;
- redirects are followed only for the index GET by digest (content-addressed: the body is checked
  against the digest), only to https and to allowed addresses, never carrying credentials to
  another host; a redirect answering the manifest HEAD, the tag list or the token realm is not followed;
- every body is read up to a bound, undecoded (no Content-Encoding is inflated);
- what it says (tags, platforms) is kept only when it matches its grammar; network failures read
  alike ("could not be reached or did not answer"), so messages tell no port scan.

Answers name no credential: only the outcome, the HTTP status and what the registry said.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from webhook.imageref import DEFAULT_DOMAIN, ImageRef, is_domain
from webhook.registry import challenge
from webhook.registry.address import (
    AddressNotAllowed,
    AddressPolicy,
    Lookup,
    PinningResolver,
    checked_addresses,
    system_lookup,
)
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
#: refused by the client's own rules before anything was sent (an address, a realm, a redirect)
NOT_ASKED = "not asked"
#: the detail of an UNREACHABLE answer whose TLS certificate no trusted CA signed (the caller names the fix)
UNTRUSTED_CERTIFICATE = "its TLS certificate is not trusted"
#: answers that say something about the image (cached); the rest only about the registry's health
DEFINITE = frozenset({FOUND, UNKNOWN, UNAUTHORIZED, FORBIDDEN})
#: the most tags read from a repository to name the nearby ones
TAGS_MAX = 1000
TAGS_BODY_MAX = 1024 * 1024
TOKEN_BODY_MAX = 64 * 1024
#: answers cached and registries with failures remembered, at most each (job authors name hosts)
ENTRIES_MAX = 4096
#: redirects followed for one index GET at most
REDIRECTS_MAX = 3
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: distribution/reference's tag grammar (reference.go: [\w][\w.-]{0,127})
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
#: a bearer token as an Authorization header may carry it (RFC 6750 b64token, and JWTs): no space, no control
TOKEN = re.compile(r"[\x21-\x7e]{1,16384}")
DIGEST = re.compile(r"sha256:[a-f0-9]{64}")

ADDRESS_NOT_ALLOWED = (
    "was not asked: its address is not allowed (internal or private; list it in "
    "registryAccess.internalRegistries to check it)"
)
UNREADABLE_CHALLENGE = (
    "answered HTTP 401 with a WWW-Authenticate challenge that could not be read; no credential was sent"
)


def unreachable_detail(seconds: float) -> str:
    """One text for every network failure (refused, reset, TLS handshake, silence): no port scan by message."""
    return f"could not be reached or did not answer within {seconds:.1f}s"


@dataclass(frozen=True)
class Answer:
    outcome: str
    status: int = 0
    #: why a registry was not asked or could not be: what follows `registry "<host>"` in a message,
    #: e.g. "answered HTTP 503" or unreachable_detail(2.0)
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


def host_port(name: str) -> tuple[str, int] | None:
    """(host lowercased, port; 443 when none) of `host[:port]` as an image or a setting names it."""
    if not is_domain(name):
        return None
    url = URL("https://" + name)
    if url.host is None or url.port is None:
        return None
    return url.host.lower(), url.port


def _basic(cred: Credential) -> str:
    """The Authorization header of a Basic credential (RFC 7617: base64 of user:password, UTF-8)."""
    return "Basic " + base64.b64encode(f"{cred.username}:{cred.password}".encode()).decode()


def _https_target(text: str, base: URL | None = None) -> URL | None:
    """An https URL with a valid host and no user info (a realm, a redirect's Location), else None."""
    try:
        url = URL(text)
        if base is not None:
            url = base.join(url)
    except (ValueError, TypeError):
        return None
    host = url.raw_host
    if url.scheme != "https" or not host or url.user is not None or url.password is not None:
        return None
    return url if is_domain(f"[{host}]" if ":" in host else host) else None


class _NotAsked(Exception):
    """The client's own rules stopped the lookup before it sent anything more (detail: the predicate)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class _Unreachable(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class _Breaker:
    def __init__(self) -> None:
        self.failures = 0
        self.open_until = 0.0


@dataclass
class _LoopState:
    """What lives on one event loop: the session (its connection pool), the resolver, the slots."""

    loop: asyncio.AbstractEventLoop
    session: aiohttp.ClientSession
    resolver: PinningResolver
    slots: asyncio.Semaphore


@dataclass(frozen=True)
class _Target:
    """The registry one lookup is for: the host asked, and whether it may be at an internal address."""

    host: str
    port: int
    listed: bool


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: Any
    body: bytes | None  # None: longer than allowed


async def _read_bounded(r: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """At most `limit` bytes of the body, as sent (no Content-Encoding inflated); None when longer."""
    buf = bytearray()
    while True:
        chunk = await r.content.read(min(64 * 1024, limit + 1 - len(buf)))
        if not chunk:
            return bytes(buf)
        buf += chunk
        if len(buf) > limit:
            return None


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
        internal_registries: Iterable[str] = (),
        token_realms: Iterable[str] = (),
        cluster_networks: Iterable[str] = (),
        max_concurrent: int = 16,
        lookup: Lookup | None = None,
    ) -> None:
        self.timeout = timeout
        self.cache_seconds = cache_seconds
        self.breaker_failures = breaker_failures
        self.breaker_open_seconds = breaker_open_seconds
        self.ssl_context = ssl_context or make_ssl_context(None)
        self.max_concurrent = max_concurrent
        self.policy = AddressPolicy(cluster_networks)
        #: (host, port) of the registries (and hosts) that may be at internal addresses
        self.internal = frozenset(hp for r in internal_registries if (hp := host_port(r)) is not None)
        #: (host, port) of the token realms allowed besides each registry's own host
        self.token_realms = frozenset(hp for r in token_realms if (hp := host_port(r)) is not None)
        self._lookup: Lookup = lookup or system_lookup
        self._clock = clock
        self._cache: dict[tuple[str, str, str, str], tuple[float, Answer]] = {}
        self._inflight: dict[tuple[str, str, str, str], asyncio.Task[Answer]] = {}
        self._breakers: dict[str, _Breaker] = {}
        self._state: _LoopState | None = None
        #: requests sent (for tests of coalescing and caching: a count, no content)
        self.requests = 0

    # ------------------------------------------------------------------ the session

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        st = self._state
        if st is not None and st.loop is loop and not st.session.closed:
            return st
        if st is not None and not st.session.closed and st.loop.is_closed():
            st.session.detach()  # its loop is gone: nothing to close on it
        resolver = PinningResolver()
        connector = aiohttp.TCPConnector(
            ssl=self.ssl_context, resolver=resolver, use_dns_cache=False, limit=2 * self.max_concurrent
        )
        session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            trust_env=False,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        self._state = st = _LoopState(loop, session, resolver, asyncio.Semaphore(self.max_concurrent))
        return st

    async def close(self) -> None:
        st, self._state = self._state, None
        if st is not None and st.loop is asyncio.get_running_loop():
            await st.session.close()

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
        loop = asyncio.get_running_loop()
        task = self._inflight.get(key)
        if task is not None and task.get_loop() is not loop:
            task = None
        breaker = self._breakers.get(host) or _Breaker()
        if breaker.open_until > now and task is None:
            return Answer(
                UNREACHABLE,
                detail=f"was not asked: {breaker.failures} failures in a row, asked again in "
                f"{breaker.open_until - now:.0f}s",
            )
        if wait <= 0:
            return Answer(UNREACHABLE, detail="was not asked: no time was left before the admission deadline")
        if task is None:
            target = self._target(ref)
            if target is None:
                return Answer(NOT_ASKED, detail="was not asked: its name is not a host[:port]")
            st = self._loop_state()
            started = loop.time()
            try:
                await asyncio.wait_for(st.slots.acquire(), wait)
            except TimeoutError:
                return Answer(
                    UNREACHABLE,
                    detail=f"was not asked: {self.max_concurrent} lookups were in flight for {wait:.1f}s "
                    "(registryAccess.maxConcurrentLookups)",
                )
            wait -= loop.time() - started
            task = self._inflight.get(key)
            if task is not None and task.get_loop() is loop:
                st.slots.release()
            else:
                task = asyncio.ensure_future(self._fetch(st, target, ref.path, reference, cred))
                self._inflight[key] = task
                slots = st.slots

                def done(t: asyncio.Task[Answer]) -> None:
                    slots.release()
                    self._settle(key, host, t)

                task.add_done_callback(done)
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(wait, 0.001))
        except TimeoutError:
            return Answer(UNREACHABLE, detail=unreachable_detail(wait))

    def _target(self, ref: ImageRef) -> _Target | None:
        hp = host_port(registry_host(ref))
        named = host_port(ref.registry)
        if hp is None or named is None:
            return None
        return _Target(hp[0], hp[1], listed=hp in self.internal or named in self.internal)

    def _settle(self, key: tuple[str, str, str, str], host: str, task: asyncio.Task[Answer]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if task.cancelled():
            return
        exc = task.exception()
        answer = Answer(UNREACHABLE, detail=unreachable_detail(self.timeout)) if exc else task.result()
        if answer.outcome == NOT_ASKED:
            return  # the client's own rule, not the registry's health
        now = self._clock()
        if answer.outcome in DEFINITE:
            self._breakers.pop(host, None)  # a registry in good health needs no entry
            if self.cache_seconds > 0:
                if len(self._cache) >= ENTRIES_MAX:
                    self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
                    for k in list(self._cache)[: max(0, len(self._cache) - ENTRIES_MAX // 2)]:
                        del self._cache[k]  # the oldest first: a job author naming hosts without end
                self._cache[key] = (now + self.cache_seconds, answer)
        else:
            if host not in self._breakers and len(self._breakers) >= ENTRIES_MAX:
                self._breakers = {h: b for h, b in self._breakers.items() if b.open_until > now}
                for h in list(self._breakers)[: max(0, len(self._breakers) - ENTRIES_MAX // 2)]:
                    del self._breakers[h]
            breaker = self._breakers.setdefault(host, _Breaker())
            breaker.failures += 1
            if breaker.failures >= self.breaker_failures:
                breaker.open_until = now + self.breaker_open_seconds

    # ------------------------------------------------------------------ HTTP

    async def _fetch(
        self, st: _LoopState, target: _Target, path: str, reference: str, cred: Credential | None
    ) -> Answer:
        netloc = f"[{target.host}]" if ":" in target.host else target.host
        if target.port != 443:
            netloc += f":{target.port}"
        base = URL(f"https://{netloc}/v2/{path}", encoded=False)
        try:
            async with asyncio.timeout(self.timeout):
                scope = f"repository:{path}:pull"
                url = URL(f"{base}/manifests/{quote(reference, safe=':')}", encoded=True)
                reply, auth = await self._authorized(st, target, "HEAD", url, cred, scope)
                status, headers = reply.status, reply.headers
                if status == 200:
                    media_type = headers.get("Content-Type", "").split(";")[0].strip()
                    digest = headers.get("Docker-Content-Digest", "")
                    platforms = None
                    if media_type in INDEX_TYPES:
                        platforms = await self._platforms(st, target, base, url, digest, auth)
                    return Answer(FOUND, 200, media_type=media_type, digest=digest, platforms=platforms)
                if status == 404:
                    return Answer(UNKNOWN, 404, tags=await self._tags(st, target, base, auth))
                if status == 401:
                    return Answer(UNAUTHORIZED, 401)
                if status == 403:
                    return Answer(FORBIDDEN, 403)
                if status in REDIRECT_STATUSES:
                    return Answer(
                        NOT_ASKED,
                        status,
                        detail=f"answered the manifest request with a redirect (HTTP {status}), which is not followed",
                    )
                return Answer(UNREACHABLE, status, detail=f"answered HTTP {status}")
        except _NotAsked as exc:
            return Answer(NOT_ASKED, detail=exc.detail)
        except _Unreachable as exc:
            return Answer(UNREACHABLE, detail=exc.detail)
        except AddressNotAllowed:
            return Answer(NOT_ASKED, detail=ADDRESS_NOT_ALLOWED)
        except aiohttp.ClientConnectorCertificateError as exc:
            if (exc.host or "").lower() == target.host:
                return Answer(UNREACHABLE, detail=UNTRUSTED_CERTIFICATE)
            return Answer(UNREACHABLE, detail=unreachable_detail(self.timeout))
        except (TimeoutError, aiohttp.ClientError, OSError):
            return Answer(UNREACHABLE, detail=unreachable_detail(self.timeout))
        except ValueError:
            return Answer(UNREACHABLE, detail="answered something that could not be read")

    async def _check(self, st: _LoopState, target: _Target, url: URL) -> None:
        """The address policy for one URL about to be asked; the connection then goes to what was checked."""
        host = (url.raw_host or "").lower()
        port = url.port or 443
        internal_ok = (host, port) in self.internal or (target.listed and host == target.host)
        addresses = await checked_addresses(
            host, port, policy=self.policy, internal_ok=internal_ok, lookup=self._lookup
        )
        st.resolver.pin(host, port, addresses)

    async def _send(
        self,
        st: _LoopState,
        target: _Target,
        method: str,
        url: URL,
        auth: str | None,
        *,
        body_max: int = MANIFEST_MAX,
        redirects: bool = False,
    ) -> tuple[_Reply, URL]:
        """One request (and, when `redirects`, the redirects it is answered with, re-checked each):
        the reply and the URL that gave it. A redirect that is not followed is the reply."""
        last = _Reply(0, {}, b"")
        for _ in range(REDIRECTS_MAX + 1):
            await self._check(st, target, url)
            headers = {"Accept": ACCEPT, "Accept-Encoding": "identity"}
            if auth:
                headers["Authorization"] = auth
            self.requests += 1
            async with st.session.request(method, url, headers=headers, allow_redirects=False) as r:
                if r.status in REDIRECT_STATUSES and redirects:
                    last = _Reply(r.status, r.headers, b"")
                    nxt = _https_target(r.headers.get("Location", ""), url)
                    if nxt is None:
                        return last, url
                    if (nxt.raw_host, nxt.port) != (url.raw_host, url.port):
                        auth = None  # never a credential to another host
                    url = nxt
                    continue
                body = b"" if method == "HEAD" or r.status in REDIRECT_STATUSES else await _read_bounded(r, body_max)
                return _Reply(r.status, r.headers, body), url
        return last, url  # too many redirects: the last one is the reply

    async def _authorized(
        self, st: _LoopState, target: _Target, method: str, url: URL, cred: Credential | None, scope: str
    ) -> tuple[_Reply, str | None]:
        """Send; on a 401 answer the challenge it names (Bearer: get a token; Basic: the credential) and
        send once more. Returns the reply and the Authorization header that was used."""
        reply, _ = await self._send(st, target, method, url, None)
        if reply.status != 401:
            return reply, None
        auth: str | None = None
        for c in challenge.parse(reply.headers.get("WWW-Authenticate", "")):
            if c.scheme == "bearer" and c.params.get("realm"):
                token = await self._token(st, target, c.params, scope, cred)
                if token is None:
                    return reply, None  # the realm refused: what the kubelet would meet too
                auth = f"Bearer {token}"
                break
            if c.scheme == "basic":
                if cred is None:
                    return reply, None  # anonymous and refused
                auth = _basic(cred)
                break
        if auth is None:
            raise _NotAsked(UNREADABLE_CHALLENGE)
        reply, _ = await self._send(st, target, method, url, auth)
        return reply, auth

    async def _token(
        self, st: _LoopState, target: _Target, params: dict[str, str], scope: str, cred: Credential | None
    ) -> str | None:
        """distribution docs/spec/auth/token.md: GET realm?service=…&scope=…, Basic auth when we have a
        credential; the answer's "token" (or "access_token"). None when the realm refuses (401/403).

        The realm must be https, on the registry's own host name or in token_realms, at an allowed
        address; else it is not asked and no credential is sent."""
        realm = _https_target(params["realm"])
        if realm is None:
            if params["realm"][:7].lower() == "http://":
                raise _NotAsked(
                    "names a plain-HTTP token realm; it was not asked and no credential was sent (token realms "
                    "must be https)"
                )
            raise _NotAsked("names a token realm that is not an https URL; it was not asked and no credential was sent")
        host = (realm.raw_host or "").lower()
        if host != target.host and (host, realm.port or 443) not in self.token_realms:
            shown = f"{host}:{realm.port}" if realm.explicit_port else host
            raise _NotAsked(
                f'names its token realm on host "{shown}", which is not in registryAccess.tokenRealms; it was not '
                "asked and no credential was sent"
            )
        query = {"scope": params.get("scope") or scope}
        if params.get("service"):
            query["service"] = params["service"]
        url = realm.update_query(query)
        try:
            reply, _ = await self._send(st, target, "GET", url, _basic(cred) if cred else None, body_max=TOKEN_BODY_MAX)
        except AddressNotAllowed:
            raise _NotAsked(
                "names a token realm whose address is not allowed (internal or private; list its host in "
                "registryAccess.internalRegistries to use it); no credential was sent"
            ) from None
        if reply.status in REDIRECT_STATUSES:
            raise _NotAsked(
                f"has a token realm that answered with a redirect (HTTP {reply.status}), which is not followed"
            )
        if reply.status in (401, 403):
            return None
        if reply.status != 200:
            raise _Unreachable(f"has a token realm that answered HTTP {reply.status}")
        try:
            doc = json.loads(reply.body or b"")
        except ValueError:
            doc = None
        token = (doc.get("token") or doc.get("access_token")) if isinstance(doc, dict) else None
        if not isinstance(token, str) or not TOKEN.fullmatch(token):
            raise _Unreachable("has a token realm that answered no readable token")
        return token

    async def _platforms(
        self, st: _LoopState, target: _Target, base: URL, url: URL, digest: str, auth: str | None
    ) -> tuple[tuple[str, str], ...] | None:
        """The index's platforms. Asked by digest when the registry named one: then redirects are
        followed (to blob storage, as registries do) and the body must hash to the digest."""
        by_digest = DIGEST.fullmatch(digest) is not None
        if by_digest:
            url = URL(f"{base}/manifests/{digest}", encoded=True)
        try:
            reply, _ = await self._send(st, target, "GET", url, auth, redirects=by_digest)
        except AddressNotAllowed:
            return None
        body = reply.body
        if reply.status != 200 or body is None:
            return None
        if by_digest and "sha256:" + hashlib.sha256(body).hexdigest() != digest:
            return None
        try:
            return index_platforms(body)
        except ValueError:
            return None

    async def _tags(self, st: _LoopState, target: _Target, base: URL, auth: str | None) -> tuple[str, ...] | None:
        """The repository's tags (spec.md "Listing tags", the first TAGS_MAX, those that are tags by
        the reference grammar), or None when not readable. A redirect is not followed."""
        try:
            reply, _ = await self._send(st, target, "GET", URL(f"{base}/tags/list?n={TAGS_MAX}", encoded=True), auth,
                                        body_max=TAGS_BODY_MAX)  # fmt: skip
        except (aiohttp.ClientError, OSError):
            return None
        if reply.status == 404:
            return ()  # NAME_UNKNOWN: the repository has no tags at all
        if reply.status != 200 or reply.body is None:
            return None
        try:
            doc = json.loads(reply.body)
        except ValueError:
            return None
        tags = doc.get("tags") if isinstance(doc, dict) else None
        if not isinstance(tags, list):
            return ()
        return tuple(t for t in tags[:TAGS_MAX] if isinstance(t, str) and TAG.fullmatch(t))


def make_ssl_context(ca_file: str | None) -> ssl.SSLContext:
    """The system's trust, plus `ca_file`'s CAs (a private registry's); TLS 1.2 or newer."""
    ctx = ssl.create_default_context()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca_file:
        ctx.load_verify_locations(cafile=ca_file)
    return ctx
