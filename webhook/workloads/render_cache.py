"""The render cache: one Workload per object content, so the same content renders once.

A review renders its object into a Workload (the adapter: the derived JobSet, the run config, the
pod groups); a 200-variation AIPerfSweep costs hundreds of milliseconds of CPU. The same content
comes back: a controller retrying, the apiserver calling again after a dropped connection, the audit
controller judging every stored job again, a dry-run of an UPDATE followed by the UPDATE. This keeps
a bounded LRU of renders, keyed by what the render reads:

* the object (its values, types and order: :func:`canonical`), hashed (SHA-256), without the metadata no adapter
  reads: ``resourceVersion``, ``generation`` and ``managedFields`` for every kind, and ``uid`` and
  ``creationTimestamp`` for the kinds whose adapter never reads them (:data:`UNREAD_METADATA`: a
  TrainJob's or a JobSet's render is the same for every create of the same content; such a field
  that is not a string stays in the key, as its render refuses it). An AIPerfJob's
  and an AIPerfSweep's render reads both (``AIPERF_JOB_UID``, the run epoch key, the sweep's labels and
  owner references), so each create of those kinds, which gets a new uid from the apiserver, is a
  miss, and only a review of the same stored object hits;
* the request's namespace (the default for an object without one);
* the Settings (the same object, or an equal one) and the process environment (AIPerf's settings
  read ``AIPERF_*`` variables from it);
* the cluster objects the render looked up (a TrainJob's (Cluster)TrainingRuntime through the
  runtime lookup): each lookup is recorded with the ``resourceVersion`` of what it returned, and an
  entry is used only when the same lookups now return the same object or one with the same
  ``resourceVersion`` (nothing found then and now counts as the same). Anything else is a miss and
  the entry is replaced.

Only an object the plain-JSON test accepts (webhook.workloads.walks) is cached. A render that raised is never cached. A hit returns a new Workload
around the shared render (its own object, and its own lists and dicts at the top: the checks never
change what is under them, webhook.checks.dryrun_probe), so one review cannot change what another
sees.

Bounded twice: at most ``renderCacheEntries`` renders (the setting; 0 turns the cache off) and at
most :data:`MAX_BYTES` of their objects' serialized keys, the least recently used dropped first.
:func:`stats` counts hits and misses (``preflight_webhook_render_cache_total``).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import marshal
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from webhook.config import Settings
from webhook.workloads.base import RuntimeLookup, Workload
from webhook.workloads.walks import is_plain

#: metadata no adapter reads, left out of every key
NEVER_READ = frozenset({"resourceVersion", "generation", "managedFields"})
#: (group, kind) → more metadata its adapter never reads (webhook/workloads/trainjob/adapter.py and
#: jobset/adapter.py discard read_metadata's uid and never look at creationTimestamp)
UNREAD_METADATA: dict[tuple[str, str], frozenset[str]] = {
    ("trainer.kubeflow.org", "TrainJob"): frozenset({"uid", "creationTimestamp"}),
    ("jobset.x-k8s.io", "JobSet"): frozenset({"uid", "creationTimestamp"}),
}
#: at most this many bytes of the cached objects' serialized keys (the renders are a small multiple)
MAX_BYTES = 32 * 2**20


def _version(found: dict[str, Any] | None) -> str | None:
    meta = found.get("metadata") if isinstance(found, dict) else None
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return rv if isinstance(rv, str) and rv else None


@dataclass
class _Lookup:
    args: tuple[str, str, str]
    found: dict[str, Any] | None
    version: str | None

    def same(self, now: dict[str, Any] | None) -> bool:
        """The lookup answers now what it answered at render time."""
        if now is None or self.found is None:
            return now is None and self.found is None
        return now is self.found or (self.version is not None and _version(now) == self.version)


@dataclass
class _Entry:
    settings: Settings
    environ: Hashable
    lookups: list[_Lookup]
    workload: Workload
    nbytes: int


def _environ() -> Hashable:
    """The process environment as it is now (CPython's own mapping behind os.environ: no decoding)."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return tuple(data.items())
    return tuple(sorted(os.environ.items()))


class RenderCache:
    """A bounded LRU of renders by content (see the module docstring). Thread-safe: the server renders
    a large object in a worker thread."""

    def __init__(self) -> None:
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def render(
        self,
        obj: dict[str, Any],
        group_kind: tuple[str, str],
        build: Callable[[RuntimeLookup | None], Workload | None],
        *,
        settings: Settings,
        runtime_lookup: RuntimeLookup | None,
        namespace: str | None,
    ) -> Workload | None:
        """``build(lookup)``'s Workload for ``obj``, from the cache when its inputs are the same."""
        limit = settings.render_cache_entries
        if limit <= 0 or not is_plain(obj):
            return build(runtime_lookup)
        text = canonical(obj, UNREAD_METADATA.get(group_kind, frozenset()), namespace)
        key = hashlib.sha256(text).digest()
        environ = _environ()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is not None and self._valid(entry, settings, environ, runtime_lookup):
            with self._lock:
                self.hits += 1
            return _fresh(entry.workload, obj)
        recorded: list[_Lookup] = []
        lookup = None if runtime_lookup is None else _recording(runtime_lookup, recorded)
        wl = build(lookup)
        with self._lock:
            self.misses += 1
            if wl is None:
                return None
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            if len(text) <= MAX_BYTES:
                self._entries[key] = _Entry(settings, environ, recorded, wl, len(text))
                self._bytes += len(text)
            while self._entries and (len(self._entries) > limit or self._bytes > MAX_BYTES):
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= dropped.nbytes
        return _fresh(wl, obj)

    @staticmethod
    def _valid(entry: _Entry, settings: Settings, environ: Hashable, runtime_lookup: RuntimeLookup | None) -> bool:
        if entry.settings is not settings and entry.settings != settings:
            return False
        if entry.environ != environ:
            return False
        if entry.lookups and runtime_lookup is None:
            return False
        return all(r.same(runtime_lookup(*r.args)) for r in entry.lookups) if runtime_lookup else True


def canonical(obj: dict[str, Any], unread: frozenset[str], namespace: str | None) -> bytes:
    """The key's bytes: the request's namespace and ``obj`` without the metadata its render does not read.

    marshal (format 2: no back-references, so the bytes depend on the values, their types and their
    order only), as the Dry Run cache keys its bodies (webhook/checks/dryrun_cache.py content_key):
    several times faster than sorted JSON, which cost 2.6 % of the webhook's CPU in the Kyverno run
    (docs/benchmarks/vs-kyverno.md). It is order-sensitive: the same maps in another key order are a
    miss, never a false hit (the apiserver sends one order). Anything marshal cannot write falls back
    to sorted JSON."""
    meta = obj.get("metadata")
    drop = NEVER_READ | unread
    if isinstance(meta, dict) and not drop.isdisjoint(meta):
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k not in drop or _kept(k, v, unread)}}
    try:
        return b"m" + marshal.dumps([namespace, obj], 2)
    except ValueError:
        return b"j" + json.dumps([namespace, obj], sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _kept(key: str, value: Any, unread: frozenset[str]) -> bool:
    """An unread field stays in the key when it is not a string: the adapter checks its shape
    (shape.read_metadata refuses a uid that is not a string), so a TrainJob with `uid: 5` must render,
    and be refused, on its own, never be answered with the render of the same content with a real
    uid. The fields of NEVER_READ go whatever their shape."""
    return key in unread and not isinstance(value, str)


def _recording(lookup: RuntimeLookup, into: list[_Lookup]) -> RuntimeLookup:
    def recorded(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = lookup(kind, namespace, name)
        into.append(_Lookup((kind, namespace, name), found, _version(found)))
        return found

    return recorded


#: Workload fields that hold a Kubernetes object itself (the review's, the runtime found): never copied
_OBJECTS = frozenset({"obj", "runtime"})


def _fresh(wl: Workload, obj: dict[str, Any]) -> Workload:
    """A Workload of its own around a shared render: the review's object, its own top-level lists,
    dicts and sets (a shallow copy of every other field that holds one)."""
    changes: dict[str, Any] = {"obj": obj}
    for f in dataclasses.fields(wl):
        if f.name in _OBJECTS or not f.init:
            continue
        value = getattr(wl, f.name)
        if isinstance(value, list | dict | set):
            changes[f.name] = copy.copy(value)
    return dataclasses.replace(wl, **changes)


#: the process's cache (the server, the audit controller and the CLI share one per process)
CACHE = RenderCache()


def stats() -> tuple[int, int]:
    """(hits, misses) since the process started."""
    return CACHE.hits, CACHE.misses
