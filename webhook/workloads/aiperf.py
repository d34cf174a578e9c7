"""AIPerfJob → Workload: the JobSet and run-config ConfigMap AIPerf 0.13.0's operator renders.

Reproduces `aiperf.operator.handlers.create._build_deployment` without importing AIPerf
(its wheel pulls ~50 heavy packages): the worker arithmetic
(`AIPerfJobSpecConverter.calculate_workers`, `apply_worker_config`), the controller and
worker containers with the per-container split of the `AIPERF_K8S_*` budgets
(`jobset.split_worker_pod_resources`), env, volumes, probes, security contexts and the
podTemplate pass-through, and the `run_config.json` the ConfigMap carries. Where the
operator would refuse to render, the refusal goes to `Workload.render_errors` with a fix.

Settings: `Settings.aiperf_env` (same names as the operator's env) wins over this
process's environment, which wins over AIPerf's defaults. The goldens in tests/oracle/
were produced by AIPerf's own renderer and pin every detail here.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import zlib
from datetime import datetime, timezone
from typing import Any

from webhook.config import Settings
from webhook.workloads import podspec
from webhook.workloads.base import AdapterError, PodGroup, RuntimeLookup, Workload
from webhook.workloads.shape import (
    MapOf,
    Schema,
    at,
    boolean,
    clean,
    integer,
    listing,
    mapping,
    number,
    one_of,
    plain_json,
    str_map,
    string,
    wrong,
)

API_VERSION = "aiperf.nvidia.com/v1alpha1"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
CONFIGMAP_KEY = "run_config.json"
MAX_JOB_ID = 35  # "aiperf-<id>-controller-0-0-xxxxx" must fit a 63-char DNS label
# a rendered worker container is ~2 KB of JSON: past this many per pod the JobSet cannot fit
# etcd's 1.5 MiB object limit (and rendering it would only burn the admission budget)
MAX_WORKER_POD_CONTAINERS = 1000

# --- AIPerfJobSpec / PodTemplateConfig fields (extra="forbid": anything else is rejected) ---
_SPEC_KEYS = set(
    "image imagePullPolicy resourceMode connectionsPerWorker timeoutSeconds ttlSecondsAfterFinished resultsTtlDays "
    "keepFailedPods cancel podTemplate scheduling schemaVersion benchmark sweep multiRun plot variables randomSeed "
    "noSweepTable skipEndpointCheck failurePolicy".split()
)
_POD_TEMPLATE_KEYS = set(
    "env volumes volumeMounts nodeSelector tolerations affinity annotations labels imagePullSecrets "
    "serviceAccountName containerSecurityContext shareProcessNamespace priorityClassName runtimeClassName "
    "schedulerName topologySpreadConstraints hostAliases dnsPolicy dnsConfig terminationGracePeriodSeconds "
    "podSecurityContext initContainers extraPodSpec".split()
)
_SCHEDULING_KEYS = {"queueName", "priorityClass"}
_DENIED_EXTRA_POD_SPEC_KEYS = {"hostIPC", "hostPID", "securityContext", "hostNetwork", "hostUsers", "containers"}
_POD_PASSTHROUGH = (
    "nodeSelector",
    "tolerations",
    "affinity",
    "serviceAccountName",
    "priorityClassName",
    "runtimeClassName",
    "schedulerName",
    "topologySpreadConstraints",
    "hostAliases",
    "dnsPolicy",
    "dnsConfig",
)

# --- K8sEnvironment defaults (aiperf/kubernetes/environment.py) ---
RESOURCE_DEFAULTS: dict[str, tuple[str, str]] = {
    "SYSTEM_CONTROLLER": ("75m", "192Mi"),
    "TIMING_MANAGER": ("50m", "192Mi"),
    "DATASET_MANAGER": ("50m", "256Mi"),
    "RECORDS_MANAGER": ("75m", "256Mi"),
    "API": ("75m", "256Mi"),
    "GPU_TELEMETRY_MANAGER": ("25m", "192Mi"),
    "SERVER_METRICS_MANAGER": ("25m", "192Mi"),
    "RESULTS_SIDECAR": ("25m", "192Mi"),
    "EVENT_BUS_PROXY": ("50m", "64Mi"),
    "WORKER_POD": ("3350m", "6Gi"),
}
MIN_CONTAINER_CPU_MCPU = 1
MIN_CONTAINER_MEMORY_MIB = 1
WORKER_IMPORT_MEMORY_FLOOR_MIB = 162
_HEALTH = {"initial": 5, "period": 10, "timeout": 5, "failure": 10, "success": 1, "startup_period": 5, "startup_failure": 30}
_PORTS = {
    "SYSTEM_CONTROLLER_HEALTH": 8080,
    "TIMING_MANAGER_HEALTH": 8082,
    "DATASET_MANAGER_HEALTH": 8083,
    "RECORDS_MANAGER_HEALTH": 8084,
    "API_SERVICE": 9090,
    "RESULTS_SIDECAR": 9091,
    "API_SERVICE_HEALTH": 8085,
    "GPU_TELEMETRY_MANAGER_HEALTH": 8086,
    "SERVER_METRICS_MANAGER_HEALTH": 8087,
    "EVENT_BUS_PROXY_HEALTH": 8088,
    "EVENT_BUS_PROXY_PUB_FRONTEND": 5663,
    "EVENT_BUS_PROXY_SUB_BACKEND": 5664,
    "WORKER_HEALTH": 8080,
    "RECORD_PROCESSOR_HEALTH": 8081,
}
_IPC_PATH = "/aiperf/ipc"
_REGISTRATION_TIMEOUT = 30.0  # Environment.SERVICE.REGISTRATION_TIMEOUT
_CONNECTION_PROBE_TIMEOUT = 60.0  # K8sEnvironment.JOBSET.WORKER_CONNECTION_PROBE_TIMEOUT
_HEARTBEAT_INTERVAL = 10.0

_CONTAINER_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 1000,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
_POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 1000,
    "fsGroup": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


class _Env:
    """The operator's AIPERF_* settings: Settings.aiperf_env, then os.environ, then AIPerf's default."""

    def __init__(self, settings: Settings) -> None:
        self._over = dict(settings.aiperf_env)
        # pydantic-settings reads env names case-insensitively; one pass over the environment
        # (keys first: decoding every value of the environment costs more than the rest of this)
        environ = os.environ
        self._env = {k.upper(): environ[k] for k in environ if k[:6].upper() == "AIPERF"}

    def get(self, name: str, default: str) -> str:
        if name in self._over:
            return str(self._over[name])
        return self._env.get(name, default)

    def int(self, name: str, default: int) -> int:
        raw = self.get(name, str(default))
        try:
            return int(raw)
        except ValueError:
            raise AdapterError(f"setting {name}={raw!r} is not an integer") from None

    def bool(self, name: str, default: bool) -> bool:
        raw = self.get(name, "true" if default else "false").strip().lower()
        return raw in ("1", "true", "yes", "on", "y", "t")

    def resources(self, key: str) -> tuple[str, str]:
        cpu, mem = RESOURCE_DEFAULTS[key]
        return self.get(f"AIPERF_K8S_{key}_CPU", cpu), self.get(f"AIPERF_K8S_{key}_MEMORY", mem)


# ----------------------------------------------------------------------------- small helpers


@functools.lru_cache(maxsize=1024)
def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _get(d: dict[str, Any], camel: str, default: Any = None) -> Any:
    """A field given in camelCase or snake_case (AIPerf accepts both)."""
    if camel in d:
        return d[camel]
    return d.get(_snake(camel), default)


def _known(d: dict[str, Any], allowed: set[str] | frozenset[str]) -> frozenset[str]:
    return _known_names(frozenset(allowed))


@functools.lru_cache(maxsize=256)
def _known_names(allowed: frozenset[str]) -> frozenset[str]:
    return allowed | {_snake(k) for k in allowed}


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


class _RenderError(Exception):
    """The operator would refuse to render: message already ends with a Fix."""


def _split_with_minimum(total: int, weights: list[int], minimum: int) -> list[int]:
    return [minimum + s for s in _split_weighted_total(total - minimum * len(weights), weights)]


def split_worker_pod_resources(
    cpu: str, memory: str, worker_count: int, rp_count: int, rp_cpu_request: str | None
) -> list[tuple[str, str]]:
    """(cpu, memory) per worker-pod container: manager, workers, record processors.

    Mirrors `split_worker_pod_resources`: the WORKER_POD budget is the pod total, split by
    measured weights; a budget that cannot cover the minima or the worker import floor is
    the operator's ValueError, raised here as `_RenderError`.
    """
    n = 1 + worker_count + rp_count
    total_mcpu = int(round(_parse_cpu(cpu) * 1000))
    total_mib = _parse_memory_mib(memory)
    shape = f"1 worker-pod-manager + {worker_count} worker(s) + {rp_count} record processor(s)"
    if total_mcpu < MIN_CONTAINER_CPU_MCPU * n:
        raise _RenderError(
            f"WORKER_POD CPU budget ({total_mcpu}m) cannot cover the {MIN_CONTAINER_CPU_MCPU}m minimum per container "
            f"across {n} container(s) ({shape}). Fix: raise AIPERF_K8S_WORKER_POD_CPU on the operator "
            "(and in the webhook's aiperfEnv) or lower spec.benchmark.runtime.workersPerPod / recordProcessorsPerPod."
        )
    if total_mib < MIN_CONTAINER_MEMORY_MIB * n:
        raise _RenderError(
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
            raise _RenderError(
                f"AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST is not a valid Kubernetes CPU quantity: {rp_cpu_request!r}. "
                "Fix: use a value like '500m' or '2'."
            ) from None
        if rp_mcpu <= 0:
            raise _RenderError(
                f"AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST must be greater than zero, got {rp_cpu_request!r}. "
                "Fix: set it to a positive CPU quantity or unset it."
            )
        fixed = rp_mcpu * rp_count
        rest_weights = [100] + [131] * worker_count
        remaining = total_mcpu - fixed
        if remaining < MIN_CONTAINER_CPU_MCPU * len(rest_weights):
            raise _RenderError(
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
        raise _RenderError(
            f"WORKER_POD memory budget ({total_mib}Mi) leaves worker containers below the "
            f"{WORKER_IMPORT_MEMORY_FLOOR_MIB}Mi worker import-memory floor ({min(worker_mem)}Mi each across "
            f"{shape}). Fix: raise AIPERF_K8S_WORKER_POD_MEMORY on the operator (and in the webhook's aiperfEnv) "
            "or lower spec.benchmark.runtime.workersPerPod / recordProcessorsPerPod."
        )
    return [(_format_mcpu(c), f"{m}Mi") for c, m in zip(cpu_shares, mem_shares)]


def _resources(cpu: str, memory: str, mode: str) -> dict[str, dict[str, str]] | None:
    if mode == "none":
        return None
    out: dict[str, dict[str, str]] = {"requests": {"cpu": cpu, "memory": memory}}
    if mode != "burstable":
        out["limits"] = {"cpu": cpu, "memory": memory}
    return out


# ----------------------------------------------------------------------------- workers


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


def calculate_workers(spec: dict[str, Any], env: _Env) -> int:
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


def worker_topology(total: int, runtime: dict[str, Any], env: _Env) -> tuple[int, int, int]:
    """(pods, workers per pod, record processors per pod) as `apply_worker_config` sets them."""
    rpath = "spec.benchmark.runtime"
    per_pod_default = _count(runtime, "workersPerPod", rpath) or env.int("AIPERF_WORKER_DEFAULT_WORKERS_PER_POD", 10)
    if total <= per_pod_default:
        per_pod, pods = total, 1
    elif total % per_pod_default:
        lower = (total // per_pod_default) * per_pod_default
        raise _RenderError(
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
            raise _RenderError(
                "runtime.record_processors must equal runtime.record_processors_per_pod multiplied by the Kubernetes "
                f"worker pod count ({rp_per_pod} * {pods}). Fix: set spec.benchmark.runtime.recordProcessors to "
                f"{rp_per_pod * pods} or remove it."
            )
    elif rp_total is not None:
        if rp_total % pods:
            raise _RenderError(
                f"runtime.record_processors must be divisible by the Kubernetes worker pod count ({pods}). Fix: set "
                "spec.benchmark.runtime.recordProcessorsPerPod explicitly or choose a divisible total."
            )
        rp_per_pod = rp_total // pods
    else:
        rp_per_pod = max(1, per_pod // env.int("AIPERF_K8S_RECORD_PROCESSOR_SCALE_FACTOR", 1))
    return pods, per_pod, rp_per_pod


# ----------------------------------------------------------------------------- run_config.json

_ORDER: dict[str, list[str]] = {
    "cfg": "models endpoint datasets phases artifacts slos tokenizer gpu_telemetry server_metrics network_latency otel "
    "mlflow wandb runtime logging metrics accuracy scenario unsafe_override".split(),
    "endpoint": "urls url_strategy type path api_key timeout streaming transport connection_reuse use_legacy_max_tokens "
    "use_server_token_count per_chunk_usage template headers extra download_video_content request_content_type "
    "session_header uuid_and_strip wait_for_model_timeout wait_for_model_interval wait_for_model_mode reset_kv_cache "
    "server_profiler".split(),
    "models": ["strategy", "items"],
    "model": ["name", "weight", "lora", "modalities", "tokenizer"],
    "dataset": "system_prompt system_prompt_file name type entries random_seed sampling prompts prefix_prompts turns "
    "turn_delay turn_delay_ratio images audio video rankings isl osl".split(),
    "prompts": "isl osl block_size batch_size cache_bust corpus sequence_distribution random_range_ratio "
    "random_corpus_style".split(),
    "phase": "name kind type exclude_from_results requests duration sessions concurrency concurrency_ramp "
    "prefill_concurrency prefill_ramp grace_period cancellation sla seamless timing_mode failed_request_threshold "
    "trajectory_start_min_ratio trajectory_start_max_ratio burst_phase_starts system_idle_gap_cap_seconds "
    "agentic_cache_warmup_duration agentic_warmup_grace_period rate rate_ramp rate_series smoothness".split(),
    "runtime": "ui workers record_processors service_run_type communication api_port api_host dataset_api_base_url "
    "workers_per_pod record_processors_per_pod workers_min stats_interval".split(),
    "artifacts": "dir prefix summary records raw trace slice_duration show_trace_timing user_files auto_plot "
    "plot_required export_outputs_json".split(),
    "distribution": ["value", "min", "max", "mean", "stddev", "type"],
}
_FLOATS = {
    "phase": {
        "duration",
        "grace_period",
        "failed_request_threshold",
        "system_idle_gap_cap_seconds",
        "agentic_cache_warmup_duration",
        "agentic_warmup_grace_period",
        "rate",
        "smoothness",
        "adaptive_sustain_duration",
        "adaptive_assessment_period",
        "adaptive_control_max",
    },
    "runtime": {"stats_interval"},
    "artifacts": {"slice_duration"},
    "model": {"weight"},
    "distribution": {"value", "min", "max", "mean", "stddev"},
}


def _ordered(d: dict[str, Any], kind: str) -> dict[str, Any]:
    """Snake-case keys in the model's field order (unknown keys keep their place after), floats coerced."""
    snake = {_snake(k): v for k, v in d.items() if v is not None}
    floats = _FLOATS.get(kind, set())
    out: dict[str, Any] = {}
    for k in _ORDER.get(kind, []) + [k for k in snake if k not in _ORDER.get(kind, [])]:
        if k in snake:
            v = snake[k]
            if k in floats and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            out[k] = v
    return out


def _distribution(v: Any) -> Any:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {"value": float(v)}
    if isinstance(v, dict):
        return _ordered(v, "distribution")
    return v


def _models(b: dict[str, Any]) -> Any:
    m = b.get("models", b.get("model"))
    if isinstance(m, str):
        return {"items": [{"name": m}]}
    if isinstance(m, list):
        return {"items": [_ordered({"name": x} if isinstance(x, str) else x, "model") for x in m]}
    if isinstance(m, dict):
        out = _ordered(m, "models")
        if isinstance(out.get("items"), list):
            out["items"] = [_ordered({"name": x} if isinstance(x, str) else x, "model") for x in out["items"]]
        return out
    return m


def _phase(p: dict[str, Any]) -> dict[str, Any]:
    out = _ordered(p, "phase")
    name = out.get("name")
    if "kind" not in out and name in ("warmup", "profiling"):
        out["kind"] = name
    if out.get("kind") == "warmup" and "exclude_from_results" not in out:
        out["exclude_from_results"] = True
    return _ordered(out, "phase")


def _dataset(d: dict[str, Any]) -> dict[str, Any]:
    out = _ordered(d, "dataset")
    if isinstance(out.get("prompts"), dict):
        prompts = _ordered(out["prompts"], "prompts")
        for k in ("isl", "osl"):
            if k in prompts:
                prompts[k] = _distribution(prompts[k])
        out["prompts"] = prompts
    return out


def run_config_cfg(benchmark: dict[str, Any], job_id: str, namespace: str, pods: int, per_pod: int, rp_per_pod: int) -> dict[str, Any]:
    """The `cfg` of run_config.json: BenchmarkConfig dumped with exclude_unset, field order kept."""
    b = {_snake(k): v for k, v in benchmark.items()}
    cfg: dict[str, Any] = {}
    if "models" in b or "model" in b:
        cfg["models"] = _models(b)
    if isinstance(b.get("endpoint"), dict):
        ep = _ordered(b["endpoint"], "endpoint")
        if "url" in ep and "urls" not in ep:
            ep["urls"] = [ep.pop("url")]
            ep = _ordered(ep, "endpoint")
        cfg["endpoint"] = ep
    datasets = b.get("datasets")
    if datasets is None and isinstance(b.get("dataset"), dict):
        datasets = [dict(b["dataset"], name=b["dataset"].get("name", "default"))]
    if isinstance(datasets, list):
        cfg["datasets"] = [_dataset(d) if isinstance(d, dict) else d for d in datasets]
    phases = _phases(b)
    if phases:
        cfg["phases"] = [_phase(p) for p, _ in phases]
    artifacts = _ordered(b.get("artifacts") or {}, "artifacts")
    artifacts["dir"] = "/results"
    cfg["artifacts"] = _ordered(artifacts, "artifacts")
    cfg["tokenizer"] = _ordered(b.get("tokenizer") or {}, "tokenizer")
    runtime = _ordered(b.get("runtime") or {}, "runtime")
    jobset = f"aiperf-{job_id}"
    runtime.update(
        {
            "service_run_type": "kubernetes",
            "ui": "simple",
            "api_port": _PORTS["API_SERVICE"],
            "api_host": "0.0.0.0",
            "dataset_api_base_url": f"http://{jobset}-controller-0-0.{jobset}.{namespace}.svc.cluster.local:"
            f"{_PORTS['API_SERVICE']}/api/dataset",
            "communication": {"type": "dual", "ipc_path": _IPC_PATH, "tcp_host": "0.0.0.0"},
            "workers_per_pod": per_pod,
            "workers": pods * per_pod,
            "record_processors_per_pod": rp_per_pod,
            "record_processors": rp_per_pod * pods,
        }
    )
    cfg["runtime"] = _ordered(runtime, "runtime")
    logging_cfg = _ordered(b.get("logging") or {}, "logging")
    logging_cfg.setdefault("level", "INFO")
    cfg["logging"] = logging_cfg
    for k, v in b.items():
        if k in ("model", "dataset", "warmup", "profiling") or k in cfg or v is None:
            continue
        cfg[k] = _ordered(v, k) if isinstance(v, dict) else v
    return {k: cfg[k] for k in _ORDER["cfg"] + [k for k in cfg if k not in _ORDER["cfg"]] if k in cfg}


def run_epoch(obj: dict[str, Any]) -> str:
    """The run epoch key (results_layout.epoch_key_from_body), from creationTimestamp and uid."""
    meta = obj.get("metadata") or {}
    ts = meta.get("creationTimestamp")
    try:
        dt = datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
    except ValueError:
        return str(int(datetime.now(timezone.utc).timestamp()))
    seconds = int(dt.timestamp())
    if dt.microsecond:
        return f"{seconds}{dt.microsecond:06d}"
    uid = meta.get("uid")
    if not uid:
        return str(seconds)
    return f"{seconds}{zlib.crc32(str(uid).encode('utf-8')) % 1_000_000:06d}"


def run_config_json(spec: dict[str, Any], obj: dict[str, Any], job_id: str, namespace: str, pods: int, per_pod: int, rp: int) -> str:
    """The exact text of run_config.json (orjson OPT_INDENT_2 == json.dumps(indent=2, ensure_ascii=False))."""
    run: dict[str, Any] = {
        "benchmark_id": job_id,
        "cfg": run_config_cfg(spec.get("benchmark") or {}, job_id, namespace, pods, per_pod, rp),
        "trial": 0,
        "artifact_dir": "/results",
        "label": "",
    }
    seed = _get(spec, "randomSeed")
    if seed is not None:
        run["random_seed"] = seed
    run["variables"] = dict(spec.get("variables") or {})
    if spec.get("plot") is not None:
        run["plot"] = spec["plot"]
    run["run_meta"] = {"epoch": run_epoch(obj), "job_name": (obj.get("metadata") or {}).get("name", job_id), "namespace": namespace}
    return dumps_indent2(run)


class _NotPlain(Exception):
    """A value dumps_indent2 leaves to json.dumps (non-string key, unknown type, deep nesting)."""


_encode_str = json.encoder.encode_basestring  # the C encoder json.dumps(ensure_ascii=False) uses for strings


def _float_text(o: float) -> str:
    if o != o:
        return "NaN"
    if o == math.inf:
        return "Infinity"
    if o == -math.inf:
        return "-Infinity"
    return float.__repr__(o)


def _indent2(o: Any, out: list[str], nl: str) -> None:
    if isinstance(o, str):
        out.append(_encode_str(o))
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif isinstance(o, int):
        out.append(int.__repr__(o))
    elif isinstance(o, float):
        out.append(_float_text(o))
    elif isinstance(o, (list, tuple)):
        if not o:
            out.append("[]")
            return
        inner = nl + "  "
        sep = "[" + inner
        for v in o:
            out.append(sep)
            _indent2(v, out, inner)
            sep = "," + inner
        out.append(nl + "]")
    elif isinstance(o, dict):
        if not o:
            out.append("{}")
            return
        inner = nl + "  "
        sep = "{" + inner
        for k, v in o.items():
            if not isinstance(k, str):
                raise _NotPlain
            out.append(sep + _encode_str(k) + ": ")
            _indent2(v, out, inner)
            sep = "," + inner
        out.append(nl + "}")
    else:
        raise _NotPlain


def dumps_indent2(obj: Any) -> str:
    """json.dumps(obj, indent=2, ensure_ascii=False), character for character, at a third of its cost:
    with an indent the stdlib falls back to its pure-Python encoder, and run_config.json is built
    on every request. Anything unusual goes to json.dumps itself."""
    out: list[str] = []
    try:
        _indent2(obj, out, "\n")
    except (_NotPlain, RecursionError):
        return json.dumps(obj, indent=2, ensure_ascii=False)
    return "".join(out)


# ----------------------------------------------------------------------------- JobSet


class _Renderer:
    def __init__(self, spec: dict[str, Any], template: dict[str, Any], job_id: str, namespace: str, uid: str | None,
                 env: _Env) -> None:  # fmt: skip
        self.spec, self.job_id, self.ns, self.uid, self.env = spec, job_id, namespace, uid, env
        self.name = f"aiperf-{job_id}"
        self.tmpl = template  # validated by _pod_template: camelCase keys, Kubernetes shapes
        self.image = spec.get("image") or "nvcr.io/nvidia/aiperf:latest"
        self.pull_policy = _get(spec, "imagePullPolicy")
        self.mode = _get(spec, "resourceMode") or "burstable"
        self.config_path = env.get("AIPERF_K8S_JOBSET_CONFIG_MOUNT_PATH", "/etc/aiperf")
        self.datasets_path = env.get("AIPERF_K8S_JOBSET_DATASETS_PATH", "/aiperf/datasets")
        self._env_cache: dict[tuple[str | None, bool, bool], list[dict[str, Any]]] = {}

    # -- fragments
    def _t(self, camel: str, default: Any = None) -> Any:
        return _get(self.tmpl, camel, default)

    def security(self) -> dict[str, Any]:
        """The containers' securityContext; one shared dict per job (consumers copy before changing)."""
        return self._security

    @functools.cached_property
    def _security(self) -> dict[str, Any]:
        ctx = json.loads(json.dumps(_CONTAINER_SECURITY))
        over = self._t("containerSecurityContext") or {}
        if "capabilities" in over:
            ctx["capabilities"] = {**ctx["capabilities"], **over["capabilities"]}
        for k, v in over.items():
            if k == "capabilities" or (k == "privileged" and v) or (k == "allowPrivilegeEscalation" and v):
                continue
            ctx[k] = v
        return ctx

    def mounts(self) -> list[dict[str, Any]]:
        return [
            {"name": "config", "mountPath": self.config_path, "readOnly": True},
            {"name": "ipc", "mountPath": _IPC_PATH},
            {"name": "results", "mountPath": "/results"},
            {"name": "datasets", "mountPath": self.datasets_path},
            {"name": "tokenizer-cache", "mountPath": "/aiperf/hf_home"},
            {"name": "tmp", "mountPath": "/tmp"},
            *list(self._t("volumeMounts") or []),
        ]

    def volumes(self) -> list[dict[str, Any]]:
        return [
            {"name": "config", "configMap": {"name": f"{self.name}-config"}},
            {"name": "ipc", "emptyDir": {}},
            {"name": "results", "emptyDir": {}},
            {"name": "datasets", "emptyDir": {}},
            {"name": "tokenizer-cache", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
            *list(self._t("volumes") or []),
        ]

    def env_vars(self, *, controller_host: str | None = None, pod_index: bool = True, controller_pod: bool = False) -> list[dict[str, Any]]:
        """A new list per container; its entries are shared between the containers of one job
        (built once per variant: ~30 containers use 3 variants), like the template's own env
        entries and the securityContext already are. Consumers copy before changing."""
        key = (controller_host, pod_index, controller_pod)
        cached = self._env_cache.get(key)
        if cached is None:
            cached = self._env_cache[key] = self._env_vars(controller_host=controller_host, pod_index=pod_index, controller_pod=controller_pod)
        return list(cached)

    def _env_vars(self, *, controller_host: str | None, pod_index: bool, controller_pod: bool) -> list[dict[str, Any]]:
        timeout = max(_REGISTRATION_TIMEOUT, _CONNECTION_PROBE_TIMEOUT * 2)
        env: list[dict[str, Any]] = [
            {"name": "AIPERF_DATASET_MMAP_BASE_PATH", "value": self.datasets_path},
            {"name": "AIPERF_K8S_JOBSET_CONFIG_MOUNT_PATH", "value": self.config_path},
            {"name": "AIPERF_JOB_ID", "value": self.job_id},
            {"name": "AIPERF_NAMESPACE", "value": self.ns},
            {"name": "AIPERF_OPERATOR_MANAGED", "value": "1"},
            {"name": "AIPERF_SERVICE_HEALTH_ENABLED", "value": "true"},
            {"name": "AIPERF_SERVICE_HEALTH_HOST", "value": "0.0.0.0"},
            {"name": "AIPERF_SERVICE_REGISTRATION_TIMEOUT", "value": str(timeout)},
            {"name": "AIPERF_SERVICE_REGISTRATION_MAX_ATTEMPTS", "value": str(max(10, int(timeout) + 1))},
        ]
        if controller_pod:
            env.append({"name": "AIPERF_CONTROLLER_POD", "value": "1"})
            env.append({"name": "AIPERF_UI_REALTIME_METRICS_ENABLED", "value": "true"})
            env.append({"name": "AIPERF_K8S_CONTROLLER_HEARTBEAT_INTERVAL_SECONDS", "value": str(_HEARTBEAT_INTERVAL)})
            if self.uid:
                env.append({"name": "AIPERF_JOB_UID", "value": self.uid})
        env.append({"name": "HF_HOME", "value": "/aiperf/hf_home"})
        if pod_index:
            env.append(
                {
                    "name": "AIPERF_POD_INDEX",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}},
                }
            )
        if controller_host:
            env.append({"name": "AIPERF_K8S_ZMQ_CONTROLLER_HOST", "value": controller_host})
        reserved = {e["name"] for e in env} | {"AIPERF_JOB_UID"}
        env.extend(e for e in (self._t("env") or []) if e.get("name") not in reserved)
        return env

    def _probe(self, port: int, path: str = "/healthz") -> dict[str, Any]:
        return {
            "httpGet": {"path": path, "port": port},
            "initialDelaySeconds": _HEALTH["initial"],
            "periodSeconds": _HEALTH["period"],
            "timeoutSeconds": _HEALTH["timeout"],
            "failureThreshold": _HEALTH["failure"],
            "successThreshold": _HEALTH["success"],
        }

    def _startup(self, port: int) -> dict[str, Any]:
        return {
            "httpGet": {"path": "/healthz", "port": port},
            "initialDelaySeconds": 0,
            "periodSeconds": _HEALTH["startup_period"],
            "timeoutSeconds": _HEALTH["timeout"],
            "failureThreshold": _HEALTH["startup_failure"],
        }

    def _container(self, **fields: Any) -> dict[str, Any]:
        order = ["name", "image", "imagePullPolicy", "command", "args", "env", "resources", "volumeMounts", "ports",
                 "startupProbe", "livenessProbe", "readinessProbe", "securityContext"]  # fmt: skip
        fields.setdefault("image", self.image)
        fields.setdefault("imagePullPolicy", self.pull_policy)
        fields.setdefault("volumeMounts", self.mounts())
        fields.setdefault("securityContext", self.security())
        return {k: fields[k] for k in order if fields.get(k) is not None}

    def service(self, name: str, service_type: str, health_port: int, resources: Any, *, service_id: str,
                api_port: int | None = None, controller_host: str | None = None, extra_env: list[dict[str, Any]] | None = None,
                pod_index: bool = True, controller_pod: bool = False, readiness: bool = True, startup: bool = True,
                liveness: bool = True) -> dict[str, Any]:  # fmt: skip
        args = ["service", "--type", service_type, "--benchmark-run", f"{self.config_path}/run_config.json",
                "--health-port", str(health_port), "--service-id", service_id]  # fmt: skip
        ports = [{"containerPort": health_port, "name": "health"}]
        if api_port:
            args += ["--api-port", str(api_port)]
            ports.append({"containerPort": api_port, "name": "api"})
        env = self.env_vars(controller_host=controller_host, pod_index=pod_index, controller_pod=controller_pod)
        env += extra_env or []
        probe_port = api_port or health_port
        return self._container(
            name=name,
            command=["aiperf"],
            args=args,
            env=env,
            resources=resources,
            ports=ports,
            startupProbe=self._startup(probe_port) if startup else None,
            livenessProbe=self._probe(probe_port) if liveness else None,
            readinessProbe=self._probe(probe_port, "/readyz") if readiness else None,
        )

    def res(self, key: str) -> Any:
        return _resources(*self.env.resources(key), self.mode)

    def controller_containers(self, gpu_telemetry: bool, server_metrics: bool) -> list[dict[str, Any]]:
        sidecar_enabled = self.env.bool("AIPERF_K8S_EVENT_BUS_SIDECAR_ENABLED", True)
        ctl = {"pod_index": False, "controller_pod": True}
        out = [
            self.service("control-plane", "system_controller", _PORTS["SYSTEM_CONTROLLER_HEALTH"], self.res("SYSTEM_CONTROLLER"),
                         service_id="system_controller", readiness=False,
                         extra_env=[{"name": "AIPERF_K8S_EVENT_BUS_SIDECAR_ENABLED", "value": str(sidecar_enabled).lower()}], **ctl),
            self.service("dataset-manager", "dataset_manager", _PORTS["DATASET_MANAGER_HEALTH"], self.res("DATASET_MANAGER"),
                         service_id="dataset_manager", **ctl),
            self.service("timing-manager", "timing_manager", _PORTS["TIMING_MANAGER_HEALTH"], self.res("TIMING_MANAGER"),
                         service_id="timing_manager", **ctl),
            self.service("records-manager", "records_manager", _PORTS["RECORDS_MANAGER_HEALTH"], self.res("RECORDS_MANAGER"),
                         service_id="records_manager", readiness=False, startup=False, liveness=False, **ctl),
            self.service("api", "api", _PORTS["API_SERVICE_HEALTH"], self.res("API"), service_id="api",
                         api_port=_PORTS["API_SERVICE"], **ctl),
        ]  # fmt: skip
        if gpu_telemetry:
            out.append(self.service("gpu-telemetry-manager", "gpu_telemetry_manager", _PORTS["GPU_TELEMETRY_MANAGER_HEALTH"],
                                    self.res("GPU_TELEMETRY_MANAGER"), service_id="gpu_telemetry_manager", **ctl))  # fmt: skip
        if server_metrics:
            out.append(self.service("server-metrics-manager", "server_metrics_manager", _PORTS["SERVER_METRICS_MANAGER_HEALTH"],
                                    self.res("SERVER_METRICS_MANAGER"), service_id="server_metrics_manager", **ctl))  # fmt: skip
        port = _PORTS["RESULTS_SIDECAR"]
        out.append(
            self._container(
                name="results-sidecar",
                command=["python", "-m", "aiperf.kubernetes.results_sidecar"],
                env=[
                    {"name": "AIPERF_RESULTS_DIR", "value": "/results"},
                    {"name": "AIPERF_RESULTS_SIDECAR_PORT", "value": str(port)},
                    {"name": "AIPERF_RESULTS_SIDECAR_LOG_LEVEL", "value": self.env.get("AIPERF_K8S_RESULTS_SIDECAR_LOG_LEVEL", "info")},
                ],
                resources=self.res("RESULTS_SIDECAR"),
                volumeMounts=[{"name": "results", "mountPath": "/results", "readOnly": True}, {"name": "tmp", "mountPath": "/tmp"}],
                ports=[{"containerPort": port, "name": "results"}],
                startupProbe=self._startup(port),
                livenessProbe=self._probe(port),
                readinessProbe=self._probe(port),
            )
        )
        if sidecar_enabled:
            hp = _PORTS["EVENT_BUS_PROXY_HEALTH"]
            out.insert(
                0,
                self._container(
                    name="event-bus-proxy",
                    command=["aiperf"],
                    args=["proxy", "--kind", "event_bus", "--benchmark-run", f"{self.config_path}/run_config.json",
                          "--health-port", str(hp)],  # fmt: skip
                    env=self.env_vars(pod_index=False, controller_pod=True),
                    resources=self.res("EVENT_BUS_PROXY"),
                    ports=[
                        {"containerPort": hp, "name": "health"},
                        {"containerPort": _PORTS["EVENT_BUS_PROXY_PUB_FRONTEND"], "name": "pub-frontend"},
                        {"containerPort": _PORTS["EVENT_BUS_PROXY_SUB_BACKEND"], "name": "sub-backend"},
                    ],
                    startupProbe=self._startup(hp),
                    livenessProbe=self._probe(hp),
                    readinessProbe=self._probe(hp, "/readyz"),
                ),
            )
        return out

    def worker_containers(self, workers: int, rps: int) -> list[dict[str, Any]]:
        dns = f"{self.name}-controller-0-0.{self.name}.{self.ns}.svc.cluster.local"
        manager = _PORTS["WORKER_HEALTH"]
        worker_ports = list(range(manager + 1, manager + 1 + workers))
        rp_start = max(_PORTS["RECORD_PROCESSOR_HEALTH"], manager + 1 + workers)
        rp_ports = list(range(rp_start, rp_start + rps))
        if self.mode == "none":
            shares: list[Any] = [None] * (1 + workers + rps)
        else:
            rp_cpu = None
            for e in self._t("env") or []:
                if e.get("name") == "AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST" and e.get("value"):
                    rp_cpu = e["value"]
                    break
            rp_cpu = rp_cpu or self.env.get("AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST", "") or None
            cpu, mem = self.env.resources("WORKER_POD")
            shares = [_resources(c, m, self.mode) for c, m in split_worker_pod_resources(cpu, mem, workers, rps, rp_cpu)]
        quiet = {"controller_host": dns, "readiness": False, "startup": False, "liveness": False}
        out = [self.service("worker-group-manager", "worker_group_manager", manager, shares[0],
                            service_id="worker_group_manager_$(AIPERF_POD_INDEX)", **quiet)]  # fmt: skip
        for i, port in enumerate(worker_ports):
            out.append(self.service(f"worker-{i}", "worker", port, shares[1 + i], service_id=f"worker_$(AIPERF_POD_INDEX)_{i}", **quiet))
        for i, port in enumerate(rp_ports):
            out.append(self.service(f"record-processor-{i}", "record_processor", port, shares[1 + workers + i],
                                    service_id=f"record_processor_$(AIPERF_POD_INDEX)_{i}", **quiet))  # fmt: skip
        return out

    def pod_spec(self, containers: list[dict[str, Any]], restart: str) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "restartPolicy": restart,
            "containers": containers,
            "volumes": self.volumes(),
            "securityContext": dict(_POD_SECURITY),
        }
        for key in _POD_PASSTHROUGH:
            v = self._t(key)
            if v:
                spec[key] = v
        init = self._t("initContainers")
        if init:
            base = {k: v for k, v in self.security().items() if k != "readOnlyRootFilesystem"}
            spec["initContainers"] = [
                c if "securityContext" in c else {**c, "securityContext": base} for c in init
            ]
        if self._t("imagePullSecrets"):
            spec["imagePullSecrets"] = list(self._t("imagePullSecrets"))
        if self._t("shareProcessNamespace"):
            spec["shareProcessNamespace"] = True
        if self._t("terminationGracePeriodSeconds") is not None:
            spec["terminationGracePeriodSeconds"] = self._t("terminationGracePeriodSeconds")
        if self._t("podSecurityContext"):
            spec["securityContext"] = {**_POD_SECURITY, **self._t("podSecurityContext")}
        extra = self._t("extraPodSpec") or {}
        spec.update({k: v for k, v in extra.items() if k not in _DENIED_EXTRA_POD_SPEC_KEYS})
        return spec

    def replicated_job(self, name: str, replicas: int, containers: list[dict[str, Any]], restart: str, backoff: int,
                       ttl: int | None, annotations: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
        labels = dict(self._t("labels") or {})
        labels["app"] = "aiperf"
        labels["aiperf.nvidia.com/job-id"] = self.job_id
        meta: dict[str, Any] = {"labels": labels}
        ann = {**(self._t("annotations") or {}), **(annotations or {})}
        if ann:
            meta["annotations"] = ann
        job: dict[str, Any] = {
            "parallelism": 1,
            "completions": 1,
            "completionMode": "Indexed",
            "backoffLimit": backoff,
            "template": {"spec": self.pod_spec(containers, restart), "metadata": meta},
        }
        if ttl is not None:
            job["ttlSecondsAfterFinished"] = ttl
        return {"name": name, "replicas": replicas, "template": {"spec": job}}


def _queue(spec: dict[str, Any], env: _Env, settings: Settings) -> tuple[str | None, str | None]:
    sched = spec.get("scheduling") or {}
    queue = _get(sched, "queueName") or env.get("AIPERF_K8S_JOBSET_KUEUE_DEFAULT_QUEUE_NAME", "") or settings.kueue.default_queue_name
    prio = _get(sched, "priorityClass") or env.get("AIPERF_K8S_JOBSET_KUEUE_DEFAULT_PRIORITY_CLASS", "")
    return queue or None, prio or None


# PodTemplateConfig field → the Kubernetes shape it is copied into the pods as
_TEMPLATE_SCHEMA: dict[str, Schema] = {
    **{k: podspec.POD_SPEC[k] for k in _POD_PASSTHROUGH + ("imagePullSecrets", "shareProcessNamespace",
                                                             "terminationGracePeriodSeconds", "initContainers")},
    "env": podspec.CONTAINER["env"],
    "volumes": podspec.POD_SPEC["volumes"],
    "volumeMounts": podspec.CONTAINER["volumeMounts"],
    "annotations": MapOf("string"),
    "labels": MapOf("string"),
    "containerSecurityContext": podspec.SECURITY_CONTEXT,
    "podSecurityContext": podspec.POD_SECURITY_CONTEXT,
    "extraPodSpec": podspec.POD_SPEC,
}  # fmt: skip
assert set(_TEMPLATE_SCHEMA) == _POD_TEMPLATE_KEYS


def _key(d: dict[str, Any], camel: str) -> str:
    """The spelling of a field the object uses (camelCase wins, as `_get` reads it)."""
    return camel if camel in d or _snake(camel) not in d else _snake(camel)


def _no_unknown(d: dict[str, Any], allowed: set[str], path: str, what: str) -> None:
    for key in d:
        if key not in _known(d, allowed):
            raise AdapterError(f"{at(path, key)} is not a field of AIPerfJob (AIPerf rejects unknown {what})")


def _pod_template(spec: dict[str, Any]) -> dict[str, Any]:
    """spec.podTemplate validated against the Kubernetes shapes it becomes, camelCase keys, no nulls."""
    path = at("spec", _key(spec, "podTemplate"))
    tmpl = mapping(_get(spec, "podTemplate"), path)
    _no_unknown(tmpl, _POD_TEMPLATE_KEYS, path, "fields")
    out: dict[str, Any] = {}
    for camel, schema in _TEMPLATE_SCHEMA.items():
        key = _key(tmpl, camel)
        if tmpl.get(key) is not None:
            out[camel] = clean(tmpl[key], schema, at(path, key))
    return out


# --- typed fields AIPerf 0.13.0's models refuse (aiperf/config/{phases,dataset,endpoint,models}.py), in
# pydantic's lax mode: what AIPerf accepts is never refused here (a wrong verdict must not block a user)
PHASE_TYPES = ("concurrency", "constant", "gamma", "poisson", "fixed_schedule", "user_centric")  # PhaseConfig union
DATASET_TYPES = ("synthetic", "file", "public")  # DatasetType (case-insensitive)
ENDPOINT_TYPES = (
    "audio_transcription chat cohere_rankings completions responses messages chat_embeddings embeddings "
    "hf_tei_rankings huggingface_generate image_generation image_edit video_generation image_retrieval "
    "nim_embeddings nim_rankings solido_rag raw template"
).split()  # EndpointType
_PHASE_INTS = ("requests", "sessions", "concurrency", "prefillConcurrency")
_PHASE_DURATIONS = ("duration", "gracePeriod")  # aiperf/config/loader/duration.py
_PHASE_FLOATS = ("rate", "failedRequestThreshold", "smoothness")
_PHASE_BOOLS = ("excludeFromResults", "seamless", "burstPhaseStarts")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|hour)?$", re.IGNORECASE)
_LAX_TRUE_FALSE = {"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"}


def _lax_int(value: Any, path: str) -> None:
    """pydantic's lax int: an int, a bool, an integral float, or a string of digits."""
    if value is None or isinstance(value, (int, bool)) or (isinstance(value, float) and value.is_integer()):
        return
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return
    raise wrong(path, "an integer", value)


def _lax_float(value: Any, path: str) -> None:
    """pydantic's lax float: a number, a bool, or a string that reads as a number."""
    if value is None or isinstance(value, (int, float, bool)):
        return
    if isinstance(value, str):
        try:
            float(value)
            return
        except ValueError:
            pass
    raise wrong(path, "a number", value)


def _lax_bool(value: Any, path: str) -> None:
    """pydantic's lax bool: true/false, 0/1, or one of its strings (yes, no, on, off, ...)."""
    if value is None or isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return
    if isinstance(value, str) and value.strip().lower() in _LAX_TRUE_FALSE:
        return
    raise wrong(path, "a boolean", value)


def _duration(value: Any, path: str) -> None:
    """A number of seconds or a string such as "30s", "5m", "2h", "inf" (AIPerf's _parse_duration)."""
    if value is None or isinstance(value, (int, float)):
        return
    if isinstance(value, str) and (value.strip().lower() in ("inf", "infinity") or _DURATION.match(value.strip())):
        return
    if isinstance(value, str):
        raise AdapterError(f"{path} must be a duration such as 30, \"30s\", \"5m\" or \"2h\", not {value[:40]!r}")
    raise wrong(path, 'a duration (a number of seconds or a string such as "30s")', value)


def _enum(value: Any, path: str, allowed: tuple[str, ...] | list[str], *, required: bool = False) -> None:
    if value is None:
        if required:
            raise AdapterError(f"{path} is required: one of {', '.join(allowed)}")
        return
    if isinstance(value, str) and value.lower() in allowed:
        return
    choices = ", ".join(allowed[:-1]) + f" or {allowed[-1]}"
    if isinstance(value, str):
        raise AdapterError(f"{path} must be {choices}, not {value[:40]!r}")
    raise wrong(path, choices, value)


def _field(d: dict[str, Any], camel: str, path: str) -> tuple[Any, str]:
    key = _key(d, camel)
    return d.get(key), at(path, key)


def _check_models(models: Any, path: str) -> None:
    """ModelsAdvanced: a name, a non-empty list of names or {name: ...} items, or {items: [...]}."""
    if isinstance(models, str):
        return
    if isinstance(models, dict):
        if models.get("items") is None:
            raise AdapterError(f"{at(path, 'items')} is required (the list of models)")
        path = at(path, "items")
        models = listing(models.get("items"), path)
    elif not isinstance(models, list):
        raise wrong(path, "a string, a list or a mapping", models)
    if not models:
        raise AdapterError(f"{path} must name at least one model")
    for i, item in enumerate(models):
        if isinstance(item, dict):
            name = item.get("name")
            if name is None:
                raise AdapterError(f"{at(at(path, i), 'name')} is required")
            string(name, at(at(path, i), "name"))
        elif not isinstance(item, str):
            raise wrong(at(path, i), "a string or a mapping", item)


def _check_phase(phase: dict[str, Any], ppath: str) -> None:
    _enum(phase.get("type"), at(ppath, "type"), PHASE_TYPES, required=True)
    for camel in _PHASE_INTS:
        _lax_int(*_field(phase, camel, ppath))
    for camel in _PHASE_DURATIONS:
        _duration(*_field(phase, camel, ppath))
    for camel in _PHASE_FLOATS:
        _lax_float(*_field(phase, camel, ppath))
    for camel in _PHASE_BOOLS:
        _lax_bool(*_field(phase, camel, ppath))


def _check_endpoint(endpoint: dict[str, Any], ep_path: str) -> None:
    urls = endpoint.get("urls")
    upath = at(ep_path, "urls")
    if urls is not None:
        if not isinstance(urls, list):
            raise wrong(upath, "a list of URLs", urls)
        if not urls:
            raise AdapterError(f"{upath} must list at least one URL")
        for i, url in enumerate(urls):
            if not isinstance(url, str):
                raise wrong(at(upath, i), "a string", url)
    string(endpoint.get("url"), at(ep_path, "url"))
    _enum(endpoint.get("type"), at(ep_path, "type"), ENDPOINT_TYPES)
    _lax_bool(endpoint.get("streaming"), at(ep_path, "streaming"))
    _lax_float(*_field(endpoint, "timeout", ep_path))


def _check_benchmark(bench: dict[str, Any], path: str = "spec.benchmark") -> None:
    """The parts of BenchmarkConfig this adapter and the checks read, each at its field path."""
    for key in ("models", "model"):
        if bench.get(key) is not None:
            _check_models(bench[key], at(path, key))
    ep_path = at(path, "endpoint")
    _check_endpoint(mapping(bench.get("endpoint"), ep_path), ep_path)
    datasets = [(d, at(at(path, "datasets"), i)) for i, d in enumerate(listing(bench.get("datasets"), at(path, "datasets")))]
    if bench.get("dataset") is not None:
        datasets.append((bench["dataset"], at(path, "dataset")))
    for d, dpath in datasets:
        if not isinstance(d, dict):
            raise wrong(dpath, "a mapping", d)
        string(d.get("name"), at(dpath, "name"))
        _enum(d.get("type"), at(dpath, "type"), DATASET_TYPES)
        _lax_int(d.get("entries"), at(dpath, "entries"))
        prompts = mapping(d.get("prompts"), at(dpath, "prompts"))
        for key in ("isl", "osl"):  # a number or a distribution mapping (aiperf/config/distributions.py)
            v, vpath = prompts.get(key), at(at(dpath, "prompts"), key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, dict))):
                raise wrong(vpath, "a number or a distribution mapping", v)
    for phase, ppath in _phases(bench, path):
        string(phase.get("name"), at(ppath, "name"))
        string(phase.get("kind"), at(ppath, "kind"))
        _check_phase(phase, ppath)
    for key in ("runtime", "artifacts", "tokenizer", "logging"):
        mapping(bench.get(key), at(path, key))


def _check_shape(spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec, its pod template) once every field the adapter reads has the shape AIPerf's model gives it."""
    if not isinstance(spec, dict):  # the one field where null is not "absent": a job needs a spec
        raise wrong("spec", "a mapping", spec)
    _no_unknown(spec, _SPEC_KEYS, "spec", "spec fields")
    if spec.get("benchmark") is None:
        raise AdapterError("spec.benchmark is required")
    _check_benchmark(mapping(spec["benchmark"], "spec.benchmark"))
    template = _pod_template(spec)
    sched_path = at("spec", _key(spec, "scheduling"))
    sched = mapping(_get(spec, "scheduling"), sched_path)
    _no_unknown(sched, _SCHEDULING_KEYS, sched_path, "fields")
    for field in _SCHEDULING_KEYS:
        string(_get(sched, field), at(sched_path, _key(sched, field)))
    one_of(_get(spec, "resourceMode"), at("spec", _key(spec, "resourceMode")), ("guaranteed", "burstable", "none"))
    string(_get(spec, "imagePullPolicy"), at("spec", _key(spec, "imagePullPolicy")))
    image = spec.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise AdapterError("spec.image must be a non-empty string")
    mapping(spec.get("variables"), "spec.variables")
    _lax_float(*_field(spec, "timeoutSeconds", "spec"))
    _lax_int(*_field(spec, "randomSeed", "spec"))
    boolean(_get(spec, "keepFailedPods"), at("spec", _key(spec, "keepFailedPods")))
    integer(_get(spec, "ttlSecondsAfterFinished"), at("spec", _key(spec, "ttlSecondsAfterFinished")), minimum=0)
    return spec, template


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _phase_errors(benchmark: dict[str, Any]) -> list[str]:
    errors = []
    for p, _ in _phases(benchmark):
        name = p.get("name")
        if name not in ("warmup", "profiling") and not p.get("kind"):
            errors.append(
                f"Phase '{name}': kind is required for non-canonical phase names, so the AIPerf operator rejects the "
                f"config. Fix: set kind: profiling (or warmup) on phase '{name}', or name it profiling/warmup."
            )
    return errors


def build(
    obj: dict[str, Any],
    *,
    settings: Settings,
    runtime_lookup: RuntimeLookup | None = None,
    namespace: str | None = None,
) -> Workload:
    """The Workload for one AIPerfJob. Raises AdapterError when it cannot be read as one."""
    plain_json(obj)
    meta = mapping(obj.get("metadata"), "metadata")
    name = string(meta.get("name"), "metadata.name") or ""
    ns = string(meta.get("namespace"), "metadata.namespace") or namespace or "default"
    labels = str_map(meta.get("labels"), "metadata.labels")
    str_map(meta.get("annotations"), "metadata.annotations")  # the skip annotation is read from here
    uid = string(meta.get("uid"), "metadata.uid")
    spec, template = _check_shape(obj.get("spec"))
    env = _Env(settings)
    queue, prio = _queue(spec, env, settings)
    wl = Workload(
        kind="AIPerfJob",
        api_version=str(obj.get("apiVersion") or API_VERSION),
        name=name,
        namespace=ns,
        obj=obj,
        queue_name=queue or labels.get(QUEUE_LABEL),
    )
    job_id = name
    if not job_id:
        wl.render_errors.append("metadata.name is empty (generateName is not resolved at admission). Fix: set metadata.name.")
    elif len(job_id) > MAX_JOB_ID or not _DNS_LABEL.match(job_id):
        wl.render_errors.append(
            f'AIPerfJob name "{job_id}" is not a DNS label of at most {MAX_JOB_ID} characters, which the AIPerf operator '
            f'requires for its job id (pods are named aiperf-<name>-controller-0-0-xxxxx, at most 63 characters). '
            f"Fix: rename the AIPerfJob to at most {MAX_JOB_ID} lowercase letters, digits and '-'."
        )
    wl.render_errors += _phase_errors(spec["benchmark"])
    if spec.get("sweep") is not None:
        wl.render_errors.append(
            "A single Kubernetes benchmark run cannot include `sweep`, so the AIPerf operator rejects this AIPerfJob. "
            "Fix: submit it as kind: AIPerfSweep (same spec: every variation becomes a child AIPerfJob), "
            "or remove spec.sweep."
        )
    if wl.render_errors:
        wl.incomplete_reason = "the AIPerf operator cannot render this AIPerfJob"
        return wl

    runtime = spec["benchmark"].get("runtime") or {}
    try:
        total = calculate_workers(spec, env)
        pods, per_pod, rp_per_pod = worker_topology(total, runtime, env)
        if 1 + per_pod + rp_per_pod > MAX_WORKER_POD_CONTAINERS:
            raise _RenderError(
                f"each worker pod would hold {1 + per_pod + rp_per_pod} containers (1 worker-pod-manager + {per_pod} "
                f"worker(s) + {rp_per_pod} record processor(s)), about 2 KB each, so the JobSet cannot fit the "
                "apiserver's 1.5 MiB object limit. Fix: lower spec.benchmark.runtime.workersPerPod / "
                f"recordProcessorsPerPod so a pod holds at most {MAX_WORKER_POD_CONTAINERS} containers."
            )
        r = _Renderer(spec, template, job_id, ns, uid, env)
        worker_containers = r.worker_containers(per_pod, rp_per_pod)
    except _RenderError as exc:
        wl.render_errors.append(f"The AIPerf operator would refuse to render this job: {exc}")
        wl.incomplete_reason = "the AIPerf operator cannot render this AIPerfJob"
        return wl

    bench = spec["benchmark"]
    gpu = _get(bench, "gpuTelemetry") or {}
    srv = _get(bench, "serverMetrics") or {}
    controller = r.controller_containers(
        gpu_telemetry=bool(gpu.get("enabled", True)) if isinstance(gpu, dict) else True,
        server_metrics=bool(srv.get("enabled", True)) if isinstance(srv, dict) else True,
    )
    keep_failed = bool(_get(spec, "keepFailedPods", False))
    controller_job = r.replicated_job(
        "controller", 1, controller, "Never", env.int("AIPERF_K8S_JOBSET_CONTROLLER_BACKOFF_LIMIT", 0), None,
        annotations={"prometheus.io/scrape": "true", "prometheus.io/port": str(_PORTS["API_SERVICE"]), "prometheus.io/path": "/metrics"},
    )  # fmt: skip
    worker_job = r.replicated_job(
        "workers", pods, worker_containers, "OnFailure", env.int("AIPERF_K8S_JOBSET_WORKER_BACKOFF_LIMIT", 20),
        None if keep_failed else 0,
    )  # fmt: skip
    js_labels = {"app": "aiperf", "aiperf.nvidia.com/job-id": job_id}
    if queue:
        js_labels[QUEUE_LABEL] = queue
    if prio:
        js_labels[PRIORITY_LABEL] = prio
    jobset: dict[str, Any] = {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": {"name": r.name, "namespace": ns, "labels": js_labels},
        "spec": {
            "network": {"enableDNSHostnames": True},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["controller"]},
            "replicatedJobs": [controller_job, worker_job],
        },
    }
    if queue:
        jobset["spec"]["suspend"] = True
    if not keep_failed:
        ttl = _get(spec, "ttlSecondsAfterFinished", 300)
        if ttl is not None:
            jobset["spec"]["ttlSecondsAfterFinished"] = ttl
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{r.name}-config", "namespace": ns, "labels": {"app": "aiperf", "aiperf.nvidia.com/job-id": job_id}},
        "data": {CONFIGMAP_KEY: run_config_json(spec, obj, job_id, ns, pods, per_pod, rp_per_pod)},
    }
    wl.derived = {"jobSet": jobset, "configMap": configmap}
    for rj, role in ((controller_job, "controller"), (worker_job, "workers")):
        tmpl = rj["template"]["spec"]["template"]
        wl.pod_groups.append(PodGroup(name=rj["name"], pods=rj["replicas"], pod_spec=tmpl["spec"], pod_metadata=tmpl["metadata"], role=role))
    return wl
