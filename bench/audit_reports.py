"""What does the Policy Report sink cost at scale, and how many writes does a steady state cause?

In process (webhook/audit/reports.py): what one namespace of N jobs costs to build and write, and
how many writes steady state causes (the target: at most one write per changed result, none while
nothing changes).

    .venv/bin/python bench/audit_reports.py --jobs 1000 --write

The apiserver is an in-memory stand-in counting requests (the sink's write decisions are pure logic;
e2e/test_audit_reports_live.py runs the sink against the real apiserver). Each job is an AIPerfJob
judged once through webhook.preflight.evaluate (offline checks) and republished as-is.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import write_section
from webhook.audit.client import TokenBucket
from webhook.audit.reports import ReportSink, report_path
from webhook.audit.sink import JobRef, Judgement
from webhook.checks import all_checks
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.kube import ApiError
from webhook.preflight import evaluate


class Store:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: dict[str, int] = {}
        self.bytes_written = 0

    async def request(self, method: str, path: str, *, timeout: float, query: Any = None, body: Any = None) -> Any:
        self.calls[method] = self.calls.get(method, 0) + 1
        if method == "GET":
            if path not in self.objects:
                raise ApiError(404, "not found")
            return copy.deepcopy(self.objects[path])
        obj = copy.deepcopy(body)
        self.bytes_written += len(json.dumps(obj, separators=(",", ":")))
        key = path if method == "PUT" else f"{path}/{obj['metadata']['name']}"
        obj["metadata"]["resourceVersion"] = str(sum(self.calls.values()))
        self.objects[key] = obj
        return copy.deepcopy(obj)


class Paced(Store):
    """The stand-in, paced as the audit controller's client is (webhook/audit/client.py TokenBucket), at
    2,000 requests a second: a scan's writes wait their turn, as they do behind audit.qps."""

    def __init__(self) -> None:
        super().__init__()
        self.limiter = TokenBucket(2000, 40)

    async def request(self, method: str, path: str, *, timeout: float, query: Any = None, body: Any = None) -> Any:
        await self.limiter.wait()
        answer = await super().request(method, path, timeout=timeout, query=query, body=body)
        if method in ("POST", "PUT"):  # keep only the metadata: the peak is the sink's, not the stand-in's
            key = path if method == "PUT" else f"{path}/{answer['metadata']['name']}"
            self.objects[key] = {"metadata": self.objects[key]["metadata"], "results": []}
        return answer


def job(i: int, bad: bool) -> dict[str, Any]:
    image = "nvcr.io/nvidia/AIPERF:0.13.0" if bad else "nvcr.io/nvidia/aiperf:0.13.0"
    return {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "metadata": {"name": f"bench-{i}", "namespace": "team-a"},
        "spec": {
            "image": image,
            "benchmark": {
                "models": ["m"],
                "endpoint": {"urls": ["http://llm.example.com:8000"]},
                "datasets": [{"name": "main", "type": "synthetic", "entries": 10}],
                "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 10, "requests": 10}],
            },
        },
    }


async def run(n: int) -> dict[str, Any]:
    settings = Settings(mode="audit")
    checks = [c for c in all_checks() if not c.needs_cluster]
    now = dt.datetime.now(dt.UTC)
    judgements = []
    for i in range(n):
        ev = await evaluate(job(i, i % 10 == 0), settings=settings, deadline=Deadline(5), checks=checks)
        ref = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", "team-a", f"bench-{i}", f"uid-{i}")
        judgements.append(Judgement(ref, ev, "1", now, "scan"))
    store = Store()
    sink = ReportSink(store, settings, debounce=0.05)
    t0 = time.perf_counter()
    for j in judgements:  # the full scan
        await sink.publish(j)
    await sink.idle()
    scan = time.perf_counter() - t0
    after_scan = dict(store.calls)
    t0 = time.perf_counter()
    for j in judgements:  # a periodic re-check that finds the same
        await sink.publish(j)
    await sink.idle()
    recheck = time.perf_counter() - t0
    steady = {k: v - after_scan.get(k, 0) for k, v in store.calls.items()}
    report = store.objects[report_path("team-a")]
    return {
        "jobs": n,
        "results": len(report["results"]),
        "summary": report["summary"],
        "limited": report.get("configuration"),
        "size": len(json.dumps(report, separators=(",", ":"))),
        "scan_s": scan,
        "scan_writes": {k: v for k, v in after_scan.items() if k != "GET"},
        "recheck_s": recheck,
        "recheck_writes": {k: v for k, v in steady.items() if k != "GET" and v},
    }


async def memory(namespaces: int, per_ns: int = 10) -> dict[str, Any]:
    """What the sink holds for `namespaces` namespaces of `per_ns` AIPerfJobs each, after a full scan
    (tracemalloc, the stand-in apiserver's copies left out): all of it, and what it keeps of the
    reports as last written (webhook/audit/reports.py `Kept`)."""
    import gc
    import tracemalloc

    settings = Settings(mode="audit")
    checks = [c for c in all_checks() if not c.needs_cluster]
    now = dt.datetime.now(dt.UTC)
    evs = [
        await evaluate(job(i, i % 10 == 0), settings=settings, deadline=Deadline(5), checks=checks)
        for i in range(per_ns)
    ]
    store = Paced()
    sink = ReportSink(store, settings, debounce=0)
    gc.collect()
    tracemalloc.start()
    # as a cheap pass does: every namespace's jobs judged at once, their writes then wait on the qps
    for n in range(namespaces):
        for i, ev in enumerate(evs):
            ref = JobRef("aiperf.nvidia.com/v1alpha1", "AIPerfJob", f"ns-{n:04d}", f"bench-{i}", f"uid-{n}-{i}")
            await sink.publish(Judgement(ref, ev, "1", now, "scan"))
    await sink.idle()
    peak = tracemalloc.get_traced_memory()[1]
    results = len(sink.entries("ns-0000"))
    store.objects.clear()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    sink._remote.clear()
    gc.collect()
    without = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {"namespaces": namespaces, "per_ns": per_ns, "results": results, "held": held, "kept": held - without,
            "peak": peak}  # fmt: skip


def _writes(calls: dict[str, int]) -> str:
    names = {"POST": "create", "PUT": "update"}
    return ", ".join(f"{n} {names.get(m, m)}" for m, n in sorted(calls.items()) if n) or "none"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="+", default=[100, 1000], help="namespace sizes (default 100 1000)")
    ap.add_argument("--write", action="store_true", help="write the section of docs/benchmarks/audit-reports.md")
    ap.add_argument(
        "--quick", action="store_true", help="a smoke run in seconds at toy sizes; writes nothing (20 jobs)"
    )
    ap.add_argument(
        "--memory", type=int, metavar="N", default=0,
        help="instead: what the sink holds for N namespaces of 10 jobs each (tracemalloc); with --write, its section",
    )  # fmt: skip
    args = ap.parse_args()
    if args.memory:
        m = asyncio.run(memory(args.memory))
        body = (
            f"`.venv/bin/python bench/audit_reports.py --memory {args.memory} --write` (Python {sys.version.split()[0]}, "
            f"{dt.date.today()}). {m['namespaces']} namespaces of {m['per_ns']} AIPerfJobs (one in ten broken), "
            f"{m['results']} results a report, after a full scan (tracemalloc; the stand-in apiserver's copies left out): "
            f"the sink holds {m['held'] / 2**20:.1f} MiB, of which {m['kept'] / 2**20:.1f} MiB is what it keeps of the "
            f"reports as last written ({m['kept'] / m['namespaces'] / 1024:.1f} KiB a namespace). Peak while the "
            f"scan's writes waited on the client's pace (as behind audit.qps): {m['peak'] / 2**20:.1f} MiB."
        )
        print(body)
        if args.write:
            write_section("audit-reports-memory", body)
        return 0
    if args.quick:
        args.jobs, args.write = [20], False
    rows = [asyncio.run(run(n)) for n in args.jobs]
    lines = [
        f"`.venv/bin/python bench/audit_reports.py --jobs {' '.join(map(str, args.jobs))} --write` "
        f"(Python {sys.version.split()[0]}, {dt.date.today()}). One namespace, N AIPerfJobs (one in ten broken), "
        "published to the Report sink as a full scan and then again unchanged (a periodic re-check).",
        "",
        "| jobs | results in the report | report size | scan: sink time | scan: writes | re-check: sink time | re-check: writes |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        limited = " (limited: fail kept)" if r["limited"] else ""
        lines.append(
            f"| {r['jobs']} | {r['results']}{limited} | {r['size'] / 1024:.0f} KiB | {r['scan_s'] * 1000:.0f} ms "
            f"| {_writes(r['scan_writes'])} | {r['recheck_s'] * 1000:.0f} ms | {_writes(r['recheck_writes'])} |"
        )
    body = "\n".join(lines) + (
        "\n\nThe re-check writes nothing: a report is written only when a result changes. Above 1 MiB "
        "(here ~2 MiB of results at 1000 jobs) the report keeps whole statuses, fail first, and says so in "
        "`configuration.limits`; the summary counts every result."
    )
    print(body)
    if args.write:
        write_section("audit-reports", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
