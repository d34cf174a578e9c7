"""LiveClusterView: the ClusterView the server and the CLI use against a real apiserver.

Start-up (in the background, retried with backoff until it succeeds):
  discovery + /version ─► SelfSubjectAccessReview for every required permission
  ─► log what is missing ─► start a watch-backed cache for every served, permitted
  resource ─► ready once every started cache has synced.

The hot path never waits on the apiserver for cached objects. The few live calls
(Secret keys, dry-run creates, single GETs) are bounded by the request's deadline, go
through one semaphore, and identical reads in flight are coalesced. Secrets are read on
demand (never watched): see docs/cluster.md for the measurements behind that choice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from webhook.cluster.cache import CACHE_SPECS, SPECS_BY_RESOURCE, CacheSpec, Reflector, backoff_delay, freeze_heap
from webhook.cluster.capabilities import (
    NO,
    Capability,
    PermissionResult,
    cache_absence_reason,
    capability_of,
    fatal_reason,
    named_permissions,
    probe_permissions,
    probed_permissions,
    required_permissions,
    unverified_of,
)
from webhook.cluster.client import Coalescer, KubeClient, load_configuration
from webhook.cluster.discovery import Discovery, gv_path
from webhook.cluster.names import is_dns1123_label, is_dns1123_subdomain
from webhook.cluster.reads import DeclaredReads, never_read_namespaces, own_namespace
from webhook.cluster.view import CheckNeeds
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.kube import WARNINGS_KEY, ApiError, Permission
from webhook.registry.keyring import PullSecret, read_pull_secret
from webhook.reused import Reused

log = logging.getLogger(__name__)

#: the longest a single live call may take even when the deadline allows more
LIVE_CALL_CEILING = 10.0
#: Secret key sets remembered (found Secrets only; a 404 is never cached)
SECRET_CACHE_MAX = 4096


R = TypeVar("R")


#: the parameters of the live reads `kept` answers for, in order, with their defaults (_NEEDED: none)
_NEEDED = object()
_SECRET_KEYS = (("namespace", _NEEDED), ("name", _NEEDED), ("deadline", None))
_GET_OBJECT = (
    ("api_version", _NEEDED),
    ("resource", _NEEDED),
    ("namespace", _NEEDED),
    ("name", _NEEDED),
    ("deadline", None),
    ("ttl", 0.0),
    ("subresource", ""),
    ("query", None),
)
_LIST_OBJECTS = (
    ("api_version", _NEEDED),
    ("resource", _NEEDED),
    ("namespace", _NEEDED),
    ("label_selector", _NEEDED),
    ("deadline", None),
    ("ttl", 0.0),
)


def _bind(params: tuple[tuple[str, Any], ...], args: tuple[Any, ...], kw: dict[str, Any]) -> list[Any]:
    """A read's arguments, positional and by keyword, as the list of its parameters (defaults filled in)."""
    out = list(args[: len(params)])
    for name, default in params[len(out) :]:
        value = kw.get(name, default)
        if value is _NEEDED:
            raise TypeError(f"missing argument {name!r}")
        out.append(value)
    return out


def _q(part: str) -> str:
    return quote(part, safe="")


class LiveClusterView:
    """ClusterView on kubernetes_asyncio; see the module docstring for the life cycle."""

    def __init__(
        self,
        settings: Settings,
        client: KubeClient,
        *,
        checks: Sequence[CheckNeeds],
        discovery_refresh_seconds: float = 60.0,
        clock: Any = time.monotonic,
        own_ns: str | None = None,
        freeze_after_lists: bool = False,
    ) -> None:
        self.settings = settings
        #: a long-lived process (serve, audit) freezes the heap after each cache's list (cache.freeze_heap)
        self._after_list = freeze_heap if freeze_after_lists else None
        self.client = client
        self.checks = checks
        self.discovery = Discovery(client, refresh_seconds=discovery_refresh_seconds)
        #: check name → (discovery snapshot, permission probe, settings, namespaces state, capability)
        self._cap_memo: dict[str, tuple[Any, Any, Any, Any, Capability]] = {}
        self.reflectors: dict[str, Reflector] = {}
        self.cache_reasons: dict[str, str] = {}  # resource -> why it has no cache
        self.permissions: dict[Permission, PermissionResult] | None = None
        self.ready = False
        self.ready_reason = "starting: discovery and capability probe not done yet"
        self.fatal = ""
        self._clock = clock
        self.never_read = never_read_namespaces(settings, own_ns if own_ns is not None else own_namespace())
        self.declared = DeclaredReads(required_permissions(checks), named_permissions(checks, settings))
        #: Secret key sets read on demand, kept for secretTtlSeconds (read again ahead of expiry while in use)
        self._secret_ttl: Reused[frozenset[str]] = Reused(clock, SECRET_CACHE_MAX)
        #: the current resourceVersion of a Secret as a watch holds it ("" absent, None not watched): set by
        #: the audit controller, whose metadata watch of Secrets knows it; keys read at that version are
        #: reused while the watch still holds it (`secret_keys`)
        self.secret_version: Callable[[str, str], str | None] | None = None
        self._secret_at: dict[tuple[str, str], tuple[str, frozenset[str]]] = {}
        self._secret_reads: Coalescer[frozenset[str] | None] = Coalescer()
        self._object_reads: Coalescer[dict[str, Any] | None] = Coalescer()
        #: pages of a paged on-demand read a model may read (ClusterView.max_pages): 1 for a review (its
        #: deadline); the audit controller sets more (webhook/audit/runner.py: its reads are paced by audit.qps)
        self.max_pages = 1
        #: on-demand reads reused for their `ttl` (get_object by path?query, list_objects by path?selector)
        self._read_ttl: Reused[Any] = Reused(clock, SECRET_CACHE_MAX)
        self._list_reads: Coalescer[list[dict[str, Any]]] = Coalescer()
        #: each on-demand read's key and request by its arguments (`_spec`)
        self._specs: dict[tuple[Any, ...], Any] = {}
        self._startup_task: asyncio.Task[None] | None = None
        self._first_attempt = asyncio.Event()
        self._probed = asyncio.Event()
        self._synced = asyncio.Event()

    # ------------------------------------------------------------------ life cycle

    async def start(self, wait_seconds: float = 20.0) -> None:
        """Begin start-up; return once the caches synced, the first attempt failed, or after
        `wait_seconds` — so a CLI run sees synced caches and a server is never held up long."""
        if self._startup_task is None:
            self._startup_task = asyncio.ensure_future(self._startup())
        await _set_within(self._first_attempt, wait_seconds)

    async def wait_probed(self, timeout: float) -> bool:
        return await _set_within(self._probed, timeout)

    async def wait_synced(self, timeout: float) -> bool:
        """True once every started cache has synced (what /readyz and the CLI wait for)."""
        return await _set_within(self._synced, timeout)

    async def close(self) -> None:
        if self._startup_task is not None:
            self._startup_task.cancel()
            await asyncio.gather(self._startup_task, return_exceptions=True)
        await asyncio.gather(
            *(r.stop() for r in self.reflectors.values()),
            self.discovery.stop(),
            self._secret_ttl.close(),
            self._read_ttl.close(),
        )
        await self.client.close()

    async def _startup(self) -> None:
        attempt = 0
        while True:
            try:
                await self.discovery.refresh()
                perms = probed_permissions(self.checks, self.settings)
                self.permissions = await probe_permissions(self.client, perms, timeout=30.0)
                break
            except ApiError as exc:
                self.ready_reason = f"cannot read the apiserver's discovery: {exc.message}"
                delay = backoff_delay(attempt)
                attempt += 1
                log.error("start-up: %s; retrying in %.1fs", self.ready_reason, delay)
                self._first_attempt.set()
                await asyncio.sleep(delay)
        self._report_permissions()
        for spec in CACHE_SPECS:
            self._maybe_start_cache(spec)
        self.discovery.on_change(lambda _snap: self._on_discovery_change())
        self.discovery.start()
        self._probed.set()
        if self.fatal:
            self.ready_reason = self.fatal
            log.error("not ready: %s", self.fatal)
        await self._wait_caches()

    def _report_permissions(self) -> None:
        assert self.permissions is not None
        denied = [p for p, r in self.permissions.items() if r.allowed is False]
        unknown = [p for p, r in self.permissions.items() if r.allowed is None]
        if denied:
            log.warning("missing permissions (checks that need them are skipped): %s", ", ".join(map(str, denied)))
        if unknown:
            log.warning("permissions that could not be verified: %s", ", ".join(map(str, unknown)))
        self.fatal = fatal_reason(self.checks, self.discovery.served, self.permissions, self.settings)
        for c in (self._capability(c) for c in self.checks if c.needs_cluster):
            if c.value == NO:
                log.warning("check %r lowered to skip: %s", c.check, c.reason)
        for check in self.checks:  # said once here, never as a warning on an apply
            for _, text in unverified_of(check):
                log.info("check %r cannot verify, on any cluster: %s", check.name, text)

    def _maybe_start_cache(self, spec: CacheSpec) -> None:
        if spec.resource in self.reflectors or self.permissions is None:
            return
        reason = cache_absence_reason(spec, self.discovery.served, self.permissions)
        if reason:
            self.cache_reasons[spec.resource] = reason
            return
        self.cache_reasons.pop(spec.resource, None)
        r = Reflector(spec, self.client, after_list=self._after_list)
        self.reflectors[spec.resource] = r
        r.start()

    def _on_discovery_change(self) -> None:
        """An API installed after start-up gets its cache; one removed loses it (no stale ghosts)."""
        for spec in CACHE_SPECS:
            r = self.reflectors.get(spec.resource)
            if r is not None and not self.discovery.served(spec.group_version):
                log.warning("%s is no longer served: dropping the %s cache", spec.group_version, spec.resource)
                del self.reflectors[spec.resource]
                self.cache_reasons[spec.resource] = f"{spec.group_version} is not served"
                asyncio.ensure_future(r.stop())
            else:
                self._maybe_start_cache(spec)

    async def _wait_caches(self) -> None:
        pending = {name: r for name, r in self.reflectors.items()}
        while pending:
            if not self.fatal:
                self.ready_reason = "starting: waiting for caches to sync: " + ", ".join(sorted(pending))
            waits = {asyncio.ensure_future(r.synced_event.wait()): name for name, r in pending.items()}
            done, rest = await asyncio.wait(waits.keys(), timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
            for t in rest:
                t.cancel()
            for t in done:
                pending.pop(waits[t], None)
            # a cache the apiserver refuses (403) will not sync: count it as absent, not as waiting
            for name in [n for n, r in pending.items() if r.denied]:
                log.warning("cache %s: %s", name, pending[name].denied)
                pending.pop(name)
        self._synced.set()
        self._first_attempt.set()
        if not self.fatal:
            self.ready = True
            self.ready_reason = "ready"
            log.info("cluster view ready: caches synced: %s", ", ".join(sorted(self.reflectors)) or "none")

    # ------------------------------------------------------------------ cached objects

    def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        r = self.reflectors.get(resource)
        return [] if r is None else r.cache.objects(namespace)

    def get_cached(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        r = self.reflectors.get(resource)
        if r is None:
            return None
        spec = SPECS_BY_RESOURCE[resource]
        return r.cache.get(namespace if spec.namespaced else None, name)

    def cache_age(self, resource: str) -> float | None:
        r = self.reflectors.get(resource)
        return None if r is None else r.cache.age()

    def cache_version(self, resource: str) -> tuple[int, int] | None:
        r = self.reflectors.get(resource)
        return None if r is None else (r.cache.generation, r.cache.changes)

    async def wait_for(self, resource: str, predicate: Any, timeout: float) -> bool:
        """Wait until `predicate(view)` holds, re-checking after each change of `resource`'s cache."""
        r = self.reflectors.get(resource)
        if r is None:
            return bool(predicate(self))
        changed = asyncio.Event()
        r.cache.listeners.append(changed.set)
        try:
            async with asyncio.timeout(timeout):
                while not predicate(self):
                    await changed.wait()
                    changed.clear()
            return True
        except TimeoutError:
            return False
        finally:
            r.cache.listeners.remove(changed.set)

    def cache_status(self) -> list[dict[str, Any]]:
        """Per cache: objects, synced, age, last error, or why it is absent (for /capabilities)."""
        out: list[dict[str, Any]] = []
        for spec in CACHE_SPECS:
            r = self.reflectors.get(spec.resource)
            if r is None:
                out.append(
                    {
                        "resource": spec.resource,
                        "cached": False,
                        "reason": self.cache_reasons.get(spec.resource, "not started"),
                    }
                )
                continue
            age = r.cache.age()
            out.append(
                {
                    "resource": spec.resource,
                    "cached": True,
                    "synced": r.cache.synced,
                    "objects": len(r.cache),
                    "ageSeconds": None if age is None else round(age, 1),
                    "relists": r.cache.relists,
                    "lastError": r.denied or r.cache.last_error,
                }
            )
        return out

    # ------------------------------------------------------------------ live reads

    async def secret_keys(self, namespace: str, name: str, deadline: Deadline) -> set[str] | None:
        """Key names only: the body (and every value in it) is dropped before this returns.

        A name or namespace that no object can have (not a DNS-1123 subdomain / label,
        pkg/apis/core/validation ValidateSecretName / ValidateNamespaceName) is answered
        "not found" without a request: such a Secret cannot exist, and the name never goes
        into a URL (`.` would turn the GET into a LIST of the namespace's Secrets). A
        namespace in `never_read` is refused as not permitted, without a request.
        """
        if namespace in self.never_read and is_dns1123_label(namespace) and is_dns1123_subdomain(name):
            raise ApiError(
                403, f'the webhook does not read Secrets in namespace "{namespace}" (never-read namespace)', "Forbidden"
            )
        hit = self._kept_secret_keys(namespace, name)
        if hit is not None:
            return hit[0]
        found = await self._secret_reads.run(
            (namespace, name), deadline.timeout(LIVE_CALL_CEILING), self._secret_fetch(namespace, name)
        )
        return None if found is None else set(found)

    def _kept_secret_keys(self, namespace: str, name: str) -> tuple[set[str] | None] | None:
        """(the keys,) `secret_keys` answers without a request (a name no Secret can have, keys read at the version
        the watch holds, or kept within secretTtlSeconds: read again ahead of expiry), else None."""
        if not is_dns1123_label(namespace) or not is_dns1123_subdomain(name):
            return (None,)
        if namespace in self.never_read:
            return None
        key = (namespace, name)
        watched = self.secret_version(namespace, name) if self.secret_version is not None else None
        if watched:
            at = self._secret_at.get(key)
            if at is not None and at[0] == watched:
                return (set(at[1]),)
        fetch = self._secret_fetch(namespace, name)

        async def renew() -> None:
            if await self._secret_reads.run(key, LIVE_CALL_CEILING, fetch) is None:
                self._secret_ttl.forget(key)  # deleted since: the next review reads it (a 404 is never kept)

        hit = self._secret_ttl.get(key, renew)
        return None if hit is None else (set(hit[0]),)

    def _secret_fetch(self, namespace: str, name: str) -> Callable[[float], Awaitable[frozenset[str] | None]]:
        """The GET of one Secret, its values dropped on arrival: its key names (None: not found), kept."""
        key = (namespace, name)

        async def fetch(timeout: float) -> frozenset[str] | None:
            path = f"/api/v1/namespaces/{_q(namespace)}/secrets/{_q(name)}"
            try:
                doc = await self.client.request("GET", path, timeout=timeout, kind="GET secret")
            except ApiError as exc:
                if exc.status == 404:
                    return None
                raise
            keys = frozenset((doc.get("data") or {}).keys()) | frozenset((doc.get("stringData") or {}).keys())
            version = str((doc.get("metadata") or {}).get("resourceVersion") or "")
            doc.clear()  # values go now, not whenever the GC gets to them
            if self.secret_version is not None and version:
                self._remember_secret_at(key, version, keys)
            self._secret_ttl.put(key, keys, self.settings.secret_ttl_seconds)
            return keys

        return fetch

    def _remember_secret_at(self, key: tuple[str, str], version: str, keys: frozenset[str]) -> None:
        """Keys read at `version`. A Secret's keys change only with its resourceVersion (a re-created
        Secret has a new one), so they hold for as long as the watch reports that version: under churn
        the jobs that read one Secret cost one GET a version, not one each (issue 33)."""
        self._secret_at.pop(key, None)
        if len(self._secret_at) >= SECRET_CACHE_MAX:
            self._secret_at.pop(next(iter(self._secret_at)))
        self._secret_at[key] = (version, keys)

    async def pull_secret(self, namespace: str, name: str, deadline: Deadline) -> PullSecret | None:
        """A pull Secret as the kubelet reads it (webhook.registry.keyring.read_pull_secret); None when
        it does not exist. The values stay in the returned object only, which the Image Pull check
        holds for one registry lookup; nothing is cached here and nothing is logged. The same name
        and namespace rules as `secret_keys` (never_read namespaces are refused without a request)."""
        if not is_dns1123_label(namespace) or not is_dns1123_subdomain(name):
            return None
        if namespace in self.never_read:
            raise ApiError(
                403, f'the webhook does not read Secrets in namespace "{namespace}" (never-read namespace)', "Forbidden"
            )
        path = f"/api/v1/namespaces/{_q(namespace)}/secrets/{_q(name)}"
        try:
            doc = await self.client.request("GET", path, timeout=deadline.timeout(LIVE_CALL_CEILING), kind="GET secret")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        try:
            return read_pull_secret(name, doc)
        finally:
            doc.clear()  # the values go now; only the parsed entries live on, in the caller's hands

    async def get_object(
        self,
        api_version: str,
        resource: str,
        namespace: str | None,
        name: str,
        deadline: Deadline,
        *,
        ttl: float = 0.0,
        subresource: str = "",
        query: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """One object by name, or None when it does not exist (or cannot: an invalid name or namespace).
        `subresource`: a GET of that subresource instead (Kueue's visibility API: clusterqueues/<name>/pendingworkloads).
        `query`: its query parameters (a page of that list: `offset`, `limit`); each query is its own read.

        `ttl` > 0 reuses an answer (found or not found; never an error) for that long: the
        Controllers check reads a few Deployments and Leases per review, and a burst of reviews
        then costs one GET per object per TTL window instead of one per review.

        Only declared reads are sent (`DeclaredReads`). A 403 for an object whose namespace the
        namespaces cache does not hold is "not found": a named read's Role exists only where its
        namespace did at install, and an object cannot exist in a namespace that does not."""
        read = self._object_read(api_version, resource, namespace, name, subresource, query)
        if read is None:
            return None
        key, fetch = read
        if ttl > 0 and (hit := self._reused(key, ttl, self._object_reads, fetch)) is not None:
            return None if hit[0] is None else dict(hit[0])
        return await self._read_kept(key, ttl, self._object_reads, fetch, deadline.timeout(LIVE_CALL_CEILING))

    def _object_read(
        self,
        api_version: str,
        resource: str,
        namespace: str | None,
        name: str,
        subresource: str,
        query: Mapping[str, str] | None,
    ) -> tuple[str, Callable[[float], Awaitable[dict[str, Any] | None]]] | None:
        """`_make_object_read`, kept by its arguments (`_spec`)."""
        args = (
            "get",
            api_version,
            resource,
            namespace,
            name,
            subresource,
            tuple(sorted(query.items())) if query else (),
        )
        return self._spec(args, lambda: self._make_object_read(args))

    def _spec(self, args: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """What `make` answers for a read's `args` (its key and request: they stand on the arguments alone and the
        declared reads, fixed for the view's life), kept: a review asks the same few reads, and quoting, name rules
        and the declared-read lookup cost more than the kept answer's own lookup. At most SECRET_CACHE_MAX, then
        all dropped; what raises (an undeclared read, a Secret) raises each time."""
        got = self._specs.get(args, _NEEDED)
        if got is _NEEDED:
            got = make()
            if len(self._specs) >= SECRET_CACHE_MAX:
                self._specs.clear()
            self._specs[args] = got
        return got

    def _make_object_read(
        self, args: tuple[Any, ...]
    ) -> tuple[str, Callable[[float], Awaitable[dict[str, Any] | None]]] | None:
        """(the read's key, its GET) for `get_object` with `args` as `_object_read` puts them (the query as sorted
        pairs); None when no object can have that name or namespace."""
        _, api_version, resource, namespace, name, subresource, pairs = args
        if not is_dns1123_subdomain(name) or (namespace and not is_dns1123_label(namespace)):
            return None
        if resource == "secrets":
            raise ValueError("Secrets are read with secret_keys(), which drops their values")
        self.declared.check_get(api_version, resource, namespace or "", name, subresource)
        path = gv_path(api_version)
        if namespace:
            path += f"/namespaces/{_q(namespace)}"
        path += f"/{resource}/{_q(name)}" + (f"/{_q(subresource)}" if subresource else "")
        params = dict(pairs)
        key = path + ("?" + "&".join(f"{k}={_q(v)}" for k, v in params.items()) if params else "")

        async def fetch(timeout: float) -> dict[str, Any] | None:
            try:
                doc = await self.client.request(
                    "GET", path, timeout=timeout, query=params or None, kind=f"GET {resource}"
                )
            except ApiError as exc:
                if exc.status == 404:
                    return None
                if exc.forbidden and namespace and not self._namespace_exists(namespace):
                    # no Role where there is no namespace (the chart skips those): nothing can be there
                    return None
                raise
            (doc.get("metadata") or {}).pop("managedFields", None)
            return doc

        return key, fetch

    def _reused(
        self, key: str, ttl: float, reads: Coalescer[R], fetch: Callable[[float], Awaitable[R]]
    ) -> tuple[R] | None:
        """(the answer,) of an on-demand read still within its ttl, else None (a None answer is `(None,)`);
        one in the last quarter of its lifetime is read again in the background (webhook/reused.py)."""
        got: tuple[R] | None = self._read_ttl.get(
            key, lambda: self._read_kept(key, ttl, reads, fetch, LIVE_CALL_CEILING)
        )
        return got

    async def _read_kept(
        self, key: str, ttl: float, reads: Coalescer[R], fetch: Callable[[float], Awaitable[R]], timeout: float
    ) -> R:
        """Read (identical reads in flight share one call) and keep the answer for `ttl` seconds (errors
        are never kept: they raise first)."""
        got = await reads.run(key, timeout, fetch)
        self._read_ttl.put(key, got, ttl)
        return got

    async def list_objects(
        self,
        api_version: str,
        resource: str,
        namespace: str,
        label_selector: str,
        deadline: Deadline,
        ttl: float = 0.0,
    ) -> list[dict[str, Any]]:
        """One namespace's objects matching `label_selector` (one page of at most 100): for what is
        read on demand instead of watched (a Service's EndpointSlices). Identical lists in flight
        share one request; `ttl` > 0: an answer is reused that many seconds (errors never)."""
        key, fetch = self._list_read(api_version, resource, namespace, label_selector)
        if not key:
            return []
        if ttl > 0 and (hit := self._reused(key, ttl, self._list_reads, fetch)) is not None:
            return [dict(i) for i in hit[0]]
        return await self._read_kept(key, ttl, self._list_reads, fetch, deadline.timeout(LIVE_CALL_CEILING))

    def _list_read(
        self, api_version: str, resource: str, namespace: str, label_selector: str
    ) -> tuple[str, Callable[[float], Awaitable[list[dict[str, Any]]]]]:
        """`_make_list_read`, kept by its arguments (`_spec`)."""
        args = ("list", api_version, resource, namespace, label_selector)
        got: tuple[str, Callable[[float], Awaitable[list[dict[str, Any]]]]] = self._spec(
            args, lambda: self._make_list_read(api_version, resource, namespace, label_selector)
        )
        return got

    def _make_list_read(
        self, api_version: str, resource: str, namespace: str, label_selector: str
    ) -> tuple[str, Callable[[float], Awaitable[list[dict[str, Any]]]]]:
        """(the read's key, its LIST) for `list_objects`; key "" when no object can be in that namespace."""

        async def fetch(timeout: float) -> list[dict[str, Any]]:
            doc = await self.client.request(
                "GET",
                path,
                query={"labelSelector": label_selector, "limit": "100"},
                timeout=timeout,
                kind=f"LIST {resource}",
            )
            items = [i for i in doc.get("items") or [] if isinstance(i, dict)]
            for i in items:
                (i.get("metadata") or {}).pop("managedFields", None)
            return items

        if not is_dns1123_label(namespace):
            return "", fetch
        if resource == "secrets":
            raise ValueError("Secrets are never listed")
        self.declared.check_list(api_version, resource)
        path = f"{gv_path(api_version)}/namespaces/{_q(namespace)}/{resource}"
        return f"{path}?{label_selector}", fetch

    def kept(self, read: str, *args: Any, **kw: Any) -> tuple[Any] | None:
        """(the answer,) the live read `read` (secret_keys, get_object, list_objects) with these arguments gives
        without a request or a wait: a name no object can have, or an answer kept within its ttl (used in the last
        quarter of its lifetime, it is read again in the background, as by the read itself); None otherwise."""
        if read == "secret_keys":
            return self._kept_secret_keys(*_bind(_SECRET_KEYS, args, kw)[:2])
        if read == "get_object":
            api_version, resource, namespace, name, _, ttl, subresource, query = _bind(_GET_OBJECT, args, kw)
            got = self._object_read(api_version, resource, namespace, name, subresource, query)
            if got is None:
                return (None,)
            hit = self._reused(got[0], ttl, self._object_reads, got[1]) if ttl > 0 else None
            return None if hit is None else (None if hit[0] is None else dict(hit[0]),)
        if read == "list_objects":
            api_version, resource, namespace, selector, _, ttl = _bind(_LIST_OBJECTS, args, kw)
            key, fetch = self._list_read(api_version, resource, namespace, selector)
            if not key:
                return ([],)
            listed = self._reused(key, ttl, self._list_reads, fetch) if ttl > 0 else None
            return None if listed is None else ([dict(i) for i in listed[0]],)
        return None

    async def dry_run_create(
        self, api_version: str, kind: str, namespace: str, body: dict[str, Any], deadline: Deadline
    ) -> dict[str, Any] | None:
        """The only write the webhook sends, and it is always dryRun=All (nothing is persisted). The answer
        is the object as the apiserver would store it, after every mutating admission layer
        (k8s.io/apiserver pkg/endpoints/handlers/create.go), its managedFields left out. What the admission
        layers said (the answer's `Warning` headers, webhook.kube.warning_texts) is kept under
        webhook.kube.WARNINGS_KEY, and on the ApiError of a refusal."""
        if not is_dns1123_label(namespace):
            raise ApiError(404, f'namespace "{namespace}" cannot exist (not a DNS-1123 label)', "NotFound")
        res = await self.discovery.resource(api_version, kind, deadline.timeout(LIVE_CALL_CEILING))
        if res is None:
            raise ApiError(404, f"{kind} ({api_version}) is not served by this cluster", "NotFound")
        path = gv_path(api_version)
        obj = dict(body)
        if res.namespaced:
            path += f"/namespaces/{_q(namespace)}"
            obj["metadata"] = {**(obj.get("metadata") or {}), "namespace": namespace}
        path += f"/{res.name}"
        warnings: list[str] = []
        doc = await self.client.request(
            "POST",
            path,
            query={"dryRun": "All"},
            body=obj,
            timeout=deadline.timeout(LIVE_CALL_CEILING),
            kind=f"DRYRUN {res.name}",
            warnings=warnings,
        )
        (doc.get("metadata") or {}).pop("managedFields", None)
        if warnings:
            doc[WARNINGS_KEY] = warnings
        return doc

    # ------------------------------------------------------------------ discovery, capabilities

    def served(self, group_version: str) -> bool:
        return self.discovery.served(group_version)

    def _namespace_exists(self, namespace: str) -> bool:
        """Whether the namespaces cache holds `namespace`; True while it is absent or not synced."""
        r = self.reflectors.get("namespaces")
        if r is None or not r.cache.synced:
            return True
        return r.cache.get(None, namespace) is not None

    def _namespaces_state(self) -> tuple[bool, int] | None:
        """What `_namespace_exists` answers from: None without a namespaces cache, else
        (synced, its change count)."""
        r = self.reflectors.get("namespaces")
        return None if r is None else (r.cache.synced, r.cache.changes)

    def server_version(self) -> tuple[int, int] | None:
        return self.discovery.server_version()

    def _capability(self, check: CheckNeeds) -> Capability:
        snap = self.discovery.snapshot
        # the probed part changes only with a new discovery snapshot or permission probe (and,
        # for a check lowered by its named reads, the settings and which namespaces exist):
        # computed once per such state, not on every request
        ns_state = self._namespaces_state() if check.named_permissions_required else None
        memo = self._cap_memo.get(check.name)
        if (
            memo is not None
            and snap is not None
            and memo[0] is snap
            and memo[1] is self.permissions
            and memo[2] is self.settings
            and memo[3] == ns_state
        ):
            cap = memo[4]
        else:
            cap = capability_of(
                check,
                served=self.discovery.served if snap is not None else None,
                perms=self.permissions,
                discovery_error=self.ready_reason if snap is None else "",
                settings=self.settings,
                namespace_exists=self._namespace_exists if check.named_permissions_required else None,
            )
            self._cap_memo[check.name] = (snap, self.permissions, self.settings, ns_state, cap)
        if cap.value != NO:
            for p in check.permissions:  # a cache refused at run time (RBAC changed since start-up)
                r = self.reflectors.get(p.resource)
                if r is not None and r.denied and r.spec.group == p.group and p.verb in ("list", "watch"):
                    return Capability(check.name, NO, cap.source, r.denied)
        return cap

    def check_capability(self, check: CheckNeeds) -> tuple[bool, str]:
        cap = self._capability(check)
        return (False, cap.reason) if cap.value == NO else (True, "")

    def capabilities(self) -> list[dict[str, str]]:
        out = []
        for c in self.checks:
            entry = self._capability(c).as_dict()
            if unverified := unverified_of(c):
                entry["unverified"] = "; ".join(text for _, text in unverified)
            out.append(entry)
        return out

    def capability_summary(self) -> dict[str, Any]:
        """Everything /capabilities shows: checks, caches, APIs, version, readiness."""
        ver = self.server_version()
        return {
            "ready": self.ready,
            "reason": self.ready_reason,
            "serverVersion": None if ver is None else f"{ver[0]}.{ver[1]}",
            "checks": self.capabilities(),
            "caches": self.cache_status(),
            "missingPermissions": sorted(str(p) for p, r in (self.permissions or {}).items() if r.allowed is False),
            "probed": self.permissions is not None,
        }


async def open_cluster_view(
    settings: Settings,
    kubeconfig: str | None = None,
    *,
    checks: Sequence[CheckNeeds],
    wait_seconds: float = 20.0,
    freeze_after_lists: bool = False,
    context: str | None = None,
) -> LiveClusterView:
    """Connect (in-cluster config when no kubeconfig is given inside a pod, else the
    kubeconfig or the default one) and begin start-up. Returns once the caches have
    synced, or the apiserver could not be read, or after `wait_seconds`; start-up then
    goes on in the background (`ready`, `ready_reason`, `wait_synced`)."""
    cfg = await load_configuration(kubeconfig, context)
    view = LiveClusterView(
        settings, KubeClient(cfg, settings.api_concurrency), checks=checks, freeze_after_lists=freeze_after_lists
    )
    await view.start(wait_seconds)
    return view


async def _set_within(event: asyncio.Event, timeout: float) -> bool:
    """Wait up to `timeout` seconds for `event`; whether it was set."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
        return True
    except TimeoutError:
        return False
