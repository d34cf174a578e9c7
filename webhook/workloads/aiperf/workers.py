"""Worker topology: how many workers (AIPerfJobSpecConverter.calculate_workers) and how
they are packed into pods (apply_worker_config).
"""

from __future__ import annotations

import math
from typing import Any

from webhook.workloads.aiperf.env import Env, _snake
from webhook.workloads.aiperf.resources import RenderError
from webhook.workloads.base import AdapterError
from webhook.workloads.shape import (
    at,
    integer,
    listing,
    mapping,
    number,
)


def _phases(benchmark: dict[str, Any], path: str = "spec.benchmark") -> list[tuple[dict[str, Any], str]]:
    """(phase, its field path) as AIPerf normalizes them: a list, or the warmup/profiling
    shorthands. Raises AdapterError for a phase that is not a mapping, or a map of phases."""
    phases, ppath = benchmark.get("phases"), at(path, "phases")
    out: list[tuple[dict[str, Any], str]] = []
    if isinstance(phases, dict):  # AIPerf 0.13.0 refuses the map shape of earlier versions
        raise AdapterError(
            f"{ppath} must be a list of named phases (- name: profiling ...), not a mapping: AIPerf 0.13.0 "
            "no longer reads the map shape"
        )
    if phases is not None:
        out = [(mapping(v, at(ppath, i)), at(ppath, i)) for i, v in enumerate(listing(phases, ppath))]
    for short in ("warmup", "profiling"):
        if benchmark.get(short) is not None:
            phase = mapping(benchmark[short], at(path, short))
            out.append((dict(phase, name=phase.get("name", short)), at(path, short)))
    return out


def _count(d: dict[str, Any], camel: str, path: str) -> int | None:
    """A non-negative count field of spec.benchmark.runtime or a phase (pydantic lax int)."""
    key = camel if camel in d else _snake(camel)
    return integer(d.get(key), at(path, key), lax=True, minimum=0)


def calculate_workers(spec: dict[str, Any], env: Env) -> int:
    """Total workers: runtime.workers verbatim, else ceil(max concurrency / connectionsPerWorker),
    at least runtime.workersMin, rounded up to a whole number of pods."""
    benchmark = mapping(spec.get("benchmark"), "spec.benchmark")
    rpath = "spec.benchmark.runtime"
    runtime = mapping(benchmark.get("runtime"), rpath)
    explicit = _count(runtime, "workers", rpath)
    if explicit:
        return explicit
    counts = (_count(p, "concurrency", path) for p, path in _phases(benchmark))
    concurrency = max((c for c in counts if c is not None), default=1)
    key = "connectionsPerWorker" if "connectionsPerWorker" in spec else "connections_per_worker"
    cpw = number(spec.get(key), at("spec", key))
    cpw = 100 if cpw is None else max(cpw, 1)
    derived = max(1, math.ceil(concurrency / cpw))
    derived = max(derived, _count(runtime, "workersMin", rpath) or 0)
    per_pod = _count(runtime, "workersPerPod", rpath) or env.int("AIPERF_WORKER_DEFAULT_WORKERS_PER_POD", 10)
    if derived <= per_pod or derived % per_pod == 0:
        return derived
    return derived + per_pod - derived % per_pod


def worker_topology(total: int, runtime: dict[str, Any], env: Env) -> tuple[int, int, int]:
    """(pods, workers per pod, record processors per pod) as `apply_worker_config` sets them."""
    rpath = "spec.benchmark.runtime"
    per_pod_default = _count(runtime, "workersPerPod", rpath) or env.int("AIPERF_WORKER_DEFAULT_WORKERS_PER_POD", 10)
    if total <= per_pod_default:
        per_pod, pods = total, 1
    elif total % per_pod_default:
        lower = (total // per_pod_default) * per_pod_default
        raise RenderError(
            f"total_workers={total} is not a multiple of workers_per_pod={per_pod_default}, and a JobSet replicated job "
            f"cannot express a partial final pod. Fix: set spec.benchmark.runtime.workers to a multiple of "
            f"{per_pod_default} (e.g. {lower} or {lower + per_pod_default}), or set spec.benchmark.runtime.workersPerPod "
            f"to a value that divides {total}."
        )
    else:
        per_pod, pods = per_pod_default, total // per_pod_default
    rp_total = _count(runtime, "recordProcessors", rpath)
    rp_per_pod = _count(runtime, "recordProcessorsPerPod", rpath)
    if rp_per_pod is not None:
        if rp_total is not None and rp_total != rp_per_pod * pods:
            raise RenderError(
                "runtime.record_processors must equal runtime.record_processors_per_pod multiplied by the Kubernetes "
                f"worker pod count ({rp_per_pod} * {pods}). Fix: set spec.benchmark.runtime.recordProcessors to "
                f"{rp_per_pod * pods} or remove it."
            )
    elif rp_total is not None:
        if rp_total % pods:
            raise RenderError(
                f"runtime.record_processors must be divisible by the Kubernetes worker pod count ({pods}). Fix: set "
                "spec.benchmark.runtime.recordProcessorsPerPod explicitly or choose a divisible total."
            )
        rp_per_pod = rp_total // pods
    else:
        rp_per_pod = max(1, per_pod // env.int("AIPERF_K8S_RECORD_PROCESSOR_SCALE_FACTOR", 1))
    return pods, per_pod, rp_per_pod
