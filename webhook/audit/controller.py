"""The audit controller: judge every job that has not started, again whenever that could change.

    watches (jobs, their JobSets and Kueue Workloads, and what jobs read) ──► triggers
    triggers ──► Debouncer ──► judge(job): not started? ──► evaluate() through a RecordingView
             ──► ReverseIndex (what it read) + Judgement ──► every FindingSink

- The judgement is `webhook.preflight.evaluate`, the webhook's own path (adapter, checks,
  policy; the mode from the settings and the namespace label), on the shared watch-backed
  ClusterView (webhook/cluster/live.py) that `serve` uses.
- Re-check triggers: a full scan when this replica starts leading; a change of the job; a
  change of an object the job's last evaluation read (the reverse index, from the reads the
  view served: webhook/audit/deps.py), once the view's cache holds that change (`view_has_seen`);
  the period (`audit.periodSeconds`), for what no watch
  reports (node capacity, a registry). Bursts are debounced (`audit.debounceSeconds`) and
  coalesced in a bounded queue (webhook/audit/queue.py: one entry a job, however many changes),
  at most one evaluation of a job runs at a time, `audit.workers` workers take the queue, a job
  that changed while it was judged is judged again after, and every request is paced by
  `audit.qps`/`audit.burst`. The period has its own timer: the changes cannot starve the scans.
- An AIPerfSweep is judged per child: each child AIPerfJob its sweep controller has not created
  yet is evaluated as the webhook will evaluate it when the controller creates it
  (webhook/audit/sweeps.py), and published as a child of the sweep (Events go on the sweep and
  name the child; one report result per child x check). A child's creation re-checks its sweep.
- A full scan runs in two passes (webhook/audit/passes.py): every job by the checks that send no
  request first (partial judgements: reports and metrics, never an Event), then, job by job and
  paced by `audit.qps`, the jobs still partial with every check (complete judgements). A
  request-sending check's results are kept with the versions of what it read, and reused while
  those are unchanged (`audit.requestChecksReuseSeconds` at most).
- Only the leader (webhook/audit/lease.py) judges and writes; the others keep their watches
  warm to take over at once.
- The kinds jobs read that the view caches (ServiceAccounts, Services, Namespaces, quotas, ...) trigger
  re-checks from the view's own caches (`ResourceCache.object_listeners`): one watch and one copy a kind,
  as client-go's shared informers share one among handlers. The others (Secrets, ConfigMaps, PVCs:
  `OWN_TRIGGER_SPECS`) are watched by the controller as metadata only (PartialObjectMetadata): a Secret's values never reach this process; its keys are read
  live by the Secrets check, as for the webhook. Where the chart grants Secrets only in the job
  namespaces (`jobNamespaces` listed: rbac.jobNamespaces, a RoleBinding each) they are watched
  namespace by namespace (`NamespacedReflector`, at most `MAX_NAMESPACED_WATCHES`), else cluster-wide.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import hashlib
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.audit.deps import ANY, Dep, RecordingView, ReverseIndex
from webhook.audit.jobs import (
    AIPERFJOB,
    AIPERFSWEEP,
    JUDGED,
    RUNNING,
    Related,
    job_kinds,
    kind_by_resource,
    owned_by,
    uid_of,
)
from webhook.audit.passes import (
    NOTHING_KEPT,
    JobKept,
    Kept,
    Remembered,
    admission_of,
    checks_for,
    shared_reads,
    shared_results,
)
from webhook.audit.queue import Debouncer
from webhook.audit.sink import FindingSink, JobRef, Judgement
from webhook.audit.sweeps import RemainingChild, child_of_sweep, remaining_children
from webhook.checks.base import Check
from webhook.cluster.cache import (
    CACHE_SPECS,
    META_LIST,
    META_WATCH,
    SPECS_BY_RESOURCE,
    CacheSpec,
    Reflector,
    ResourceCache,
    key_of,
    resource_version,
    share_map,
    slim,
    trim_heap,
)
from webhook.cluster.live import LiveClusterView
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import evaluate
from webhook.results import CheckResult
from webhook.workloads.kinds import READS_JOBSET, READS_WORKLOADS, KindSpec

log = logging.getLogger(__name__)

JobKey = tuple[str, str, str]  # (resource, namespace, name)
#: a job in a namespace the webhook does not judge (Settings.excluded_namespaces, kube-system, its own)
EXCLUDED = "excluded"

#: what jobs read and a watch can report, watched as metadata only (the reverse index decides who is re-checked)
TRIGGER_SPECS: tuple[CacheSpec, ...] = (
    CacheSpec("secrets", "", "v1", True),
    CacheSpec("configmaps", "", "v1", True),
    CacheSpec("serviceaccounts", "", "v1", True),
    CacheSpec("persistentvolumeclaims", "", "v1", True),
    CacheSpec("resourcequotas", "", "v1", True),
    CacheSpec("limitranges", "", "v1", True),
    CacheSpec("services", "", "v1", True),
    CacheSpec("namespaces", "", "v1", False),  # the mode label, Pod Security labels
    CacheSpec("networkpolicies", "networking.k8s.io", "v1", True),
    CacheSpec("localqueues", "kueue.x-k8s.io", "v1beta2", True),
    CacheSpec("clusterqueues", "kueue.x-k8s.io", "v1beta2", False),
    CacheSpec("trainingruntimes", "trainer.kubeflow.org", "v1alpha1", True),
    CacheSpec("clustertrainingruntimes", "trainer.kubeflow.org", "v1alpha1", False),
)
#: the kinds jobs read that the cluster view never caches (webhook/cluster/cache.py CACHE_SPECS): the controller's
#: own watches. The others follow the view's caches (`ResourceCache.object_listeners`), one watch a kind: a second
#: one held ~65,000 more objects at Kubernetes' thresholds (docs/benchmarks/cluster.md, issue 38); the controller
#: watches one itself only while the view holds no cache of it
OWN_TRIGGER_SPECS: tuple[CacheSpec, ...] = tuple(s for s in TRIGGER_SPECS if s.resource not in SPECS_BY_RESOURCE)
#: the trigger watches the chart grants only where jobs live (pw.auditJobRules, webhook/audit/rbac.py
#: JOB_NAMESPACE_PERMISSIONS): with `jobNamespaces` listed, watched namespace by namespace
JOB_NAMESPACE_WATCHES = frozenset({"secrets"})
#: at most this many namespaced watches of one resource (each holds a connection to the apiserver);
#: past it the resource is not watched (the period re-checks; a cluster-wide watch needs rbac.clusterWide)
MAX_NAMESPACED_WATCHES = 200
#: whether a job started: its JobSet (same name) and its Kueue Workload (KindSpec.reads). The JobSets are
#: watched as metadata only, unless JobSet is a judged kind: then its job watch is the one (JobSets a
#: judged job owns keep their metadata only there: `JobCache`)
JOBSETS = CacheSpec("jobsets", "jobset.x-k8s.io", "v1alpha2", True)
WORKLOADS = CacheSpec("workloads", "kueue.x-k8s.io", "v1beta2", True)

Listener = Callable[[str, dict[str, Any]], None]


class MetadataClient:
    """The client as a Reflector sees it, asking for metadata only (no data, no spec)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        return await self.client.request(method, path, accept=META_LIST, **kw)

    def stream(self, path: str, **kw: Any) -> Any:
        return self.client.stream(path, accept=META_WATCH, **kw)


class NotifyingCache(ResourceCache):
    """A ResourceCache that tells `listener` of every object that changed: ADDED, MODIFIED,
    DELETED, also across a relist (by resourceVersion), never for the first list
    (`ResourceCache.object_listeners`)."""

    def __init__(self, resource: str, listener: Listener) -> None:
        super().__init__(resource)
        self.listener = listener
        self.object_listeners.append(listener)


class VersionCache(NotifyingCache):
    """A NotifyingCache that keeps of each object only what names one version of it (namespace, name,
    resourceVersion): the trigger watches' objects are read for nothing else (`_on_dependency`,
    `view_has_seen`, `version_of`), and a cluster holds one of them for every Secret, ConfigMap,
    ServiceAccount, Service and Namespace."""

    def _put(self, obj: dict[str, Any], *, slimmed: bool = False) -> None:
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            kept = {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}
            if isinstance(kept.get("namespace"), str):
                kept["namespace"] = sys.intern(kept["namespace"])
            obj = {"metadata": kept}
        super()._put(obj, slimmed=True)


#: at most this many distinct job specs are shared (`share_spec`); the table is cleared when full, as share_map's
SPECS_MAX = 4096
_SPECS: dict[bytes, dict[str, Any]] = {}


def share_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The one held copy of a job's spec: an equal spec held before (equal by `==`, found by a digest of its
    JSON), else `spec`. Jobs made from one template (a team's sweep, the same fine-tune in every namespace) differ
    in their names, not their specs: 10,000 waiting TrainJobs held 10,000 equal specs (issue 38). Cached objects
    are never mutated (the controller judges a deep copy), so a spec read by several jobs is safe."""
    try:
        text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return spec
    key = hashlib.blake2b(text.encode(), digest_size=16).digest()
    held = _SPECS.get(key)
    if held is not None and held == spec:
        return held
    if len(_SPECS) >= SPECS_MAX:
        _SPECS.clear()
    _SPECS[key] = spec
    return spec


class JobCache(NotifyingCache):
    """The cache of a judged kind's watch: a NotifyingCache whose jobs share equal specs, labels and annotations
    (`share_spec`, `share_map`), and that keeps only the metadata of an object `trim` says is no job of its own
    (a JobSet a judged job owns, `KindSpec.skips`: only whether it exists is read, for its owner's state)."""

    def __init__(self, resource: str, listener: Listener, trim: Callable[[dict[str, Any]], bool] | None = None) -> None:
        super().__init__(resource, listener)
        self.trim = trim

    def _put(self, obj: dict[str, Any], *, slimmed: bool = False) -> None:
        if not slimmed:
            obj = slim(self.resource, obj)
        if self.trim is not None and self.trim(obj):
            obj = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            for m in ("labels", "annotations"):
                if isinstance(meta.get(m), dict):
                    meta[m] = share_map(meta[m])
        if isinstance(obj.get("spec"), dict):
            obj["spec"] = share_spec(obj["spec"])
        super()._put(obj, slimmed=True)


def job_spec(spec: KindSpec) -> CacheSpec:
    """The watch of one judged kind."""
    return CacheSpec(spec.plural, spec.group, spec.version, True)


class JoinedCache(ResourceCache):
    """The caches of one resource's per-namespace watches, read as one (`get`, `objects`, `len`).
    `synced` is set by its `NamespacedReflector` once every namespace's first list arrived."""

    def __init__(self, resource: str, parts: dict[str, ResourceCache]) -> None:
        super().__init__(resource)
        self.parts = parts

    def __len__(self) -> int:
        return sum(len(c) for c in self.parts.values())

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        part = self.parts.get(namespace or "")
        return None if part is None else part.get(namespace, name)

    def objects(self, namespace: str | None = None) -> list[dict[str, Any]]:
        if namespace is None:
            return [o for part in self.parts.values() for o in part.objects()]
        part = self.parts.get(namespace)
        return [] if part is None else part.objects(namespace)


class NamespacedReflector(Reflector):
    """One resource watched in each of `namespaces` (one Reflector each, on
    /api/v1/namespaces/NS/RESOURCE), every change told to `listener`: where the RBAC grants
    list/watch only per namespace (the chart's rbac.jobNamespaces, a RoleBinding each), a
    cluster-wide watch is refused. Synced once every namespace's first list arrived."""

    def __init__(
        self,
        spec: CacheSpec,
        client: Any,
        namespaces: Sequence[str],
        listener: Listener,
        *,
        versions_only: bool = False,
    ) -> None:
        super().__init__(spec, client)
        self.parts: dict[str, Reflector] = {}
        for ns in namespaces:
            r = self.parts[ns] = Reflector(spec, client, namespace=ns)
            r.cache = (VersionCache if versions_only else NotifyingCache)(spec.resource, listener)
        self.cache = JoinedCache(spec.resource, {ns: r.cache for ns, r in self.parts.items()})

    def start(self) -> None:
        for r in self.parts.values():
            r.start()
        super().start()

    async def run(self) -> None:
        await asyncio.gather(*(r.synced_event.wait() for r in self.parts.values()))
        self.cache.synced = True
        self.synced_event.set()

    async def stop(self) -> None:
        await asyncio.gather(*(r.stop() for r in self.parts.values()))
        await super().stop()


def watch_namespaces(resource: str, job_namespaces: list[str] | None, existing: set[str] | None) -> list[str] | None:
    """Where the audit controller watches `resource`: None cluster-wide; else the namespaces, one watch each.

    Namespace by namespace when the chart granted it only there (`JOB_NAMESPACE_WATCHES` and
    `jobNamespaces` listed), less those `existing` (the namespaces the view holds, None: unknown)
    does not hold: a namespace deleted since the install has no RoleBinding any more. Past
    `MAX_NAMESPACED_WATCHES` namespaces, or none: [] (not watched, said in the log; the period re-checks)."""
    if resource not in JOB_NAMESPACE_WATCHES or job_namespaces is None:
        return None
    wanted = sorted(set(job_namespaces))
    if existing is not None:
        gone = [ns for ns in wanted if ns not in existing]
        if gone:
            log.warning("audit: not watching %s in %d namespace(s) that no longer exist: %s",
                        resource, len(gone), ", ".join(gone[:10]) + (", ..." if len(gone) > 10 else ""))  # fmt: skip
            wanted = [ns for ns in wanted if ns in existing]
    if len(wanted) > MAX_NAMESPACED_WATCHES:
        log.warning("audit: jobNamespaces lists %d namespaces, more than %d watches (a connection each): %s are not "
                    "watched, a changed one re-checks its jobs at the next scan (audit.periodSeconds); "
                    "rbac.clusterWide=true grants one cluster-wide watch", len(wanted), MAX_NAMESPACED_WATCHES,
                    resource)  # fmt: skip
        return []
    return wanted


def watch_connections(settings: Settings) -> int:
    """The watch streams an audit process holds at most: the view's caches, this controller's watches (of what
    the view does not cache: `OWN_TRIGGER_SPECS`), and a Secret watch per job namespace. Each holds a connection of the client's pool (webhook/cluster/client.py),
    which gets them on top of `apiConcurrency`: else requests wait for a watch to end (50-70 s)."""
    n = None if settings.job_namespaces is None else len(set(settings.job_namespaces))
    secrets = 1 if n is None else (n if n <= MAX_NAMESPACED_WATCHES else 0)
    jobs = {k.plural for k in job_kinds()} | {JOBSETS.resource, WORKLOADS.resource}
    return len(CACHE_SPECS) + len(jobs) + len(OWN_TRIGGER_SPECS) - 1 + secrets


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def _rv_int(rv: str | None) -> int | None:
    return int(rv) if rv is not None and rv.isdigit() else None


def view_has_seen(cache: ResourceCache, event_type: str, obj: dict[str, Any]) -> bool:
    """Whether the view's cache of a resource holds a change this controller's own watch reported.

    The controller's watches (metadata only) and the view's caches (what the checks read) are
    separate Reflectors, each on its own watch: a re-check judged before the view's cache applied
    the change judges the old state, and the change is lost until the period. Seen: the view
    holds the object at that resourceVersion (DELETED: no longer holds it), or its watch has
    passed that resourceVersion. resourceVersions are opaque (API conventions); the ordering
    is used only when both are integers, as etcd3's are (k8s.io/apiserver
    pkg/storage/etcd3 APIObjectVersioner.ParseResourceVersion, what the watch cache compares);
    otherwise only equality counts, and the wait is bounded by the caller."""
    if not cache.synced:
        return False
    want = resource_version(obj)
    key = key_of(obj)
    have = None if key is None else cache.get(*key)
    have_rv = None if have is None else resource_version(have)
    if event_type == "DELETED":
        if have is None:
            return True
    elif have is not None and want is not None and have_rv == want:
        return True
    w, c = _rv_int(want), _rv_int(cache.resource_version)
    if w is None:
        return want is None  # nothing to wait for
    if c is not None and c >= w:
        return True
    h = _rv_int(have_rv)
    return h is not None and h > w


class _KeyLock:
    """One job's lock (`AuditController._lock`) and how many hold or wait for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class _ViewWait:
    """One changed object's re-checks waiting for the view's cache: its latest change and every job to re-check."""

    __slots__ = ("event_type", "keys", "obj", "reason")

    def __init__(self, event_type: str, obj: dict[str, Any], reason: str, keys: set[JobKey]) -> None:
        self.event_type, self.obj, self.reason, self.keys = event_type, obj, reason, keys

    def change(self, event_type: str, obj: dict[str, Any], reason: str, keys: list[JobKey]) -> None:
        self.event_type, self.obj, self.reason = event_type, obj, reason
        self.keys.update(keys)


@dataclass(frozen=True)
class _Pass:
    """What the judgements of one job's targets share: its key, the reverse index its reads go into (the one
    in place when the judgement began), the reads found so far, the job's versions, why it runs, and whether
    the checks that send requests are left out (the cheap pass of a scan)."""

    key: JobKey
    index: ReverseIndex
    reads: set[Dep]
    version: str
    generation: str
    reason: str
    why: str
    cheap: bool


class AuditController:
    """See the module docstring. `run()` until cancelled; `is_leader` gates judging and writing."""

    def __init__(
        self,
        settings: Settings,
        view: LiveClusterView,
        *,
        checks: Sequence[Check],
        sinks: Sequence[FindingSink],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.audit = settings.audit
        self.view = view
        if isinstance(view, LiveClusterView):  # a Secret's keys are read once a version (this watch knows it)
            view.secret_version = lambda ns, name: self.version_of(Dep("secrets", ns, name))
        self.client = view.client
        self.checks = list(checks)
        self.sinks = list(sinks)
        self._clock = clock
        self.index = ReverseIndex()
        self.debouncer = Debouncer(self.audit.debounce_seconds)
        self._wake = asyncio.Event()
        #: per job being judged or waiting to be: its lock and how many hold or wait for it (`_lock`)
        self._locks: dict[JobKey, _KeyLock] = {}
        self._workers = asyncio.Semaphore(self.audit.workers)
        self.judged: dict[JobKey, JobRef] = {}
        #: what was published for each judged job: the job itself, or a sweep's remaining children (a tuple: a
        #: dict of one entry a job cost ~170 B more at 10,000 jobs; `JobRef.key` names each)
        self.published: dict[JobKey, tuple[JobRef, ...]] = {}
        #: per published job (`JobRef.key`): each request-sending check's kept results (webhook/audit/passes.py)
        self.kept: dict[str, JobKept] = {}
        #: the published jobs (`JobRef.key`) whose last published judgement is complete: a partial one never replaces it
        self.complete: set[str] = set()
        #: the jobs whose last judgement was partial: the request pass of the scan judges them again
        self.partial: set[JobKey] = set()
        self.reflectors: dict[str, Reflector] = {}
        #: the kinds jobs read whose changes come from the view's own cache: resource -> (that cache, the listener)
        self.followed: dict[str, tuple[ResourceCache, Listener]] = {}
        self.is_leader = False
        self._lead_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        #: evaluations made (for tests and the benchmark), by reason's first word
        self.evaluations: Counter[str] = Counter()
        self.last_scan: dt.datetime | None = None
        #: full scans ended (both passes), and cheap passes ended, with the last one's duration
        self.scans = 0
        self.cheap_passes = 0
        self.last_cheap_pass_seconds: float | None = None
        #: changed objects waiting for the view's cache to hold their change before their jobs' re-check
        self._view_pending: dict[tuple[str, str, str], _ViewWait] = {}
        #: set when a key is ready for a worker (`_worker`)
        self._ready = asyncio.Event()
        #: when the last full scan started (the loop's clock): the period runs from there
        self.last_scan_started: float | None = None
        #: resource -> the state of the cache a cluster-wide list's digest was made at, and that digest
        self._list_versions: dict[str, tuple[tuple[int, int], str]] = {}

    # ------------------------------------------------------------------ watches

    def _start_reflector(
        self,
        spec: CacheSpec,
        listener: Listener,
        *,
        metadata: bool,
        trim: Callable[[dict[str, Any]], bool] | None = None,
        versions_only: bool = False,
        jobs: bool = False,
    ) -> None:
        if spec.resource in self.reflectors or not self.view.served(spec.group_version):
            return
        client = MetadataClient(self.client) if metadata else self.client
        namespaces = watch_namespaces(spec.resource, self.settings.job_namespaces, self._existing_namespaces())
        r: Reflector
        if namespaces == []:
            return
        if namespaces is None:
            r = Reflector(spec, client)
            if jobs:
                r.cache = JobCache(spec.resource, listener, trim)
            elif versions_only:
                r.cache = VersionCache(spec.resource, listener)
            else:
                r.cache = NotifyingCache(spec.resource, listener)
        else:
            log.info("audit: watching %s in %d job namespace(s) (jobNamespaces)", spec.resource, len(namespaces))
            r = NamespacedReflector(spec, client, namespaces, listener, versions_only=versions_only)
        self.reflectors[spec.resource] = r
        r.start()

    def _existing_namespaces(self) -> set[str] | None:
        """The namespaces the view's synced namespaces cache holds; None when it holds none."""
        r: Reflector | None = getattr(self.view, "reflectors", {}).get("namespaces")
        if r is None or not r.cache.synced:
            return None
        return {name for o in r.cache.objects() if isinstance(name := _meta(o).get("name"), str)}

    def start_watches(self) -> None:
        for jk in job_kinds():
            self._start_reflector(
                job_spec(jk),
                lambda t, o, res=jk.resource: self._on_job(res, t, o),  # type: ignore[misc]
                metadata=False,
                trim=jk.skips,
                jobs=True,
            )
        self._start_reflector(JOBSETS, self._on_jobset, metadata=True)
        self._start_reflector(WORKLOADS, self._on_workload, metadata=False)
        for spec in TRIGGER_SPECS:
            if self._follow_view(spec.resource):
                continue
            self._start_reflector(
                spec, lambda t, o, res=spec.resource: self._on_dependency(res, t, o),  # type: ignore[misc]
                metadata=True, versions_only=True,
            )  # fmt: skip

    @property
    def watched(self) -> set[str]:
        """The kinds whose changes reach this controller: its own watches and the view's caches it follows."""
        return set(self.reflectors) | set(self.followed)

    def _follow_view(self, resource: str) -> bool:
        """Follow the view's cache of `resource` (its `object_listeners`) when the view holds one, instead of
        a watch of its own (stopped if it had one); whether it does. The view's cache, replaced or dropped
        (its API no longer served), is let go; a watch of its own takes over where the view holds none."""
        vr: Reflector | None = getattr(self.view, "reflectors", {}).get(resource)
        held = self.followed.get(resource)
        if held is not None and (vr is None or vr.cache is not held[0]):
            self._unfollow(resource)
            held = None
        if vr is None:
            return False
        if held is None:
            listener: Listener = lambda t, o: self._on_dependency(resource, t, o)  # noqa: E731
            vr.cache.object_listeners.append(listener)
            self.followed[resource] = (vr.cache, listener)
        own = self.reflectors.pop(resource, None)
        if own is not None:
            log.info("audit: the view caches %s now: following its cache, not watching it", resource)
            self._spawn(own.stop())
        return True

    def _unfollow(self, resource: str) -> None:
        held = self.followed.pop(resource, None)
        if held is not None and held[1] in held[0].object_listeners:
            held[0].object_listeners.remove(held[1])

    def watch_discovery(self) -> None:
        """Follow the apiserver's discovery (webhook/cluster/discovery.py, refreshed every
        `discovery_refresh_seconds`): a kind whose CRD is installed after start (AIPerf, Trainer,
        Kueue, JobSet) is watched from then on, without a restart; one no longer served is dropped."""
        discovery = getattr(self.view, "discovery", None)
        if discovery is not None:
            discovery.on_change(lambda _snap: self._on_discovery_change())

    def _on_discovery_change(self) -> None:
        specs = [
            *TRIGGER_SPECS,
            JOBSETS,
            WORKLOADS,
            *(job_spec(j) for j in job_kinds()),
        ]
        for spec in specs:
            r = self.reflectors.get(spec.resource)
            if r is not None and not self.view.served(spec.group_version):
                log.warning("audit: %s is no longer served: no longer watching %s", spec.group_version, spec.resource)
                del self.reflectors[spec.resource]
                self._spawn(r.stop())
        before = self.watched
        self.start_watches()
        for res in sorted(self.watched - before):
            log.info("audit: %s is served now: %s", res, "following the view's cache" if res in self.followed
                     else "watching it")  # fmt: skip
            if kind_by_resource(res) is not None:  # the jobs its first list finds are judged once it synced
                self._spawn(self._judge_when_synced(res))

    async def _judge_when_synced(self, resource: str) -> None:
        r = self.reflectors.get(resource)
        if r is None:
            return
        await r.synced_event.wait()
        kind = kind_by_resource(resource)
        for obj in r.cache.objects():
            if kind is not None and kind.skipped(obj):
                continue
            m = _meta(obj)
            self.enqueue((resource, m.get("namespace") or "", m.get("name") or ""), f"{resource} served now")

    async def wait_synced(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(r.synced_event.wait() for r in self.reflectors.values()))
            return True
        except TimeoutError:
            return False

    def _on_job(self, resource: str, event_type: str, obj: dict[str, Any]) -> None:
        if resource == JOBSETS.resource:  # JobSet is a judged kind: its job watch is also the JobSets' watch
            self._on_jobset(event_type, obj)
        kind = kind_by_resource(resource)
        if kind is not None and kind.skipped(obj):
            return  # a JobSet a judged job owns: its owner is the job
        m = _meta(obj)
        key: JobKey = (resource, m.get("namespace") or "", m.get("name") or "")
        sweep = child_of_sweep(obj) if resource == AIPERFJOB.resource else None
        if sweep is not None and event_type in ("ADDED", "DELETED"):  # the sweep's remaining children changed
            what = "created" if event_type == "ADDED" else "deleted"
            self.enqueue((AIPERFSWEEP.resource, key[1], sweep), f'child AIPerfJob "{key[2]}" {what}')
        if event_type == "DELETED":
            self.debouncer.discard(key)
            self._spawn(self._forget(key, "deleted"))
            return
        self.enqueue(key, "job changed")

    def _on_jobset(self, event_type: str, obj: dict[str, Any]) -> None:
        """A JobSet changed: re-check the job of its name of each kind whose state reads its JobSet."""
        m = _meta(obj)
        what = "deleted" if event_type == "DELETED" else "created" if event_type == "ADDED" else "changed"
        for jk in job_kinds():
            if READS_JOBSET in jk.reads:
                self.enqueue((jk.resource, m.get("namespace") or "", m.get("name") or ""), f"JobSet {what}")

    def _on_workload(self, event_type: str, obj: dict[str, Any]) -> None:
        """A Kueue Workload changed: re-check its owner, of a kind whose state reads its Workloads."""
        m = _meta(obj)
        readers = {(jk.group, jk.kind): jk for jk in job_kinds() if READS_WORKLOADS in jk.reads}
        for ref in m.get("ownerReferences") or []:
            if not isinstance(ref, dict) or not isinstance(ref.get("name"), str):
                continue
            jk = readers.get((str(ref.get("apiVersion") or "").split("/", 1)[0], ref.get("kind")))  # type: ignore[arg-type]
            if jk is not None:
                self.enqueue((jk.resource, m.get("namespace") or "", ref["name"]), "Kueue Workload changed")

    def _on_dependency(self, resource: str, event_type: str, obj: dict[str, Any]) -> None:
        if not self.is_leader:
            return
        m = _meta(obj)
        ns, name = m.get("namespace") or "", m.get("name") or ""
        jobs = self.index.jobs_for(resource, ns, name)
        if not jobs:
            return
        what = {"ADDED": "created", "DELETED": "deleted"}.get(event_type, "changed")
        where = f"{ns}/{name}" if ns else name
        reason = f'{resource} "{where}" {what}'
        keys: list[JobKey] = list(jobs)  # type: ignore[arg-type]
        r: Reflector | None = getattr(self.view, "reflectors", {}).get(resource)
        if r is None or r.denied or view_has_seen(r.cache, event_type, obj):
            for key in keys:
                self.enqueue(key, reason)
            return
        # the checks read the view's cache, not this watch: re-check once it holds the change too. One
        # waiter an object, however often it changes meanwhile: it waits for the latest change
        okey = (resource, ns, name)
        pending = self._view_pending.get(okey)
        if pending is not None:
            pending.change(event_type, obj, reason, keys)
            return
        pending = self._view_pending[okey] = _ViewWait(event_type, obj, reason, set(keys))
        self._spawn(self._enqueue_when_seen(r.cache, okey, pending))

    @property
    def view_waits(self) -> int:
        """Changed objects whose re-checks wait for the view's cache to hold the change."""
        return len(self._view_pending)

    async def _enqueue_when_seen(self, cache: ResourceCache, okey: tuple[str, str, str], pending: _ViewWait) -> None:
        """Enqueue the jobs of `pending` once the view's cache holds its latest change (`view_has_seen`), at
        most `audit.budgetSeconds` later (then anyway, said in the log: the period catches what is missed)."""
        seen = asyncio.Event()
        cache.listeners.append(seen.set)
        try:
            async with asyncio.timeout(self.audit.budget_seconds):
                while not view_has_seen(cache, pending.event_type, pending.obj):
                    seen.clear()
                    await seen.wait()
        except TimeoutError:
            log.warning("audit: the view's %s cache has not caught up with %s in %.0fs; re-checking anyway",
                        cache.resource, pending.reason, self.audit.budget_seconds)  # fmt: skip
        finally:
            cache.listeners.remove(seen.set)
            if self._view_pending.get(okey) is pending:
                del self._view_pending[okey]
        for key in pending.keys:
            self.enqueue(key, pending.reason)

    # ------------------------------------------------------------------ queue

    def enqueue(self, key: JobKey, reason: str) -> None:
        if not self.is_leader or not key[2]:
            return
        if self.debouncer.add(key, reason, self._clock()):
            self._wake.set()

    def _spawn(self, coro: Any) -> None:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _dispatch_loop(self) -> None:
        """Make the keys whose debounce passed ready for `audit.workers` workers: a fixed pool, never a task
        a change (issue 33: Secret churn spawned a judging task per change and job, 1.4 GiB in 45 cycles)."""
        workers = [asyncio.ensure_future(self._worker()) for _ in range(max(1, self.audit.workers))]
        try:
            while True:
                nxt = self.debouncer.next_due()
                timeout = None if nxt is None else max(0.0, nxt - self._clock())
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                if self.debouncer.promote(self._clock()):
                    self._ready.set()
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self) -> None:
        """Judge the ready keys one at a time; a key that changed while it was judged is ready again after."""
        while True:
            item = self.debouncer.take()
            if item is None:
                self._ready.clear()
                await self._ready.wait()
                continue
            key, reason = item
            try:
                await self.judge(key, reason)  # type: ignore[arg-type]
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("audit: judging %s failed", key)
            finally:
                if self.debouncer.done(key):
                    self._ready.set()

    # ------------------------------------------------------------------ judging

    @contextlib.asynccontextmanager
    async def _lock(self, key: JobKey) -> AsyncIterator[None]:
        """At most one evaluation of a job at a time. The lock lives while someone holds or waits for it:
        a lock kept for every job ever judged cost ~220 B a job (issue 38: 10,000 waiting jobs)."""
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = _KeyLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0 and self._locks.get(key) is entry:
                del self._locks[key]

    def state_of(self, resource: str, obj: dict[str, Any]) -> tuple[str, str]:
        """(judged | running | finished, why) for one job object: its kind's state reader (KindSpec.state),
        given what it reads from this controller's watches (its JobSet, its Kueue Workloads)."""
        kind = kind_by_resource(resource)
        if kind is None or kind.state is None:
            return JUDGED, ""
        m = _meta(obj)
        ns, name = m.get("namespace") or "", m.get("name") or ""
        jobset: dict[str, Any] | None = None
        workloads: tuple[dict[str, Any], ...] = ()
        if READS_JOBSET in kind.reads:
            js = self.reflectors.get(JOBSETS.resource)
            jobset = None if js is None else js.cache.get(ns, name)
        if READS_WORKLOADS in kind.reads:
            wls = self.reflectors.get(WORKLOADS.resource)
            uid = uid_of(obj)
            workloads = () if wls is None else tuple(w for w in wls.cache.objects(ns) if owned_by(w, uid))
        return kind.state(obj, Related(jobset, workloads))

    def version_of(self, dep: Dep) -> str | None:
        """The resourceVersion of what `dep` names as a cache holds it now: the view's (what the checks
        read), else this controller's watch; "" absent; a list: a digest of its members' names and
        versions; None when no synced cache holds that kind (a result read from it is never reused)."""
        vr = getattr(self.view, "reflectors", {}).get(dep.resource)
        r = vr if vr is not None and vr.cache.synced else self.reflectors.get(dep.resource)
        if r is None or not r.cache.synced:
            return None
        if isinstance(r.cache, JoinedCache) and (dep.namespace or "") not in r.cache.parts:
            return None  # not watched there (a namespace without the grant, or a cluster-wide list)
        if dep.name == ANY:
            return self._list_version(r.cache, dep.namespace)
        obj = r.cache.get(dep.namespace or None, dep.name)
        return "" if obj is None else (resource_version(obj) or "")

    def _list_version(self, cache: ResourceCache, namespace: str) -> str:
        """A digest of the names and versions of what `cache` holds in `namespace` ("": everywhere). A cluster-wide
        one is computed once a state of the cache ((generation, changes) names one: webhook/cluster/cache.py):
        every job's checks read the 5,000 Nodes' list at Kubernetes' thresholds, and digesting it again for each
        job and reader made the first scan of 10,000 jobs take longer than 15 minutes (issue 38)."""
        state = None if isinstance(cache, JoinedCache) or namespace else (cache.generation, cache.changes)
        memo = self._list_versions.get(cache.resource) if state is not None else None
        if memo is not None and memo[0] == state:
            return memo[1]
        members = sorted(
            f"{m.get('namespace') or ''}/{m.get('name') or ''}@{m.get('resourceVersion') or ''}"
            for m in (_meta(o) for o in cache.objects(namespace or None))
        )
        # interned: the jobs of a namespace (and every job, for a cluster-wide list) keep one string
        digest = sys.intern(hashlib.sha256("\n".join(members).encode()).hexdigest())
        if state is not None:
            self._list_versions[cache.resource] = (state, digest)
        return digest

    async def judge(self, key: JobKey, reason: str, *, cheap: bool = False) -> str:
        """Judge one job now (unless it started); the state it was found in.

        `cheap`: the first pass of a full scan: the checks that send requests are not run (their kept
        results stand for them while they hold), and a judgement that lacks one is partial."""
        async with self._lock(key), self._workers:
            if not self.is_leader:
                return "not leader"
            r = self.reflectors.get(key[0])
            obj = None if r is None else r.cache.get(key[1], key[2])
            kind = kind_by_resource(key[0])
            if obj is None or kind is None or kind.skipped(obj):  # gone, or no job of its own (its owner is)
                await self._forget(key, "deleted")
                return "deleted"
            state, why, children = self._judged_state(key, obj)
            if state != JUDGED:
                if key in self.judged:
                    await self._forget(key, state)
                return state
            ref = JobRef(kind.api_version, kind.kind, key[1], key[2], uid_of(obj))
            await self._judge_targets(key, obj, ref, children, reason=reason, why=why, cheap=cheap)
            return state

    def _judged_state(self, key: JobKey, obj: dict[str, Any]) -> tuple[str, str, list[RemainingChild] | None]:
        """(the state the job is in, why, the children its sweep controller has still to create, or None).

        A namespace the webhook does not judge is EXCLUDED; a sweep whose children are all created runs."""
        state, why = self.state_of(key[0], obj)
        if key[1] in self.view.never_read:
            # the webhook's configuration does not judge these namespaces (excludedNamespaces, kube-system,
            # its own): neither does the controller, and it never reads their Secrets
            state = EXCLUDED
        children: list[RemainingChild] | None = None
        if state == JUDGED and key[0] == AIPERFSWEEP.resource:
            jobs = self.reflectors.get(AIPERFJOB.resource)
            created = [] if jobs is None else jobs.cache.objects(key[1])
            children = remaining_children(obj, created, self.settings)
            if children == []:
                state, why = RUNNING, "every child created"
        return state, why, children

    async def _judge_targets(
        self,
        key: JobKey,
        obj: dict[str, Any],
        ref: JobRef,
        children: list[RemainingChild] | None,
        *,
        reason: str,
        why: str,
        cheap: bool,
    ) -> None:
        """Judge the job, or each child its sweep controller creates later, and publish each judgement."""
        m = _meta(obj)
        gen = m.get("generation")
        generation = str(gen if gen is not None else m.get("resourceVersion") or "")
        # (what is judged, its JobRef): the job, or each child its sweep controller creates later
        targets = [(obj, ref)]
        if children is not None:
            targets = [
                (c.obj, JobRef(AIPERFJOB.api_version, AIPERFJOB.kind, key[1], c.name, "", parent=ref)) for c in children
            ]
        version = str(m.get("resourceVersion") or "")
        # each read is indexed as it is made, not when the judgement ends: a change of what this
        # evaluation already read (while it still runs, or while the sinks publish) re-checks the job
        index = self.index
        reads: set[Dep] = set()
        self.judged[key] = ref
        before = self.published.get(key, ())
        now: dict[str, JobRef] = {}
        partial = False
        pass_ = _Pass(key, index, reads, version, generation, reason, why, cheap)
        for target, tref in targets:
            complete = await self._judge_target(pass_, target, tref)
            now[tref.key] = tref
            partial = partial or not complete
        index.replace(key, reads)
        self.published[key] = tuple(now.values())
        if partial:
            self.partial.add(key)
        else:
            self.partial.discard(key)
        for gone in before:  # a child created meanwhile (judged as an AIPerfJob now), or the sweep
            k = gone.key
            if k not in now:
                self.kept.pop(k, None)
                self.complete.discard(k)
                await self._tell_forget(gone, "created" if gone.parent is not None else "judged per child")

    async def _judge_target(self, p: _Pass, target: dict[str, Any], tref: JobRef) -> bool:
        """Evaluate one target with its kept results standing for the checks not run, and publish the
        judgement (a partial one only when no complete one stands); whether it was complete."""
        tk = tref.key
        index, key = p.index, p.key
        recording = RecordingView(
            self.view, on_read=lambda dep: index.add(key, dep), stamp=self.version_of, canonical=index.canonical
        )
        pending: set[str] = set()
        ran: dict[str, list[CheckResult]] = {}
        kept = self.kept.get(tk, NOTHING_KEPT)
        checks = checks_for(
            self.checks, kept, cheap=p.cheap, pending=pending, ran=ran, job_version=p.version,
            version_of=self.version_of, now=self._clock(), max_age=self.audit.request_checks_reuse_seconds,
            settings=self.settings,
        )  # fmt: skip
        for c in checks:  # a kept result stands for its reads: a change of one of them re-checks the job
            if isinstance(c, Remembered):
                for dep in kept[c.name].reads:
                    p.reads.add(dep)
                    index.add(key, dep)
        ev = await evaluate(
            copy.deepcopy(target),
            settings=self.settings,
            deadline=Deadline(self.audit.budget_seconds),
            view=recording,
            checks=checks,
        )
        self.evaluations[p.reason.split(" ", 1)[0]] += 1
        p.reads.update(recording.reads)
        if ran:
            at = self._clock()
            fresh = {
                n: Kept(p.version, shared_reads(recording.by_reader.get(n, {})), at, shared_results(r), admission_of(r))
                for n, r in ran.items()
            }
            self.kept[tk] = kept.merged(fresh, p.version)
        complete = not pending
        if not complete and tk in self.complete:
            return False  # the last complete judgement stands until the request pass gives the next one
        if complete:
            self.complete.add(tk)
        judgement = Judgement(
            tref, ev, p.generation, dt.datetime.now(dt.UTC), f"{p.reason} ({p.why})", complete=complete
        )
        for sink in self.sinks:
            try:
                await sink.publish(judgement)
            except Exception:
                log.exception("audit: sink %s failed to publish %s %s/%s", type(sink).__name__, *key)
        return complete

    async def _forget(self, key: JobKey, why: str) -> None:
        self.judged.pop(key, None)
        published = self.published.pop(key, ())
        self.partial.discard(key)
        for ref in published:
            k = ref.key
            self.kept.pop(k, None)
            self.complete.discard(k)
        self.index.drop(key)
        if not self.is_leader:
            return
        for ref in published:
            await self._tell_forget(ref, why)

    async def _tell_forget(self, ref: JobRef, why: str) -> None:
        for sink in self.sinks:
            try:
                await sink.forget(ref, why)
            except Exception:
                log.exception("audit: sink %s failed to forget %s %s/%s", type(sink).__name__, ref.kind,
                              ref.namespace, ref.name)  # fmt: skip

    def job_keys(self) -> list[JobKey]:
        out: list[JobKey] = []
        for jk in job_kinds():
            r = self.reflectors.get(jk.resource)
            if r is None:
                continue
            for obj in r.cache.objects():
                if jk.skipped(obj):
                    continue
                m = _meta(obj)
                out.append((jk.resource, m.get("namespace") or "", m.get("name") or ""))
        return out

    async def _judge_each(self, keys: list[JobKey], reason: str, *, cheap: bool = False) -> dict[JobKey, str]:
        """Judge `keys` in order, `audit.workers` at a time: that many tasks take the next key, not a
        task a job waiting for its turn (10,000 waiting tasks held ~20 MiB: bench/audit_scale.py --census)."""
        states: dict[JobKey, str] = {}
        todo = iter(keys)

        async def worker() -> None:
            for key in todo:
                states[key] = await self.judge(key, reason, cheap=cheap)

        await asyncio.gather(*(worker() for _ in range(max(1, self.audit.workers))))
        return {k: states[k] for k in keys if k in states}

    async def full_scan(self, reason: str = "scan") -> dict[str, int]:
        """Judge every job once (those that started are counted, not judged); tell the sinks.

        Two passes (webhook/audit/passes.py): every job by the checks that send no request, then the
        jobs whose judgement is still partial with every check, in the same order (namespace, name)."""
        start = self._clock()
        for sink in self.sinks:
            started = getattr(sink, "scan_started", None)
            if started is not None:
                started()
        keys = sorted(self.job_keys(), key=lambda k: (k[1], k[2], k[0]))
        states = await self._judge_each(keys, reason, cheap=True)
        self.cheap_passes += 1
        self.last_cheap_pass_seconds = self._clock() - start
        rest = [k for k in keys if states[k] == JUDGED and k in self.partial]
        log.info("audit: %s, cheap pass: %d jobs in %.1fs; %d wait for the checks that send requests", reason,
                 len(keys), self.last_cheap_pass_seconds, len(rest))  # fmt: skip
        states.update(await self._judge_each(rest, reason))
        counts = Counter(states.values())
        judged = counts.pop(JUDGED, 0)
        not_judged = {k: v for k, v in counts.items() if k not in ("not leader", "deleted")}
        self.last_scan = dt.datetime.now(dt.UTC)
        self.scans += 1
        log.info("audit: %s of %d jobs: %d judged, not judged: %s (%.1fs)", reason, len(keys), judged,
                 not_judged or "none", self._clock() - start)  # fmt: skip
        for sink in self.sinks:
            try:
                await sink.scan_done(judged, not_judged)
            except Exception:
                log.exception("audit: sink %s failed at scan_done", type(sink).__name__)
        trim_heap()  # the scan's responses and Report bodies were freed into the C heap: give them back
        return {"judged": judged, **not_judged}

    # ------------------------------------------------------------------ leading

    def start_leading(self) -> None:
        if self.is_leader:
            return
        self.is_leader = True
        self._lead_task = asyncio.ensure_future(self._lead())

    def stop_leading(self) -> None:
        self.is_leader = False
        if self._lead_task is not None:
            self._lead_task.cancel()
            self._lead_task = None
        for t in list(self._tasks):
            t.cancel()
        self.debouncer = Debouncer(self.audit.debounce_seconds)
        self._view_pending.clear()
        self.judged.clear()
        self.published.clear()
        self.kept.clear()
        self.complete.clear()
        self.partial.clear()
        self.index = ReverseIndex()

    async def _lead(self) -> None:
        for sink in self.sinks:
            resync = getattr(sink, "resync", None)
            if resync is not None:
                await resync()
        dispatch = asyncio.ensure_future(self._dispatch_loop())
        loop = asyncio.get_running_loop()
        reason = "scan"
        try:
            # the period runs from each scan's start, on its own timer: however many changes come meanwhile,
            # a scan starts every `audit.periodSeconds` (back to back when one takes longer); the changes'
            # re-checks wait in a bounded queue and share the workers with it (issue 33: none ran in 36 min)
            while True:
                started = self.last_scan_started = loop.time()
                await self.full_scan(reason)
                reason = "period"
                await asyncio.sleep(max(0.0, started + self.audit.period_seconds - loop.time()))
        finally:
            dispatch.cancel()
            await asyncio.gather(dispatch, return_exceptions=True)

    async def close(self) -> None:
        for resource in list(self.followed):
            self._unfollow(resource)
        self.stop_leading()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(r.stop() for r in self.reflectors.values()))
