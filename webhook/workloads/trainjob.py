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
from collections import OrderedDict
from typing import Any

from webhook.config import Settings
from webhook.workloads import podspec
from webhook.workloads.base import PodGroup, RuntimeLookup, Workload
from webhook.workloads.shape import ListOf, Schema, clean, listing, mapping, plain_json, str_map, string, wrong

API_GROUP = "trainer.kubeflow.org"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
# role (ancestor step) → the container Trainer writes into
ROLE_CONTAINER = {"trainer": "node", "dataset-initializer": "dataset-initializer", "model-initializer": "model-initializer"}
_INITIALIZER_ROLE = {"dataset": "dataset-initializer", "model": "model-initializer"}

# --- the shapes this adapter reads (TrainJob v1alpha1, JobSet v1alpha2), validated before use ---
_JOB_SPEC: dict[str, Schema] = {
    "parallelism": "integer",
    "completions": "integer",
    "backoffLimit": "integer",
    "completionMode": "string",
    "template": podspec.POD_TEMPLATE,
}
REPLICATED_JOB: dict[str, Schema] = {
    "name": "string",
    "replicas": "integer",
    "dependsOn": ListOf({"name": "string", "status": "string"}),
    "template": {"metadata": podspec.OBJECT_META, "spec": _JOB_SPEC},
}
JOBSET_TEMPLATE: dict[str, Schema] = {
    "metadata": podspec.OBJECT_META,
    "spec": {"replicatedJobs": ListOf(REPLICATED_JOB), "suspend": "boolean"},
}
_INITIALIZER: dict[str, Schema] = {"storageUri": "string", "env": ListOf(podspec.ENV_VAR), "secretRef": {"name": "string"}}
TRAINJOB_SPEC: dict[str, Schema] = {
    "runtimeRef": {"name": "string", "kind": "string", "apiGroup": "string"},
    "trainer": {
        "image": "string",
        "command": ListOf("string"),
        "args": ListOf("string"),
        "env": ListOf(podspec.ENV_VAR),
        "numNodes": "integer",
        "numProcPerNode": "int-or-string",
        "resourcesPerNode": podspec.RESOURCES,
    },
    "initializer": {"dataset": _INITIALIZER, "model": _INITIALIZER},
    "runtimePatches": ListOf({"manager": "string", "trainingRuntimeSpec": {"template": JOBSET_TEMPLATE}}),
    "suspend": "boolean",
    "managedBy": "string",
}
RUNTIME_SPEC: dict[str, Schema] = {
    "mlPolicy": {
        "numNodes": "integer",
        "torch": {"numProcPerNode": "int-or-string"},
        "mpi": {"runLauncherAsNode": "boolean", "numProcPerNode": "integer"},
    },
    "template": JOBSET_TEMPLATE,
}

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


def _copy(value: Any) -> Any:
    """copy.deepcopy for JSON data at a fraction of its cost (no memo); anything else goes to deepcopy."""
    t = type(value)
    if t is dict:
        return {k: _copy(v) for k, v in value.items()}
    if t is list:
        return [_copy(v) for v in value]
    if t is str or t is int or t is float or t is bool or value is None:
        return value
    return copy.deepcopy(value)


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
                out[k] = _copy(v)
        return out
    key = _MERGE_KEYS.get(field)
    if key and isinstance(base, list) and isinstance(patch, list):
        out_list = [_copy(x) for x in base]
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                out_list.append(_copy(item))
                continue
            for i, existing in enumerate(out_list):
                if isinstance(existing, dict) and existing.get(key) == item[key]:
                    out_list[i] = strategic_merge(existing, item, "")
                    break
            else:
                out_list.append(_copy(item))
        return out_list
    return _copy(patch)


def _upsert_env(container: dict[str, Any], env: list[dict[str, Any]]) -> None:
    container["env"] = strategic_merge(container.get("env") or [], env, "env")


def _container(pod_spec: dict[str, Any], name: str) -> dict[str, Any] | None:
    for c in pod_spec.get("containers") or []:
        if c.get("name") == name:
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
    """Secrets named by the TrainJob itself (trainer env, initializer env and secretRef); `spec` is validated."""
    refs: list[tuple[str, str | None, bool, str]] = []

    def env_refs(env: list[dict[str, Any]], path: str) -> None:
        for e in env:
            ref = (e.get("valueFrom") or {}).get("secretKeyRef") or {}
            if ref.get("name"):
                refs.append((ref["name"], ref.get("key"), bool(ref.get("optional", False)), f"{path}[{e.get('name', '?')}]"))

    env_refs((spec.get("trainer") or {}).get("env") or [], "spec.trainer.env")
    for kind in ("dataset", "model"):
        section = (spec.get("initializer") or {}).get(kind) or {}
        env_refs(section.get("env") or [], f"spec.initializer.{kind}.env")
        sref = section.get("secretRef") or {}
        if sref.get("name"):
            refs.append((sref["name"], None, False, f"spec.initializer.{kind}.secretRef"))
    return refs


def _num_nodes(spec: dict[str, Any], ml: dict[str, Any]) -> int:
    n = (spec.get("trainer") or {}).get("numNodes")
    return max(n if n is not None else ml.get("numNodes", 1), 1)


def _apply_trainer(pod: dict[str, Any], trainer: dict[str, Any], wl_name: str) -> None:
    node = _container(pod, "node")
    if node is None:
        return
    for field in ("image", "command", "args"):
        if trainer.get(field) is not None:
            node[field] = _copy(trainer[field])
    if trainer.get("env"):
        _upsert_env(node, trainer["env"])
    res = trainer.get("resourcesPerNode")
    if res is not None:
        node["resources"] = strategic_merge(node.get("resources") or {}, res)


def build(
    obj: dict[str, Any],
    *,
    settings: Settings,
    runtime_lookup: RuntimeLookup | None = None,
    namespace: str | None = None,
) -> Workload:
    """The Workload for one TrainJob. Raises AdapterError when it cannot be read as one."""
    plain_json(obj)
    meta = mapping(obj.get("metadata"), "metadata")
    raw_spec = obj.get("spec")
    if not isinstance(raw_spec, dict):  # the one field where null is not "absent": a job needs a spec
        raise wrong("spec", "a mapping", raw_spec)
    spec = clean(raw_spec, TRAINJOB_SPEC, "spec")
    # runtime patches are merged as given: a null in a patch means "delete", which clean() drops
    patches = listing(raw_spec.get("runtimePatches"), "spec.runtimePatches")
    name = string(meta.get("name"), "metadata.name") or ""
    ns = string(meta.get("namespace"), "metadata.namespace") or namespace or "default"
    labels = str_map(meta.get("labels"), "metadata.labels")
    str_map(meta.get("annotations"), "metadata.annotations")  # the skip annotation is read from here
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
    rt_path = f'{rt_kind} "{rt_name}" spec'
    _render(wl, spec, patches, _runtime_spec(mapping(runtime, f'{rt_kind} "{rt_name}"'), rt_path))
    return wl


#: validated runtime specs of cluster objects: id(runtime) → (runtime, resourceVersion, spec).
#: The watch cache replaces an object on every change (new resourceVersion) and an entry keeps
#: its object alive, so an id is never reused while cached. Objects without a resourceVersion
#: (the CLI's input files, tests) are validated every time, as before.
_RUNTIME_SPECS: OrderedDict[int, tuple[dict[str, Any], str, dict[str, Any]]] = OrderedDict()
_RUNTIME_SPECS_MAX = 64


def _runtime_spec(runtime: dict[str, Any], path: str) -> dict[str, Any]:
    """clean(runtime spec), once per version of a cluster runtime rather than per request.

    The result may be shared between requests and is never changed: _render only reads it
    and works on copies (strategic_merge and clean both return new containers)."""
    meta = runtime.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if not isinstance(rv, str) or not rv:
        return clean(runtime.get("spec"), RUNTIME_SPEC, path) or {}
    key = id(runtime)
    hit = _RUNTIME_SPECS.get(key)
    if hit is not None and hit[0] is runtime and hit[1] == rv:
        _RUNTIME_SPECS.move_to_end(key)
        return hit[2]
    rt_spec = clean(runtime.get("spec"), RUNTIME_SPEC, path) or {}
    _RUNTIME_SPECS[key] = (runtime, rv, rt_spec)
    if len(_RUNTIME_SPECS) > _RUNTIME_SPECS_MAX:
        _RUNTIME_SPECS.popitem(last=False)
    return rt_spec


def _render(wl: Workload, spec: dict[str, Any], patches: list[Any], rt_spec: dict[str, Any]) -> None:
    """The JobSet from the validated `spec` and runtime spec; `patches` are the raw (validated) runtimePatches."""
    template = rt_spec.get("template") or {}
    order = [rj.get("name") for rj in (template.get("spec") or {}).get("replicatedJobs") or []]
    for patch in patches:
        ptmpl = (patch.get("trainingRuntimeSpec") or {}).get("template")
        if ptmpl is not None:
            template = strategic_merge(template, ptmpl)
    # merged patches may bring nulls (kept so that they delete); what is left is read as a JobSet
    template = clean(template, JOBSET_TEMPLATE, "the patched JobSet template")
    jobset_spec: dict[str, Any] = template.get("spec") or {}
    # the patch merged replicatedJobs as a plain list: merge by name, then restore the runtime's order
    jobs: dict[str, dict[str, Any]] = {}
    for rj in jobset_spec.get("replicatedJobs") or []:
        n = rj.get("name")
        jobs[n] = strategic_merge(jobs[n], rj) if n in jobs else rj
    ordered = [jobs[n] for n in order if n in jobs] + [rj for n, rj in jobs.items() if n not in order]

    ml = rt_spec.get("mlPolicy") or {}
    num_nodes = _num_nodes(spec, ml)
    trainer = spec.get("trainer") or {}
    mpi = ml.get("mpi")
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
            if ml.get("torch") is not None:
                _torch_env(pod, wl.name, num_nodes, trainer, ml["torch"])
        elif rj.get("name") == "launcher" and mpi is not None:
            count = 1
            if launcher_as_node:
                _apply_trainer(pod, trainer, wl.name)
        elif role in ("dataset-initializer", "model-initializer"):
            section = init.get(role.split("-")[0])
            c = _container(pod, ROLE_CONTAINER[role])
            if section is not None and c is not None:
                env: list[dict[str, Any]] = []
                if section.get("storageUri"):
                    env.append({"name": "STORAGE_URI", "value": section["storageUri"]})
                env += section.get("env") or []
                _upsert_env(c, env)
                sref = section.get("secretRef") or {}
                if sref.get("name"):
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
