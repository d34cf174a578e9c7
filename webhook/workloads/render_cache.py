"""The render cache: one Workload per object content, so the same content renders once.

A review renders its object into a Workload (the adapter: the derived JobSet, the run config, the
pod groups); a 200-variation AIPerfSweep costs hundreds of milliseconds of CPU. The same content
comes back: a controller retrying, the apiserver calling again after a dropped connection, the audit
controller judging every stored job again, a dry-run of an UPDATE followed by the UPDATE. This keeps
a bounded LRU of renders, keyed by what the render reads:

* the object (its values, types and order: :func:`canonical`), hashed (SHA-256), without the metadata no adapter
  reads: ``resourceVersion``, ``generation`` and ``managedFields`` for every kind, and ``uid`` and
  ``creationTimestamp`` for the kinds whose adapter never reads them (``KindSpec.unread_metadata``: a
  TrainJob's or a JobSet's render is the same for every create of the same content; such a field
  that is not a string stays in the key, as its render refuses it). An AIPerfJob's render reads both,
  but only to copy them: the uid into ``AIPERF_JOB_UID`` of every container, the run epoch key
  (results_layout.epoch_key_from_body, from the creationTimestamp and the uid) into run_config.json's
  ``run_meta.epoch``. So it is rendered once per content with placeholders for both
  (``KindSpec.per_create``, :class:`_Fill`), and each review gets that render with its own uid and epoch
  filled in: a dry run and the apply that follows, or two creates of the same spec, share one
  render, and each gets the body AIPerf's operator renders for it (tests/test_workload_aiperf.py
  compares both with the operator's goldens). The key then holds, instead of the two fields, the
  epoch's length (the ConfigMap's size is judged against its limit in the render) and whether
  there is a uid (without one no container gets ``AIPERF_JOB_UID``). An AIPerfSweep's render
  reads them in more ways (the children's labels and owner references), so each of its creates is
  a miss, and only a review of the same stored object hits;
* the request's namespace (the default for an object without one);
* the Settings (the same object, or an equal one) and the process environment (AIPerf's settings
  read ``AIPERF_*`` variables from it);
* the cluster objects the render looked up (a TrainJob's (Cluster)TrainingRuntime through the
  runtime lookup): each lookup is recorded with the ``resourceVersion`` of what it returned, and an
  entry is used only when the same lookups now return the same object or one with the same
  ``resourceVersion`` (nothing found then and now counts as the same). Anything else is a miss and
  the entry is replaced.

Only an object the plain-JSON test accepts (webhook.workloads.walks) is cached. A render that raised is never cached, nor one an adapter cut short to keep a review
within its deadline (``Workload.cut_short``). A hit returns a new Workload
around the shared render (its own object, and its own lists and dicts at the top: the checks never
change what is under them, webhook.models.dryrun_probe), so one review cannot change what another
sees.

Bounded twice: at most ``renderCacheEntries`` renders (the setting; 0 turns the cache off) and at
most :data:`MAX_BYTES` of their objects' serialized keys, the least recently used dropped first.
:func:`stats` counts hits and misses (``preflight_webhook_render_cache_total``).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib
import itertools
import json
import marshal
import os
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from webhook._compat import environ_key
from webhook.config import Settings
from webhook.workloads.base import RuntimeLookup, Workload
from webhook.workloads.kinds import kind_spec
from webhook.workloads.walks import is_plain

#: metadata no adapter reads, left out of every key
NEVER_READ = frozenset({"resourceVersion", "generation", "managedFields"})
#: at most this many bytes of the cached objects' serialized keys (the renders are a small multiple)
MAX_BYTES = 32 * 2**20
#: the placeholders, drawn per process from two disjoint alphabets (neither contains the other's
#: characters): the uid's 32 upper-case hex digits, the epoch's lower-case letters g-z (an epoch key
#: is digits and '-'; the placeholder has its length, so every size the render measures is the same)
UID_MARK = secrets.token_hex(16).upper()
EPOCH_MARKS = "".join(secrets.choice("ghijklmnopqrstuvwxyz") for _ in range(24))
#: an epoch key shorter than this is rendered with the object (a short placeholder could match elsewhere)
MIN_EPOCH = 8


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
    #: where the placeholders are, for a render made with them
    fill: _Fill | None = None


@dataclass
class _Create:
    """One review's per-create values, and the object its render is made from (placeholders for them)."""

    uid: str | None
    epoch: str
    marked: dict[str, Any]
    unread: frozenset[str]

    @property
    def epoch_mark(self) -> str:
        return EPOCH_MARKS[: len(self.epoch)]


def _unread_metadata(group_kind: tuple[str, str]) -> frozenset[str]:
    """More metadata the kind's adapter never reads (its KindSpec's ``unread_metadata``: a TrainJob's
    and a JobSet's adapter discard read_metadata's uid and never look at creationTimestamp)."""
    spec = kind_spec(*group_kind)
    return frozenset() if spec is None else spec.unread_metadata


def _per_create(obj: dict[str, Any], group_kind: tuple[str, str]) -> _Create | None:
    """The per-create values of ``obj`` when its render is made with placeholders, else None: the
    kind copies them (its KindSpec's ``per_create``: the function giving the per-create value its render
    copies besides the uid, an AIPerfJob's run epoch key, its adapter's ``epoch=``), the uid is a non-empty string or absent (another uid stays in
    the key and the render), the epoch key is at least MIN_EPOCH long and fits EPOCH_MARKS."""
    spec = kind_spec(*group_kind)
    target = None if spec is None else spec.per_create
    meta = obj.get("metadata")
    if target is None or not isinstance(meta, dict):
        return None
    uid = meta.get("uid")
    if uid is not None and (not isinstance(uid, str) or not uid):
        return None
    epoch = _function(target)(obj)
    if not isinstance(epoch, str) or not MIN_EPOCH <= len(epoch) <= len(EPOCH_MARKS):
        return None
    marked_meta = {k: v for k, v in meta.items() if k != "creationTimestamp"}
    if uid is not None:
        marked_meta["uid"] = UID_MARK
    unread = frozenset({"creationTimestamp", "uid"} if uid is not None else {"creationTimestamp"})
    return _Create(uid, epoch, {**obj, "metadata": marked_meta}, unread)


_FUNCTIONS: dict[str, Callable[[dict[str, Any]], Any]] = {}


def _function(target: str) -> Callable[[dict[str, Any]], Any]:
    """The function "module:name" (imported when first needed: the CLI loads only what it judges)."""
    fn = _FUNCTIONS.get(target)
    if fn is None:
        mod, name = target.split(":")
        fn = _FUNCTIONS[target] = getattr(importlib.import_module(mod), name)
    return fn


class _Fill:
    """Where a render made with placeholders holds them: for each container (dict, list, dataclass)
    on the way to one, the keys (indices, field names) that lead to one. Filling in copies only
    those containers and shares everything else with the cached render.

    Made only when the placeholders are where a copy puts them (:meth:`of` returns None
    otherwise): the uid's as whole string values, the epoch's exactly once in all the string
    values at most (inside run_config.json's text, or its document left unwritten; none when the render
    stopped before it), neither in a key nor in
    a tuple or set."""

    def __init__(self, epoch_mark: str) -> None:
        self.paths: dict[int, list[Any]] = {}
        self.epochs = 0
        self.ok = True
        self._mark = epoch_mark

    @classmethod
    def of(cls, wl: Workload, epoch_mark: str) -> _Fill | None:
        f = cls(epoch_mark)
        seen: dict[int, bool] = {}
        for fld in dataclasses.fields(wl):
            if fld.name not in _OBJECTS and fld.init:
                f._walk(getattr(wl, fld.name), seen)
        return f if f.ok and f.epochs <= 1 else None

    def _has(self, text: str) -> bool:
        if UID_MARK in text:
            self.ok = self.ok and text == UID_MARK
            return True
        n = text.count(self._mark)
        self.epochs += n
        return n > 0

    def _walk(self, x: Any, seen: dict[int, bool]) -> bool:
        if isinstance(x, str):
            return self._has(x)
        i = id(x)
        if i in seen:
            return seen[i]
        seen[i] = False
        keys: list[Any] = []
        if isinstance(x, dict):
            for k, v in x.items():
                if isinstance(k, str) and (UID_MARK in k or self._mark in k):
                    self.ok = False
                if self._walk(v, seen):
                    keys.append(k)
        elif isinstance(x, list):
            keys = [j for j, v in enumerate(x) if self._walk(v, seen)]
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            keys = [fld.name for fld in dataclasses.fields(x) if self._walk(getattr(x, fld.name), seen)]
        elif isinstance(x, tuple | set | frozenset):
            self.ok = self.ok and not any(self._walk(v, seen) for v in x)
        if keys:
            self.paths[i] = keys
            seen[i] = True
        return bool(keys)

    def apply(self, x: Any, uid: str | None, epoch_mark: str, epoch: str, memo: dict[int, Any]) -> Any:
        """``x`` with the placeholders replaced by ``uid`` and ``epoch`` (``memo``: what is already
        filled in, so an object reached twice, a pod group's spec and its JobSet's, stays one)."""
        if isinstance(x, str):
            return uid if x == UID_MARK else x.replace(epoch_mark, epoch)
        keys = self.paths.get(id(x))
        if keys is None:
            return x
        done = memo.get(id(x))
        if done is not None:
            return done
        if isinstance(x, dict | list):
            out: Any = x.copy()
            memo[id(x)] = out
            for k in keys:
                out[k] = self.apply(x[k], uid, epoch_mark, epoch, memo)
            return out
        out = dataclasses.replace(x, **{k: self.apply(getattr(x, k), uid, epoch_mark, epoch, memo) for k in keys})
        memo[id(x)] = out
        return out


def _environ() -> Hashable:
    """The process environment as it is now (CPython's own mapping behind os.environ: no decoding)."""
    key = environ_key()
    return key if key is not None else tuple(sorted(os.environ.items()))


#: the ids of the renders made (Workload.render_id): the same id is the same render
_RENDER_IDS = itertools.count(1)

_T = TypeVar("_T")


class PerRender(Generic[_T]):
    """What a check derives from a render alone (not its uid or run epoch, the only values a hit fills in:
    `_Fill`), kept by Workload.render_id: at most `entries`, the least recently used dropped first. A Workload
    without a render_id (cut short, not cached, the pods as admitted) is derived each time, and so is a value
    `keep` refuses."""

    def __init__(self, entries: int, keep: Callable[[_T], bool] | None = None) -> None:
        self.entries = entries
        self.keep = keep
        self._kept: OrderedDict[int, _T] = OrderedDict()

    def __contains__(self, wl: Workload) -> bool:
        return wl.render_id is not None and wl.render_id in self._kept

    def get(self, wl: Workload, make: Callable[[Workload], _T]) -> _T:
        rid = wl.render_id
        if rid is not None and rid in self._kept:
            self._kept.move_to_end(rid)
            return self._kept[rid]
        value = make(wl)
        if rid is not None and (self.keep is None or self.keep(value)):
            self._kept[rid] = value
            while len(self._kept) > self.entries:
                self._kept.popitem(last=False)
        return value


def _cache_text(
    obj: dict[str, Any], group_kind: tuple[str, str], namespace: str | None
) -> tuple[bytes, _Create | None]:
    """(the text the cache key is the digest of, the per-create values when the render is made with
    placeholders for them; None: with the object's own values)."""
    create = _per_create(obj, group_kind)
    if create is not None:
        # the epoch's length and whether there is a uid: what the render reads of the two
        text = b"p%d:%d:" % (len(create.epoch), create.uid is not None) + canonical(obj, create.unread, namespace)
        if UID_MARK.encode() in text or create.epoch_mark.encode() in text:
            create = None  # the object holds a placeholder: rendered with its own values
    if create is None:
        text = canonical(obj, _unread_metadata(group_kind), namespace)
    return text, create


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
        build: Callable[..., Workload | None],
        *,
        settings: Settings,
        runtime_lookup: RuntimeLookup | None,
        namespace: str | None,
    ) -> Workload | None:
        """``build(lookup)``'s Workload for ``obj``, from the cache when its inputs are the same."""
        limit = settings.render_cache_entries
        if limit <= 0 or not is_plain(obj):
            return build(runtime_lookup)
        text, create = _cache_text(obj, group_kind, namespace)
        key = hashlib.sha256(text).digest()
        environ = _environ()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is not None and self._valid(entry, settings, environ, runtime_lookup):
            with self._lock:
                self.hits += 1
            return _fresh(entry.workload, obj, entry.fill, create)
        recorded: list[_Lookup] = []
        lookup = None if runtime_lookup is None else _recording(runtime_lookup, recorded)
        fill = None
        if create is not None:
            try:
                wl = build(lookup, obj=create.marked, epoch=create.epoch_mark)
                fill = None if wl is None else _Fill.of(wl, create.epoch_mark)
                usable = wl is None or fill is not None
            except Exception:  # the render of the object itself raises what the review sees
                usable = False
            if not usable:  # an error, or the placeholders not only where a copy puts them: not cached
                with self._lock:
                    self.misses += 1
                return build(runtime_lookup)
        else:
            wl = build(lookup)
        with self._lock:
            self.misses += 1
            if wl is None:
                return None
            if wl.cut_short:  # a render cut short by one review's deadline is not the object's render
                return _fresh(wl, obj, fill, create)
            wl.render_id = next(_RENDER_IDS)
            self._keep(key, _Entry(settings, environ, recorded, wl, len(text), fill), limit)
        return _fresh(wl, obj, fill, create)

    def _keep(self, key: bytes, entry: _Entry, limit: int) -> None:
        """Store `entry` under `key` when its text is within MAX_BYTES, then drop the least recently used
        entries over `limit` or MAX_BYTES (the lock held)."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        if entry.nbytes <= MAX_BYTES:
            self._entries[key] = entry
            self._bytes += entry.nbytes
        while self._entries and (len(self._entries) > limit or self._bytes > MAX_BYTES):
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.nbytes

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
    order only), as the Dry Run cache keys its bodies (webhook/models/dryrun_cache.py content_key):
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


def _fresh(wl: Workload, obj: dict[str, Any], fill: _Fill | None = None, create: _Create | None = None) -> Workload:
    """A Workload of its own around a shared render: the review's object, its own top-level lists,
    dicts and sets (a shallow copy of every other field that holds one), and, for a render made
    with placeholders, this review's uid and epoch filled in (new containers on their way only)."""
    changes: dict[str, Any] = {"obj": obj}
    memo: dict[int, Any] = {}
    for f in dataclasses.fields(wl):
        if f.name in _OBJECTS or not f.init:
            continue
        value = getattr(wl, f.name)
        if fill is not None and create is not None and id(value) in fill.paths:
            changes[f.name] = fill.apply(value, create.uid, create.epoch_mark, create.epoch, memo)
        elif isinstance(value, list | dict | set):
            changes[f.name] = copy.copy(value)
    return dataclasses.replace(wl, **changes)


#: the process's cache (the server, the audit controller and the CLI share one per process)
CACHE = RenderCache()


def stats() -> tuple[int, int]:
    """(hits, misses) since the process started."""
    return CACHE.hits, CACHE.misses
