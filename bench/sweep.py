"""What does one review of a 200-variation AIPerfSweep cost (the adapter, the handler, the checks)?

    .venv/bin/python bench/sweep.py [--write]

The sweep: a 10 x 20 grid (concurrency x requests) = 200 variations, the cap, with 10 trials
(2,000 child runs). What the handler does per review: expand the grid, render each variation's
child AIPerfJob once (its trials share that render: they differ only in name and seed), pick
the heaviest child for the peak pod groups, then every check, including Sweep Children
(names, ConfigMap) over all 200 and Sweep Child Quotas (children with the same pod requests
share one evaluation). Figures are CPU milliseconds (process time), best of several rounds:
the machine is shared. The handler and evaluate() rows render every time (``renderCacheEntries: 0``);
the render cache (webhook/workloads/render_cache.py) is measured on its own: the same review again
(a hit), and its hit rate over a dry run, the apply, a retry of the apply's review and an audit pass. `--write` puts them into docs/benchmarks/sweep.md (section bench:sweep).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import FakeRequest, review, write_section  # noqa: E402
from tests.fakeview import FakeView, meta  # noqa: E402  (an in-memory cluster: the checks' own CPU)
from webhook.config import Settings  # noqa: E402
from webhook.deadline import Deadline  # noqa: E402
from webhook.preflight import evaluate, too_large  # noqa: E402
from webhook.server import WebhookApp  # noqa: E402
from webhook.workloads.aiperf_sweep import build  # noqa: E402
from webhook.workloads.render_cache import CACHE, stats  # noqa: E402


def sweep(trials: int = 10) -> dict[str, Any]:
    return {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfSweep",
        "metadata": {"name": "llama-pareto", "namespace": "bench", "uid": "5e1d-77aa"},
        "spec": {
            "image": "nvcr.io/nvidia/aiperf:0.13.0",
            "connectionsPerWorker": 100,
            "benchmark": {
                "models": ["meta/llama-3.1-8b-instruct"],
                "endpoint": {"urls": ["http://llm.models.svc.cluster.local:8000"]},
                "datasets": [{"name": "main", "type": "synthetic", "entries": 100, "prompts": {"isl": 128, "osl": 64}}],
                "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 10, "requests": 100}],
            },
            "podTemplate": {"imagePullSecrets": [{"name": "ngc"}]},
            "sweep": {"type": "grid", "parameters": {
                "concurrency": [100 * 2**i for i in range(10)], "requests": [1000 + 100 * i for i in range(20)]}},
            "multiRun": {"numRuns": trials},
        },
    }  # fmt: skip


def cluster() -> FakeView:
    hard = {"pods": "400", "requests.cpu": "2000", "requests.memory": "4000Gi"}
    return FakeView({
        "resourcequotas": [{"metadata": meta("team", "bench"), "spec": {"hard": hard}, "status": {"hard": hard, "used": {}}}],
        "limitranges": [{"metadata": meta("defaults", "bench"), "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]}}],
        "services": [{"metadata": meta("llm", "models"), "spec": {"ports": [{"port": 8000}]}}],
        "serviceaccounts": [{"metadata": meta("default", "bench")}],
        "namespaces": [{"metadata": meta("bench")}],
    }, secrets={("bench", "ngc"): {".dockerconfigjson"}})  # fmt: skip


def best_ms(fn: Callable[[], Any], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        c0 = time.process_time()
        fn()
        best = min(best, (time.process_time() - c0) * 1000.0)
    return best


async def best_ms_async(fn: Callable[[], Awaitable[Any]], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        c0 = time.process_time()
        await fn()
        best = min(best, (time.process_time() - c0) * 1000.0)
    return best


async def run(rounds: int) -> dict[str, Any]:
    settings = Settings.model_validate({"renderCacheEntries": 0})  # every review renders
    obj = sweep()
    wl = build(obj, settings=settings)
    assert not wl.render_errors and len(wl.children) == 200, wl.render_errors
    assert too_large(obj, settings) is None
    out: dict[str, Any] = {"variations": len(wl.children), "runs": sum(len(c.names) for c in wl.children)}
    out["object_bytes"] = len(json.dumps(obj))
    out["adapter_ms"] = best_ms(lambda: build(obj, settings=settings), rounds)
    out["adapter_1_trial_ms"] = best_ms(lambda: build(sweep(1), settings=settings), rounds)

    big = sweep(1)
    big["spec"]["variables"] = {"blob": "x" * 900_000}  # in every child's run_config.json: 200 x 900 KB
    assert too_large(big, settings) is None
    out["hostile_bytes"] = len(json.dumps(big))
    out["hostile_adapter_ms"] = best_ms(lambda: build(big, settings=settings), max(2, rounds // 2))
    import resource

    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    app = WebhookApp(settings)
    body = review(obj)

    async def handler() -> Any:
        return await app.validate(FakeRequest(body))  # type: ignore[arg-type]

    answer = json.loads((await handler()).body)["response"]
    out["handler_allowed"] = answer["allowed"]
    out["handler_offline_ms"] = await best_ms_async(handler, rounds)

    view = cluster()

    async def judged() -> Any:
        return await evaluate(obj, settings=settings, deadline=Deadline(settings.budget_seconds), view=view)  # type: ignore[arg-type]

    ev = await judged()
    out["cluster_allowed"] = ev.decision.allowed
    out["cluster_ms"] = await best_ms_async(judged, rounds)
    durations = {r.name: r.duration_ms or 0.0 for r in ev.results.checks}
    out["checks_ms"] = {k: round(v, 1) for k, v in sorted(durations.items(), key=lambda kv: -kv[1])[:5]}
    out["budget_s"] = settings.budget_seconds
    out.update(await render_cache(obj, rounds))
    return out


async def render_cache(obj: dict[str, Any], rounds: int) -> dict[str, Any]:
    """The render cache on (the default): the same review again, and a dry run, the apply, a retried
    review of the apply and an audit pass, each a review of the sweep (the apiserver gives the dry run
    and the apply their own uid and creationTimestamp; the retry and the audit see the stored object)."""
    settings = Settings()
    CACHE.clear()
    app = WebhookApp(settings)

    async def handler() -> Any:
        return await app.validate(FakeRequest(review(obj)))  # type: ignore[arg-type]

    h0, m0 = stats()
    cold = await best_ms_async(handler, 1)
    warm = await best_ms_async(handler, rounds)
    h1, m1 = stats()
    CACHE.clear()
    stored = {**obj, "metadata": {**obj["metadata"], "uid": "apply-uid", "creationTimestamp": "2026-01-01T00:00:01Z"}}
    dry = {**obj, "metadata": {**obj["metadata"], "uid": "dry-run-uid", "creationTimestamp": "2026-01-01T00:00:00Z"}}
    for what in (dry, stored, stored, stored):  # dry run, apply, the apply's review retried, an audit pass
        await app.validate(FakeRequest(review(what)))  # type: ignore[arg-type]
    h2, m2 = stats()
    return {
        "cache_cold_ms": cold,
        "cache_warm_ms": warm,
        "cache_same_review": (h1 - h0, m1 - m0),
        "cache_sequence": (h2 - h1, m2 - m1),
    }


def markdown(r: dict[str, Any]) -> str:
    top = ", ".join(f"{k} {v} ms" for k, v in r["checks_ms"].items())
    return f"""## A 200-variation AIPerfSweep per review (`bench/sweep.py`)

A 10 x 20 grid (200 variations, the cap) x 10 trials = {r["runs"]} child runs; the object is
{r["object_bytes"]:,} bytes (well inside objectLimits). CPU per review, best of the rounds
(machine shared, load average {os.getloadavg()[0]:.1f} at the start):

| what | CPU ms |
|---|---|
| adapter: expand + render 200 children (trials share the render) | {r["adapter_ms"]:.0f} |
| adapter, the same grid with 1 trial | {r["adapter_1_trial_ms"]:.0f} |
| whole /validate handler, offline (envelope, adapter, checks, answer) | {r["handler_offline_ms"]:.0f} |
| `evaluate()` with an in-memory cluster (quota, LimitRange, Secrets, dry run answered in memory) | {r["cluster_ms"]:.0f} |
| adapter, hostile: a 900 KB variable copied into all 200 children's run_config.json ({r["hostile_bytes"]:,}-byte object, inside objectLimits) | {r["hostile_adapter_ms"]:.0f} |

Render cache (on by default, `renderCacheEntries`): the whole handler for this review is {r["cache_cold_ms"]:.0f} ms
the first time and {r["cache_warm_ms"]:.0f} ms for the same review again ({r["cache_same_review"][0]} hits,
{r["cache_same_review"][1]} miss over {r["cache_same_review"][0] + r["cache_same_review"][1]} reviews). Over a dry run, the apply, a retry of
the apply's review and an audit pass: {r["cache_sequence"][0]} hits, {r["cache_sequence"][1]} misses
({r["cache_sequence"][0] / max(1, sum(r["cache_sequence"])):.0%}): the dry run and the apply each get a new uid
and creationTimestamp from the apiserver, which an AIPerfSweep's render reads (its children's labels and
owner references, the run epoch), so only the reviews of the stored object hit.

Peak RSS of the whole benchmark process: {r["peak_rss_mib"]:.0f} MiB (only the heaviest child keeps its
run-config text; the others keep its size, so the hostile case does not hold 200 x 900 KB).

Slowest checks in that evaluation (wall ms): {top}. The default budget is {r["budget_s"]} s
(the chart's timeoutSeconds is 5): a 200-variation sweep is judged in well under a second of CPU.
Repeats are cached: one render per variation for all its trials, one quota evaluation per
distinct child shape (children whose pods request the same), requests and ConfigMap size
computed once per child.
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="rounds; the best is kept (default 5)")
    p.add_argument("--write", action="store_true", help="write docs/benchmarks/sweep.md (section bench:sweep)")
    p.add_argument(
        "--quick", action="store_true", help="a smoke run in seconds at toy sizes; writes nothing (one round)"
    )
    args = p.parse_args()
    if args.quick:
        args.rounds, args.write = 1, False
    r = asyncio.run(run(args.rounds))
    print(json.dumps(r, indent=2))
    if args.write:
        write_section("sweep", markdown(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
