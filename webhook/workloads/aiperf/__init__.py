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

The package follows the operator's seams: `env` (constants, AIPERF_K8S_* defaults),
`resources` (the per-container budget split), `workers` (worker topology), `run_config`
(run_config.json and its JSON writer), `jobset` (the JobSet renderer), `typed` (shape
checks) and `adapter` (`build`: one AIPerfJob to a Workload). Every public name is
importable from `webhook.workloads.aiperf`.
"""

from __future__ import annotations

from typing import Any

from webhook.kube import JOBSET_API_VERSION, QUEUE_LABEL
from webhook.workloads.aiperf.adapter import FACTS, build, read_metadata
from webhook.workloads.aiperf.env import (
    API_VERSION,
    CONFIGMAP_KEY,
    MAX_JOB_ID,
    MAX_WORKER_POD_CONTAINERS,
    MIN_CONTAINER_CPU_MCPU,
    MIN_CONTAINER_MEMORY_MIB,
    PRIORITY_LABEL,
    RESOURCE_DEFAULTS,
    RESULTS_SIDECAR_PORT,
    WORKER_IMPORT_MEMORY_FLOOR_MIB,
    Env,
    lookup,
)
from webhook.workloads.aiperf.jobset import container_security, merge_pod_security, results_sidecar
from webhook.workloads.aiperf.resources import k8s_resources, split_worker_pod_resources
from webhook.workloads.aiperf.run_config import (
    dumps_indent2,
    indent2_bytes,
    run_config_cfg,
    run_config_data,
    run_config_json,
    run_epoch,
)
from webhook.workloads.aiperf.typed import DATASET_TYPES, ENDPOINT_TYPES, PHASE_TYPES
from webhook.workloads.aiperf.workers import calculate_workers, worker_topology
from webhook.workloads.kinds import FINISHED, JUDGED, RUNNING, KindSpec, Related, phase_of

#: AIPerf 0.13.0 `aiperf/kubernetes/phase.py` `Phase`: judged while `status.phase` is unset, `Pending` or
#: `Queued` (JobSet suspended by Kueue); `Initializing`/`Running` run; the rest are finished
AIPERF_WAITING = frozenset({"", "Pending", "Queued"})
AIPERF_RUNNING = frozenset({"Initializing", "Running"})
AIPERF_TERMINAL = frozenset({"Completed", "Failed", "Cancelled"})


def aiperf_state(obj: dict[str, Any], related: Related | None = None) -> tuple[str, str]:
    """Whether an AIPerfJob started, from its `status.phase` (see AIPERF_WAITING)."""
    phase = phase_of(obj)
    if phase in AIPERF_TERMINAL:
        return FINISHED, f"phase {phase}"
    if phase in AIPERF_RUNNING:
        return RUNNING, f"phase {phase}"
    return JUDGED, f"phase {phase or 'not set'}"


KIND_SPEC = KindSpec(
    kind="AIPerfJob",
    group="aiperf.nvidia.com",
    version="v1alpha1",
    plural="aiperfjobs",
    adapter=build,
    state=aiperf_state,
    owns_jobsets=True,
    # its render copies the uid and the run epoch key: rendered once with placeholders (render_cache.py)
    per_create="webhook.workloads.aiperf.run_config:run_epoch",
)

__all__ = [
    "AIPERF_RUNNING",
    "AIPERF_TERMINAL",
    "AIPERF_WAITING",
    "API_VERSION",
    "FACTS",
    "CONFIGMAP_KEY",
    "DATASET_TYPES",
    "ENDPOINT_TYPES",
    "JOBSET_API_VERSION",
    "KIND_SPEC",
    "MAX_JOB_ID",
    "MAX_WORKER_POD_CONTAINERS",
    "MIN_CONTAINER_CPU_MCPU",
    "MIN_CONTAINER_MEMORY_MIB",
    "PHASE_TYPES",
    "PRIORITY_LABEL",
    "QUEUE_LABEL",
    "RESOURCE_DEFAULTS",
    "RESULTS_SIDECAR_PORT",
    "WORKER_IMPORT_MEMORY_FLOOR_MIB",
    "Env",
    "aiperf_state",
    "build",
    "calculate_workers",
    "container_security",
    "dumps_indent2",
    "indent2_bytes",
    "k8s_resources",
    "lookup",
    "merge_pod_security",
    "read_metadata",
    "results_sidecar",
    "run_config_cfg",
    "run_config_data",
    "run_config_json",
    "run_epoch",
    "split_worker_pod_resources",
    "worker_topology",
]
