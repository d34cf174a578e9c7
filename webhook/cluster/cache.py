"""Watch-backed caches: the objects checks read on every request, kept in memory.

A `Reflector` lists a resource once (paged), then follows a watch from the list's
resourceVersion with bookmarks. It relists only when the apiserver says the version is
gone (410) — never per request — and backs off with jitter on errors, keeping the last
state so checks still answer while the apiserver is away (with `age` growing).

`ResourceCache` is the pure part: plain dicts keyed by (namespace, name), a
per-namespace index, and the bookkeeping that says how fresh the data is. Objects are
slimmed on the way in (managedFields, last-applied annotations, node image lists) so
tens of thousands of objects stay cheap.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import itertools
import logging
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.kube import ApiError, Permission

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace or "", name)

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True)
class CacheSpec:
    """One cached resource: where it lives and whether it is namespaced."""

    resource: str
    group: str
    version: str
    namespaced: bool

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            return f"{base}/namespaces/{namespace}/{self.resource}"
        return f"{base}/{self.resource}"


CORE = ""
TRAINER = "trainer.kubeflow.org"
KUEUE = "kueue.x-k8s.io"
SCHEDULING = "scheduling.k8s.io"
KARPENTER = "karpenter.sh"
NETWORKING = "networking.k8s.io"
STORAGE = "storage.k8s.io"
RESOURCE = "resource.k8s.io"

#: every cache the view keeps, in start order
CACHE_SPECS: tuple[CacheSpec, ...] = (
    CacheSpec("namespaces", CORE, "v1", False),
    CacheSpec("resourcequotas", CORE, "v1", True),
    CacheSpec("limitranges", CORE, "v1", True),
    CacheSpec("serviceaccounts", CORE, "v1", True),
    CacheSpec("nodes", CORE, "v1", False),
    CacheSpec("services", CORE, "v1", True),
    CacheSpec("priorityclasses", SCHEDULING, "v1", False),  # the globalDefault, for quota scopes
    CacheSpec("clustertrainingruntimes", TRAINER, "v1alpha1", False),
    CacheSpec("trainingruntimes", TRAINER, "v1alpha1", True),
    CacheSpec("localqueues", KUEUE, "v1beta2", True),
    CacheSpec("clusterqueues", KUEUE, "v1beta2", False),
    CacheSpec("admissionchecks", KUEUE, "v1beta2", False),
    CacheSpec("cohorts", KUEUE, "v1beta2", False),
    CacheSpec("resourceflavors", KUEUE, "v1beta2", False),  # nodeLabels/nodeTaints: could a flavor place a pod
    CacheSpec("nodepools", KARPENTER, "v1", False),  # Karpenter: could a NodePool add a node for a pod
    CacheSpec("networkpolicies", NETWORKING, "v1", True),  # would the job's own traffic be dropped
    CacheSpec("storageclasses", STORAGE, "v1", False),  # Volume Claims: the default class, provisioners
    CacheSpec("persistentvolumes", CORE, "v1", False),  # Volume Claims: could a PV bind a claim no class provisions
    # Dynamic Resource Allocation: the classes, the devices the drivers publish, the claims
    # (their allocations take devices) and the templates pods make claims from
    CacheSpec("deviceclasses", RESOURCE, "v1", False),
    CacheSpec("resourceslices", RESOURCE, "v1", False),
    CacheSpec("resourceclaims", RESOURCE, "v1", True),
    CacheSpec("resourceclaimtemplates", RESOURCE, "v1", True),
)
SPECS_BY_RESOURCE = {s.resource: s for s in CACHE_SPECS}


#: Accept headers that ask the apiserver for metadata only (no spec, no data): a list, and a watch's events
META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
META_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


# --------------------------------------------------------------------------- slimming


def _slim_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    meta.pop("managedFields", None)
    ann = meta.get("annotations")
    if isinstance(ann, dict) and LAST_APPLIED in ann:
        ann = {k: v for k, v in ann.items() if k != LAST_APPLIED}
        if ann:
            meta["annotations"] = ann
        else:
            meta.pop("annotations", None)
    return meta


#: kinds held as a projection on what their readers read, (metadata fields, top-level fields): who
#: reads them (grep `cached("<kind>"`): Service Account and Image Pull/Reference read a ServiceAccount's
#: existence and imagePullSecrets; Endpoint Service and Network Policies a Service's spec; the quota model
#: (webhook/models/quota.py) a ResourceQuota's spec and status, the LimitRange defaults its spec; Pod
#: Security, Network Policies, Kueue and the namespace mode a Namespace's labels; the dry-run probe's
#: cache versions (checks/dryrun.py) and the audit controller's relist diff the resourceVersion of each
_NS_META = ("name", "namespace", "resourceVersion")
PROJECTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "serviceaccounts": (_NS_META, ("imagePullSecrets",)),
    "services": (_NS_META, ("spec",)),
    "resourcequotas": (_NS_META, ("spec", "status")),
    "limitranges": (_NS_META, ("spec",)),
    "namespaces": (("name", "resourceVersion", "labels"), ()),
}


def _project(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` on the fields PROJECTIONS keeps for its kind: the same dict, emptied of the others."""
    meta_keys, keys = PROJECTIONS[resource]
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        kept_meta = {k: meta[k] for k in meta_keys if k in meta}
        if isinstance(kept_meta.get("namespace"), str):  # five kinds' objects in each namespace name it
            kept_meta["namespace"] = sys.intern(kept_meta["namespace"])
        if isinstance(kept_meta.get("name"), str) and resource != "namespaces":  # "default" in each one
            kept_meta["name"] = sys.intern(kept_meta["name"])
        if isinstance(kept_meta.get("labels"), dict):
            kept_meta["labels"] = share_map(kept_meta["labels"])
    kept = {k: obj[k] for k in keys if k in obj}
    obj.clear()
    if isinstance(meta, dict):
        obj["metadata"] = kept_meta
    obj.update(kept)
    return obj


#: identical small flat maps (labels, a quota's hard and used, a node's capacity) held once; keyed by
#: their items in order (a shared map iterates as each copy did); cleared when full, so it stays bounded
_MAPS: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
MAPS_MAX = 4096
_SHARED_MAP_MAX = 16


def share_map(m: dict[str, Any]) -> dict[str, Any]:
    """The one held copy of a small map of strings to strings: an equal map held before, else a copy of
    `m` with its keys and short values interned (so even a map seen once shares its strings). Cached
    objects are never mutated, so a map read by several is safe. Anything else is returned as it is."""
    if len(m) > _SHARED_MAP_MAX:
        return m
    items: list[tuple[str, str]] = []
    for k, v in m.items():
        if type(k) is not str or type(v) is not str:
            return m
        items.append((sys.intern(k), sys.intern(v) if len(v) <= 64 else v))
    key = tuple(items)
    got = _MAPS.get(key)
    if got is None:
        if len(_MAPS) >= MAPS_MAX:
            _MAPS.clear()
        got = _MAPS[key] = dict(items)
    return got


def _share_node(obj: dict[str, Any]) -> None:
    """A Node's labels, capacity and allocatable: the same few shapes across a pool of nodes."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("labels"), dict):
        meta["labels"] = share_map(meta["labels"])
    status = obj.get("status")
    if isinstance(status, dict):
        for k in ("capacity", "allocatable"):
            if isinstance(status.get(k), dict):
                status[k] = share_map(status[k])


def _share_quota(obj: dict[str, Any]) -> None:
    for part, keys in (("spec", ("hard",)), ("status", ("hard", "used"))):
        d = obj.get(part)
        if isinstance(d, dict):
            for k in keys:
                if isinstance(d.get(k), dict):
                    d[k] = share_map(d[k])


def slim(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Drop what no check reads and what costs the most memory. Mutates and returns `obj`."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        _slim_metadata(meta)
    if resource in PROJECTIONS:
        _project(resource, obj)
    if resource == "nodes":
        _share_node(obj)
        status = obj.get("status")
        if isinstance(status, dict):
            for big in ("images", "volumesInUse", "volumesAttached", "daemonEndpoints", "config", "features"):
                status.pop(big, None)
    elif resource == "services":
        spec = obj.get("spec")
        if isinstance(spec, dict):
            obj["spec"] = {k: spec[k] for k in ("type", "ports", "selector", "clusterIP", "externalName") if k in spec}
            if isinstance(obj["spec"].get("selector"), dict):
                obj["spec"]["selector"] = share_map(obj["spec"]["selector"])
    elif resource == "resourcequotas":
        _share_quota(obj)
    elif resource == "nodepools":
        spec = obj.get("spec")
        if isinstance(spec, dict):
            obj["spec"] = {k: spec[k] for k in ("template",) if k in spec}
        obj.pop("status", None)
    elif resource in ("resourceflavors", "networkpolicies"):
        obj.pop("status", None)
    elif resource == "persistentvolumes":
        spec = obj.get("spec")
        if isinstance(spec, dict):  # the volume source (csi attributes, mount options) is not read
            keep = ("capacity", "accessModes", "volumeMode", "storageClassName", "claimRef", "nodeAffinity")
            obj["spec"] = {k: spec[k] for k in (*keep, "volumeAttributesClassName") if k in spec}
        status = obj.get("status")
        if isinstance(status, dict):
            obj["status"] = {k: status[k] for k in ("phase",) if k in status}
    elif resource == "resourceslices":
        _slim_slice(obj)
    elif resource == "resourceclaims":
        status = obj.get("status")
        if isinstance(status, dict):  # the drivers' per-device status (network data) is not read
            obj["status"] = {k: status[k] for k in ("allocation", "reservedFor") if k in status}
    return obj


#: the ResourceSlice fields Device Allocation reads (webhook/models/dra/allocate.py: GatherPools'
#: targeting, the pool, the devices); a device's capacity is not read (a selector naming capacity is
#: not evaluated), nor are the metadata beyond what names one version of the slice
SLICE_SPEC = (
    "driver",
    "pool",
    "nodeName",
    "allNodes",
    "nodeSelector",
    "perDeviceNodeSelection",
    "sharedCounters",
    "devices",
)
SLICE_DEVICE = ("name", "attributes", "taints", "consumesCounters", "bindingConditions", "allowMultipleAllocations",
                "nodeName", "nodeSelector", "allNodes")  # fmt: skip
_SLICE_META = ("name", "uid", "resourceVersion")
#: attribute values shared between devices: ("string", "NVIDIA H100 80GB HBM3") -> one dict for all
#: devices that carry it (cached objects are never mutated); cleared when full, so it stays bounded
_VALUES: dict[tuple[str, Any], dict[str, Any]] = {}
VALUES_MAX = 16384


def _shared_value(attr: Any) -> Any:
    if not isinstance(attr, dict) or len(attr) != 1:
        return attr
    ((kind, value),) = attr.items()
    if not isinstance(value, (str, int, bool)):
        return attr
    key = (kind, value)
    got = _VALUES.get(key)
    if got is None:
        if len(_VALUES) >= VALUES_MAX:
            _VALUES.clear()
        got = _VALUES[key] = attr
    return got


def _slim_slice(obj: dict[str, Any]) -> None:
    """A projection of a ResourceSlice on what the check reads: 30 KiB of a slice of 8 GPUs as NVIDIA's
    driver publishes them becomes ~9 KiB (bench/scale.py --in-process); attribute names and the
    values devices share (model, architecture, versions) are held once."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        obj["metadata"] = {k: meta[k] for k in _SLICE_META if k in meta}
    obj.pop("status", None)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec = obj["spec"] = {k: spec[k] for k in SLICE_SPEC if k in spec}
    devices = spec.get("devices")
    if not isinstance(devices, list):
        return
    out: list[Any] = []
    for d in devices:
        if not isinstance(d, dict):
            out.append(d)
            continue
        d = {k: d[k] for k in SLICE_DEVICE if k in d}
        attrs = d.get("attributes")
        if isinstance(attrs, dict):
            d["attributes"] = {(sys.intern(k) if isinstance(k, str) else k): _shared_value(v) for k, v in attrs.items()}
        out.append(d)
    spec["devices"] = out


def key_of(obj: dict[str, Any]) -> Key | None:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    return (meta.get("namespace") or "", name)


def resource_version(obj: dict[str, Any]) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return rv if isinstance(rv, str) and rv else None


# --------------------------------------------------------------------------- the store

_GENERATIONS = itertools.count(1)


class ResourceCache:
    """Objects of one resource by namespace, then name; `objects()` lists them namespace by namespace.

    `synced` turns True after the first complete list and stays True (later outages keep
    the last state). `last_ok` is the monotonic time of the last evidence that the data
    was current: a list, an opened watch, an event, a bookmark, a clean end of a watch.
    """

    def __init__(self, resource: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.resource = resource
        self._clock = clock
        #: namespace ("" for a cluster-scoped object) -> name -> object: the one index (a second one by
        #: (namespace, name) cost ~6 MiB at Kubernetes' thresholds, its keys and its table)
        self._by_ns: dict[str, dict[str, dict[str, Any]]] = {}
        self._count = 0
        self.resource_version: str | None = None
        self.synced = False
        self.last_ok: float | None = None
        self.last_error: str = ""
        self.relists = 0
        #: counts lists and ADDED/MODIFIED/DELETED events: something derived from the objects
        #: (e.g. which namespaces exist) is current while this number is the one it saw
        self.changes = 0
        #: this cache among every one the process made: (generation, changes) names one state
        self.generation = next(_GENERATIONS)
        #: called after every change (list or event); used to wait for a state, never polled
        self.listeners: list[Callable[[], None]] = []
        #: called after `listeners` with (event type, object) for each object a change ADDED, MODIFIED or
        #: DELETED: every watch event, and across a relist the difference by resourceVersion (never for the
        #: first list). One watch, many handlers, as client-go's shared informers
        #: (k8s.io/client-go tools/cache/shared_informer.go AddEventHandler): the audit controller follows
        #: the view's caches this way instead of a second watch of the same kind
        self.object_listeners: list[Callable[[str, dict[str, Any]], None]] = []

    def __len__(self) -> int:
        return self._count

    # --- reads
    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        names = self._by_ns.get(namespace or "")
        return None if names is None else names.get(name)

    def objects(self, namespace: str | None = None) -> list[dict[str, Any]]:
        if namespace is None:
            return [o for names in self._by_ns.values() for o in names.values()]
        return list(self._by_ns.get(namespace, {}).values())

    def age(self) -> float | None:
        return None if self.last_ok is None else max(0.0, self._clock() - self.last_ok)

    # --- writes
    def touch(self) -> None:
        self.last_ok = self._clock()
        self.last_error = ""

    def replace(self, items: list[dict[str, Any]], rv: str | None, *, slimmed: bool = False) -> None:
        """The result of a complete list: the new truth, whatever was there before. `slimmed`: the
        items went through :func:`slim` already (the reflector slims each page as it arrives)."""
        before = self._versions() if self.synced and self.object_listeners else None
        self._by_ns.clear()
        self._count = 0
        for obj in items:
            self._put(obj, slimmed=slimmed)
        self.resource_version = rv
        self.changes += 1
        if self.synced:
            self.relists += 1
        self.synced = True
        self.touch()
        self._notify()
        if before is not None:
            self._tell_relisted(before)

    def _versions(self) -> dict[tuple[str, str], tuple[str | None, dict[str, Any]]]:
        return {(ns, n): (resource_version(o), o) for ns, names in self._by_ns.items() for n, o in names.items()}

    def _tell_relisted(self, before: dict[tuple[str, str], tuple[str | None, dict[str, Any]]]) -> None:
        """Tell `object_listeners` what a relist changed: created, changed (another resourceVersion), deleted."""
        for ns, names in list(self._by_ns.items()):
            for n, obj in list(names.items()):
                old = before.pop((ns, n), None)
                if old is None:
                    self._tell("ADDED", obj)
                elif old[0] != resource_version(obj):
                    self._tell("MODIFIED", obj)
        for _, obj in before.values():
            self._tell("DELETED", obj)

    def _tell(self, event_type: str, obj: dict[str, Any]) -> None:
        for fn in list(self.object_listeners):
            fn(event_type, obj)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED, BOOKMARK). ERROR is the reflector's job."""
        rv = resource_version(obj)
        if event_type in ("ADDED", "MODIFIED"):
            self._put(obj)
            self.changes += 1
        elif event_type == "DELETED":
            self.changes += 1
            key = key_of(obj)
            if key is not None:
                ns = self._by_ns.get(key[0])
                if ns is not None and ns.pop(key[1], None) is not None:
                    self._count -= 1
                    if not ns:
                        del self._by_ns[key[0]]
        elif event_type != "BOOKMARK":
            return
        if rv:
            self.resource_version = rv
        self.touch()
        self._notify()
        if event_type != "BOOKMARK":
            self._tell(event_type, obj)

    def _notify(self) -> None:
        for fn in list(self.listeners):
            fn()

    def _put(self, obj: dict[str, Any], *, slimmed: bool = False) -> None:
        key = key_of(obj)
        if key is None:
            return
        if not slimmed:
            obj = slim(self.resource, obj)
        names = self._by_ns.setdefault(key[0], {})
        if key[1] not in names:
            self._count += 1
        names[key[1]] = obj


# --------------------------------------------------------------------------- backoff


def backoff_delay(
    attempt: int, *, base: float = 0.5, cap: float = 30.0, rand: Callable[[], float] = random.random
) -> float:
    """Delay before retry number `attempt` (0-based): exponential, capped, "equal jitter".

    Half of the exponential step is fixed and half is random, so a fleet of replicas that
    lost the apiserver together does not come back in lockstep, and no delay is ~0.
    """
    step = min(cap, base * (2 ** max(0, attempt)))
    return step / 2 + rand() * step / 2


# --------------------------------------------------------------------------- the collector


def freeze_heap() -> None:
    """Move every object alive now, the caches just listed among them, out of the cyclic collector's way.

    CPython's collector (docs.python.org/3/library/gc.html) walks every tracked container of a
    generation when it collects it; a full collection walks them all. At Kubernetes' scalability
    thresholds the caches hold ~250,000 tracked containers and a full collection took 175 ms
    (docs/benchmarks/cluster.md), a stall for every review in flight. `gc.freeze()` moves them to
    the permanent generation, which collections ignore (the gc docs: "Freeze all the objects
    tracked by the garbage collector; move them to a permanent generation and ignore them in all
    the future collections"); reference counting still frees a frozen object that is replaced, as a
    cache entry is on every change, so only reference cycles among frozen objects would stay, and the
    caches hold plain JSON, which has none. A collection of the young generations first keeps the
    garbage cycles made so far out of the permanent one. Called after every complete list (the
    start-up's and each relist after 410 Gone), so a relisted cache is frozen too."""
    gc.collect(1)
    gc.freeze()


def trim_heap() -> bool:
    """Give the C heap's free pages back to the system: glibc's `malloc_trim(0)` (man 3 malloc_trim:
    "attempts to release free memory from the heap ... by calling madvise(2) with MADV_DONTNEED").

    Python frees a large object (a report's JSON, an apiserver response: anything over 512 bytes
    is a C malloc) into glibc's free lists, which the process keeps: its RSS, what the kubelet
    counts against the memory limit, stays at the peak of the last burst. Called after each full
    scan of the audit controller, whose burst is a scan's responses and Report bodies. False where
    the C library has no `malloc_trim` (musl, macOS): nothing is released there."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return True


# --------------------------------------------------------------------------- reflector


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone): relist."""


def event_action(event: dict[str, Any]) -> str:
    """What the reflector does with one watch event: "apply", "relist" (410) or "error"."""
    etype = event.get("type")
    if etype in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
        return "apply" if isinstance(event.get("object"), dict) else "error"
    if etype == "ERROR":
        status = event.get("object") or {}
        code = status.get("code") if isinstance(status, dict) else None
        reason = status.get("reason") if isinstance(status, dict) else None
        return "relist" if code == 410 or reason in ("Expired", "Gone") else "error"
    return "error"


class Reflector:
    """Keeps one ResourceCache in step with the apiserver, forever, in the background."""

    PAGE = 500

    def __init__(
        self,
        spec: CacheSpec,
        client: Any,  # KubeClient (duck-typed so tests of the loop can pass a fake)
        *,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
        watch_seconds: tuple[int, int] = (50, 70),
        list_timeout: float = 60.0,
        after_list: Callable[[], None] | None = None,
        namespace: str | None = None,
    ) -> None:
        self.spec = spec
        #: watch this one namespace (a Role's grant there) instead of the whole cluster
        self.namespace = namespace
        #: called after every complete list has replaced the cache (e.g. :func:`freeze_heap`)
        self.after_list = after_list
        self.client = client
        self.cache = ResourceCache(spec.resource, clock=clock)
        self._rand = rand
        self._watch_seconds = watch_seconds
        self._list_timeout = list_timeout
        self.synced_event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.failures = 0
        #: set while the apiserver answers 403 to this cache's list/watch ("" otherwise)
        self.denied = ""

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def list_once(self) -> None:
        """A complete, paged list; replaces the cache only when every page arrived.

        Each page's objects are slimmed as the page arrives, not once the list is complete: holding
        a whole resource unslimmed (managedFields, node image lists, the drivers' slice fields) until
        the last page made the peak and left the heap fragmented, the slimmed objects pinning the
        pages the dropped fields were freed from. At Kubernetes' thresholds with 40,000 DRA devices
        that was ~220 MiB of RSS (docs/benchmarks/cluster.md, "Memory at the thresholds")."""
        items: list[dict[str, Any]] = []
        cont: str | None = None
        rv: str | None = None
        resource = self.spec.resource
        while True:
            doc = await self.client.request(
                "GET",
                self.spec.path(self.namespace),
                query={"limit": self.PAGE, "continue": cont},
                timeout=self._list_timeout,
                kind=f"LIST {self.spec.resource}",
            )
            meta = doc.get("metadata") or {}
            objs = doc.get("items") or []
            del doc
            for obj in objs:
                if isinstance(obj, dict):
                    items.append(slim(resource, obj))
            del objs
            rv = meta.get("resourceVersion") or rv
            cont = meta.get("continue") or None
            if not cont:
                break
        self.cache.replace(items, rv, slimmed=True)
        self.synced_event.set()
        if self.after_list is not None:
            self.after_list()

    async def watch_once(self) -> None:
        """Follow one watch until the server ends it (normal) or it fails (raises)."""
        lo, hi = self._watch_seconds
        seconds = int(lo + self._rand() * (hi - lo))
        query = {
            "watch": "true",
            "resourceVersion": self.cache.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": seconds,
        }
        first = True
        async for event in self.client.stream(
            self.spec.path(self.namespace), query=query, read_timeout=seconds + 30, kind=f"WATCH {self.spec.resource}"
        ):
            if first:
                self.cache.touch()  # the watch is open: what we hold is current
                first = False
            action = event_action(event)
            if action == "apply":
                self.cache.apply(event["type"], event["object"])
            elif action == "relist":
                raise WatchExpired()
            else:
                obj = event.get("object") or {}
                msg = obj.get("message") if isinstance(obj, dict) else None
                raise ApiError(int(obj.get("code") or 0) if isinstance(obj, dict) else 0, str(msg or event))
        self.cache.touch()  # ended cleanly at timeoutSeconds: nothing was missed

    async def run(self) -> None:
        need_list = True
        while True:
            try:
                if need_list:
                    await self.list_once()
                    need_list = False
                self.denied = ""
                await self.watch_once()
                self.failures = 0
            except asyncio.CancelledError:
                raise
            except WatchExpired:
                log.info("watch of %s expired (410 Gone): relisting", self.spec.resource)
                need_list = True
                self.failures = 0
            except Exception as exc:
                if isinstance(exc, ApiError) and exc.status == 410:
                    need_list = True
                    continue
                self.cache.last_error = str(exc) or type(exc).__name__
                if isinstance(exc, ApiError) and exc.status == 403:
                    self.denied = f"not permitted to {Permission('list', self.spec.resource, self.spec.group)}"
                delay = backoff_delay(self.failures, rand=self._rand)
                self.failures += 1
                log.warning(
                    "cache %s: %s; retrying in %.1fs (data is %s old)",
                    self.spec.resource,
                    self.cache.last_error,
                    delay,
                    "never synced" if self.cache.age() is None else f"{self.cache.age():.0f}s",
                )
                if self.cache.resource_version is None:
                    need_list = True
                await asyncio.sleep(delay)
