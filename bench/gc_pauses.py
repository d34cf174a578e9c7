"""What does CPython's cyclic collector cost a serving webhook, per review and in pauses, at given thresholds?

    /tmp/pw/venv/bin/python bench/gc_pauses.py [-n 1500] [--clients 32] [--kind aiperfjob-good]
        [--thresholds 700,10,10/10000,10,10] [--rounds 8] [--quick]

Issue 38 (the p99 at 32 clients). The collector (docs.python.org/3/library/gc.html; CPython 3.11's
Modules/gcmodule.c) collects generation 0 once the containers allocated minus those freed since its
last collection pass ``threshold0`` (700 by default), runs inside whichever code allocates, and holds the
event loop while it walks. A review decodes thousands of containers, so it sets off collections
while other reviews wait.

The webhook as ``serve`` runs it (bench/review_cpu.py ``serving``: the live view against a local
control plane with the sample prerequisites, the TLS listener, the start-up objects frozen as serve
freezes them), driven by review_cpu's client subprocess. Each round sets the next thresholds of
``--thresholds`` (rounds alternate, so a change of the machine's load falls on both), sends ``-n``
reviews and prints the server's CPU per review, the client's p50 and p99 (ms, the first 2 × clients left
out), and, per generation, the collections (``gc.callbacks``): how many, their total and longest wall
time, and what they freed; at the end each threshold's median p50 and p99 over its rounds. It writes nothing (the figures
go to docs/benchmarks/vs-kyverno.md by hand, with the command); ``--quick`` is a smoke run of two
rounds of 50.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_bench import pct  # noqa: E402
from bench.review_cpu import drive, load_arguments, sample_cluster, serving  # noqa: E402


class LoopWatch:
    """Where the event loop stood still: a beat every 5 ms on the loop, and a thread that, while the beat is
    more than ``late_ms`` overdue, samples the loop thread's stack every 10 ms. ``gaps``: every beat-to-beat
    gap over ``late_ms`` (ms); ``stacks``: the innermost frames of each sample, counted."""

    def __init__(self, late_ms: float = 50.0) -> None:
        import collections
        import threading

        self.late = late_ms / 1000.0
        self.gaps: list[float] = []
        self.stacks: collections.Counter[str] = collections.Counter()
        self._beat = time.perf_counter()
        self._ident = threading.get_ident()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._task: asyncio.Task[None] | None = None

    async def _beats(self) -> None:
        while True:
            now = time.perf_counter()
            if now - self._beat > self.late:
                self.gaps.append((now - self._beat) * 1000.0)
            self._beat = now
            await asyncio.sleep(0.005)

    def _sample(self) -> None:
        import traceback

        while not self._stop.wait(0.01):
            if time.perf_counter() - self._beat > self.late:
                frame = sys._current_frames().get(self._ident)
                if frame is not None:
                    inner = traceback.extract_stack(frame)[-6:]
                    self.stacks[
                        " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(inner))
                    ] += 1

    def start(self) -> None:
        self._beat = time.perf_counter()
        self._task = asyncio.ensure_future(self._beats())
        self._thread.start()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def summary(self) -> str:
        if not self.gaps:
            return f"no stall over {self.late * 1000:.0f} ms"
        lines = [f"{len(self.gaps)} stalls over {self.late * 1000:.0f} ms, longest {max(self.gaps):.0f} ms, "
                 f"{sum(self.gaps):.0f} ms in all; where the loop thread was (samples):"]  # fmt: skip
        lines += [f"    {n:4d}  {where}" for where, n in self.stacks.most_common(8)]
        return "\n".join(lines)


#: (generation, wall ms, objects freed) of each collection while recording
PAUSES: list[tuple[int, float, int]] = []
_started = [0.0]


def _record(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
    else:
        PAUSES.append((info["generation"], (time.perf_counter() - _started[0]) * 1000.0, info["collected"]))


def summary(pauses: list[tuple[int, float, int]]) -> str:
    """Per generation: collections, total ms, longest ms, objects freed."""
    parts = []
    for gen in sorted({g for g, _, _ in pauses}):
        ms = [t for g, t, _ in pauses if g == gen]
        freed = sum(c for g, _, c in pauses if g == gen)
        parts.append(f"gen{gen} {len(ms)}× {sum(ms):.1f} ms (longest {max(ms):.1f}, freed {freed})")
    return "; ".join(parts) or "no collection"


async def rounds(
    kubeconfig: str, kind: str, n: int, clients: int, thresholds: list[tuple[int, ...]], count: int, watch: bool
) -> None:
    async with serving(kubeconfig, freeze=True) as (port, cafile):
        start = 0
        await drive(port, cafile, kind, 200, start, clients)  # warm-up
        start += 200
        before = gc.get_threshold()
        per: dict[int, list[tuple[float, float]]] = {}
        try:
            for rnd in range(count):
                gc.set_threshold(*thresholds[rnd % len(thresholds)])
                PAUSES.clear()
                gc.callbacks.append(_record)
                watcher = LoopWatch() if watch else None
                if watcher is not None:
                    watcher.start()
                t0, c0 = time.perf_counter(), time.process_time()
                try:
                    took = await drive(port, cafile, kind, n, start, clients)
                finally:
                    gc.callbacks.remove(_record)
                    if watcher is not None:
                        await watcher.stop()
                wall, cpu = time.perf_counter() - t0, (time.process_time() - c0) * 1000.0 / n
                start += n
                p50, p99 = pct(took, 50), pct(took, 99)
                per.setdefault(gc.get_threshold()[0], []).append((p50, p99))
                print(
                    f"round {rnd} thresholds {gc.get_threshold()}: {n} reviews in {wall:.1f} s, "
                    f"{cpu:.3f} CPU ms a review, p50 {p50:.1f} p99 {p99:.1f} ms; {summary(PAUSES)}",
                    flush=True,
                )
                if watcher is not None:
                    print("  the loop: " + watcher.summary(), flush=True)
            for young, xs in per.items():
                print(
                    f"threshold0 {young}: median p50 {statistics.median(x[0] for x in xs):.1f} ms, "
                    f"median p99 {statistics.median(x[1] for x in xs):.1f} ms over {len(xs)} rounds"
                )
        finally:
            gc.set_threshold(*before)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    load_arguments(p, n=1500, per="reviews per round", clients=32, kind="aiperfjob-good")
    p.add_argument("--thresholds", default="700,10,10/10000,10,10", help="gc thresholds per round, '/' between")
    p.add_argument("--rounds", type=int, default=8, help="rounds, the thresholds in turn (default 8)")
    p.add_argument(
        "--watch",
        action="store_true",
        help="also report where the server's event loop stood still over 50 ms (a beat on the loop, a sampling thread)",
    )
    p.add_argument("--quick", action="store_true", help="a smoke run: two rounds of 50 reviews")
    args = p.parse_args()
    if args.quick:
        args.n, args.rounds = 50, 2
    thresholds = [tuple(int(x) for x in t.split(",")) for t in args.thresholds.split("/")]
    with sample_cluster() as kubeconfig:
        asyncio.run(rounds(kubeconfig, args.kind, args.n, args.clients, thresholds, args.rounds, args.watch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
