"""The AIPerfJob adapter: one AIPerfJob object to a Workload (its JobSet, its ConfigMap, its pod groups)."""

from __future__ import annotations

from typing import Any

from webhook.cluster.names import is_dns1123_label
from webhook.config import Settings
from webhook.kube import CONFIGMAP_MAX_BYTES, JOBSET_API_VERSION, QUEUE_LABEL
from webhook.workloads import shape
from webhook.workloads.aiperf.env import (
    _PORTS,
    API_VERSION,
    CONFIGMAP_KEY,
    MAX_JOB_ID,
    MAX_WORKER_POD_CONTAINERS,
    PRIORITY_LABEL,
    Env,
    lookup,
)
from webhook.workloads.aiperf.jobset import Renderer, kueue_queue
from webhook.workloads.aiperf.resources import RenderError
from webhook.workloads.aiperf.run_config import run_config_data
from webhook.workloads.aiperf.typed import check_shape, phase_errors
from webhook.workloads.aiperf.workers import calculate_workers, worker_topology
from webhook.workloads.base import KindFacts, PodGroup, RuntimeLookup, Workload
from webhook.workloads.walks import plain_json

#: the operator renders a JobSet; pod-level fields are set in spec.podTemplate
FACTS = KindFacts(
    controllers=("AIPerf operator", "JobSet"),
    pod_field="spec.podTemplate.{field}",
    pull_secrets_at="spec.podTemplate.imagePullSecrets",
    # the operator names the JobSet aiperf-<job> (jobset.py Renderer)
    jobset_prefix="aiperf-",
    # jobset.py kueue_queue: the spec's scheduling.queueName, else the operator's default queue
    queue_field="spec.scheduling.queueName",
    default_queue=True,
    resources_hint=(
        ("requests", " (AIPerfJob: spec.resourceMode burstable or guaranteed)"),
        ("limits", " (AIPerfJob: spec.resourceMode: guaranteed sets limits)"),
    ),
    calls_endpoints=True,
)


def build(
    obj: dict[str, Any],
    *,
    settings: Settings,
    runtime_lookup: RuntimeLookup | None = None,
    namespace: str | None = None,
    epoch: str | None = None,
) -> Workload:
    """The Workload for one AIPerfJob. Raises AdapterError when it cannot be read as one.

    ``epoch``: the run epoch key to write into run_config.json instead of the one ``obj``'s
    creationTimestamp and uid give (the render cache renders once per content with placeholders for
    both and fills them in per review: webhook/workloads/render_cache.py).

    Steps: read the object (metadata, spec shape), collect what the operator refuses before
    rendering, lay out the workers, render the JobSet and the ConfigMap, list the pod groups."""
    name, ns, labels, uid = read_metadata(obj, namespace)
    spec, template = check_shape(obj.get("spec"))
    env = Env(settings)
    queue, prio = kueue_queue(spec, env, settings)
    wl = Workload(
        kind="AIPerfJob",
        api_version=str(obj.get("apiVersion") or API_VERSION),
        name=name,
        namespace=ns,
        obj=obj,
        queue_name=queue or labels.get(QUEUE_LABEL),
        facts=FACTS,
    )
    wl.render_errors += _refusals(spec, name)
    if wl.render_errors:
        wl.incomplete_reason = "the AIPerf operator cannot render this AIPerfJob"
        return wl
    try:
        pods, per_pod, rp_per_pod = _worker_layout(spec, env)
        r = Renderer(spec, template, name, ns, uid, env)
        worker_containers = r.worker_containers(per_pod, rp_per_pod)
    except RenderError as exc:
        return _refused(wl, exc)
    jobset = _jobset(spec, r, env, ns, name, pods, worker_containers, queue, prio)
    try:
        # the text when it fits the 1 MiB ConfigMap, else its document and size (ConfigMap Size reports it)
        run_config = run_config_data(
            spec, obj, name, ns, pods, per_pod, rp_per_pod, key=CONFIGMAP_KEY, limit=CONFIGMAP_MAX_BYTES, epoch=epoch
        )
    except RenderError as exc:
        return _refused(wl, exc)
    wl.derived = {"jobSet": jobset, "configMap": _configmap(r.name, ns, name, run_config)}
    wl.pod_groups.extend(_pod_groups(jobset))
    return wl


def _refused(wl: Workload, exc: RenderError) -> Workload:
    """`wl` with the render error the operator would refuse the job with: incomplete, no pod groups."""
    wl.render_errors.append(f"The AIPerf operator would refuse to render this job: {exc}")
    wl.incomplete_reason = "the AIPerf operator cannot render this AIPerfJob"
    return wl


def _configmap(rendered_name: str, ns: str, name: str, run_config: Any) -> dict[str, Any]:
    """The ConfigMap the operator creates beside the JobSet: the run configuration under CONFIGMAP_KEY."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{rendered_name}-config",
            "namespace": ns,
            "labels": {"app": "aiperf", "aiperf.nvidia.com/job-id": name},
        },
        "data": {CONFIGMAP_KEY: run_config},
    }


def _pod_groups(jobset: dict[str, Any]) -> list[PodGroup]:
    """One pod group per replicated job of the rendered JobSet."""
    groups: list[PodGroup] = []
    for rj in jobset["spec"]["replicatedJobs"]:
        tmpl = rj["template"]["spec"]["template"]
        groups.append(
            PodGroup(
                name=rj["name"],
                pods=rj["replicas"],
                pod_spec=tmpl["spec"],
                pod_metadata=tmpl["metadata"],
                role=rj["name"],
            )
        )
    return groups


def read_metadata(obj: dict[str, Any], namespace: str | None) -> tuple[str, str, dict[str, str], str | None]:
    """(name, namespace, labels, uid) of an AIPerf object (AIPerfJob, AIPerfSweep), once the object is
    plain JSON and its metadata has Kubernetes' shapes; the namespace defaults to the request's."""
    plain_json(obj)
    return shape.read_metadata(obj, namespace)


def _refusals(spec: dict[str, Any], job_id: str) -> list[str]:
    """What the operator refuses before it renders anything: the job id, phase names, `sweep`."""
    errors: list[str] = []
    if not job_id:
        errors.append("metadata.name is empty (generateName is not resolved at admission). Fix: set metadata.name.")
    elif len(job_id) > MAX_JOB_ID or not is_dns1123_label(job_id):
        errors.append(
            f'AIPerfJob name "{job_id}" is not a DNS label of at most {MAX_JOB_ID} characters, which the AIPerf operator '
            f"requires for its job id (pods are named aiperf-<name>-controller-0-0-xxxxx, at most 63 characters). "
            f"Fix: rename the AIPerfJob to at most {MAX_JOB_ID} lowercase letters, digits and '-'."
        )
    errors += phase_errors(spec["benchmark"])
    if spec.get("sweep") is not None:
        errors.append(
            "A single Kubernetes benchmark run cannot include `sweep`, so the AIPerf operator rejects this AIPerfJob. "
            "Fix: submit it as kind: AIPerfSweep (same spec: every variation becomes a child AIPerfJob), "
            "or remove spec.sweep."
        )
    return errors


def _worker_layout(spec: dict[str, Any], env: Env) -> tuple[int, int, int]:
    """(worker pods, workers per pod, record processors per pod); raises RenderError past the container cap."""
    total = calculate_workers(spec, env)
    pods, per_pod, rp_per_pod = worker_topology(total, spec["benchmark"].get("runtime") or {}, env)
    if 1 + per_pod + rp_per_pod > MAX_WORKER_POD_CONTAINERS:
        raise RenderError(
            f"each worker pod would hold {1 + per_pod + rp_per_pod} containers (1 worker-pod-manager + {per_pod} "
            f"worker(s) + {rp_per_pod} record processor(s)), about 2 KB each, so the JobSet cannot fit the "
            "apiserver's 1.5 MiB object limit. Fix: lower spec.benchmark.runtime.workersPerPod / "
            f"recordProcessorsPerPod so a pod holds at most {MAX_WORKER_POD_CONTAINERS} containers."
        )
    return pods, per_pod, rp_per_pod


def _jobset(
    spec: dict[str, Any],
    r: Renderer,
    env: Env,
    ns: str,
    job_id: str,
    pods: int,
    worker_containers: list[dict[str, Any]],
    queue: str | None,
    prio: str | None,
) -> dict[str, Any]:
    """The JobSet: a controller replicated job and a workers replicated job."""
    bench = spec["benchmark"]
    gpu = lookup(bench, "gpuTelemetry") or {}
    srv = lookup(bench, "serverMetrics") or {}
    controller = r.controller_containers(
        gpu_telemetry=bool(gpu.get("enabled", True)) if isinstance(gpu, dict) else True,
        server_metrics=bool(srv.get("enabled", True)) if isinstance(srv, dict) else True,
    )
    keep_failed = bool(lookup(spec, "keepFailedPods", False))
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
        ttl = lookup(spec, "ttlSecondsAfterFinished", 300)
        if ttl is not None:
            jobset["spec"]["ttlSecondsAfterFinished"] = ttl
    return jobset
