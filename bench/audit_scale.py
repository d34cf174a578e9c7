"""How does the audit controller scale: full-scan time, memory, and apiserver requests in steady state?

Issue 20's scale question: N jobs across M namespaces in the local control plane
(e2e/harness/controlplane.py: etcd + kube-apiserver, binaries from e2e/build.sh). Each namespace
holds one Secret, one PVC and N/M suspended TrainJobs that read the Secret (env secretKeyRef)
and run on one ClusterTrainingRuntime. The audit controller (webhook.audit.runner.AuditRun, what
`preflight-webhook audit` runs) runs in this process, with the chart's defaults (qps 20, burst 40,
4 workers, every check on, Dry Run included). Measured:

- full-scan time: from leading to the end of the first full scan (every job judged once);
- RSS of this process (the controller; the control plane runs in other processes) after the scan;
- the requests the controller sent, by kind (GET, dry-run POST, write), during the scan, then in a
  quiet minute, then during a periodic re-scan that finds nothing new (writes: the target is none);
- one Secret deleted: the jobs re-checked (only those that read it) and the writes that caused.

    .venv/bin/python bench/audit_scale.py --jobs 10000 --namespaces 1000 --write   # the issue's size
    .venv/bin/python bench/audit_scale.py --jobs 1000 --namespaces 100 --write     # a short run
    .venv/bin/python bench/audit_scale.py --quick                                  # smoke, writes nothing
    .venv/bin/python bench/audit_scale.py --jobs 2000 --namespaces 4 --churn 900 --write   # issue 33's churn

Not a test: it takes minutes and its figures move with the machine's load (the shared 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import datetime as dt
import gc
import json
import logging
import os
import re
import sys
import tempfile
import time
import types
from collections import Counter, deque
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import write_section
from e2e.harness.audit import install_openreports
from e2e.harness.controlplane import ControlPlane, cache_dir, ensure_built
from webhook.audit.client import AuditClient
from webhook.audit.runner import AuditRun
from webhook.checks import all_checks
from webhook.config import Settings

SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "oracle" / "samples"
RUNTIME = "scale-torch"
CALLS: Counter[str] = Counter()
#: the requests sent while the first cheap pass ran (the controller's client, counted when sent)
CHEAP: Counter[str] = Counter()
#: the controller measured (set once it runs)
CONTROLLER: list[Any] = []


class _Troubles(logging.Handler):
    """Counts what went wrong while measured: Leases lost, Report writes that failed (and were retried)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        for what in ("lost the Lease", "cannot write the Report", "cannot write Lease", "events: cannot write"):
            if what in msg:
                self.counts[what] += 1


TROUBLES = _Troubles()


def _count_requests() -> None:
    """Count every request the audit controller's client sends: GET, dry run, write (by verb)."""
    original = AuditClient.request

    async def counted(self: AuditClient, method: str, path: str, *, timeout: float, **kw: Any) -> dict[str, Any]:
        query = kw.get("query") or {}
        kind = "GET" if method == "GET" else "dry run" if query.get("dryRun") else f"write {method} {_written(path)}"
        CALLS[kind] += 1
        if CONTROLLER and CONTROLLER[0].is_leader and CONTROLLER[0].cheap_passes == 0:
            CHEAP[kind] += 1
        return await original(self, method, path, timeout=timeout, **kw)

    AuditClient.request = counted  # type: ignore[method-assign]


#: what the controller writes: Events, Reports (openreports.io), its leader-election Lease
WRITTEN = ("events", "clusterreports", "reports", "leases")


def _written(path: str) -> str:
    """The resource a write goes to, from its path (".../namespaces/NS/events" → "events")."""
    parts = path.strip("/").split("/")
    return next((r for r in WRITTEN if r in parts), "other")


def _rss_mib(field: str = "VmRSS") -> float:
    """This process's resident memory (VmRSS), or its peak so far (VmHWM: what a memory limit must hold)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _objects(ns: str, per_ns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        # no controller-manager here: the ServiceAccount controller's "default", which the pods' dry runs need
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token", "namespace": ns},
         "stringData": {"token": "x"}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "initializer", "namespace": ns},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
    ]  # fmt: skip
    for i in range(per_ns):
        out.append({
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": f"ft-{i}", "namespace": ns},
            "spec": {"suspend": True, "runtimeRef": {"name": RUNTIME}, "trainer": {
                "image": "registry.example/acme/ft:1.0", "numNodes": 1,
                "resourcesPerNode": {"requests": {"cpu": "1", "memory": "1Gi"}},
                "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]}},
        })  # fmt: skip
    return out


def _populate(cp: ControlPlane, jobs: int, namespaces: int) -> float:
    rt = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())
    rt["metadata"]["name"] = RUNTIME
    rt["spec"]["mlPolicy"]["torch"] = {}
    cp.apply(rt)
    t0 = time.monotonic()
    per_ns = jobs // namespaces
    batch: list[dict[str, Any]] = []
    for n in range(namespaces):
        batch += _objects(f"scale-{n:04d}", per_ns)
        if len(batch) >= 600 or n == namespaces - 1:
            cp.kubectl("apply", "--server-side", "--field-manager=bench", "-f", "-",
                       input=yaml.safe_dump_all(batch), timeout=600)  # fmt: skip
            batch = []
    return time.monotonic() - t0


#: modules whose objects the census does not follow: the machinery, not what the controller holds per job
_NOT_FOLLOWED = ("asyncio", "aiohttp", "kubernetes_asyncio", "ssl", "logging", "pydantic", "prometheus_client",
                 "concurrent", "threading", "socket", "yarl", "multidict", "webhook.config")  # fmt: skip


def _deep(root: Any, seen: set[int]) -> int:
    """Bytes reachable from `root` not counted before (`seen`): containers, and objects' __dict__ and
    __slots__, except the machinery's (_NOT_FOLLOWED)."""
    total = 0
    stack = [root]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type | types.ModuleType | types.FunctionType | types.MethodType):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset | deque):
            stack.extend(o)
        elif not isinstance(o, str | bytes | int | float | bool) and o is not None:
            if type(o).__module__.startswith(_NOT_FOLLOWED):
                continue
            d = getattr(o, "__dict__", None)
            if isinstance(d, dict):
                stack.append(d)
            for cls in type(o).__mro__:
                for slot in getattr(cls, "__slots__", ()):
                    if isinstance(slot, str) and hasattr(o, slot):
                        stack.append(getattr(o, slot))
    return total


class _MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (man 3 mallinfo2), summed over every arena."""

    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]  # fmt: skip


def _heaps() -> list[str]:
    """Where the RSS is, below the objects: the C heap (glibc mallinfo2: in use, free but kept, mmapped)
    and Python's small-object allocator (sys._debugmallocstats: its arenas, and the bytes their blocks
    hold). A heap much larger than what it holds is fragmentation, which no census of objects shows."""
    out: list[str] = []
    try:
        fn = ctypes.CDLL(None).mallinfo2
        fn.restype = _MallInfo2
        m = fn()
        out.append(f"C heap: {m.uordblks / 2**20:.1f} MiB in use, {m.fordblks / 2**20:.1f} MiB free but kept, "
                   f"{m.hblkhd / 2**20:.1f} MiB mmapped ({m.hblks} blocks)")  # fmt: skip
    except (OSError, AttributeError):
        out.append("C heap: no mallinfo2 here")
    with tempfile.TemporaryFile() as f:  # _debugmallocstats writes to the C stderr
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        stats = f.read().decode(errors="replace")
    want = ("arenas allocated current", "arenas highwater mark", "bytes in allocated blocks",
            "bytes in available blocks", "unused pools")  # fmt: skip
    for line in stats.splitlines():
        if any(w in line for w in want) and "=" in line:
            name, _, value = line.rpartition("=")
            number = int(value.strip().replace(",", ""))
            shown = f"{number / 2**20:.1f} MiB" if "bytes" in line or "pools" in line else str(number)
            out.append(f"pymalloc: {name.strip().lstrip('# ')} = {shown}")
    return out


def _census(run: AuditRun) -> str:
    """What the controller holds, part by part (deep sizes; an object shared by two parts counts in the
    first), then the heap by type. Walks every object: seconds at 10,000 jobs, not for timed runs."""
    from webhook.checks import dryrun
    from webhook.cluster import cache as cluster_cache
    from webhook.workloads import render_cache

    c = run.controller
    by_type: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for o in gc.get_objects():  # before the walk's own set of ids exists
        by_type[type(o).__name__] += sys.getsizeof(o)
        counts[type(o).__name__] += 1
    # the parts are named below; what links them (the run, the controller, the view, the clients) is not followed
    seen: set[int] = {id(x) for x in (run, c, run.view, run.elector, c.client, run.view.client, *c.sinks)}
    parts: list[tuple[str, Any]] = [(f"view cache {r}", rf.cache) for r, rf in sorted(run.view.reflectors.items())]
    parts += [(f"controller watch {r}", rf.cache) for r, rf in sorted(c.reflectors.items())]
    parts += [(f"controller {a}", getattr(c, a)) for a in ("kept", "judged", "published", "complete", "partial",
                                                           "index", "_locks", "debouncer", "_tasks")]  # fmt: skip
    for sink in c.sinks:
        parts += [(f"{type(sink).__name__}.{k}", v) for k, v in vars(sink).items() if k not in ("client", "settings")]
    parts.append(
        ("view reads kept", {k: getattr(run.view, k, None) for k in ("_read_ttl", "_secret_ttl", "_cap_memo")})
    )
    parts += [("render cache", render_cache.CACHE), ("dry-run caches", dict(dryrun._CACHES)),
              ("interned cache values", cluster_cache._VALUES)]  # fmt: skip
    parts.append(("the rest of the controller", vars(c)))
    sizes = [(name, _deep(obj, seen)) for name, obj in parts]
    lines = [f"{size / 2**20:9.1f} MiB  {name}" for name, size in sorted(sizes, key=lambda x: -x[1]) if size > 2**19]
    lines.append(f"{sum(s for _, s in sizes) / 2**20:9.1f} MiB  all the parts above")
    for sink in c.sinks:  # the Report sink's messages: how many, how many distinct, how long
        entries = getattr(sink, "_entries", None)
        if isinstance(entries, dict):
            msgs = [f.message for jobs in entries.values() for _, found in jobs.values() for f in found]
            distinct = set(msgs)
            held = len({id(m) for m in msgs})
            lines.append(f"report messages: {len(msgs)} ({sum(map(len, msgs)) / 2**20:.1f} MiB of text), "
                         f"{len(distinct)} distinct ({sum(map(len, distinct)) / 2**20:.1f} MiB), held as {held} strings")  # fmt: skip
            lines += [f"    {m[:160]}" for m in sorted(distinct, key=len, reverse=True)[:6]]
    lines += _heaps()
    lines.append("the heap's tracked objects by type (shallow):")
    lines += [f"{size / 2**20:9.1f} MiB {counts[t]:9d}  {t}" for t, size in by_type.most_common(12)]
    return "\n".join(lines)


async def _sinks_idle(run: AuditRun) -> None:
    """Every write the sinks have pending or in flight is sent (Reports, Events)."""
    for sink in run.controller.sinks:
        idle = getattr(sink, "idle", None)
        if idle is not None:
            await idle()


async def _until(cond: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def measure(
    cp: ControlPlane,
    jobs: int,
    namespaces: int,
    quiet: float,
    watch: float | None,
    census: bool = False,
    qps: float | None = None,
) -> dict[str, Any]:
    """`watch`: None: wait for the complete scan and measure the rest; else watch the request pass this many
    seconds after the cheap pass, and extrapolate its time from the jobs it completed. `census`: print what
    the controller holds after the cheap pass and at the end (:func:`_census`; it stalls the loop)."""
    _count_requests()
    logging.getLogger("webhook").addHandler(TROUBLES)
    audit: dict[str, Any] = {"leaseNamespace": "default"}
    if qps is not None:  # the apiserver's own pace, not the controller's (--qps)
        audit.update(qps=qps, burst=max(40, int(qps * 2)))
    settings = Settings.model_validate({"audit": audit})
    rss0 = _rss_mib()
    run = await AuditRun.start(settings, kubeconfig=str(cp.kubeconfig), identity="bench", checks=all_checks(),
                               sync_timeout=300)  # fmt: skip
    c = run.controller
    CONTROLLER.append(c)
    try:
        await _until(lambda: c.is_leader, 60)
        t0 = time.monotonic()
        CALLS.clear()
        await _until(lambda: c.cheap_passes >= 1, 3600)
        cheap = c.last_cheap_pass_seconds or time.monotonic() - t0
        cheap_calls = dict(CHEAP)
        rss_cheap = _rss_mib()
        if census:
            print(f"--- after the cheap pass (RSS {rss_cheap:.0f} MiB)\n{_census(run)}", file=sys.stderr, flush=True)
        if watch is not None:
            done0, t1 = len(c.complete), time.monotonic()
            await asyncio.sleep(watch)
            rate = (len(c.complete) - done0) / (time.monotonic() - t1)
            if census:
                print(
                    f"--- after {watch:.0f} s of the request pass (RSS {_rss_mib():.0f} MiB)\n{_census(run)}",
                    file=sys.stderr,
                    flush=True,
                )
            return {"jobs": len(c.judged), "cheap_s": cheap, "cheap_calls": cheap_calls, "rss_cheap": rss_cheap,
                    "rss0_mib": rss0, "rate": rate, "watched": watch, "rss_mib": _rss_mib(), "troubles": dict(TROUBLES.counts),
                    "watch_calls": {k: v - cheap_calls.get(k, 0) for k, v in CALLS.items()}}  # fmt: skip
        await _until(lambda: c.scans >= 1, 36000)
        scan = time.monotonic() - t0
        await _sinks_idle(run)  # the Reports and Events it made due (debounced; they yield to its requests)
        reports_after = time.monotonic() - t0 - scan
        scan_calls = dict(CALLS)
        failing = _failing_checks(run)
        rss, rss_peak_scan = _rss_mib(), _rss_mib("VmHWM")
        if census:
            print(f"--- after the full scan (RSS {rss:.0f} MiB)\n{_census(run)}", file=sys.stderr, flush=True)
        CALLS.clear()
        await asyncio.sleep(quiet)
        quiet_calls = dict(CALLS)
        CALLS.clear()
        t1 = time.monotonic()
        await c.full_scan("period")
        rescan = time.monotonic() - t1
        await asyncio.sleep(5)
        rescan_calls = dict(CALLS)
        refailing = _failing_checks(run)
        CALLS.clear()
        before = c.evaluations["secrets"]
        await asyncio.to_thread(cp.kubectl, "delete", "secret", "hf-token", "-n", "scale-0000")
        per_ns = jobs // namespaces
        await _until(lambda: c.evaluations["secrets"] - before >= per_ns, 120)
        await asyncio.sleep(5)
        deleted = {"rechecked": c.evaluations["secrets"] - before, "calls": dict(CALLS)}
        if census:
            print(f"--- at the end (RSS {_rss_mib():.0f} MiB)\n{_census(run)}", file=sys.stderr, flush=True)
        rss_end, rss_peak = _rss_mib(), _rss_mib("VmHWM")
        await _sinks_idle(run)  # the deletion's Report write has landed
        agree = await asyncio.to_thread(_reports_agree, cp, _results_of_sink(run))
        return {
            "rss_end": rss_end, "rss_peak": rss_peak, "agree": agree, "reports_after": reports_after,
            "rss_peak_scan": rss_peak_scan,
            "jobs": len(c.judged), "cheap_s": cheap, "cheap_calls": cheap_calls, "rss_cheap": rss_cheap,
            "scan_s": scan, "rss_mib": rss, "rss0_mib": rss0, "scan_calls": scan_calls,
            "quiet_calls": quiet_calls, "rescan_s": rescan, "rescan_calls": rescan_calls, "deleted": deleted,
            "failing": failing, "refailing": refailing, "troubles": dict(TROUBLES.counts),
        }  # fmt: skip
    finally:
        await run.stop()


class _IndexedView:
    """tests/fakeview.py's FakeView with indexed caches and counted (not kept) requests: the in-process
    run measures the controller's own CPU and memory, not the fake's."""

    def __init__(self, fake: Any, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.fake = fake
        self.index: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.by_ns: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for resource, objs in objects.items():
            for o in objs:
                m = o["metadata"]
                self.index[(resource, m.get("namespace") or "", m["name"])] = o
                self.by_ns.setdefault((resource, m.get("namespace") or ""), []).append(o)
        self.requests: Counter[str] = Counter()
        self.seen: set[tuple[str, str, str]] = set()

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.fake, attr)

    def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        if namespace is None:
            return [o for (r, _), objs in self.by_ns.items() if r == resource for o in objs]
        return list(self.by_ns.get((resource, namespace), [])) + list(self.by_ns.get((resource, ""), []))

    def get_cached(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.index.get((resource, namespace or "", name)) or self.index.get((resource, "", name))

    async def secret_keys(self, namespace: str, name: str, deadline: Any) -> set[str] | None:
        self.requests["GET"] += 1
        return {"token"}

    async def dry_run_create(self, api_version: str, kind: str, namespace: str, body: Any, deadline: Any) -> None:
        self.requests["dry run"] += 1

    async def get_object(self, api_version: str, resource: str, namespace: str | None, name: str, deadline: Any,
                         *, ttl: float = 0.0, subresource: str = "") -> dict[str, Any] | None:  # fmt: skip
        key = (f"{resource}/{subresource}" if subresource else resource, namespace or "", name)
        if not (ttl > 0 and key in self.seen):  # the view keeps a read with a ttl that long (Controllers)
            self.requests["GET"] += 1
            self.seen.add(key)
        return self.index.get(key)


class _Answered:
    """The apiserver as the Event and Report sinks see it in process: every write accepted, every read empty."""

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        body = kw.get("body")
        return body if isinstance(body, dict) and method != "GET" else {"items": [], "metadata": {}}


def _in_process_census(c: Any, per_job: int, snapshot: Any) -> str:
    """What the in-process controller holds after its scans, part by part (deep sizes, an object shared by two
    parts counted in the first; per job), and the traced allocations still live by the line that made them."""
    from webhook.audit import passes
    from webhook.workloads import render_cache

    seen: set[int] = {id(x) for x in (c, c.view, c.view.fake, *c.sinks)}
    parts: list[tuple[str, Any]] = [(f"controller watch {r}", rf.cache) for r, rf in sorted(c.reflectors.items())
                                    if r == "trainjobs"]  # fmt: skip
    parts += [(f"controller {a}", getattr(c, a)) for a in ("kept", "judged", "published", "complete", "partial",
                                                           "index", "_locks", "debouncer", "_tasks")]  # fmt: skip
    for sink in c.sinks:
        parts += [(f"{type(sink).__name__}.{k}", v) for k, v in vars(sink).items() if k not in ("client", "settings")]
    parts += [("kept results/reads tables", (passes._RESULTS, passes._READS)), ("render cache", render_cache.CACHE)]
    sizes = [(name, _deep(obj, seen)) for name, obj in parts]
    lines = [f"{size / 2**20:8.2f} MiB {size / per_job:8.0f} B/job  {name}" for name, size in
             sorted(sizes, key=lambda x: -x[1]) if size > 2**14]  # fmt: skip
    total = sum(s for _, s in sizes)
    lines.append(f"{total / 2**20:8.2f} MiB {total / per_job:8.0f} B/job  all the parts above")
    stats = snapshot.statistics("lineno")
    traced = sum(st.size for st in stats)
    lines.append(f"traced and still live: {traced / 2**20:.1f} MiB ({traced / per_job:.0f} B/job); the top lines:")
    lines += [f"{st.size / 2**20:8.2f} MiB {st.size / per_job:8.0f} B/job {st.count:8d}  {st.traceback[0]}"
              for st in stats[:25]]  # fmt: skip
    return "\n".join(lines)


async def in_process(jobs: int, namespaces: int, census: bool = False) -> dict[str, Any]:
    """The controller on a fake view (no apiserver): the cheap pass's CPU and memory at `jobs`, and the
    requests the request pass sends per job (its time at audit.qps follows from them). `census`: the Event
    and Report sinks too (writes answered at once), and what the controller holds after the scans, by part
    and by the line that allocated it (tracemalloc from the controller's start: slower, figures not written)."""
    import tracemalloc

    from tests.fakeview import FakeView
    from webhook.audit.controller import AuditController, JobCache
    from webhook.audit.events import EventSink
    from webhook.audit.metrics import AuditMetrics
    from webhook.audit.reports import ReportSink
    from webhook.cluster.cache import ResourceCache

    rss0 = _rss_mib()
    rt = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())
    rt["metadata"]["name"] = RUNTIME
    rt["spec"]["mlPolicy"]["torch"] = {}
    per_ns = jobs // namespaces
    objs: dict[str, list[dict[str, Any]]] = {"clustertrainingruntimes": [rt]}
    n = 0
    for i in range(namespaces):
        for o in _objects(f"scale-{i:04d}", per_ns):
            o = {**o, "metadata": {**o["metadata"], "uid": f"uid-{n}", "resourceVersion": str(100 + n)}}
            n += 1
            res = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "Secret": "secrets",
                   "PersistentVolumeClaim": "persistentvolumeclaims", "TrainJob": "trainjobs"}[o["kind"]]  # fmt: skip
            if res == "persistentvolumeclaims":
                o["status"] = {"phase": "Bound"}
            objs.setdefault(res, []).append(o)
    served = {"v1", "batch/v1", "jobset.x-k8s.io/v1alpha2", "trainer.kubeflow.org/v1alpha1"}
    view = _IndexedView(FakeView({}, served=served), {k: v for k, v in objs.items() if k != "trainjobs"})
    view.fake.client, view.fake.never_read = None, set()
    settings = Settings()
    if census:
        tracemalloc.start()
    sinks: list[Any] = [AuditMetrics(settings)]
    if census:
        sinks = [EventSink(_Answered(), settings, instance="bench"), ReportSink(_Answered(), settings), *sinks]
    c = AuditController(settings, view, checks=all_checks(), sinks=sinks)  # type: ignore[arg-type]

    class _R:
        def __init__(self, resource: str, items: list[dict[str, Any]]) -> None:
            # the jobs in the cache of the controller's own job watch, as start_watches makes it
            self.cache = JobCache(resource, lambda *_: None) if resource == "trainjobs" else ResourceCache(resource)
            self.cache.replace(items, "1")
            self.denied = ""

    # the caches the controller (or, on a cluster, the view) holds: what a kept result's reads are compared with
    for res in ("trainjobs", "secrets", "namespaces", "serviceaccounts", "persistentvolumeclaims",
                "resourcequotas", "limitranges", "nodes", "storageclasses", "persistentvolumes"):  # fmt: skip
        c.reflectors[res] = _R(res, objs.get(res, []))  # type: ignore[assignment]
    c.is_leader = True
    t0 = time.process_time()
    w0 = time.monotonic()
    await c.full_scan("scan")
    wall = time.monotonic() - w0
    cpu = time.process_time() - t0
    first = dict(view.requests)
    view.requests.clear()
    w1, t1 = time.monotonic(), time.process_time()
    await c.full_scan("period")
    if census:
        for sink in c.sinks:
            idle = getattr(sink, "idle", None)
            if idle is not None:
                await idle()
        gc.collect()
        print(f"--- after both scans (RSS {_rss_mib():.0f} MiB)\n{_in_process_census(c, jobs, tracemalloc.take_snapshot())}",
              file=sys.stderr, flush=True)  # fmt: skip
        tracemalloc.stop()
    return {
        "jobs": len(c.judged), "cheap_s": c.last_cheap_pass_seconds, "scan_wall_s": wall,
        "cpu_s": cpu, "rss_mib": _rss_mib(), "rss0_mib": rss0, "requests": first,
        "period_s": time.monotonic() - w1, "period_cpu_s": time.process_time() - t1,
        "period_evaluations": c.evaluations["period"], "period_requests": dict(view.requests),
    }  # fmt: skip


def _failing_checks(run: AuditRun) -> dict[str, int]:
    """How many jobs' last Event is a PreflightFailed, by the checks it names."""
    out: Counter[str] = Counter()
    for reason, message in run.events.last.values():
        if reason == "PreflightFailed":
            out[", ".join(sorted(set(re.findall(r"^\[([^\]]+)\] ", message, flags=re.M))))] += 1
    return dict(out)


def _results_of_sink(run: AuditRun) -> set[tuple[str, ...]]:
    """(namespace, job, child, check, result, message) of every finding the Report sink holds."""
    out: set[tuple[str, ...]] = set()
    for sink in run.controller.sinks:
        for ns, jobs in getattr(sink, "_entries", {}).items():
            for job, found in jobs.values():
                subject, child = (job, "") if job.parent is None else (job.parent, job.name)
                out |= {(ns, subject.name, child, f.check, f.result, f.message) for f in found}
    return out


def _reports_agree(cp: ControlPlane, held: set[tuple[str, ...]]) -> str:
    """Do the Reports the apiserver stores say what the controller judged? Every result of every
    report against `held` (:func:`_results_of_sink`), read with kubectl after the writes settled."""
    listed = json.loads(cp.kubectl("get", "reports.openreports.io", "-A", "-o", "json", timeout=600).stdout)
    stored: set[tuple[str, ...]] = set()
    for item in listed.get("items") or []:
        ns = item["metadata"]["namespace"]
        for r in item.get("results") or []:
            subject = (r.get("resources") or [{}])[0]
            child = (r.get("properties") or {}).get("child", "")
            stored.add((ns, subject.get("name", ""), child, r.get("policy"), r.get("result"), r.get("message")))
    missing, extra = len(held - stored), len(stored - held)
    verdict = (
        "all agree" if not missing and not extra else f"{missing} judged but not stored, {extra} stored but not judged"
    )
    return f"{len(listed.get('items') or [])} reports, {len(stored)} results: {verdict}"


def _calls(d: dict[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(d.items())) or "none"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10_000, help="TrainJobs in all (default 10000)")
    ap.add_argument("--namespaces", type=int, default=1_000, help="namespaces they spread over (default 1000)")
    ap.add_argument("--quiet", type=float, default=60.0, help="seconds of steady state to count requests in")
    ap.add_argument("--write", action="store_true", help="write the section of docs/benchmarks/audit-scale.md")
    ap.add_argument("--quick", action="store_true", help="a smoke run at toy size (50 jobs); writes nothing")
    ap.add_argument(
        "--watch",
        type=float,
        default=None,
        help="do not wait for the request pass: watch it this "
        "many seconds after the cheap pass and extrapolate (a run too long for the shared machine)",
    )
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="the controller on a fake view (no apiserver): "
        "the cheap pass's time and memory, and the requests per job of the request pass",
    )
    ap.add_argument(
        "--census",
        action="store_true",
        help="print what the controller holds, part by part, after the cheap pass and at the end (the walk "
        "stalls the controller for seconds: its figures are not written)",
    )
    ap.add_argument(
        "--qps",
        type=float,
        default=None,
        help="audit.qps for this run (default: the chart's 20); a high value measures what the apiserver "
        "itself can answer on this machine",
    )
    ap.add_argument(
        "--churn",
        type=float,
        default=None,
        metavar="SECONDS",
        help="issue 33's churn (bench/audit_churn.py): after the first full scan, delete and create again (or "
        "patch) the hf-token Secret of --churn-namespaces namespaces every --churn-every seconds for this long; "
        "RSS, CPU, queue, scans, and the time until no Report says fail after the last change",
    )
    ap.add_argument(
        "--churn-mode", choices=("delete", "patch"), default="delete", help="(--churn) what each cycle does"
    )
    ap.add_argument("--churn-every", type=float, default=1.0, help="(--churn) seconds between two cycles")
    ap.add_argument("--churn-namespaces", type=int, default=1, help="(--churn) namespaces whose Secret churns")
    ap.add_argument("--period", type=float, default=None, help="audit.periodSeconds (default: the chart's 600)")
    ap.add_argument(
        "--setup-qps",
        type=float,
        default=0,
        help="(--churn) the controller's qps during the first full scan only (the set-up; 0: audit.qps); the "
        "churn is measured at audit.qps",
    )
    args = ap.parse_args()
    if args.churn is not None:
        return _main_churn(args)
    if args.census and args.write:
        ap.error("--census stalls the controller while it walks its objects: its figures are not written")
    if args.in_process:
        return _main_in_process(args)
    if args.quick:
        args.jobs, args.namespaces, args.quiet, args.write = 50, 5, 5.0, False
    ensure_built(quiet=True, what="control-plane")
    with ControlPlane(build=False, verbose=False) as cp:
        install_openreports(cp)  # the chart installs them by default: the controller writes its Reports
        created = _populate(cp, args.jobs, args.namespaces)
        r = asyncio.run(measure(cp, args.jobs, args.namespaces, args.quiet, args.watch, args.census, args.qps))
    load = os.getloadavg()[0]
    per_ns = args.jobs // args.namespaces
    head = (
        f"`flock /work/pfw-helpers/bench.lock .venv/bin/python bench/audit_scale.py --jobs {args.jobs} "
        f"--namespaces {args.namespaces}{'' if args.watch is None else f' --watch {args.watch:.0f}'}"
        f"{'' if args.qps is None else f' --qps {args.qps:g}'} --write` "
        f"(Python {sys.version.split()[0]}, {dt.date.today()}, `uptime` load average {load:.1f} on the shared 2 "
        f"cores). {args.jobs} suspended TrainJobs, {per_ns} in each of {args.namespaces} namespaces, created in "
        f"{created:.0f} s; the audit controller in process with the chart's defaults ("
        f"{'qps 20' if args.qps is None else f'but qps {args.qps:g}'}, every check, "
        "Dry Run included; the full scan in two passes; the openreports.io CRDs installed, as the chart does)."
    )
    rows = [
        f"| jobs judged | {r['jobs']} |",
        f"| cheap pass (every job judged by the checks that send no request) | {r['cheap_s']:.1f} s |",
        f"| requests while it ran (Events read back, Lease) | {_calls(r['cheap_calls'])} |",
        f"| RSS after the cheap pass | {r['rss_cheap']:.0f} MiB ({r['rss0_mib']:.0f} MiB before the controller started) |",
    ]
    if "rate" in r:
        left = r["jobs"] / r["rate"] if r["rate"] > 0 else float("inf")
        rows += [
            f"| request pass, watched {r['watched']:.0f} s | {r['rate']:.1f} jobs/s; {_calls(r['watch_calls'])} |",
            f"| full scan (every job complete), extrapolated | {r['cheap_s'] + left:.0f} s |",
            f"| RSS at the end | {r['rss_mib']:.0f} MiB |",
            f"| warnings while measured (Lease lost, writes failed and retried) | {_calls(r['troubles'])} |",
        ]
    else:
        rows += [
            f"| full scan (leading → every job's complete judgement) | {r['scan_s']:.1f} s |",
            f"| every Report written, after the scan's end (they yield to its requests) | {r['reports_after']:.1f} s |",
            f"| requests of the full scan and its Report writes | {_calls(r['scan_calls'])} |",
            f"| RSS of the controller after the scan and its writes; the peak so far | "
            f"{r['rss_mib']:.0f} MiB; {r['rss_peak_scan']:.0f} MiB |",
            f"| requests in {args.quiet:.0f} s of steady state | {_calls(r['quiet_calls'])} |",
            f"| periodic re-scan, nothing changed: time, requests | {r['rescan_s']:.1f} s; {_calls(r['rescan_calls'])} |",
            f"| jobs failing after the scan, by the checks that fail | {_calls(r['failing'])} |",
            f"| ... after the re-scan | {_calls(r['refailing'])} |",
            f"| one Secret deleted: jobs re-checked (of {per_ns} that read it) | {r['deleted']['rechecked']} |",
            f"| ... and its requests | {_calls(r['deleted']['calls'])} |",
            f"| RSS at the end (after the re-scan and the deletion); the peak of the whole run | "
            f"{r['rss_end']:.0f} MiB; {r['rss_peak']:.0f} MiB |",
            f"| warnings while measured (Lease lost, writes failed and retried) | {_calls(r['troubles'])} |",
            f"| the stored Reports against the controller's judgements (every result) | {r['agree']} |",
        ]
    body = "\n".join([head, "", "| what | figure |", "|---|---|", *rows])
    print(body)
    if args.write:
        suffix = ("" if args.watch is None else "-watch") + ("" if args.qps is None else f"-qps{args.qps:g}")
        write_section(f"audit-scale-{args.jobs}{suffix}", body)
    return 0


async def measure_churn(cp: ControlPlane, args: argparse.Namespace) -> dict[str, Any]:
    """The first full scan, then bench/audit_churn.py's churn."""
    from bench.audit_churn import churn

    audit: dict[str, Any] = {"leaseNamespace": "default"}
    if args.period is not None:
        audit["periodSeconds"] = args.period
    settings = Settings.model_validate({"audit": audit})
    logging.getLogger("webhook").addHandler(TROUBLES)
    rss0 = _rss_mib()
    run = await AuditRun.start(settings, kubeconfig=str(cp.kubeconfig), identity="bench", checks=all_checks(),
                               sync_timeout=300)  # fmt: skip
    c = run.controller
    limiter = run.view.client.limiter
    if args.setup_qps:  # the first scan is the set-up, not what is measured: at the apiserver's pace
        limiter.qps = args.setup_qps
    try:
        await _until(lambda: c.is_leader, 60)
        t0 = time.monotonic()
        await _until(lambda: c.scans >= 1, 36000)
        scan = time.monotonic() - t0
        await _sinks_idle(run)
        limiter.qps = settings.audit.qps
        rss_scan = _rss_mib()
        namespaces = [f"scale-{n:04d}" for n in range(min(args.churn_namespaces, args.namespaces))]
        r = await churn(cp, run, namespaces, seconds=args.churn, mode=args.churn_mode, every=args.churn_every)
        return {**r, "rss0": rss0, "rss_scan": rss_scan, "scan_s": scan, "troubles": dict(TROUBLES.counts),
                "peak": _rss_mib("VmHWM"), "namespaces": namespaces}  # fmt: skip
    finally:
        await run.stop()


def _main_churn(args: argparse.Namespace) -> int:
    from bench.audit_churn import drift

    if args.quick:
        args.jobs, args.namespaces, args.write = 50, 5, False
    if not all((cache_dir() / "bin" / b).is_file() for b in ("etcd", "kube-apiserver", "kubectl")):
        ensure_built(quiet=True, what="control-plane")  # built already: no build.sh (it waits for a build in flight)
    with ControlPlane(build=False, verbose=False) as cp:
        install_openreports(cp)
        created = _populate(cp, args.jobs, args.namespaces)
        r = asyncio.run(measure_churn(cp, args))
    load = os.getloadavg()[0]
    per_ns = args.jobs // args.namespaces
    readers = per_ns * len(r["namespaces"])
    first, last, spread = drift(r["samples"])
    period = Settings().audit.period_seconds if args.period is None else args.period
    cmd = (
        f"`flock /work/pfw-helpers/bench.lock .venv/bin/python bench/audit_scale.py --jobs {args.jobs} "
        f"--namespaces {args.namespaces} --churn {args.churn:g} --churn-mode {args.churn_mode} "
        f"--churn-every {args.churn_every:g} --churn-namespaces {args.churn_namespaces}"
        f"{'' if args.period is None else f' --period {args.period:g}'}"
        f"{f' --setup-qps {args.setup_qps:g}' if args.setup_qps else ''} --write`"
    )
    head = (
        f"{cmd} (Python {sys.version.split()[0]}, {dt.date.today()}, `uptime` load average {load:.1f} on the shared "
        f"2 cores). {args.jobs} suspended TrainJobs, {per_ns} in each of {args.namespaces} namespaces (created in "
        f"{created:.0f} s), each reading its namespace's Secret; the audit controller in process with the chart's "
        f"defaults (qps 20, 4 workers, debounce 2 s, every check) and a period of {period:g} s. After the first full "
        f"scan, the Secret of {len(r['namespaces'])} namespace(s) ({readers} jobs read it) was "
        f"{'deleted and created again' if args.churn_mode == 'delete' else 'patched'} every {args.churn_every:g} s "
        f"for {r['seconds']:.0f} s ({r['cycles']} cycles, {r['errors']} failed)."
    )
    marks = [r["samples"][int(i * (len(r["samples"]) - 1) / 4)] for i in range(5)] if r["samples"] else []
    rows = [
        f"| first full scan{f' (at qps {args.setup_qps:g})' if args.setup_qps else ''} | {r['scan_s']:.0f} s; "
        f"RSS {r['rss_scan']:.0f} MiB ({r['rss0']:.0f} before the controller) |",
        "| RSS during the churn (0, ¼, ½, ¾, end) | " + ", ".join(f"{m['rss']:.0f}" for m in marks) + " MiB |",
        f"| RSS after the first quarter: first, last, spread (max-min)/min | {first:.0f}, {last:.0f} MiB; {spread:.1f} % |",
        f"| peak RSS of the run (VmHWM) | {r['peak']:.0f} MiB |",
        f"| CPU of the controller during the churn | {r['cpu_per_s']:.2f} core |",
        f"| evaluations during the churn | {r['evals']} ({r['evals'] / max(1.0, r['seconds']):.1f} a second) |",
        f"| most jobs queued; most asyncio tasks | {r['most_queue']}; {r['most_tasks']} |",
        f"| full scans ended during the churn (period {period:g} s) | {r['scans']} |",
        "| after the last change (the Secret present): until no stored Report says fail | "
        + ("not within 600 s" if r["cleared_s"] is None else f"{r['cleared_s']:.1f} s")
        + f" (at most {r['stale_at_stop']} fails seen meanwhile) |",
        f"| RSS at the end | {r['rss_after']:.0f} MiB |",
        f"| warnings while measured (Lease lost, writes failed and retried) | {_calls(r['troubles'])} |",
    ]
    body = "\n".join([head, "", "| what | figure |", "|---|---|", *rows])
    print(body)
    if args.write:
        write_section(f"audit-churn-{args.churn_mode}-{args.jobs}-{args.churn:g}s", body)
    return 0


def _main_in_process(args: argparse.Namespace) -> int:
    r = asyncio.run(in_process(args.jobs, args.namespaces, census=args.census))
    load = os.getloadavg()[0]
    total = sum(r["requests"].values())
    qps = Settings().audit.qps
    body = "\n".join([
        f"`flock /work/pfw-helpers/bench.lock .venv/bin/python bench/audit_scale.py --in-process --jobs {args.jobs} "
        f"--namespaces {args.namespaces} --write` (Python {sys.version.split()[0]}, {dt.date.today()}, `uptime` load "
        f"average {load:.1f} on the shared 2 cores). The audit controller on tests/fakeview.py's view (no apiserver, "
        "requests answered at once and counted): the same jobs as on the control plane.",
        "",
        "| what | figure |",
        "|---|---|",
        f"| jobs judged | {r['jobs']} |",
        f"| cheap pass (every job judged by the checks that send no request) | {r['cheap_s']:.1f} s |",
        f"| both passes, requests unpaced; CPU of both | {r['scan_wall_s']:.1f} s; {r['cpu_s']:.1f} s |",
        f"| requests of the request pass | {_calls(r['requests'])} ({total / max(1, r['jobs']):.1f} a job) |",
        f"| the request pass at qps {qps:.0f} (requests / qps) | {total / qps:.0f} s |",
        f"| RSS after the scans | {r['rss_mib']:.0f} MiB ({r['rss0_mib']:.0f} MiB before the jobs were made) |",
        f"| periodic re-scan, nothing changed: time, requests | {r['period_s']:.1f} s; {_calls(r['period_requests'])} |",
        f"| ... its CPU, and the jobs' evaluations (one a job: none left for the request pass) | "
        f"{r['period_cpu_s']:.1f} s; {r['period_evaluations']} |",
    ])  # fmt: skip
    print(body)
    if args.write:
        write_section(f"audit-scale-{args.jobs}-in-process", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
