"""The Dry Run check's short-lived memory: nothing is dry-run twice for the same content.

A `kubectl apply --dry-run=server` followed by the real apply, an apiserver retry, or the
children of a sweep send the same derived JobSet and Pods to the apiserver within seconds.
Each dry-run outcome is kept for `dryRunCacheSeconds` under a key made of

- the object's content (kind, namespace, the canonical JSON of the body), and
- the resourceVersions of the cached objects whose state the apiserver's admission reads for
  it and the webhook watches (the namespace, its ResourceQuotas and LimitRanges, the pods'
  ServiceAccounts and PriorityClasses),

so a changed object, or a changed quota, namespace label or LimitRange, is a miss: a verdict
is never served for data newer than the data it was computed with. What the webhook does
not watch (other webhooks, admission policies) is bounded by the lifetime alone.

Only definitive outcomes are kept: the apiserver's acceptance, or its rejection
(a non-transient ApiError). A timeout, a 5xx or any other error is forgotten at once, so
the next review asks again. Concurrent reviews of the same content share one request
(single flight): the first caller's request is shielded from the others' cancellation.

An outcome used in the last quarter of its lifetime is asked again in the background, once
(`settled_answer`'s `renew`, as webhook/reused.py does for the view's reads): the review
is answered from the kept outcome, still within its lifetime, and the new outcome replaces it
when it lands. Under steady reviews no review waits for a lifetime's end (at 32 clients every
review in flight did, docs/benchmarks/vs-kyverno.md); an outcome is never older than before.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import marshal
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from webhook.kube import ApiError
from webhook.reused import RENEW_AT

#: entries kept at most (oldest dropped first); a few KiB each at most (a future and a key)
MAX_ENTRIES = 4096


def content_key(
    kind: str, namespace: str, body: dict[str, Any], versions: Iterable[tuple[str, ...]], own_uid: str | None = None
) -> str:
    """sha256 of the object's content (:func:`body_digest`) and of the versions of what its admission reads."""
    return keyed(body_digest(kind, namespace, body, own_uid), versions)


def keyed(digest: bytes, versions: Iterable[tuple[str, ...]]) -> str:
    """The key of a body whose :func:`body_digest` is ``digest``, with the versions of what its admission reads."""
    parts = sorted(versions)
    try:
        raw = marshal.dumps(parts, 2)
    except ValueError:
        raw = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(digest + raw).hexdigest()


def body_digest(kind: str, namespace: str, body: dict[str, Any], own_uid: str | None = None) -> bytes:
    """sha256 of the object's content: its kind, namespace and body.

    ``own_uid``: the judged job's metadata.uid, which the apiserver draws anew for every
    request (a dry-run apply and the real apply carry different ones) and which the AIPerf
    operator copies into an env var of every container. It stands for "this job" in the
    key, so the same job content is the same key; any other difference is a miss.

    The content is serialized with marshal (format 2: no back-references, so the bytes depend
    on the values and their order only), ten times faster than sorted JSON on an AIPerfJob's
    ~30-container JobSet. It is order-sensitive: the same maps in another key order are a miss,
    never a false hit. The objects the apiserver sends are in one order (Go's JSON encodes map
    keys sorted), and what the webhook renders from them follows that order: the probe objects
    of an AIPerfSweep's child take their maps from the sweep as the apiserver sent it, as the
    child's own review does (e2e/test_dryrun_cache.py). Anything marshal cannot write falls
    back to sorted JSON."""
    parts = [kind, namespace, body]
    try:
        raw = marshal.dumps(parts, 2)
    except ValueError:
        raw = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()
    if own_uid and len(own_uid) >= 8:
        raw = raw.replace(own_uid.encode(), b"<own-uid>")
    return hashlib.sha256(raw).digest()


class DigestMemo:
    """The :func:`body_digest` of each probe of a render, so a review of a render seen before does not
    serialize and hash its probe bodies (~25 KB a pod) again (issue 22: 6-8 % of the webhook's CPU).

    Keyed by the render's id (webhook/workloads/render_cache.py: one per cached render, never
    reused: the same id is the same render of the same object content, settings and environment)
    and the probe (kind, name, the pod groups it stands for, twin or not), which the probe builders
    (webhook.models.dryrun_probe) make from the render alone. Reviews of one render differ only in
    the job's own uid (an AIPerfJob's AIPERF_JOB_UID; its run epoch is in no probe), which
    :func:`body_digest` reads as "this job" anyway; a uid it would not replace (under 8 characters)
    is never memoized. At most MAX_ENTRIES, the oldest dropped first."""

    def __init__(self) -> None:
        self._digests: dict[tuple[Any, ...], bytes] = {}
        self.hits = 0

    def __len__(self) -> int:
        return len(self._digests)

    def memoized(self, memo_key: tuple[Any, ...] | None, own_uid: str | None) -> bool:
        """Whether :meth:`digest` of this key answers from the memo (no serializing, no hashing)."""
        return memo_key is not None and not (own_uid is not None and len(own_uid) < 8) and memo_key in self._digests

    def digest(
        self, memo_key: tuple[Any, ...] | None, kind: str, namespace: str, body: dict[str, Any], own_uid: str | None
    ) -> bytes:
        """:func:`body_digest` of the body, from the memo when ``memo_key`` (None: not memoized) was seen."""
        if memo_key is None or (own_uid is not None and len(own_uid) < 8):
            return body_digest(kind, namespace, body, own_uid)
        got = self._digests.get(memo_key)
        if got is not None:
            self.hits += 1
            return got
        got = body_digest(kind, namespace, body, own_uid)
        if len(self._digests) >= MAX_ENTRIES:
            self._digests.pop(next(iter(self._digests)))
        self._digests[memo_key] = got
        return got


def cacheable(exc: BaseException | None) -> bool:
    """The apiserver's acceptance (None) or its definitive rejection."""
    return exc is None or (isinstance(exc, ApiError) and not exc.transient)


@dataclass
class _Entry:
    expires: float
    future: asyncio.Future[Any]
    renew_at: float


class DryRunCache:
    """Outcomes of dry-run calls by key; ``ttl`` seconds (0 = remember nothing)."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._entries: dict[str, _Entry] = {}
        #: outcomes asked again ahead of their expiry, in flight
        self._renewing: dict[str, asyncio.Future[Any]] = {}
        self.hits = 0
        self.misses = 0
        self.renewals = 0

    def __len__(self) -> int:
        return len(self._entries)

    def settled(self, key: str) -> tuple[BaseException | None] | None:
        """The kept outcome of `key` when it is final and still fresh, as (the rejection or None,),
        without waiting or a task; None when `run` must be awaited (no entry, expired, in flight)."""
        got = self.settled_answer(key)
        return None if got is None else (got[0],)

    def settled_answer(
        self, key: str, renew: Callable[[], Awaitable[Any]] | None = None
    ) -> tuple[BaseException | None, Any] | None:
        """`settled`, with what the call returned when it was accepted (the Dry Run keeps a Pod as
        admission mutated it, else None): (the rejection or None, the answer or None). In the last
        quarter of the outcome's lifetime, `renew` (the same call, on a deadline of its own) is
        started in the background unless it runs already; its definitive outcome replaces this one."""
        if self.ttl <= 0:
            return None
        entry = self._entries.get(key)
        now = self.clock()
        if entry is None or entry.expires <= now or not entry.future.done() or entry.future.cancelled():
            return None
        exc = entry.future.exception()
        if not cacheable(exc):  # about to be forgotten (its done callback has not run yet)
            return None
        self.hits += 1
        if renew is not None and now >= entry.renew_at and key not in self._renewing:
            self._renew(key, renew, now)
        return (exc, None if exc is not None else entry.future.result())

    def _renew(self, key: str, call: Callable[[], Awaitable[Any]], now: float) -> None:
        future: asyncio.Future[Any] = asyncio.ensure_future(call())
        self._renewing[key] = future
        self.renewals += 1

        def done(f: asyncio.Future[Any]) -> None:
            if self._renewing.get(key) is f:
                del self._renewing[key]
            if not f.cancelled() and cacheable(f.exception()):
                self._entries.pop(key, None)
                self._evict(self.clock())
                self._entries[key] = _Entry(now + self.ttl, f, now + self.ttl * RENEW_AT)

        future.add_done_callback(done)

    async def renewed(self) -> None:
        """Wait for the outcomes asked again in the background to land (kept when definitive)."""
        await asyncio.gather(*self._renewing.values(), return_exceptions=True)

    async def run(self, key: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """``await call()`` once per key and lifetime; returns what it returned, raises what it raised
        (if definitive). What it returns is kept as long as the outcome: keep it small (the Dry Run
        keeps only a Pod that admission changed)."""
        if self.ttl <= 0:
            self.misses += 1
            return await call()
        now = self.clock()
        entry = self._entries.get(key)
        if entry is not None and entry.expires > now:
            self.hits += 1
            return await asyncio.shield(entry.future)
        self.misses += 1
        self._evict(now)
        future: asyncio.Future[Any] = asyncio.ensure_future(call())
        entry = _Entry(now + self.ttl, future, now + self.ttl * RENEW_AT)
        self._entries[key] = entry
        future.add_done_callback(lambda f: self._settled(key, entry, f))
        return await asyncio.shield(future)

    def _settled(self, key: str, entry: _Entry, future: asyncio.Future[Any]) -> None:
        keep = not future.cancelled() and cacheable(future.exception())
        if not keep and self._entries.get(key) is entry:
            del self._entries[key]

    def _evict(self, now: float) -> None:
        if len(self._entries) < MAX_ENTRIES:
            return
        for k in [k for k, e in self._entries.items() if e.expires <= now and e.future.done()]:
            del self._entries[k]
        while len(self._entries) >= MAX_ENTRIES:
            self._entries.pop(next(iter(self._entries)))


#: how long "this namespace's webhooks look up the owner of such a probe" is remembered (from the
#: refusal that taught it; never extended, so a cluster that changes is relearnt within this time)
TWIN_MEMO_SECONDS = 300.0


def twin_key(namespace: str, kind: str, body: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """(namespace, the probe's kind, its controller owner's apiVersion and kind): what decides
    whether an owner-looking webhook refuses it (Kueue's webhooks act per namespace,
    managedJobsNamespaceSelector, and look up only owners of kinds they know). None: no
    controller owner, nothing to look up."""
    for o in (body.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(o, dict) and o.get("controller") is True:
            return (namespace, kind, str(o.get("apiVersion")), str(o.get("kind")))
    return None


class TwinMemo:
    """Which probes the cluster's webhooks refused because they looked up an owner that exists only
    once the job is stored (webhook.checks.dryrun: the twin). For ``ttl`` seconds such a probe is
    sent as its twin at once: one dry run instead of two on every review on a Kueue cluster. The
    remembered refusal names the webhook in the verdict's details. ``ttl`` 0: remember nothing."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._refusals: dict[tuple[str, str, str, str], tuple[float, ApiError]] = {}

    def __len__(self) -> int:
        return len(self._refusals)

    def get(self, key: tuple[str, str, str, str] | None) -> ApiError | None:
        """The remembered refusal for ``key`` while it is fresh, else None."""
        if key is None or self.ttl <= 0:
            return None
        got = self._refusals.get(key)
        if got is None:
            return None
        if got[0] <= self.clock():
            del self._refusals[key]
            return None
        return got[1]

    def remember(self, key: tuple[str, str, str, str] | None, refusal: ApiError) -> None:
        if key is None or self.ttl <= 0:
            return
        if key not in self._refusals and len(self._refusals) >= MAX_ENTRIES:
            self._refusals.pop(next(iter(self._refusals)))
        self._refusals[key] = (self.clock() + self.ttl, refusal)

    def forget(self, key: tuple[str, str, str, str] | None) -> None:
        if key is not None:
            self._refusals.pop(key, None)
