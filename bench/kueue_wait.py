"""What does Kueue Capacity's "will wait" warning add to an apply when 1,000 workloads are pending?

    .venv/bin/python bench/kueue_wait.py [--pending 1000] [-n 2000] [--rounds 5] [--write]
    .venv/bin/python bench/kueue_wait.py --quick        # toy sizes, writes nothing

Issue 39's bound: on a queue of 1,000 pending workloads the apply path adds at most 5 ms. The
check (webhook/checks/kueue/capacity.py, its facts in webhook/models/kueue/wait.py) runs in
process on one TrainJob of 2 pods x 8 nvidia.com/gpu going to LocalQueue "main" of a ClusterQueue
whose 64 GPUs are all in use, so the job will wait and the warning is built every time:

empty queue          no workload pending (the status's pendingWorkloads 0, the visibility API's
                     answer 0 items): the baseline
N pending, API       Kueue's visibility API serves N pending workloads (pendingworkloads of the
                     ClusterQueue, each as Kueue v0.17.0 writes it: metadata with an
                     ownerReference, priority, localQueueName, both positions); the answer is
                     reused PENDING_TTL seconds as in production, so an apply within the window
                     reads it from memory (the row measured)
N pending, API,      the first apply of a PENDING_TTL window: the GET's body (N items as JSON) is
first in window      decoded as the client decodes it (json.loads), then kept; once per window
                     per ClusterQueue, not per apply
N pending, status    the visibility API not served: the count is the ClusterQueue status's
                     pendingWorkloads (a number in the watched object)

The reads are the production ones: the cached lists (ClusterQueues, LocalQueues, namespaces,
PriorityClasses) are in memory as the watch caches hold them (references, no copy), and the
visibility read goes through LiveClusterView.get_object (webhook/cluster/live.py: the declared
reads, the single-flight, the TTL reuse) with a stand-in for the apiserver client that returns
the decoded body (no socket: the check's own time). The clock of the view is the bench's, so the
"within the window" rows never expire and the "first in window" row always does. Figures are wall
milliseconds per check (one thread, nothing else on the loop): the median and the 99th percentile of
``-n`` runs, the best round of ``--rounds`` (the machine is shared). "adds" is the row's median minus
the empty queue's. ``--write`` puts the table into docs/benchmarks/kueue-wait.md (section
bench:kueue-wait).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import write_section  # noqa: E402
from tests.fakeview import FakeView, container, meta, pod, workload  # noqa: E402  (an in-memory cluster)
from webhook.checks import all_checks  # noqa: E402
from webhook.checks.base import CheckContext  # noqa: E402
from webhook.checks.kueue.capacity import KueueCapacity  # noqa: E402
from webhook.cluster.live import LiveClusterView  # noqa: E402
from webhook.config import Settings  # noqa: E402
from webhook.deadline import Deadline  # noqa: E402
from webhook.models.kueue.wait import PENDING_TTL, VISIBILITY_API  # noqa: E402
from webhook.objects import PodSpec  # noqa: E402
from webhook.results import Status  # noqa: E402
from webhook.workloads.base import PodGroup  # noqa: E402

NS = "team-a"
CQ = "a100"
FLAVOR = "a100-80g"
GPU = "nvidia.com/gpu"
SERVED = {"v1", "trainer.kubeflow.org/v1alpha1", "kueue.x-k8s.io/v1beta2"}
ACTIVE = {"conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]}


class Clock:
    """The view's clock: the bench sets it (a window that never ends, or one that ended)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Apiserver:
    """Stands in for KubeClient: answers the visibility GET with the decoded body, as the client does
    (webhook/cluster/client.py: ``json.loads`` of the bytes read), and counts the GETs."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.gets = 0

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        assert method == "GET" and path.endswith(f"/clusterqueues/{CQ}/pendingworkloads"), path
        self.gets += 1
        doc: dict[str, Any] = json.loads(self.body)
        return doc

    async def close(self) -> None:
        pass


class Cluster(FakeView):
    """The watch caches as memory (references, as the Reflector's cache returns them) and the visibility
    read through the production LiveClusterView.get_object."""

    def __init__(self, live: LiveClusterView, served: set[str]) -> None:
        super().__init__(served=served)
        self.live_view = live

    def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [
            o
            for o in self.objects.get(resource, [])
            if namespace is None or (o.get("metadata") or {}).get("namespace") in (None, namespace)
        ]

    def get_cached(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return next((o for o in self.list_cached(resource, namespace) if o["metadata"]["name"] == name), None)

    async def get_object(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        """The live view's read as it is (its TTL reuse and decoding: what the bench measures)."""
        return await self.live_view.get_object(*args, **kwargs)


def pending_answer(n: int) -> bytes:
    """The visibility API's answer for ``n`` pending workloads of the ClusterQueue (Kueue v0.17.0
    pkg/visibility/storage/utils.go newPendingWorkload), highest priority first."""
    items = [
        {
            "metadata": {
                "name": f"trainjob-job-{i:04d}-3f2a1",
                "namespace": f"team-{i % 20}",
                "creationTimestamp": "2026-12-06T02:00:00Z",
                "ownerReferences": [
                    {
                        "apiVersion": "trainer.kubeflow.org/v1alpha1",
                        "kind": "TrainJob",
                        "name": f"job-{i:04d}",
                        "uid": f"00000000-0000-4000-8000-{i:012d}",
                    }
                ],
            },
            "priority": 1000 - i,
            "localQueueName": "main",
            "positionInClusterQueue": i,
            "positionInLocalQueue": i,
        }
        for i in range(n)
    ]
    return json.dumps({"kind": "PendingWorkloadsList", "apiVersion": VISIBILITY_API, "items": items}).encode()


def cluster_queue(pending: int) -> dict[str, Any]:
    rows = [{"name": FLAVOR, "resources": [{"name": GPU, "total": "64"}]}]
    groups = [
        {"coveredResources": [GPU], "flavors": [{"name": FLAVOR, "resources": [{"name": GPU, "nominalQuota": "64"}]}]}
    ]
    return {
        "metadata": meta(CQ),
        "spec": {"namespaceSelector": {}, "resourceGroups": groups},
        "status": {**ACTIVE, "pendingWorkloads": pending, "flavorsUsage": rows, "flavorsReservation": rows},
    }


def job() -> Any:
    """The TrainJob that will wait: 2 pods x 8 GPUs on LocalQueue "main"."""
    obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama-ft", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "main"}},
        "spec": {},
    }
    return workload(
        [PodGroup("node", 2, cast(PodSpec, pod(container("node", {GPU: "8"}))))], obj=obj, queue_name="main"
    )


def setup(pending: int, *, api: bool) -> tuple[Cluster, Clock, Apiserver]:
    clock = Clock()
    server = Apiserver(pending_answer(pending))
    live = LiveClusterView(Settings(), server, checks=all_checks(), clock=clock, own_ns="preflight-system")  # type: ignore[arg-type]
    view = Cluster(live, SERVED | ({VISIBILITY_API} if api else set()))
    view.add("namespaces", {"metadata": meta(NS)})
    view.add("localqueues", {"metadata": meta("main", NS), "spec": {"clusterQueue": CQ}, "status": ACTIVE})
    view.add("clusterqueues", cluster_queue(pending))
    return view, clock, server


async def timed(view: Cluster, clock: Clock, n: int, *, expire: bool) -> list[float]:
    """``n`` runs of the check, wall ms each; ``expire``: every run is the first of its PENDING_TTL window."""
    check, wl, settings = KueueCapacity(), job(), Settings()
    out = []
    for _ in range(n):
        if expire:
            clock.now += PENDING_TTL + 1
        ctx = CheckContext(workload=wl, deadline=Deadline(5.0), settings=settings, view=view)
        t0 = time.perf_counter()
        r = await check.run(ctx)
        out.append((time.perf_counter() - t0) * 1000)
        assert r.status is Status.WARN and " will wait in ClusterQueue " in r.message, r.message
    return out


#: (row, pending workloads or None for --pending, visibility API served, first in its window)
CASES: list[tuple[str, int | None, bool, bool]] = [
    ("empty queue, API", 0, True, False),
    ("empty queue, status", 0, False, False),
    ("{n} pending, API (within the window)", None, True, False),
    ("{n} pending, API (first in the window)", None, True, True),
    ("{n} pending, status", None, False, False),
]


async def measure(pending: int, n: int, rounds: int) -> list[dict[str, Any]]:
    rows = []
    for label, count, api, expire in CASES:
        size = pending if count is None else count
        view, clock, server = setup(size, api=api)
        await timed(view, clock, 20, expire=expire)  # warm: imports, the first read, caches
        best: list[float] | None = None
        for _ in range(rounds):
            got = sorted(await timed(view, clock, n, expire=expire))
            if best is None or statistics.median(got) < statistics.median(best):
                best = got
        assert best is not None
        ctx = CheckContext(workload=job(), deadline=Deadline(5.0), settings=Settings(), view=view)
        message = (await KueueCapacity().run(ctx)).message
        rows.append(
            {
                "case": label.format(n=f"{pending:,}"),
                "pending": size,
                "api": api,
                "first_in_window": expire,
                "median_ms": statistics.median(best),
                "p99_ms": best[min(len(best) - 1, int(len(best) * 0.99))],
                "gets": server.gets,
                "message": message,
            }
        )
    return rows


def render(rows: list[dict[str, Any]], command: str, n: int, rounds: int) -> str:
    base = {r["api"]: r["median_ms"] for r in rows if r["pending"] == 0}
    load = os.getloadavg()[0]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    lines = [
        '## Kueue Capacity\'s "will wait" at 1,000 pending workloads (`bench/kueue_wait.py`)',
        "",
        f"`{command}` on {time.strftime('%Y-%m-%d', time.gmtime())}, commit {commit.stdout.strip() or '?'}, "
        f"load average {load:.1f} at the start (2 shared cores); {n} runs a row, the best of {rounds} rounds; "
        "wall ms per check, in process. adds = the row's median minus the empty queue's (same source).",
        "",
        "| case | median ms | p99 ms | adds ms | visibility GETs |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        adds = r["median_ms"] - base[r["api"]]
        lines.append(f"| {r['case']} | {r['median_ms']:.3f} | {r['p99_ms']:.3f} | {adds:+.3f} | {r['gets']:,} |")
    full = next(r for r in rows if r["pending"] and r["api"] and not r["first_in_window"])
    lines += ["", "The warning at that size, as the check wrote it:", "", f"> {full['message']}", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/kueue_wait.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pending", type=int, default=1000, help="pending workloads in the ClusterQueue (default 1000)")
    ap.add_argument("-n", type=int, default=2000, help="runs of the check per row and round (default 2000)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per row; the best is kept (default 5)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write docs/benchmarks/kueue-wait.md (bench:kueue-wait)")
    mode.add_argument("--quick", action="store_true", help="toy sizes, writes nothing")
    args = ap.parse_args()
    if args.quick:
        args.pending, args.n, args.rounds = 50, 20, 1
    command = "bench/kueue_wait.py " + " ".join(sys.argv[1:])
    rows = asyncio.run(measure(args.pending, args.n, args.rounds))
    text = render(rows, command.strip(), args.n, args.rounds)
    print(json.dumps(rows, indent=1) if args.json else text)
    if args.write:
        write_section("kueue-wait", text)
        print("wrote docs/benchmarks/kueue-wait.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
