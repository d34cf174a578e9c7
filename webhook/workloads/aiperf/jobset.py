"""The JobSet renderer: controller and worker containers, env, volumes, probes, security
contexts and the podTemplate pass-through (aiperf/operator/handlers/create.py _build_deployment).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from webhook.config import Settings
from webhook.workloads import podspec
from webhook.workloads.aiperf.env import (
    _CONNECTION_PROBE_TIMEOUT,
    _CONTAINER_SECURITY,
    _DENIED_EXTRA_POD_SPEC_KEYS,
    _HEALTH,
    _HEARTBEAT_INTERVAL,
    _IPC_PATH,
    _POD_PASSTHROUGH,
    _POD_TEMPLATE_KEYS,
    _PORTS,
    _REGISTRATION_TIMEOUT,
    POD_SECURITY,
    RESULTS_SIDECAR_PORT,
    Env,
    _known,
    _snake,
    lookup,
)
from webhook.workloads.aiperf.resources import k8s_resources, split_worker_pod_resources
from webhook.workloads.base import AdapterError
from webhook.workloads.shape import (
    MapOf,
    Schema,
    at,
    clean,
    copy_json,
    mapping,
)


def container_security(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """AIPerf's build_security_context (kubernetes/jobset_helpers.py), for the AIPerfJob's containers
    and the sweep controller's: the hardened container securityContext with the podTemplate's
    containerSecurityContext over it (capabilities merged when a mapping, else skipped;
    `privileged` / `allowPrivilegeEscalation` can never be switched on). A new dict each call."""
    ctx = {k: copy_json(v) for k, v in _CONTAINER_SECURITY.items()}
    over = overrides or {}
    caps = over.get("capabilities")
    if isinstance(caps, dict):
        ctx["capabilities"] = {**ctx["capabilities"], **caps}
    for k, v in over.items():
        if k == "capabilities" or (k in ("privileged", "allowPrivilegeEscalation") and v):
            continue
        ctx[k] = v
    return ctx


def merge_pod_security(user: dict[str, Any] | None) -> dict[str, Any]:
    """AIPerf's merge_pod_security_context (kubernetes/jobset_specs.py), which the AIPerfJob pods and the
    sweep-controller pod share: the user's pod securityContext keys over the hardened baseline
    (POD_SECURITY), in a new dict (its values are shared: consumers copy before changing)."""
    return {**POD_SECURITY, **(user or {})}


def results_sidecar(image: str | None, env: Env) -> dict[str, Any]:
    """The results sidecar of the AIPerfJob controller pod (jobset._create_results_sidecar) and of the
    sweep-controller pod (the sweep create handler's copy of it): name, image, command, env,
    volumeMounts and ports, in a new dict; each caller adds the rest in its own key order."""
    return {
        "name": "results-sidecar",
        "image": image,
        "command": ["python", "-m", "aiperf.kubernetes.results_sidecar"],
        "env": [
            {"name": "AIPERF_RESULTS_DIR", "value": "/results"},
            {"name": "AIPERF_RESULTS_SIDECAR_PORT", "value": str(RESULTS_SIDECAR_PORT)},
            {
                "name": "AIPERF_RESULTS_SIDECAR_LOG_LEVEL",
                "value": env.get("AIPERF_K8S_RESULTS_SIDECAR_LOG_LEVEL", "info"),
            },
        ],
        "volumeMounts": [
            {"name": "results", "mountPath": "/results", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "ports": [{"containerPort": RESULTS_SIDECAR_PORT, "name": "results"}],
    }


class Renderer:
    def __init__(self, spec: dict[str, Any], template: dict[str, Any], job_id: str, namespace: str, uid: str | None,
                 env: Env) -> None:  # fmt: skip
        self.spec, self.job_id, self.ns, self.uid, self.env = spec, job_id, namespace, uid, env
        self.name = f"aiperf-{job_id}"
        self.tmpl = template  # validated by _pod_template: camelCase keys, Kubernetes shapes
        self.image = spec.get("image") or "nvcr.io/nvidia/aiperf:latest"
        self.pull_policy = lookup(spec, "imagePullPolicy")
        self.mode = lookup(spec, "resourceMode") or "burstable"
        self.config_path = env.get("AIPERF_K8S_JOBSET_CONFIG_MOUNT_PATH", "/etc/aiperf")
        self.datasets_path = env.get("AIPERF_K8S_JOBSET_DATASETS_PATH", "/aiperf/datasets")
        self._env_cache: dict[tuple[str | None, bool, bool], list[dict[str, Any]]] = {}

    # -- fragments
    def _t(self, camel: str, default: Any = None) -> Any:
        return lookup(self.tmpl, camel, default)

    def security(self) -> dict[str, Any]:
        """The containers' securityContext; one shared dict per job (consumers copy before changing)."""
        return self._security

    @functools.cached_property
    def _security(self) -> dict[str, Any]:
        return container_security(self._t("containerSecurityContext"))

    def mounts(self) -> list[dict[str, Any]]:
        """A new list per container; its entries are shared between the containers of one job
        (like env entries and the securityContext: consumers copy before changing)."""
        return list(self._mounts)

    @functools.cached_property
    def _mounts(self) -> list[dict[str, Any]]:
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

    def env_vars(
        self, *, controller_host: str | None = None, pod_index: bool = True, controller_pod: bool = False
    ) -> list[dict[str, Any]]:
        """A new list per container; its entries are shared between the containers of one job
        (built once per variant: ~30 containers use 3 variants), like the template's own env
        entries and the securityContext already are. Consumers copy before changing."""
        key = (controller_host, pod_index, controller_pod)
        cached = self._env_cache.get(key)
        if cached is None:
            cached = self._env_cache[key] = self._env_vars(
                controller_host=controller_host, pod_index=pod_index, controller_pod=controller_pod
            )
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
        reserved = frozenset({e["name"] for e in env} | {"AIPERF_JOB_UID"})
        env.extend(_template_env(self._t("env") or [], reserved))
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

    def _container(
        self,
        name: str,
        command: list[str],
        args: list[str] | None,
        env: list[dict[str, Any]],
        resources: Any,
        ports: list[dict[str, Any]],
        startup: dict[str, Any] | None,
        liveness: dict[str, Any] | None,
        readiness: dict[str, Any] | None,
        volume_mounts: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """One container in the operator's key order (name, image, imagePullPolicy, command, args,
        env, resources, volumeMounts, ports, startupProbe, livenessProbe, readinessProbe,
        securityContext), None fields left out; built key by key: ~30 per job."""
        c: dict[str, Any] = {"name": name, "image": self.image}
        if self.pull_policy is not None:
            c["imagePullPolicy"] = self.pull_policy
        c["command"] = command
        if args is not None:
            c["args"] = args
        c["env"] = env
        if resources is not None:
            c["resources"] = resources
        c["volumeMounts"] = list(self._mounts) if volume_mounts is None else volume_mounts
        c["ports"] = ports
        if startup is not None:
            c["startupProbe"] = startup
        if liveness is not None:
            c["livenessProbe"] = liveness
        if readiness is not None:
            c["readinessProbe"] = readiness
        c["securityContext"] = self._security
        return c

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
        if extra_env:
            env += extra_env
        probe_port = api_port or health_port
        return self._container(
            name,
            ["aiperf"],
            args,
            env,
            resources,
            ports,
            self._startup(probe_port) if startup else None,
            self._probe(probe_port) if liveness else None,
            self._probe(probe_port, "/readyz") if readiness else None,
        )

    def res(self, key: str) -> Any:
        return k8s_resources(*self.env.resources(key), self.mode)

    def controller_containers(self, gpu_telemetry: bool, server_metrics: bool) -> list[dict[str, Any]]:
        sidecar_enabled = self.env.bool("AIPERF_K8S_EVENT_BUS_SIDECAR_ENABLED", True)
        ctl: dict[str, Any] = {"pod_index": False, "controller_pod": True}
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
        out.append(self._results_sidecar())
        if sidecar_enabled:
            out.insert(0, self._event_bus_proxy())
        return out

    def _results_sidecar(self) -> dict[str, Any]:
        """The controller pod's results sidecar container (results_sidecar), probed on RESULTS_SIDECAR_PORT."""
        port = RESULTS_SIDECAR_PORT
        sidecar = results_sidecar(self.image, self.env)
        return self._container(
            sidecar["name"],
            sidecar["command"],
            None,
            sidecar["env"],
            self.res("RESULTS_SIDECAR"),
            sidecar["ports"],
            self._startup(port),
            self._probe(port),
            self._probe(port),
            volume_mounts=sidecar["volumeMounts"],
        )

    def _event_bus_proxy(self) -> dict[str, Any]:
        """The event-bus proxy container, first in the controller pod when the event-bus sidecar is enabled."""
        hp = _PORTS["EVENT_BUS_PROXY_HEALTH"]
        return self._container(
            "event-bus-proxy",
            ["aiperf"],
            [
                "proxy",
                "--kind",
                "event_bus",
                "--benchmark-run",
                f"{self.config_path}/run_config.json",
                "--health-port",
                str(hp),
            ],  # fmt: skip
            self.env_vars(pod_index=False, controller_pod=True),
            self.res("EVENT_BUS_PROXY"),
            [
                {"containerPort": hp, "name": "health"},
                {"containerPort": _PORTS["EVENT_BUS_PROXY_PUB_FRONTEND"], "name": "pub-frontend"},
                {"containerPort": _PORTS["EVENT_BUS_PROXY_SUB_BACKEND"], "name": "sub-backend"},
            ],
            self._startup(hp),
            self._probe(hp),
            self._probe(hp, "/readyz"),
        )

    def worker_containers(self, workers: int, rps: int) -> list[dict[str, Any]]:
        dns = f"{self.name}-controller-0-0.{self.name}.{self.ns}.svc.cluster.local"
        manager = _PORTS["WORKER_HEALTH"]
        worker_ports = list(range(manager + 1, manager + 1 + workers))
        rp_start = max(_PORTS["RECORD_PROCESSOR_HEALTH"], manager + 1 + workers)
        rp_ports = list(range(rp_start, rp_start + rps))
        if self.mode == "none":
            shares: list[Any] = [None] * (1 + workers + rps)
        else:
            rp_cpu = _template_value(self._t("env") or [], "AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST")
            rp_cpu = rp_cpu or self.env.get("AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST", "") or None
            cpu, mem = self.env.resources("WORKER_POD")
            shares = [
                k8s_resources(c, m, self.mode) for c, m in split_worker_pod_resources(cpu, mem, workers, rps, rp_cpu)
            ]
        quiet: dict[str, Any] = {"controller_host": dns, "readiness": False, "startup": False, "liveness": False}
        out = [self.service("worker-group-manager", "worker_group_manager", manager, shares[0],
                            service_id="worker_group_manager_$(AIPERF_POD_INDEX)", **quiet)]  # fmt: skip
        for i, port in enumerate(worker_ports):
            out.append(
                self.service(
                    f"worker-{i}", "worker", port, shares[1 + i], service_id=f"worker_$(AIPERF_POD_INDEX)_{i}", **quiet
                )
            )
        for i, port in enumerate(rp_ports):
            out.append(self.service(f"record-processor-{i}", "record_processor", port, shares[1 + workers + i],
                                    service_id=f"record_processor_$(AIPERF_POD_INDEX)_{i}", **quiet))  # fmt: skip
        return out

    def pod_spec(self, containers: list[dict[str, Any]], restart: str) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "restartPolicy": restart,
            "containers": containers,
            "volumes": self.volumes(),
            "securityContext": merge_pod_security(None),
        }
        for key in _POD_PASSTHROUGH:
            v = self._t(key)
            if v:
                spec[key] = v
        init = self._t("initContainers")
        if init:
            base = {k: v for k, v in self.security().items() if k != "readOnlyRootFilesystem"}
            spec["initContainers"] = [c if "securityContext" in c else {**c, "securityContext": base} for c in init]
        if self._t("imagePullSecrets"):
            spec["imagePullSecrets"] = list(self._t("imagePullSecrets"))
        if self._t("shareProcessNamespace"):
            spec["shareProcessNamespace"] = True
        if self._t("terminationGracePeriodSeconds") is not None:
            spec["terminationGracePeriodSeconds"] = self._t("terminationGracePeriodSeconds")
        if self._t("podSecurityContext"):
            spec["securityContext"] = merge_pod_security(self._t("podSecurityContext"))
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


def kueue_queue(spec: dict[str, Any], env: Env, settings: Settings) -> tuple[str | None, str | None]:
    """(Kueue queue, priority class) of the JobSet: spec.scheduling's, else the operator's defaults."""
    sched = spec.get("scheduling") or {}
    queue = (
        lookup(sched, "queueName")
        or env.get("AIPERF_K8S_JOBSET_KUEUE_DEFAULT_QUEUE_NAME", "")
        or settings.kueue.default_queue_name
    )
    prio = lookup(sched, "priorityClass") or env.get("AIPERF_K8S_JOBSET_KUEUE_DEFAULT_PRIORITY_CLASS", "")
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
    """The spelling of a field the object uses (camelCase wins, as `lookup` reads it)."""
    return camel if camel in d or _snake(camel) not in d else _snake(camel)


def _no_unknown(d: dict[str, Any], allowed: set[str], path: str, what: str) -> None:
    known = _known(d, allowed)
    for key in d:
        if key not in known:
            raise AdapterError(f"{at(path, key)} is not a field of AIPerfJob (AIPerf rejects unknown {what})")


#: id(podTemplate) → (that podTemplate, its validated copy), and (id(its env), the reserved names) → (that
#: env, its entries not reserved), while `shared_pod_templates()` holds
_TEMPLATES: ContextVar[dict[Any, tuple[Any, Any]] | None] = ContextVar("pod_templates", default=None)


@contextmanager
def shared_pod_templates() -> Iterator[None]:
    """Within the block, jobs whose spec holds the same podTemplate object share its validated copy,
    validated once (an AIPerfSweep's children: 200 validations of a large template took seconds). The
    copy is read-only, as the renderer already treats it (entries shared between a job's containers)."""
    token = _TEMPLATES.set({})
    try:
        yield
    finally:
        _TEMPLATES.reset(token)


def _pod_template(spec: dict[str, Any]) -> dict[str, Any]:
    """spec.podTemplate validated against the Kubernetes shapes it becomes, camelCase keys, no nulls."""
    memo = _TEMPLATES.get()
    given = lookup(spec, "podTemplate")
    hit = None if memo is None else memo.get(id(given))
    if hit is not None and hit[0] is given:
        return hit[1]
    out = _validated_template(spec)
    if memo is not None:
        memo[id(given)] = (given, out)
    return out


def _template_env(given: list[dict[str, Any]], reserved: frozenset[str]) -> list[dict[str, Any]]:
    """The template's env entries whose names the operator does not set itself (shared: read-only)."""
    memo = _TEMPLATES.get()
    key = (id(given), reserved)
    hit = None if memo is None else memo.get(key)
    if hit is not None and hit[0] is given:
        return hit[1]
    out = [e for e in given if e.get("name") not in reserved]
    if memo is not None:
        memo[key] = (given, out)
    return out


def _template_value(given: list[dict[str, Any]], name: str) -> Any:
    """The first non-empty value the template's env gives `name`, else None (memoized like _template_env)."""
    memo = _TEMPLATES.get()
    key = (id(given), name)
    hit = None if memo is None else memo.get(key)
    if hit is not None and hit[0] is given:
        return hit[1]
    out = next((e["value"] for e in given if e.get("name") == name and e.get("value")), None)
    if memo is not None:
        memo[key] = (given, out)
    return out


def _validated_template(spec: dict[str, Any]) -> dict[str, Any]:
    path = at("spec", _key(spec, "podTemplate"))
    tmpl = mapping(lookup(spec, "podTemplate"), path)
    _no_unknown(tmpl, _POD_TEMPLATE_KEYS, path, "fields")
    out: dict[str, Any] = {}
    for camel, schema in _TEMPLATE_SCHEMA.items():
        key = _key(tmpl, camel)
        if tmpl.get(key) is not None:
            out[camel] = clean(tmpl[key], schema, at(path, key))
    return out
