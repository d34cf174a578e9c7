"""How much CPU does one /validate request take in process, and where does it go?

Without sockets or TLS: the webhook's own time.

    .venv/bin/python bench/inproc.py [-n 300] [--profile pyinstrument|cprofile] [--kind aiperf,trainjob,trainjob-rt]
    .venv/bin/python bench/inproc.py --json     # one JSON line per sample: {"kind", "ms", ...}
    .venv/bin/python bench/inproc.py --instructions [--json]   # instructions per request (valgrind)
    .venv/bin/python bench/inproc.py --write [--code DIR --section inproc-before]   # both, into docs/benchmarks/inproc.md
    .venv/bin/python bench/inproc.py --cluster [--json|--profile cprofile|--write]  # with the live cluster view

Each request goes through `WebhookApp.validate` (content-type and size checks, body read,
envelope parse, evaluate, metrics, decision log, JSON answer) with a stand-in for
aiohttp's request object, so the figure is the handler's own CPU; HTTP parsing and TLS
are what bench/run.py's "server path only" rows add on top.

Kinds: `aiperf` (sample AIPerfJob, offline), `trainjob` (sample TrainJob, offline: the
server has no runtime lookup without a cluster, so the adapter stops at the runtime
reference), `trainjob-rt` (the sample TrainJob through `evaluate()` with the sample
ClusterTrainingRuntime given, with a resourceVersion as the watch cache holds it,
plus envelope parse, metrics and the JSON answer as the handler does them).

`--instructions` counts CPU instructions instead of seconds: the same script runs twice
under `valgrind --tool=callgrind` (a warm-up of 30 requests, then 0 or N more, with
PYTHONHASHSEED=0), and the difference of the two totals divided by N is the cost of one
request in instructions. Unlike CPU time it does not move with what else the machine runs
(the two cores are shared), so a change's effect is one comparison; it takes about a
minute per kind (valgrind runs Python ~50x slower).

`--cluster` measures the `*-cluster` kinds instead: the e2e samples
(e2e/samples/*-good.yaml) through the same handler with the real live cluster view, its watch
caches synced against a local control plane (etcd and kube-apiserver from e2e/build.sh, set up
as bench/cluster_bench.py does: the sample namespaces, Secrets, endpoint Service and runtime, a
quota per namespace, three Ready Nodes), with `checks: {Dry Run: off}`. This is what a webhook
pod spends per review in a cluster once its caches are warm (the Dry Run round trips aside);
`aiperf-cluster-dryrun` and `trainjob-cluster-dryrun` run the same with Dry Run on and its
outcomes cached (what a repeated apply costs: the probe objects and their keys, no round
trip). `--profile` works the same. Instructions are not counted for these (valgrind would have to
sync the caches 50x slower).

`--creates` makes every request a new create of the same object: its own metadata.uid and
creationTimestamp, as the apiserver gives every create (a dry run too). Without it every request
sends the same uid, which is the case of a retried review or the audit controller's next pass.

`--write` measures both for every kind and writes the `inproc` section of
docs/benchmarks/inproc.md; `--code DIR` measures the webhook package of another checkout (e.g. a
`git worktree` of an older commit) with this script and these samples.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
#: the checkout whose webhook package is measured (--code DIR sets it and runs this script again)
CODE = Path(os.environ.get("PREFLIGHT_BENCH_CODE") or ROOT)
sys.path.insert(0, str(ROOT))

from bench.common import FakeRequest, review, write_section  # noqa: E402  (this checkout's: it writes our docs/benchmarks/)

if CODE != ROOT:
    sys.path.insert(0, str(CODE))  # the webhook package below comes from there

from webhook.admission import parse_review_bytes, response_from_decision  # noqa: E402
from webhook.config import Settings  # noqa: E402
from webhook.deadline import Deadline  # noqa: E402
from webhook.manifests import split_runtimes  # noqa: E402
from webhook.preflight import evaluate  # noqa: E402
from webhook.server import WebhookApp  # noqa: E402

SAMPLES = ROOT / "tests" / "oracle" / "samples"


CLUSTER_KINDS = ("aiperf-cluster", "trainjob-cluster", "aiperf-cluster-dryrun", "trainjob-cluster-dryrun")
#: the cluster view of a --cluster run, opened once per process (set by `open_view`)
VIEW: Any = None


async def open_view(kubeconfig: str) -> Any:
    """The live cluster view the `*-cluster` kinds run against, its caches synced."""
    global VIEW
    from webhook.checks import all_checks
    from webhook.cluster.live import open_cluster_view

    VIEW = await open_cluster_view(CLUSTER_SETTINGS, kubeconfig=kubeconfig, checks=all_checks())
    await VIEW.wait_synced(60)
    return VIEW


CLUSTER_SETTINGS = Settings.model_validate({"checks": {"Dry Run": "off"}})
#: the `*-dryrun` kinds: Dry Run on, its outcomes kept long enough for every block to hit them
#: (the steady state of the same content applied again; the first review pays the round trips)
DRYRUN_SETTINGS = Settings.model_validate({"dryRunCacheSeconds": 300})


#: --creates: every request a new create (its own uid and creationTimestamp)
CREATES = False


def _creates(obj: dict[str, Any]) -> Any:
    """Review bodies of new creates of ``obj``, one per call (made ahead: the loop measures the webhook)."""
    import uuid
    from datetime import UTC, datetime, timedelta

    start = datetime(2026, 1, 1, tzinfo=UTC)
    bodies = []
    for i in range(4000):
        meta = {**obj["metadata"], "uid": str(uuid.UUID(int=i + 1, version=4))}
        meta["creationTimestamp"] = (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        bodies.append(review({**obj, "metadata": meta}))
    i = 0

    def next_body() -> bytes:
        nonlocal i
        i += 1
        return bodies[i % len(bodies)]

    return next_body


def make_call(kind: str) -> tuple[Any, bytes]:
    settings = Settings()
    if kind in CLUSTER_KINDS:
        if VIEW is None:
            raise SystemExit(f"{kind} needs --cluster (a local control plane)")
        sample = (
            ROOT / "e2e" / "samples" / ("aiperfjob-good.yaml" if kind.startswith("aiperf") else "trainjob-good.yaml")
        )
        capp = WebhookApp(DRYRUN_SETTINGS if kind.endswith("-dryrun") else CLUSTER_SETTINGS, view=VIEW)
        cobj = yaml.safe_load(sample.read_text())
        cbody = review(cobj)
        cnext = _creates(cobj) if CREATES else lambda: cbody

        async def call_cluster() -> Any:
            return await capp.validate(FakeRequest(cnext()))  # type: ignore[arg-type]

        return call_cluster, cbody
    if kind in ("aiperf", "trainjob"):
        obj = yaml.safe_load((SAMPLES / ("aiperfjob.yaml" if kind == "aiperf" else "trainjob.yaml")).read_text())
        app = WebhookApp(settings)
        body = review(obj)
        next_body = _creates(obj) if CREATES else lambda: body

        async def call() -> Any:
            return await app.validate(FakeRequest(next_body()))  # type: ignore[arg-type]

        return call, body
    docs = [yaml.safe_load((SAMPLES / f).read_text()) for f in ("trainjob.yaml", "clustertrainingruntime.yaml")]
    docs[1]["metadata"]["resourceVersion"] = "1"  # as the watch cache holds it (the webhook's case)
    jobs, lookup = split_runtimes(docs)
    body = review(jobs[0])
    app = WebhookApp(settings)

    async def call_rt() -> Any:
        rv = parse_review_bytes(body, app.loads)
        req = rv.request
        ev = await evaluate(
            req.object,
            settings=settings,
            deadline=Deadline(settings.budget_seconds),
            operation=req.operation,
            runtime_lookup=lookup,
            namespace=req.namespace or None,
            checks=app.checks,
        )
        app.metrics.observe_checks(ev.results.checks)
        app.metrics.observe_request(req.kind.kind, req.operation, ev.decision.outcome, 0.001)
        return app.dumps(response_from_decision(req.uid, ev.decision))

    return call_rt, body


async def count_run(kind: str, n: int) -> None:
    """The body valgrind counts: 30 warm-up requests (imports, caches), then `n` more."""
    call, _ = make_call(kind)
    for _ in range(30 + n):
        await call()


def instructions(kind: str, n: int) -> dict[str, Any]:
    """Instructions per request: two callgrind runs, 0 and `n` requests after the warm-up."""
    totals = []
    for k in (0, n):
        argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                __file__, "--kind", kind, "--count-run", str(k), *(["--creates"] if CREATES else [])]  # fmt: skip
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
        m = re.search(r"Collected : (\d+)", done.stderr)
        if m is None:
            raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
        totals.append(int(m.group(1)))
    return {"kind": kind, "instructions": round((totals[1] - totals[0]) / n), "n": n}


async def cpu_ms(kind: str, n: int) -> tuple[float, dict[str, Any], int]:
    """(CPU ms per request: the best of 7 blocks of n, the answer, the body's size)."""
    call, body = make_call(kind)
    first = await call()
    text = first.body if hasattr(first, "body") else first
    answer = json.loads(text)["response"]
    for _ in range(30):  # imports, caches
        await call()
    best = float("inf")
    for _ in range(7):  # the machine is shared: the best block is the least disturbed one
        c0 = time.process_time()
        for _ in range(n):
            await call()
        best = min(best, (time.process_time() - c0) * 1000.0 / n)
    return best, answer, len(body)


#: issue 13's CPU targets per kind (ms per request, in process)
TARGETS = {"aiperf": 0.5, "trainjob": 0.2, "trainjob-rt": 0.2}
WHAT = {
    "aiperf": "sample AIPerfJob, offline",
    "trainjob": "sample TrainJob, offline (stops at the runtime reference)",
    "trainjob-rt": "sample TrainJob with its ClusterTrainingRuntime",
    "aiperf-cluster": "e2e sample AIPerfJob, live cluster view (warm caches, Dry Run off)",
    "trainjob-cluster": "e2e sample TrainJob, live cluster view (warm caches, Dry Run off)",
    "aiperf-cluster-dryrun": "the same AIPerfJob, Dry Run on, its outcomes cached",
    "trainjob-cluster-dryrun": "the same TrainJob, Dry Run on, its outcomes cached",
}


def _head(title: str, flags: str, section: str, default: str, load: tuple[float, float, float]) -> str:
    """A section's title, command and machine line (the `--code` checkout named when it is another)."""
    code = "" if CODE == ROOT else f" --code {CODE}"
    args = f"{flags}{code}" + ("" if section == default else f" --section {section}")
    return f"""## {title}{f" (code: `{CODE}`)" if code else ""}

Command: `.venv/bin/python bench/inproc.py {args}`

Python {sys.version.split()[0]}, {os.cpu_count()} cores shared with other work (load average
{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at the start)."""


def write(kinds: list[str], n: int, section: str) -> None:
    """Measure CPU ms and instructions per request for each kind; write docs/benchmarks/inproc.md's section."""
    load = os.getloadavg()
    rows = []
    for kind in kinds:
        ms, answer, _ = asyncio.run(cpu_ms(kind, n))
        instr = instructions(kind, min(n, 100))["instructions"]
        target = TARGETS.get(kind)
        verdict = "" if target is None else ("met" if ms <= target else "**not met**")
        rows.append(f"| {kind} | {WHAT.get(kind, kind)} | {ms:.3f} | {instr:,} | ≤ {target} | {verdict} |")
        print(rows[-1], flush=True)
    head = _head("CPU per review in process (bench/inproc.py)", "--write", section, "inproc", load)
    body = f"""{head} Each request goes through the
/validate handler (envelope, adapter, checks, policy, metrics, JSON answer) without sockets or
TLS. *CPU ms*: process CPU time per request, the best of 7 blocks of {n} (it still moves with
the machine's load). *Instructions*: per request under `valgrind --tool=callgrind`, the
difference of two runs (30 warm-up requests, then 0 or {min(n, 100)} more), which does not move
with the load: the figure to compare between commits.

| kind | what | CPU ms per request | instructions per request | target (ms) | verdict |
|---|---|---:|---:|---:|---|
""" + "\n".join(rows)
    write_section(section, body)


async def cluster_rows(kinds: list[str], n: int) -> list[str]:
    rows = []
    for kind in kinds:
        ms, answer, _ = await cpu_ms(kind, n)
        rows.append(
            f"| {kind} | {WHAT[kind]} | {ms:.3f} | allowed={answer['allowed']}, "
            f"{len(answer.get('warnings') or [])} warning(s) |"
        )
        print(rows[-1], flush=True)
    return rows


def write_cluster(rows: list[str], n: int, load: tuple[float, float, float], section: str) -> None:
    """The `inproc-cluster` section (or `section`): CPU ms per review with the live cluster view."""
    section = "inproc-cluster" if section == "inproc" else section
    head = _head(
        "CPU per review in process, with the live cluster view", "--cluster --write", section, "inproc-cluster", load
    )
    body = f"""{head} The /validate handler as above, with
the real live cluster view (watch caches synced against a local etcd and kube-apiserver holding
the sample namespaces, Secrets, endpoint Service, ClusterTrainingRuntime, a ResourceQuota per
namespace and three Ready Nodes), `checks: {{Dry Run: off}}` (the `-dryrun` kinds: Dry Run on,
its outcomes kept, so each review builds and keys the probe objects without a round trip):
what a webhook pod spends per review once its caches are warm. *CPU ms*: the best of 7 blocks
of {n}.

| kind | what | CPU ms per request | answer |
|---|---|---:|---|
""" + "\n".join(rows)
    write_section(section, body)


def run_cluster(args: argparse.Namespace) -> int:
    """The `*-cluster` kinds against a local control plane started for the run."""
    from bench.cluster_bench import setup_samples
    from e2e.harness.controlplane import ControlPlane

    kinds = [k for k in args.kind.split(",") if k in CLUSTER_KINDS] or list(CLUSTER_KINDS)
    load = os.getloadavg()
    with ControlPlane() as cp:
        setup_samples(cp)

        async def go() -> list[str]:
            view = await open_view(str(cp.kubeconfig))
            try:
                if args.write:
                    return await cluster_rows(kinds, args.n)
                for kind in kinds:
                    await measure(kind, args.n, args.profile, args.json)
                return []
            finally:
                await view.close()

        rows = asyncio.run(go())
    if args.write:
        write_cluster(rows, args.n, load, args.section)
    return 0


async def measure(kind: str, n: int, profile: str | None, as_json: bool = False) -> None:
    from webhook.workloads import render_cache

    call, body = make_call(kind)
    hits0, misses0 = render_cache.stats()
    best, answer, _ = await cpu_ms(kind, n)
    hits, misses = (a - b for a, b in zip(render_cache.stats(), (hits0, misses0), strict=True))
    if as_json:
        line = {"kind": kind, "ms": round(best, 4), "n": n, "blocks": 7, "body_bytes": len(body)}
        line |= {"render_hits": hits, "render_misses": misses, "creates": CREATES}
        print(json.dumps({**line, "allowed": answer["allowed"], "warnings": len(answer.get("warnings") or [])}))
    else:
        print(
            f"{kind}: {best:.3f} ms CPU/request (best of 7 x {n}); body {len(body)} bytes; "
            f"allowed={answer['allowed']} warnings={len(answer.get('warnings') or [])}; "
            f"render cache {hits} hits, {misses} misses{' (every request a new create)' if CREATES else ''}",
            flush=True,
        )
    if profile == "pyinstrument":
        from pyinstrument import Profiler

        prof = Profiler(interval=0.0002, async_mode="disabled")
        prof.start()
        for _ in range(n):
            await call()
        prof.stop()
        print(prof.output_text(unicode=False, color=False, show_all=False))
    elif profile == "cprofile":
        import cProfile
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        for _ in range(n):
            await call()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(35)
        pstats.Stats(pr).sort_stats("cumulative").print_stats(45)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=300)
    p.add_argument("--profile", choices=("pyinstrument", "cprofile"))
    p.add_argument("--kind", default="aiperf,trainjob,trainjob-rt")
    p.add_argument("--json", action="store_true", help="one JSON line per kind (CPU ms per request, best block)")
    p.add_argument("--instructions", action="store_true", help="instructions per request under valgrind instead")
    p.add_argument("--count-run", type=int, help=argparse.SUPPRESS)  # the body --instructions runs under valgrind
    p.add_argument(
        "--write", action="store_true", help="CPU ms and instructions per kind into docs/benchmarks/inproc.md"
    )
    p.add_argument("--section", default="inproc", help="the docs/benchmarks/inproc.md section --write replaces")
    p.add_argument(
        "--cluster",
        action="store_true",
        help="the *-cluster kinds: the live cluster view against a local control plane",
    )
    p.add_argument("--code", help="measure the webhook package of this checkout instead of this one")
    p.add_argument("--quick", action="store_true", help="a smoke run in seconds at toy sizes; writes nothing")
    p.add_argument(
        "--creates", action="store_true", help="every request a new create: its own uid and creationTimestamp"
    )
    args = p.parse_args()
    global CREATES
    CREATES = args.creates
    if args.quick:
        args.n, args.write, args.instructions, args.profile = 20, False, False, None
    if args.code and Path(args.code).resolve() != CODE.resolve():
        env = {**os.environ, "PREFLIGHT_BENCH_CODE": str(Path(args.code).resolve())}
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], env)
    if args.cluster:
        return run_cluster(args)
    if args.write:
        write(args.kind.split(","), args.n, args.section)
        return 0
    if args.count_run is not None:
        asyncio.run(count_run(args.kind, args.count_run))
        return 0
    if args.instructions:
        n = min(args.n, 100)
        for kind in args.kind.split(","):
            line = instructions(kind, n)
            print(json.dumps(line) if args.json else f"{kind}: {line['instructions']:,} instructions/request (n={n})")
        return 0
    for kind in args.kind.split(","):
        asyncio.run(measure(kind, args.n, args.profile, args.json))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
