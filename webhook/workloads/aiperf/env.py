"""AIPerf's constants and the operator's environment: the AIPERF_K8S_* defaults
(aiperf/kubernetes/environment.py K8sEnvironment), the spec keys AIPerf's models accept, and
the `Env` reader (Settings.aiperf_env, then this process's environment, then AIPerf's default).
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

from webhook._compat import environ_key
from webhook.config import Settings
from webhook.workloads.base import AdapterError

API_VERSION = "aiperf.nvidia.com/v1alpha1"
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
_HEALTH = {
    "initial": 5,
    "period": 10,
    "timeout": 5,
    "failure": 10,
    "success": 1,
    "startup_period": 5,
    "startup_failure": 30,
}
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
RESULTS_SIDECAR_PORT = _PORTS["RESULTS_SIDECAR"]
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
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 1000,
    "fsGroup": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


class Env:
    """The operator's AIPERF_* settings: Settings.aiperf_env, then os.environ, then AIPerf's default."""

    def __init__(self, settings: Settings) -> None:
        self._over = dict(settings.aiperf_env)
        self._env = _aiperf_environ()

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


#: (the environment it was read from, its AIPERF* variables): re-read only when the environment changes
_ENVIRON: list[tuple[Any, dict[str, str]]] = []


def _aiperf_environ() -> dict[str, str]:
    """This process's AIPERF* variables by upper-cased name (pydantic-settings reads env names
    case-insensitively); shared, never changed. Decoding the whole environment on every request
    cost more than the rest of Env (a pod's environment holds a variable per Service in its
    namespace), so it is read again only when os.environ's raw contents differ."""
    key = environ_key()  # CPython's bytes mapping behind os.environ
    if key is not None and _ENVIRON and _ENVIRON[0][0] == key:
        return _ENVIRON[0][1]
    environ = os.environ
    found = {k.upper(): environ[k] for k in environ if k[:6].upper() == "AIPERF"}  # keys first: values cost more
    if key is not None:
        _ENVIRON[:] = [(key, found)]
    return found


# ----------------------------------------------------------------------------- small helpers


@functools.lru_cache(maxsize=1024)
def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def lookup(d: dict[str, Any], camel: str, default: Any = None) -> Any:
    """A field given in camelCase or snake_case (AIPerf accepts both): `d[camel]`, else
    `d[snake_case of camel]`, else `default`."""
    if camel in d:
        return d[camel]
    return d.get(_snake(camel), default)


def _known(d: dict[str, Any], allowed: set[str] | frozenset[str]) -> frozenset[str]:
    return _known_names(frozenset(allowed))


@functools.lru_cache(maxsize=256)
def _known_names(allowed: frozenset[str]) -> frozenset[str]:
    return allowed | {_snake(k) for k in allowed}
