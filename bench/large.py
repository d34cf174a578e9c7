"""Is the work linear in the object, and how long is the event loop held, at the largest objects the apiserver stores?

    .venv/bin/python bench/large.py [--shape NAME,...] [--scale 1.0] [--json]
    .venv/bin/python bench/large.py --stall [--shape NAME,...] [--write]   # the longest loop gap per review
    .venv/bin/python bench/large.py --quick                                 # a smoke run in seconds

Each shape is an AIPerfJob, AIPerfSweep or TrainJob grown to etcd's default object limit
(1.5 MiB of JSON, objectLimits.maxBytes) in one direction, sent through the /validate handler
in process as bench/inproc.py does (envelope parse, evaluate, policy, answer), offline. `--scale`
shrinks every shape (0.5: half the entries), so two runs show whether the cost doubles with the
size or grows faster. The figure is process CPU time per review, the best of 3.

Shapes:
  records-fit     inline records (spec.benchmark.datasets[0].records) just under the 1 MiB ConfigMap
  records-max     inline records filling the object to 1.5 MiB (denied by ConfigMap Size)
  values-max      the most JSON values 1.5 MiB holds: spec.variables {"v": [0, 0, ...]}
  records-deep    records nested as deep as the AIPerf operator writes them (247 levels: its orjson's limit)
  labels-max      metadata.labels with 60,000 entries
  env-max         spec.podTemplate.env with 20,000 entries (copied into every container)
  sweep-max       an AIPerfSweep of 200 variations whose records fill a ~1 MiB object
  trainjob-env    a TrainJob whose spec.trainer.env fills 1.5 MiB, with its ClusterTrainingRuntime

`--stall`: a ticker coroutine asks for the loop every millisecond while the /validate handler judges
one review in process (offline); the figure is the longest gap it saw beyond its own millisecond,
the worst of 3 reviews. Each shape is measured twice: with the object read on the loop (as every
review was before issue 25, on today's code) and as the server does now (server.read_review): a body
over OFF_LOOP_BYTES decoded a slice at a time (webhook.jsonslices) in a worker thread with the cyclic
collector kept out (webhook.heap), rendered in a worker thread, the synchronous checks yielding after
YIELD_AFTER_SECONDS. The heap is frozen once the review is warm, as serve freezes its start-up objects,
so a collection walks what a server's would. `--write` puts that table into
docs/benchmarks/large-objects.md; the load average beside it says how busy the machine was.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import FakeRequest, review, write_section  # noqa: E402
from webhook import engine, server  # noqa: E402
from webhook.admission import parse_review_bytes, response_from_decision  # noqa: E402
from webhook.config import Settings  # noqa: E402
from webhook.deadline import Deadline  # noqa: E402
from webhook.manifests import split_runtimes  # noqa: E402
from webhook.preflight import evaluate  # noqa: E402
from webhook.server import WebhookApp  # noqa: E402
from webhook.workloads.aiperf.run_config import ORJSON_MAX_NESTING  # noqa: E402

SAMPLES = ROOT / "tests" / "oracle" / "samples"
SPEC = ROOT / "tests" / "oracle" / "specs" / "sample.yaml"
#: etcd's default --max-request-bytes: the largest object the apiserver can store
ETCD_BYTES = 1_572_864


def _size(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def _aiperfjob() -> dict[str, Any]:
    return yaml.safe_load(SPEC.read_text())


def _records(n: int, text: str = "Summarise the plot of a short novel in two sentences") -> list[dict[str, Any]]:
    return [{"text": f"{text} #{i}"} for i in range(n)]


def _with_records(obj: dict[str, Any], n: int) -> dict[str, Any]:
    obj["spec"]["benchmark"]["datasets"] = [{"name": "main", "type": "file", "records": _records(n)}]
    return obj


def _fill(make: Callable[[int], dict[str, Any]], limit: int, scale: float) -> dict[str, Any]:
    """make(n) for the largest n whose object is at most `limit` bytes, times `scale`."""
    lo, hi = 1, 1
    while _size(make(hi)) <= limit:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _size(make(mid)) <= limit else (lo, mid)
    return make(max(1, int(lo * scale)))


def records_fit(scale: float) -> dict[str, Any]:
    # a record costs ~62 bytes in the object and ~120 in run_config.json (indent 2): ~8,000 fit 1 MiB
    return _with_records(_aiperfjob(), int(8_000 * scale))


def records_max(scale: float) -> dict[str, Any]:
    return _fill(lambda n: _with_records(_aiperfjob(), n), ETCD_BYTES - 4096, scale)


def values_max(scale: float) -> dict[str, Any]:
    obj = _aiperfjob()
    obj["spec"]["variables"] = {"v": [0] * int((ETCD_BYTES - 4096) // 2 * scale)}
    return obj


def records_deep(scale: float) -> dict[str, Any]:
    def deep(i: int) -> Any:
        # as deep as the operator writes run_config.json: orjson stops at 254 nested containers, and a
        # turn sits 7 below the document (run, cfg, datasets, [0], records, the record, turns)
        node: Any = f"p{i}"
        for _ in range(ORJSON_MAX_NESTING - 7):
            node = {"n": node}
        return node

    obj = _aiperfjob()
    n = max(1, int(ETCD_BYTES / _size(deep(0)) * 0.9 * scale))
    obj["spec"]["benchmark"]["datasets"] = [
        {"name": "main", "type": "file", "format": "multi_turn", "records": [{"turns": [deep(i)]} for i in range(n)]}
    ]
    return obj


def labels_max(scale: float) -> dict[str, Any]:
    obj = _aiperfjob()
    obj["metadata"]["labels"] = {f"l{i}": "v" for i in range(int(60_000 * scale))}
    return obj


def env_max(scale: float) -> dict[str, Any]:
    obj = _aiperfjob()
    obj["spec"]["podTemplate"]["env"] += [{"name": f"E{i}", "value": "x"} for i in range(int(20_000 * scale))]
    return obj


def sweep_max(scale: float) -> dict[str, Any]:
    from tests.oracle.sweeps import base

    obj = base()
    obj["spec"]["sweep"] = {"type": "grid", "parameters": {"concurrency": list(range(10, 2010, 10))}}
    obj["spec"]["benchmark"]["datasets"] = [{"name": "main", "type": "file", "records": _records(int(8_000 * scale))}]
    return obj


def trainjob_env(scale: float) -> dict[str, Any]:
    obj = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())

    def make(n: int) -> dict[str, Any]:
        o = copy.deepcopy(obj)
        o["spec"]["trainer"]["env"] += [{"name": f"E{i}", "value": "x"} for i in range(n)]
        return o

    return _fill(make, ETCD_BYTES - 4096, scale)


SHAPES: dict[str, Callable[[float], dict[str, Any]]] = {
    "records-fit": records_fit,
    "records-max": records_max,
    "values-max": values_max,
    "records-deep": records_deep,
    "labels-max": labels_max,
    "env-max": env_max,
    "sweep-max": sweep_max,
    "trainjob-env": trainjob_env,
}


def _caller(obj: dict[str, Any], settings: Settings) -> Callable[[], Any]:
    """The review of `obj` as the handler answers it (a TrainJob with its runtime, as the watch cache holds it)."""
    app = WebhookApp(settings)
    body = json.dumps(
        json.loads(review(obj)), separators=(",", ":"), ensure_ascii=False
    ).encode()  # as the apiserver writes it
    if obj["kind"] != "TrainJob":

        async def call() -> dict[str, Any]:
            resp = await app.validate(FakeRequest(body))  # type: ignore[arg-type]
            return dict(json.loads(resp.body)["response"])  # type: ignore[attr-defined]

        return call
    runtime = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())
    runtime["metadata"]["resourceVersion"] = "1"
    _, lookup = split_runtimes([obj, runtime])

    async def call_rt() -> dict[str, Any]:
        req = parse_review_bytes(body, app.loads).request
        ev = await evaluate(
            req.object or {}, settings=settings, deadline=Deadline(settings.budget_seconds),
            runtime_lookup=lookup, namespace=req.namespace or None, checks=app.checks,
        )  # fmt: skip
        return dict(json.loads(app.dumps(response_from_decision(req.uid, ev.decision))))["response"]

    return call_rt


async def measure(shape: str, scale: float, settings: Settings) -> dict[str, Any]:
    obj = SHAPES[shape](scale)
    call = _caller(obj, settings)
    answer = await call()
    best = float("inf")
    for _ in range(3):
        c0 = time.process_time()
        await call()
        best = min(best, time.process_time() - c0)
    verdict = "allowed" if answer["allowed"] else "denied: " + answer["status"]["message"].split("\n", 1)[-1][:100]
    return {"shape": shape, "scale": scale, "bytes": _size(obj), "cpu_ms": round(best * 1000, 1), "verdict": verdict}


TICK = 0.001


#: the server's own thresholds (the *now* column); the *before* column reads every object on the loop
_OFF_LOOP_BYTES, _RENDERS_MANY = server.OFF_LOOP_BYTES, server.RENDERS_MANY


def _judge(obj: dict[str, Any], settings: Settings) -> Callable[[bool], Awaitable[bool]]:
    """judge(off_loop) → allowed: the handler for the AIPerf kinds, evaluate with the runtime for a TrainJob."""
    app = WebhookApp(settings)
    body = json.dumps(json.loads(review(obj)), separators=(",", ":"), ensure_ascii=False).encode()
    if obj["kind"] != "TrainJob":

        async def judge(off_loop: bool) -> bool:
            server.OFF_LOOP_BYTES = _OFF_LOOP_BYTES if off_loop else 1 << 40
            server.RENDERS_MANY = _RENDERS_MANY if off_loop else frozenset()
            resp = await app.validate(FakeRequest(body))  # type: ignore[arg-type]
            return bool(json.loads(resp.body)["response"]["allowed"])  # type: ignore[attr-defined]

        return judge
    runtime = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())
    runtime["metadata"]["resourceVersion"] = "1"
    _, lookup = split_runtimes([obj, runtime])

    async def judge_rt(off_loop: bool) -> bool:
        large = off_loop and len(body) > _OFF_LOOP_BYTES  # as WebhookApp._review reads and judges it
        req = (await server.read_review(body, app.loads, off_loop=large)).request
        ev = await evaluate(
            req.object or {}, settings=settings, deadline=Deadline(settings.budget_seconds), runtime_lookup=lookup,
            namespace=req.namespace or None, checks=app.checks, off_loop=large, within_limit=off_loop,
        )  # fmt: skip
        return ev.decision.allowed

    return judge_rt


async def stall(judge: Callable[[bool], Awaitable[bool]], off_loop: bool) -> tuple[float, float, bool]:
    """(the longest loop gap in ms, the review's wall time in ms, allowed) for one review."""
    done = asyncio.Event()
    worst = 0.0

    async def tick() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            worst = max(worst, now - last - TICK)
            last = now

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(TICK * 2)  # the ticker is running
    t0 = time.perf_counter()
    allowed = await judge(off_loop)
    wall = time.perf_counter() - t0
    done.set()
    await ticker
    return worst * 1000, wall * 1000, allowed


async def measure_stall(shape: str, scale: float, settings: Settings) -> dict[str, Any]:
    obj = SHAPES[shape](scale)
    judge = _judge(obj, settings)
    await judge(False)  # warm: imports, caches
    # as serve does once started (cli/serve.py, _freeze_startup_objects): what start-up made, here the shape
    # the review is made from too, is out of the collector's way, so a collection walks what a server's would
    gc.collect()
    gc.freeze()
    row: dict[str, Any] = {"shape": shape, "bytes": _size(obj)}
    for off_loop in (False, True):
        runs = [await stall(judge, off_loop) for _ in range(3)]
        key = "off_loop" if off_loop else "on_loop"
        row[key] = {"stall_ms": max(r[0] for r in runs), "wall_ms": min(r[1] for r in runs), "allowed": runs[0][2]}
    return row


def render_stall(rows: list[dict[str, Any]]) -> str:
    lines = [
        "## The event loop during a large review (`bench/large.py --stall`)",
        "",
        f"`.venv/bin/python bench/large.py --stall --write` ({time.strftime('%Y-%m-%d')}, 2 cores, load average "
        f"{os.getloadavg()[0]:.0f} from the other jobs beside it). The longest gap "
        "a 1 ms ticker saw while one review of each bench/large.py shape was judged in process (worst of 3): what "
        "/healthz and the other reviews wait. *On the loop*: today's code with the object parsed, walked and "
        f"rendered on the event loop. *Now*: a body over {server.OFF_LOOP_BYTES // 1024} KiB is decoded a slice "
        "at a time in a worker thread with the cyclic collector kept out of it, rendered in a worker thread, and "
        f"the synchronous checks yield after {engine.YIELD_AFTER_SECONDS * 1000:.0f} ms. Before issue 25's "
        "linear work, on the loop: values-max 5.8 s (stall 7.8 s), records-deep 6.7 s, sweep-max 59 s (stall 76 s). "
        "Before the slices (issue 33), *now* was 908 ms for records-deep: full collections of the cyclic collector "
        "(140-460 ms each, one C call under the interpreter lock) set off by the 216,000 dicts json.loads made, "
        "then json.loads itself (one C call of 50-160 ms), ConfigMap Size measuring the largest parts on the loop, "
        "and one C-encoder call over 784,000 numbers (values-max). What is left is C calls of tens of "
        "milliseconds each in the worker threads (the render cache's marshal.dumps of the object, the C encoder over "
        "one record), and the machine's load: the interpreter hands the loop its turn every 5 ms, but the loop's "
        "thread must then get a core.",
        "",
        "| shape | object | verdict | review (on the loop) | longest stall, on the loop | review (now) | longest stall, now |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        a, b = r["on_loop"], r["off_loop"]
        verdict = "allowed" if b["allowed"] else "denied"
        lines.append(
            f"| {r['shape']} | {r['bytes'] / 1024:.0f} KiB | {verdict} | {a['wall_ms']:.0f} ms | {a['stall_ms']:.0f} ms "
            f"| {b['wall_ms']:.0f} ms | {b['stall_ms']:.0f} ms |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default=",".join(SHAPES), help="comma-separated shapes (default: all)")
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of each shape's size (default 1)")
    ap.add_argument("--json", action="store_true", help="one JSON line per shape")
    ap.add_argument("--config", help="a webhook config file (default: the defaults)")
    ap.add_argument("--stall", action="store_true", help="measure the longest event-loop gap instead of CPU")
    ap.add_argument(
        "--write", action="store_true", help="with --stall: the table into docs/benchmarks/large-objects.md"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: every shape but sweep-max at 2 %% of its size, nothing written",
    )
    args = ap.parse_args()
    if args.quick:  # sweep-max keeps its 200 variations at any scale: seconds even small
        args.scale, args.write = 0.02, False
        if args.shape == ",".join(SHAPES):
            args.shape = ",".join(s for s in SHAPES if s != "sweep-max")
    settings = Settings.model_validate(yaml.safe_load(Path(args.config).read_text())) if args.config else Settings()
    if args.stall:
        stall_main(args, settings)
        return
    for shape in args.shape.split(","):
        row = asyncio.run(measure(shape, args.scale, settings))
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"{row['shape']:<14} {row['bytes']:>9,} B  {row['cpu_ms']:>9.1f} ms  {row['verdict']}", flush=True)


def stall_main(args: argparse.Namespace, settings: Settings) -> None:
    rows = []
    for shape in args.shape.split(","):
        row = asyncio.run(measure_stall(shape, args.scale, settings))
        rows.append(row)
        a, b = row["on_loop"], row["off_loop"]
        print(
            f"{shape:<14} {row['bytes'] / 1024:7.0f} KiB  on the loop: {a['wall_ms']:7.0f} ms, stall {a['stall_ms']:6.0f} ms"
            f"   now: {b['wall_ms']:7.0f} ms, stall {b['stall_ms']:6.0f} ms",
            flush=True,
        )
    text = render_stall(rows)
    print()
    print(text)
    if args.write:
        write_section("loop-stall", text)
        print("written to docs/benchmarks/large-objects.md")


if __name__ == "__main__":
    main()
