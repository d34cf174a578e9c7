"""Resource arithmetic: CPU/memory parsing and the per-container split of the AIPERF_K8S_*
budgets (aiperf/kubernetes/jobset.py split_worker_pod_resources).
"""

from __future__ import annotations

import functools

from webhook.workloads.aiperf.env import (
    MIN_CONTAINER_CPU_MCPU,
    MIN_CONTAINER_MEMORY_MIB,
    WORKER_IMPORT_MEMORY_FLOOR_MIB,
)


def _parse_cpu(value: str) -> float:
    """aiperf.kubernetes.utils.parse_cpu (float cores)."""
    if not value or value == "0":
        return 0.0
    if value.endswith("n"):
        return float(value[:-1]) / 1_000_000_000
    if value.endswith("u"):
        return float(value[:-1]) / 1_000_000
    if value.endswith("m"):
        return float(value[:-1]) / 1000
    return float(value)


_MEM_SUFFIXES = (
    ("Ki", 1024),
    ("Mi", 1024**2),
    ("Gi", 1024**3),
    ("Ti", 1024**4),
    ("Pi", 1024**5),
    ("Ei", 1024**6),
    ("k", 1000),
    ("K", 1000),
    ("M", 1000**2),
    ("G", 1000**3),
    ("T", 1000**4),
    ("P", 1000**5),
    ("E", 1000**6),
)


def _parse_memory_mib(value: str) -> int:
    """aiperf.kubernetes.utils.parse_memory_mib (floor, never zero for a nonzero input)."""
    value = value.strip()
    if not value or value == "0":
        return 0
    total = None
    for suffix, mult in _MEM_SUFFIXES:
        if value.endswith(suffix):
            total = float(value[: -len(suffix)]) * mult
            break
    if total is None:
        total = float(value)
    if total <= 0:
        return 0
    return max(1, int(total / 1024**2))


def _format_mcpu(mcpu: int) -> str:
    return str(mcpu // 1000) if mcpu % 1000 == 0 else f"{mcpu}m"


def _split_weighted_total(total: int, weights: list[int]) -> list[int]:
    """Largest-remainder split (aiperf.kubernetes.jobset.split_weighted_total)."""
    if not weights:
        return []
    if total <= 0:
        return [0] * len(weights)
    total_weight = sum(weights)
    raw = [total * w / total_weight for w in weights]
    shares = [int(s) for s in raw]
    remainder = total - sum(shares)
    ranked = sorted(range(len(weights)), key=lambda i: raw[i] - shares[i], reverse=True)
    for i in ranked[:remainder]:
        shares[i] += 1
    return shares


class RenderError(Exception):
    """The operator would refuse to render: message already ends with a Fix."""


def _split_with_minimum(total: int, weights: list[int], minimum: int) -> list[int]:
    return [minimum + s for s in _split_weighted_total(total - minimum * len(weights), weights)]


def split_worker_pod_resources(
    cpu: str, memory: str, worker_count: int, rp_count: int, rp_cpu_request: str | None
) -> list[tuple[str, str]]:
    """(cpu, memory) per worker-pod container: manager, workers, record processors.

    Mirrors `split_worker_pod_resources`: the WORKER_POD budget is the pod total, split by
    measured weights; a budget that cannot cover the minima or the worker import floor is
    the operator's ValueError, raised here as `RenderError`. Arithmetic on five values that
    most jobs share (the operator's defaults, a few worker counts), so its answers are
    remembered (refusals are not: an exception is never cached).
    """
    return list(_split(cpu, memory, worker_count, rp_count, rp_cpu_request))


@functools.lru_cache(maxsize=256)
def _split(
    cpu: str, memory: str, worker_count: int, rp_count: int, rp_cpu_request: str | None
) -> tuple[tuple[str, str], ...]:
    n = 1 + worker_count + rp_count
    total_mcpu = int(round(_parse_cpu(cpu) * 1000))
    total_mib = _parse_memory_mib(memory)
    shape = f"1 worker-pod-manager + {worker_count} worker(s) + {rp_count} record processor(s)"
    if total_mcpu < MIN_CONTAINER_CPU_MCPU * n:
        raise RenderError(
            f"WORKER_POD CPU budget ({total_mcpu}m) cannot cover the {MIN_CONTAINER_CPU_MCPU}m minimum per container "
            f"across {n} container(s) ({shape}). Fix: raise AIPERF_K8S_WORKER_POD_CPU on the operator "
            "(and in the webhook's aiperfEnv) or lower spec.benchmark.runtime.workersPerPod / recordProcessorsPerPod."
        )
    if total_mib < MIN_CONTAINER_MEMORY_MIB * n:
        raise RenderError(
            f"WORKER_POD memory budget ({total_mib}Mi) cannot cover the {MIN_CONTAINER_MEMORY_MIB}Mi minimum per "
            f"container across {n} container(s) ({shape}). Fix: raise AIPERF_K8S_WORKER_POD_MEMORY on the operator "
            "(and in the webhook's aiperfEnv) or lower spec.benchmark.runtime.workersPerPod / recordProcessorsPerPod."
        )
    cpu_weights = [100] + [131] * worker_count + [389] * rp_count
    if rp_cpu_request is None or rp_count == 0:
        cpu_shares = _split_with_minimum(total_mcpu, cpu_weights, MIN_CONTAINER_CPU_MCPU)
    else:
        try:
            rp_mcpu = int(round(_parse_cpu(rp_cpu_request) * 1000))
        except (ValueError, OverflowError):
            raise RenderError(
                f"AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST is not a valid Kubernetes CPU quantity: {rp_cpu_request!r}. "
                "Fix: use a value like '500m' or '2'."
            ) from None
        if rp_mcpu <= 0:
            raise RenderError(
                f"AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST must be greater than zero, got {rp_cpu_request!r}. "
                "Fix: set it to a positive CPU quantity or unset it."
            )
        fixed = rp_mcpu * rp_count
        rest_weights = [100] + [131] * worker_count
        remaining = total_mcpu - fixed
        if remaining < MIN_CONTAINER_CPU_MCPU * len(rest_weights):
            raise RenderError(
                f"WORKER_POD CPU budget ({total_mcpu}m) cannot cover the pinned record-processor CPU request "
                f"({rp_mcpu}m x {rp_count} record processor(s) = {fixed}m) plus the {MIN_CONTAINER_CPU_MCPU}m minimum "
                f"for each of the remaining {len(rest_weights)} container(s) (worker-pod-manager + {worker_count} "
                "worker(s)). Fix: raise AIPERF_K8S_WORKER_POD_CPU or lower AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST."
            )
        cpu_shares = _split_with_minimum(remaining, rest_weights, MIN_CONTAINER_CPU_MCPU) + [rp_mcpu] * rp_count
    mem_weights = [128] + [128] * worker_count + [256] * rp_count
    mem_shares = _split_with_minimum(total_mib, mem_weights, MIN_CONTAINER_MEMORY_MIB)
    worker_mem = mem_shares[1 : 1 + worker_count]
    if worker_mem and min(worker_mem) < WORKER_IMPORT_MEMORY_FLOOR_MIB:
        raise RenderError(
            f"WORKER_POD memory budget ({total_mib}Mi) leaves worker containers below the "
            f"{WORKER_IMPORT_MEMORY_FLOOR_MIB}Mi worker import-memory floor ({min(worker_mem)}Mi each across "
            f"{shape}). Fix: raise AIPERF_K8S_WORKER_POD_MEMORY on the operator (and in the webhook's aiperfEnv) "
            "or lower spec.benchmark.runtime.workersPerPod / recordProcessorsPerPod."
        )
    return tuple((_format_mcpu(c), f"{m}Mi") for c, m in zip(cpu_shares, mem_shares))


def k8s_resources(cpu: str, memory: str, mode: str) -> dict[str, dict[str, str]] | None:
    """ResourceSettings.to_k8s_resources: burstable sets requests only, guaranteed limits too, none nothing."""
    if mode == "none":
        return None
    out: dict[str, dict[str, str]] = {"requests": {"cpu": cpu, "memory": memory}}
    if mode != "burstable":
        out["limits"] = {"cpu": cpu, "memory": memory}
    return out
