"""Do worst-case reviews sent at once stay under the chart's memory limit, and how long is the loop held?

    .venv/bin/python bench/worst_at_once.py [--at-once 3] [--only TEXT] [--code DIR] [--no-write]
    .venv/bin/python bench/worst_at_once.py --quick      # a smoke run in seconds; writes nothing

Starts `preflight-webhook serve --offline` in a subprocess on 127.0.0.1 (a fresh process per case,
the code under DIR, default this checkout) and sends each case's review `--at-once` times at the
same moment, on separate connections, with `?timeout=5s` (the chart's timeoutSeconds: a 4 s budget).
Meanwhile a prober asks /healthz every 10 ms on a kept-alive connection: its worst wait (wall clock,
so it also counts whatever else the machine runs: see *load*). Reports per case: the answers (HTTP
status and verdict), the slowest answer, the prober's worst wait, and the server's peak RSS (VmHWM)
against the chart's webhook memory limit (charts/preflight-webhook/values.yaml).

*Loop held*: the same reviews sent at once to the webhook served in this process, every callback of
its event loop timed in CPU time of the loop's thread (time.thread_time around asyncio's Handle._run):
the most CPU one callback took is the longest the loop was held by our code, whatever the machine's
load (the client's own callbacks share the loop and are counted too: an upper bound).

Cases (issue 33, "Fail-open and memory on big objects"):
  sweep-577k     an AIPerfSweep of 200 variations x 10 trials whose podTemplate.env holds 14,000 entries
                 (577 KB: the issue's size), one of them a missing Secret
  sweep-1.4m     the same, padded to 1.4 MiB (just under etcd's 1.5 MiB object limit)
  gzip-bomb      1 MB of gzip that inflates to 1 GiB (Content-Encoding: gzip)
  jobset-2000    a JobSet with 2,000 distinct images (registry access off: not looked up)

The figures and the command go into docs/benchmarks/worst-at-once.md (section bench:worst-at-once).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import ssl
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench.run as bench_run  # noqa: E402
from bench.common import review, write_section  # noqa: E402
from bench.run import free_port, peak_rss_mib, start, stop  # noqa: E402
from bench.sweep import sweep  # noqa: E402
from webhook.tls import generate_ca, generate_serving_cert, write_cert_files  # noqa: E402

SECTION = "worst-at-once"
VALUES = ROOT / "charts" / "preflight-webhook" / "values.yaml"


def chart_limit_mib() -> float:
    """The webhook container's memory limit in the chart (e.g. 800Mi), in MiB."""
    limit = str(yaml.safe_load(VALUES.read_text())["resources"]["limits"]["memory"])
    units = {"Mi": 1.0, "Gi": 1024.0, "M": 1e6 / 2**20, "G": 1e9 / 2**20}
    for unit, factor in units.items():
        if limit.endswith(unit):
            return float(limit[: -len(unit)]) * factor
    return float(limit) / 2**20


def padded_sweep(size: int) -> dict[str, Any]:
    """bench/sweep.py's 200-variation sweep, a missing env Secret, its podTemplate.env grown to `size` bytes."""
    obj = sweep()
    env: list[dict[str, Any]] = [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-missing", "key": "token"}}}
    ]
    obj["spec"]["podTemplate"]["env"] = env
    room = size - len(json.dumps(obj))
    env += [{"name": f"E{i}", "value": "x" * 10} for i in range(max(0, room) // 40)]
    return obj


def jobset(images: int) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": f"registry.example/team/app-{i}:1.0"} for i in range(images)]
    pod = {"restartPolicy": "Never", "containers": containers}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "many-images", "namespace": "bench"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": pod}}}}]},
    }


def gzip_bomb(inflated: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b" " * 2**20
    return b"".join([c.compress(b'{"a":"'), *(c.compress(chunk) for _ in range(inflated // 2**20)), c.flush()])


SWEEP_KIND = {"group": "aiperf.nvidia.com", "version": "v1alpha1", "kind": "AIPerfSweep"}


def cases(quick: bool) -> dict[str, tuple[bytes, dict[str, str]]]:
    """name → (body, extra headers)."""
    json_h = {"Content-Type": "application/json"}
    if quick:
        return {
            "sweep-small": (review(padded_sweep(20_000), uid="q", kind=SWEEP_KIND), json_h),
            "gzip-bomb-small": (gzip_bomb(16 * 2**20), {**json_h, "Content-Encoding": "gzip"}),
        }
    return {
        "sweep-577k": (review(padded_sweep(577 * 1024), uid="s1", kind=SWEEP_KIND), json_h),
        "sweep-1.4m": (review(padded_sweep(1_400_000), uid="s2", kind=SWEEP_KIND), json_h),
        "gzip-bomb": (gzip_bomb(2**30), {**json_h, "Content-Encoding": "gzip"}),
        "jobset-2000": (review(jobset(2000), uid="j1"), json_h),
    }


async def prober(base: str, ctx: ssl.SSLContext, stop_at: asyncio.Event, waits: list[float]) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=1)) as s:
        while not stop_at.is_set():
            t0 = time.perf_counter()
            async with s.get(base + "/healthz") as r:
                await r.read()
            waits.append((time.perf_counter() - t0) * 1000.0)
            await asyncio.sleep(0.01)


async def one(base: str, ctx: ssl.SSLContext, body: bytes, headers: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as s:
        async with s.post(base + "/validate?timeout=5s", data=body, headers=headers) as r:
            raw = await r.read()
            if r.status == 200:
                resp = json.loads(raw)["response"]
                msg = resp.get("status", {}).get("message", "")
                warned = [w.split("]", 1)[0] + "]" for w in resp.get("warnings") or () if w.startswith("[")]
                allowed = "allowed" + (f", warned: {' '.join(sorted(set(warned)))}" if warned else "")
                verdict = allowed if resp["allowed"] else "denied: " + msg.split("\n", 1)[-1][:70]
            else:
                verdict = f"HTTP {r.status}: {json.loads(raw).get('error', '')[:70]}"
    return (time.perf_counter() - t0) * 1000.0, verdict


async def scenario(base: str, ctx: ssl.SSLContext, body: bytes, headers: dict[str, str], n: int) -> dict[str, Any]:
    stop_at = asyncio.Event()
    waits: list[float] = []
    probe = asyncio.ensure_future(prober(base, ctx, stop_at, waits))
    await asyncio.sleep(0.5)  # the prober's own baseline
    baseline = max(waits) if waits else 0.0
    answers = await asyncio.gather(*(one(base, ctx, body, headers) for _ in range(n)))
    await asyncio.sleep(0.2)
    stop_at.set()
    await probe
    return {
        "slowest": max(ms for ms, _ in answers),
        "verdicts": sorted({v for _, v in answers}),
        "worst_wait": max(waits),
        "baseline": baseline,
    }


async def loop_held(body: bytes, headers: dict[str, str], n: int, files: Any, client: ssl.SSLContext) -> float:
    """The most CPU (ms) one event-loop callback took while `n` copies of the review were judged in process."""
    from webhook.config import Settings
    from webhook.listener import WebhookServer
    from webhook.server import WebhookApp
    from webhook.tls import server_context

    most = 0.0
    original = asyncio.events.Handle._run

    def timed(self: asyncio.events.Handle) -> None:
        nonlocal most
        t0 = time.thread_time()
        try:
            original(self)
        finally:
            most = max(most, time.thread_time() - t0)

    server = WebhookServer(
        WebhookApp(Settings()), ssl_context=server_context(files.cert, files.key), host="127.0.0.1", port=0
    )
    await server.start()
    try:
        base = f"https://127.0.0.1:{server.port}"
        await one(base, client, b"{}", {"Content-Type": "application/json"})  # warm: imports, first TLS
        asyncio.events.Handle._run = timed  # type: ignore[method-assign]
        try:
            await asyncio.gather(*(one(base, client, body, headers) for _ in range(n)))
        finally:
            asyncio.events.Handle._run = original  # type: ignore[method-assign]
    finally:
        await server.shutdown()
    return most * 1000.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--at-once", type=int, default=3, help="copies of each review sent at the same moment (default 3)")
    p.add_argument("--only", help="run only the cases whose name contains this text")
    p.add_argument("--code", default=str(ROOT), help="checkout whose webhook package is served (default: this one)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks/ alone")
    p.add_argument("--quick", action="store_true", help="a smoke run in seconds at toy sizes; writes nothing")
    args = p.parse_args()
    if args.quick:
        args.no_write = True

    tmp = Path(tempfile.mkdtemp(prefix="preflight-worst-at-once-"))
    ca = generate_ca()
    files = write_cert_files(tmp, ca, generate_serving_cert(ca, ["localhost"], ["127.0.0.1"]))
    client = ssl.create_default_context(cafile=str(files.ca_cert))
    limit = chart_limit_mib()
    rows = []
    for name, (body, headers) in cases(args.quick).items():
        if args.only and args.only not in name:
            continue
        port = free_port()
        cmd = [sys.executable, "-m", "webhook", "serve", "--offline", "--host", "127.0.0.1", "--port", str(port),
               "--tls-cert", str(files.cert), "--tls-key", str(files.key), "--log-level", "error"]  # fmt: skip
        bench_run.ROOT = Path(args.code)  # start() runs the server from (cwd and PYTHONPATH) this checkout
        proc = start(cmd, dict(os.environ), port, client)
        try:
            idle = peak_rss_mib(proc.pid)
            load = os.getloadavg()[0]
            res = asyncio.run(scenario(f"https://127.0.0.1:{port}", client, body, headers, args.at_once))
            res["rss"] = peak_rss_mib(proc.pid)
        finally:
            stop(proc)
        res["held"] = asyncio.run(loop_held(body, headers, args.at_once, files, client))
        res.update(name=name, kib=len(body) / 1024, idle=idle, load=load)
        rows.append(res)
        print(f"{name}: {res['kib']:.0f} KiB x {args.at_once}: loop held {res['held']:.1f} ms, slowest answer "
              f"{res['slowest']:.0f} ms, /healthz worst "
              f"{res['worst_wait']:.0f} ms (baseline {res['baseline']:.0f}), peak RSS {res['rss']:.0f} MiB "
              f"(idle {idle:.0f}, limit {limit:.0f}), load {load:.2f}: {res['verdicts']}", flush=True)  # fmt: skip
    command = ".venv/bin/python bench/worst_at_once.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    text = render(rows, command.strip(), args, limit)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)
    return 0


def render(rows: list[dict[str, Any]], command: str, args: argparse.Namespace, limit: float) -> str:
    lines = [
        f"## {args.at_once} worst-case reviews at once (bench/worst_at_once.py)",
        "",
        f"`{command}` — `serve --offline` in a subprocess, a fresh one per case; each review sent {args.at_once} times "
        "at the same moment with `?timeout=5s` (4 s budget). *Worst /healthz wait*: a prober on a kept-alive "
        "connection every 10 ms (its round trip included; *baseline*: the same before the reviews). *Peak RSS*: the "
        f"server's VmHWM (idle: before the reviews), against the chart's webhook limit ({limit:.0f} MiB). Measured "
        f"{time.strftime('%Y-%m-%d')}; *load* is the machine's 1-minute load average (shared machine).",
        "",
        "| case | body | loop held (CPU) | slowest answer | worst /healthz wait (baseline) | peak RSS (idle) | load "
        "| answers |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['kib']:.0f} KiB | {r['held']:.1f} ms | {r['slowest']:.0f} ms | {r['worst_wait']:.0f} ms "
            f"({r['baseline']:.0f} ms) | {r['rss']:.0f} MiB ({r['idle']:.0f}) | {r['load']:.2f} | "
            + "; ".join(v.replace("|", "/") for v in r["verdicts"])
            + " |"
        )
    if rows:
        worst = max(r["rss"] for r in rows)
        held = max(r["held"] for r in rows)
        lines += [
            "",
            f"Highest peak RSS {worst:.0f} MiB of the chart's {limit:.0f} MiB limit; the loop held at most "
            f"{held:.1f} ms of CPU by one callback (target: 100 ms).",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
