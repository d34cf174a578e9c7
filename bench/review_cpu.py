"""Where does one review's CPU go, step by step, through the real TLS listener with warm caches?

    /tmp/dwork/venv/bin/python bench/review_cpu.py [-n 2000] [--clients 8] [--kind aiperfjob-good,trainjob-good]
        [--no-memo] [--json] [--write] [--quick]

``--write`` puts the table in docs/benchmarks/vs-kyverno.md (section ``vs-kyverno-review-cpu``, or
``--section``); ``--quick`` is a smoke run of 50 reviews that writes nothing.

Issue 38. bench/vs_kyverno.py gives the webhook process's CPU per review, and py-spy there charges C
code (JSON, TLS, hashing) to its innermost Python caller, which says little. This script answers the
same question inclusively, in one process, reproducibly:

- one local control plane (e2e/harness/controlplane.py) with the sample prerequisites
  (bench/cluster_bench.py ``setup_samples``), the live cluster view synced against it;
- the webhook as ``serve`` runs it: ``WebhookApp`` behind ``webhook.listener.WebhookServer``, TLS on
  127.0.0.1, the default configuration (every check, Dry Run on), uvloop when installed (the image's);
- a client in a subprocess (its CPU is not ours): ``--clients`` keep-alive TLS connections POSTing
  reviews of the e2e sample (e2e/samples/<kind>.yaml), each a new create with its own uid and
  creationTimestamp, as the apiserver sends a dry-run create;
- the server's process CPU (``time.process_time``: user + system) over ``-n`` measured reviews, after a
  warm-up of 200, twice: once
  bare (the figure), once with every step below wrapped in a timer of process CPU. Each step's time is
  its own: the steps it calls that are also timed are charged to them (a check's time is the check's,
  not its caller's). What no step holds is the listener's: aiohttp's HTTP parsing and writing, TLS,
  the event loop and the checks' tasks being scheduled.

The wrapped steps are the functions of the review path (webhook/server.py, preflight.py, engine.py,
policy.py, admission.py, metrics.py) as the server calls them: a coroutine is timed step by step
(each ``send`` into it), so the time it spends suspended is not counted. ``--no-memo`` runs the
server without the check memo (webhook/checkmemo.py), for the comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import ssl
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import review  # noqa: E402

SAMPLES = ROOT / "e2e" / "samples"

#: CPU seconds per step (its own time), and the stack of steps running now (one at a time: steps nest)
SPENT: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)
_STACK: list[list[float]] = []  # each running step: [its children's time so far]
CLOCK = time.process_time


def _enter() -> float:
    _STACK.append([0.0])
    return CLOCK()


def _leave(key: str, t0: float) -> None:
    took = CLOCK() - t0
    children = _STACK.pop()[0]
    SPENT[key] += took - children
    if _STACK:
        _STACK[-1][0] += took


class _TimedCoro:
    """A coroutine whose every step (send/throw) is timed as `key`'s; awaitable and acceptable to ensure_future."""

    def __init__(self, coro: Any, key: str) -> None:
        self.coro, self.key = coro, key

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, key = self.coro, self.key
        value: Any = None
        error: BaseException | None = None
        CALLS[key] += 1
        while True:
            t0 = _enter()
            try:
                out = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                _leave(key, t0)
                return stop.value
            except BaseException:
                _leave(key, t0)
                raise
            _leave(key, t0)
            try:
                value, error = (yield out), None
            except BaseException as exc:  # thrown into us (a cancellation): passed on at the next step
                value, error = None, exc


def timed(fn: Callable[..., Any], key: str | Callable[..., str]) -> Callable[..., Any]:
    """`fn`, its CPU charged to `key` (or `key(*args)`); a coroutine function's steps each timed."""
    name = key if isinstance(key, str) else None
    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        def coro_wrapper(*args: Any, **kw: Any) -> Any:
            return _TimedCoro(fn(*args, **kw), name or key(*args))  # type: ignore[operator]

        return coro_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        k = name or key(*args)  # type: ignore[operator]
        CALLS[k] += 1
        t0 = _enter()
        try:
            return fn(*args, **kw)
        finally:
            _leave(k, t0)

    return wrapper


def instrument() -> None:
    """Wrap the review path's steps (module attributes as the callers look them up)."""
    from webhook import engine, metrics, preflight, server

    def patch(mod: Any, attr: str, key: str | Callable[..., str]) -> None:
        setattr(mod, attr, timed(getattr(mod, attr), key))

    patch(server.WebhookApp, "validate", "server: handler (content-type, size, body read, deadline)")
    patch(server.WebhookApp, "_review", "server: handler (content-type, size, body read, deadline)")
    patch(server.WebhookApp, "_judge", "server: judge (budget metric, timeout)")
    patch(server, "read_review", "parse: JSON + AdmissionReview model")
    patch(server, "evaluate", "evaluate: the rest (request, ratchet)")
    patch(preflight, "_build", "render: size walk + adapter (render cache)")
    patch(preflight, "_overrides", "evaluate: namespace mode, skip annotation")
    patch(preflight, "_dispatch", "engine: applicable, preconditions, tasks")
    patch(engine, "run_checks", "engine: applicable, preconditions, tasks")
    patch(engine, "_run_one", lambda check, *_: f"check: {check.name}")
    patch(engine, "_answered_from_kept", lambda check, *_: f"check: {check.name}")  # a kept-only run
    patch(engine, "judge_admitted", "engine: pods as admitted")
    patch(preflight, "decide", "policy: decide + message")
    patch(server, "response_from_decision", "response: AdmissionReview answer")
    patch(server.WebhookApp, "_json", "response: JSON encode + web.Response")
    patch(server.WebhookApp, "_log_decision", "log: decision line")
    patch(metrics.Metrics, "observe_checks", "metrics: per check")
    patch(metrics.Metrics, "observe_request", "metrics: per review")


def bodies(kind: str, count: int, start: int) -> list[bytes]:
    """Review bodies of `count` new creates of the sample: each its own uid and creationTimestamp."""
    import uuid
    from datetime import UTC, datetime, timedelta

    obj = yaml.safe_load((SAMPLES / f"{kind}.yaml").read_text())
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for i in range(start, start + count):
        meta = {**obj["metadata"], "uid": str(uuid.UUID(int=i + 1, version=4))}
        meta["creationTimestamp"] = (t0 + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.append(review({**obj, "metadata": meta}, uid=f"bench-{i}"))
    return out


async def client(port: int, cafile: str, kind: str, count: int, start: int, clients: int) -> int:
    """The client's side (run in a subprocess): `count` reviews over `clients` keep-alive connections. Prints
    the latencies in ms as one JSON list, in the order the answers came, after the first 2 × `clients` (their
    connections' TLS handshakes, as bench/loadgen.py's warm-up leaves out) when more than twice that many ran."""
    import aiohttp

    todo = bodies(kind, count, start)
    ctx = ssl.create_default_context(cafile=cafile)
    url = f"https://127.0.0.1:{port}/validate?timeout=10s"
    bad = 0
    took: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=clients)) as session:

        async def worker() -> None:
            nonlocal bad
            while todo:
                body = todo.pop()
                t0 = time.perf_counter()
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                    answer = await r.json()
                    bad += r.status != 200 or not answer["response"]["allowed"]
                took.append((time.perf_counter() - t0) * 1000.0)

        await asyncio.gather(*(worker() for _ in range(clients)))
    skip = 2 * clients if len(took) > 4 * clients else 0  # a smoke run (--quick) is too short to leave any out
    print(json.dumps([round(t, 3) for t in took[skip:]]))
    return bad


async def drive(port: int, cafile: str, kind: str, count: int, start: int, clients: int) -> list[float]:
    """`count` reviews of `kind` from a client subprocess (its CPU is not the server's); their latencies
    in ms (`client`)."""
    argv = [sys.executable, __file__, "--client", f"{port},{cafile},{kind},{count},{start},{clients}"]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"the client of {kind} failed (denied or not 200)")
    return [float(t) for t in json.loads(out)]


@contextlib.asynccontextmanager
async def serving(
    kubeconfig: str, *, memo: bool = True, freeze: bool = False, settings: Any = None
) -> AsyncIterator[tuple[int, str]]:
    """The webhook as ``serve`` runs it (the live view synced, WebhookApp behind WebhookServer on an
    ephemeral 127.0.0.1 port, TLS): yields (port, the CA file a client trusts). ``freeze``: the start-up
    objects frozen as serve freezes them (webhook/cli/serve.py ``_freeze_startup_objects``); ``settings``: a
    webhook.config.Settings other than the default."""
    from webhook.checks import all_checks
    from webhook.cluster.live import open_cluster_view
    from webhook.config import Settings
    from webhook.listener import WebhookServer
    from webhook.server import WebhookApp
    from webhook.tls import generate_ca, generate_serving_cert, server_context, write_cert_files

    settings = settings or Settings()
    view = await open_cluster_view(settings, kubeconfig=kubeconfig, checks=all_checks())
    await view.wait_synced(60)
    tmp = Path(tempfile.mkdtemp(prefix="preflight-review-cpu-"))
    ca = generate_ca()
    files = write_cert_files(tmp, ca, generate_serving_cert(ca, ["localhost"], ["127.0.0.1"]))
    app = WebhookApp(settings, view=view)
    if not memo:
        app.memo = None  # type: ignore[assignment]
    server = WebhookServer(app, ssl_context=server_context(files.cert, files.key), host="127.0.0.1", port=0)
    await server.start()
    if freeze:
        from webhook.cli.serve import _freeze_startup_objects

        _freeze_startup_objects()
    try:
        yield server.port, str(files.ca_cert)  # the ephemeral port it bound
    finally:
        await server.shutdown()
        await view.close()


async def serve_and_measure(kubeconfig: str, kinds: list[str], n: int, clients: int, memo: bool) -> dict[str, Any]:
    from webhook.listener import loop_name

    out: dict[str, Any] = {"loop": loop_name(), "memo": memo, "kinds": {}}
    async with serving(kubeconfig, memo=memo) as (port, cafile):
        start = 0
        for kind in kinds:
            row: dict[str, Any] = {}
            for wrapped in (False, True):
                if wrapped:
                    instrument_once()
                await drive(port, cafile, kind, 200, start, clients)  # warm-up
                start += 200
                SPENT.clear()
                CALLS.clear()
                c0 = CLOCK()
                await drive(port, cafile, kind, n, start, clients)
                total = (CLOCK() - c0) * 1000.0 / n
                start += n
                row["wrapped" if wrapped else "bare"] = total
                if wrapped:
                    row["steps"] = {k: v * 1000.0 / n for k, v in SPENT.items()}
            out["kinds"][kind] = row
            uninstrument()
    return out


#: the functions `instrument` wraps, as they were (`uninstrument` puts them back)
_ORIGINALS: dict[tuple[Any, str], Any] = {}


def instrument_once() -> None:
    """`instrument`, the originals kept first."""
    from webhook import engine, metrics, preflight, server

    if not _ORIGINALS:
        for mod, attrs in (
            (server.WebhookApp, ("validate", "_review", "_judge", "_json", "_log_decision")),
            (server, ("read_review", "evaluate", "response_from_decision")),
            (preflight, ("_build", "_overrides", "_dispatch", "decide")),
            (engine, ("run_checks", "_run_one", "judge_admitted")),
            (metrics.Metrics, ("observe_checks", "observe_request")),
        ):
            for a in attrs:
                _ORIGINALS[(mod, a)] = getattr(mod, a)
    instrument()


def uninstrument() -> None:
    for (mod, attr), fn in _ORIGINALS.items():
        setattr(mod, attr, fn)


def report(
    result: dict[str, Any], n: int, clients: int, load: tuple[float, ...], no_memo: bool = False, section: str = ""
) -> str:
    flags = f"-n {n} --clients {clients}" + (" --no-memo" if no_memo else "")
    flags += f" --section {section}" if section and section != "vs-kyverno-review-cpu" else ""
    lines = [
        f"Command: `{Path(sys.executable).parent.parent}/bin/python bench/review_cpu.py {flags} --write`",
        "",
        f"Python {sys.version.split()[0]}, loop {result['loop']}, {os.cpu_count()} cores shared with other work "
        f"(load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at the start). CPU ms per review, the "
        f"server process's user + system over {n} measured reviews (each a new create), {clients} keep-alive "
        "TLS connections from a client in another process.",
        "",
    ]
    kinds = list(result["kinds"])
    head = "| step (its own time) | " + " | ".join(kinds) + " |"
    lines += [head, "|---|" + "---:|" * len(kinds)]
    keys: list[str] = []
    for k in kinds:
        for s in sorted(result["kinds"][k]["steps"], key=lambda s: -result["kinds"][k]["steps"][s]):
            if s not in keys:
                keys.append(s)
    for s in keys:
        cells = [f"{result['kinds'][k]['steps'].get(s, 0.0):.3f}" for k in kinds]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    rest = [r["wrapped"] - sum(r["steps"].values()) for r in (result["kinds"][k] for k in kinds)]
    lines.append("| listener: aiohttp HTTP, TLS, event loop, task scheduling (what no step holds) | "
                 + " | ".join(f"{x:.3f}" for x in rest) + " |")  # fmt: skip
    lines.append(
        "| **total, steps timed** | " + " | ".join(f"{result['kinds'][k]['wrapped']:.3f}" for k in kinds) + " |"
    )
    lines.append(
        "| **total, bare (no timers)** | " + " | ".join(f"{result['kinds'][k]['bare']:.3f}" for k in kinds) + " |"
    )
    return "\n".join(lines)


def load_arguments(p: argparse.ArgumentParser, *, n: int, per: str, clients: int, kind: str) -> None:
    """-n, --clients and --kind, with their defaults (this script's and bench/gc_pauses.py's)."""
    p.add_argument("-n", type=int, default=n, help=f"{per} (default {n})")
    p.add_argument(
        "--clients", type=int, default=clients, help=f"keep-alive connections of the client (default {clients})"
    )
    p.add_argument("--kind", default=kind, help=f"e2e sample(s) (e2e/samples/<kind>.yaml; default {kind})")


@contextlib.contextmanager
def sample_cluster() -> Iterator[str]:
    """uvloop when installed, as `serve` installs it (the image's `fast` extra); a local control plane with
    the sample prerequisites (bench/cluster_bench.py ``setup_samples``). Yields its kubeconfig's path."""
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    from bench.cluster_bench import setup_samples
    from e2e.harness.controlplane import ControlPlane

    with ControlPlane() as cp:
        setup_samples(cp)
        yield str(cp.kubeconfig)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    load_arguments(p, n=2000, per="measured reviews per sample", clients=8, kind="aiperfjob-good,trainjob-good")
    p.add_argument("--json", action="store_true", help="the figures as one JSON object")
    p.add_argument("--no-memo", action="store_true", help="without the check memo (webhook/checkmemo.py)")
    p.add_argument("--write", action="store_true", help="the table into docs/benchmarks/vs-kyverno.md")
    p.add_argument("--section", default="vs-kyverno-review-cpu", help="the section --write replaces")
    p.add_argument("--quick", action="store_true", help="a smoke run of 50 reviews; writes nothing")
    p.add_argument("--client", help=argparse.SUPPRESS)  # the client subprocess
    args = p.parse_args()
    if args.quick:
        args.n, args.write = 50, False
    if args.client:
        port, cafile, kind, count, start, clients = args.client.split(",")
        return 1 if asyncio.run(client(int(port), cafile, kind, int(count), int(start), int(clients))) else 0
    load = os.getloadavg()
    with sample_cluster() as kubeconfig:
        result = asyncio.run(
            serve_and_measure(kubeconfig, args.kind.split(","), args.n, args.clients, not args.no_memo)
        )
    table = report(result, args.n, args.clients, load, args.no_memo, args.section)
    print(json.dumps(result, indent=1) if args.json else table)
    if args.write:
        from bench.common import write_section

        memo = "without the check memo" if args.no_memo else "with the check memo"
        write_section(args.section, f"## Where a review's CPU goes, {memo} (bench/review_cpu.py)\n\n{table}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
