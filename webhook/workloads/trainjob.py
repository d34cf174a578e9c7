"""TrainJob → Workload: the JobSet Kubeflow Trainer v2.3 builds from a TrainJob and its runtime.

Mirrors pkg/runtime/core/trainingruntime.go and plugins/{jobset,torch,mpi,plainml}: the
(Cluster)TrainingRuntime's JobSet template, runtimePatches strategic-merged in, the
trainer's image/command/args/env and resourcesPerNode put into container `node` of the
job labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer`, numNodes, the MPI
launcher rule, and the initializers' STORAGE_URI/env/secretRef. Without the runtime the
pod groups are unknown; the TrainJob's own secret references are still recorded so the
secrets check can run.
"""

from __future__ import annotations

import copy
from typing import Any

from webhook.config import Settings
from webhook.workloads.base import AdapterError, PodGroup, RuntimeLookup, Workload

API_GROUP = "trainer.kubeflow.org"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
# role (ancestor step) → the container Trainer writes into
ROLE_CONTAINER = {"trainer": "node", "dataset-initializer": "dataset-initializer", "model-initializer": "model-initializer"}
_INITIALIZER_ROLE = {"dataset": "dataset-initializer", "model": "model-initializer"}

# strategic-merge keys of the PodSpec fields a runtime patch may carry (k8s.io/api patchMergeKey)
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "replicatedJobs": "name",  # JobSet's listMapKey: patches address replicated jobs by name
}


def strategic_merge(base: Any, patch: Any, field: str = "") -> Any:
    """A strategic merge patch of plain dicts: maps merge, keyed lists merge by key, other lists replace."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = strategic_merge(out[k], v, k)
            else:
                out[k] = copy.deepcopy(v)
        return out
    key = _MERGE_KEYS.get(field)
    if key and isinstance(base, list) and isinstance(patch, list):
        out_list = [copy.deepcopy(x) for x in base]
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                out_list.append(copy.deepcopy(item))
                continue
            for i, existing in enumerate(out_list):
                if isinstance(existing, dict) and existing.get(key) == item[key]:
                    out_list[i] = strategic_merge(existing, item, "")
                    break
            else:
                out_list.append(copy.deepcopy(item))
        return out_list
    return copy.deepcopy(patch)


def _upsert_env(container: dict[str, Any], env: list[dict[str, Any]]) -> None:
    container["env"] = strategic_merge(container.get("env") or [], [e for e in env if isinstance(e, dict)], "env")


def _container(pod_spec: dict[str, Any], name: str) -> dict[str, Any] | None:
    for c in pod_spec.get("containers") or []:
        if isinstance(c, dict) and c.get("name") == name:
            return c
    return None


def _pod_spec(rj: dict[str, Any]) -> dict[str, Any]:
    tmpl = rj.setdefault("template", {})
    job_spec = tmpl.setdefault("spec", {})
    pod = job_spec.setdefault("template", {})
    return pod.setdefault("spec", {})


def _role(rj: dict[str, Any]) -> str | None:
    labels = ((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(ANCESTOR_LABEL)


def _own_secret_refs(spec: dict[str, Any]) -> list[tuple[str, str | None, bool, str]]:
    """Secrets named by the TrainJob itself (trainer env, initializer env and secretRef)."""
    refs: list[tuple[str, str | None, bool, str]] = []

    def env_refs(env: Any, path: str) -> None:
        for e in env or []:
            vf = e.get("valueFrom") if isinstance(e, dict) else None
            ref = vf.get("secretKeyRef") if isinstance(vf, dict) else None
            if isinstance(ref, dict) and ref.get("name"):
                refs.append((ref["name"], ref.get("key"), bool(ref.get("optional", False)), f"{path}[{e.get('name', '?')}]"))

    trainer = spec.get("trainer") or {}
    if isinstance(trainer, dict):
        env_refs(trainer.get("env"), "spec.trainer.env")
    init = spec.get("initializer") or {}
    if isinstance(init, dict):
        for kind in ("dataset", "model"):
            section = init.get(kind)
            if not isinstance(section, dict):
                continue
            env_refs(section.get("env"), f"spec.initializer.{kind}.env")
            sref = section.get("secretRef")
            if isinstance(sref, dict) and sref.get("name"):
                refs.append((sref["name"], None, False, f"spec.initializer.{kind}.secretRef"))
    return refs


def _num_nodes(spec: dict[str, Any], ml: dict[str, Any]) -> int:
    trainer = spec.get("trainer") or {}
    n = trainer.get("numNodes") if isinstance(trainer, dict) else None
    if n is None:
        n = ml.get("numNodes", 1)
    try:
        return max(int(n), 1)
    except (TypeError, ValueError):
        raise AdapterError(f"spec.trainer.numNodes must be an integer, not {n!r}") from None


def _apply_trainer(pod: dict[str, Any], trainer: dict[str, Any], wl_name: str) -> None:
    node = _container(pod, "node")
    if node is None:
        return
    for field in ("image", "command", "args"):
        if trainer.get(field) is not None:
            node[field] = copy.deepcopy(trainer[field])
    if trainer.get("env"):
        _upsert_env(node, trainer["env"])
    res = trainer.get("resourcesPerNode")
    if isinstance(res, dict):
        node["resources"] = strategic_merge(node.get("resources") or {}, res)


def build(
    obj: dict[str, Any],
    *,
    settings: Settings,
    runtime_lookup: RuntimeLookup | None = None,
    namespace: str | None = None,
) -> Workload:
    """The Workload for one TrainJob. Raises AdapterError when it cannot be read as one."""
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        raise AdapterError("metadata must be a mapping")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise AdapterError(f"spec must be a mapping, not {type(spec).__name__}")
    for field in ("trainer", "initializer", "runtimeRef"):
        if spec.get(field) is not None and not isinstance(spec[field], dict):
            raise AdapterError(f"spec.{field} must be a mapping, not {type(spec[field]).__name__}")
    if spec.get("runtimePatches") is not None and not isinstance(spec["runtimePatches"], list):
        raise AdapterError("spec.runtimePatches must be a list")
    name = str(meta.get("name") or "")
    ns = str(meta.get("namespace") or namespace or "default")
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    wl = Workload(
        kind="TrainJob",
        api_version=str(obj.get("apiVersion") or f"{API_GROUP}/v1alpha1"),
        name=name,
        namespace=ns,
        obj=obj,
        queue_name=labels.get(QUEUE_LABEL) or None,
        managed_by=spec.get("managedBy") or "trainer.kubeflow.org/trainjob-controller",
        managed_secrets={f"{name}-mpi-ssh-auth"},
    )
    ref = spec.get("runtimeRef") or {}
    rt_name = ref.get("name")
    rt_kind = ref.get("kind") or "ClusterTrainingRuntime"
    rt_group = ref.get("apiGroup") or API_GROUP
    runtime = None
    if not rt_name:
        wl.incomplete_reason = "spec.runtimeRef.name is not set"
    elif rt_group != API_GROUP or rt_kind not in RUNTIME_KINDS:
        wl.incomplete_reason = f"unsupported runtime: {rt_kind}.{rt_group}"
    elif runtime_lookup is None:
        wl.incomplete_reason = f'{rt_kind} "{rt_name}" was not available (offline: put it in the same input file)'
    else:
        runtime = runtime_lookup(rt_kind, ns if rt_kind == "TrainingRuntime" else "", rt_name)
        if runtime is None:
            where = f' in namespace "{ns}"' if rt_kind == "TrainingRuntime" else ""
            wl.incomplete_reason = f'{rt_kind} "{rt_name}"{where} was not found (offline: put it in the same input file)'
    if runtime is None:
        wl.extra_secret_refs = _own_secret_refs(spec)
        return wl
    wl.runtime = runtime
    _render(wl, spec, runtime)
    return wl


def _render(wl: Workload, spec: dict[str, Any], runtime: dict[str, Any]) -> None:
    rt_spec = runtime.get("spec") or {}
    template = copy.deepcopy(rt_spec.get("template") or {})
    order = [rj.get("name") for rj in (template.get("spec") or {}).get("replicatedJobs") or [] if isinstance(rj, dict)]
    for patch in spec.get("runtimePatches") or []:
        ptmpl = ((patch or {}).get("trainingRuntimeSpec") or {}).get("template") if isinstance(patch, dict) else None
        if isinstance(ptmpl, dict):
            template = strategic_merge(template, ptmpl)
    jobset_spec: dict[str, Any] = template.get("spec") or {}
    # the patch merged replicatedJobs as a plain list: merge by name, then restore the runtime's order
    jobs: dict[str, dict[str, Any]] = {}
    for rj in jobset_spec.get("replicatedJobs") or []:
        if isinstance(rj, dict):
            n = rj.get("name")
            jobs[n] = strategic_merge(jobs[n], rj) if n in jobs else rj
    ordered = [jobs[n] for n in order if n in jobs] + [rj for n, rj in jobs.items() if n not in order]

    ml = rt_spec.get("mlPolicy") or {}
    num_nodes = _num_nodes(spec, ml)
    trainer = spec.get("trainer") or {}
    mpi = ml.get("mpi") if isinstance(ml.get("mpi"), dict) else None
    launcher_as_node = bool(mpi and mpi.get("runLauncherAsNode"))
    init = spec.get("initializer") or {}
    for rj in ordered:
        role = _role(rj)
        pod = _pod_spec(rj)
        job_spec = rj["template"]["spec"]
        count = int(job_spec.get("parallelism") or 1)
        if role == "trainer":
            count = max(num_nodes - 1, 1) if launcher_as_node else num_nodes
            _apply_trainer(pod, trainer, wl.name)
            if isinstance(ml.get("torch"), dict):
                _torch_env(pod, wl.name, num_nodes, trainer, ml["torch"])
        elif rj.get("name") == "launcher" and mpi is not None:
            count = 1
            if launcher_as_node:
                _apply_trainer(pod, trainer, wl.name)
        elif role in ("dataset-initializer", "model-initializer"):
            section = init.get(role.split("-")[0]) if isinstance(init, dict) else None
            c = _container(pod, ROLE_CONTAINER[role])
            if isinstance(section, dict) and c is not None:
                env: list[dict[str, Any]] = []
                if section.get("storageUri"):
                    env.append({"name": "STORAGE_URI", "value": section["storageUri"]})
                env += [e for e in section.get("env") or [] if isinstance(e, dict)]
                _upsert_env(c, env)
                sref = section.get("secretRef")
                if isinstance(sref, dict) and sref.get("name"):
                    c["envFrom"] = list(c.get("envFrom") or []) + [{"secretRef": {"name": sref["name"]}}]
        if role is not None:
            rj["replicas"] = 1
        job_spec["parallelism"] = job_spec["completions"] = max(count, 1)
        replicas = int(rj.get("replicas") or 1)
        wl.pod_groups.append(
            PodGroup(
                name=str(rj.get("name")),
                pods=replicas * max(count, 1),
                pod_spec=pod,
                pod_metadata=job_spec["template"].get("metadata") or {},
                role=role or str(rj.get("name")),
            )
        )
    jobset_spec["replicatedJobs"] = ordered
    jobset_spec["suspend"] = bool(spec.get("suspend", False))
    tmeta = template.get("metadata") or {}
    metadata: dict[str, Any] = {"name": wl.name, "namespace": wl.namespace}
    if tmeta.get("labels"):
        metadata["labels"] = dict(tmeta["labels"])
    if tmeta.get("annotations"):
        metadata["annotations"] = dict(tmeta["annotations"])
    wl.derived = {"jobSet": {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": metadata, "spec": jobset_spec}}


def _torch_env(pod: dict[str, Any], name: str, num_nodes: int, trainer: dict[str, Any], torch: dict[str, Any]) -> None:
    """The PET_* variables the torch plugin sets on `node` (T:pkg/runtime/framework/plugins/torch)."""
    node = _container(pod, "node")
    if node is None:
        return
    nproc = trainer.get("numProcPerNode", torch.get("numProcPerNode", "auto"))
    _upsert_env(
        node,
        [
            {"name": "PET_NNODES", "value": str(num_nodes)},
            {"name": "PET_NPROC_PER_NODE", "value": str(nproc)},
            {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
            {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": "29500"},
        ],
    )
