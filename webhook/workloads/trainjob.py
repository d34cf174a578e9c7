"""TrainJob → Workload: the JobSet Kubeflow Trainer v2.3.0 builds from a TrainJob and its runtime,
and the pods JobSet v0.12.0 creates from it.

Mirrors, in their order: pkg/runtime/core/trainingruntime.go (runtimePatches, newRuntimeInfo:
pod counts and resourcesPerNode), the ML policy plugins' EnforceMLPolicy
(pkg/runtime/framework/plugins/{plainml,torch,jax,xgboost,mpi,flux}), the JobSet builder
(plugins/jobset/{jobset.go,builder.go}, with pkg/apply's whole-entry env upsert), and JobSet's
volumeClaimPolicies volumes (sigs.k8s.io/jobset pkg/controllers/volume_claim_policy.go). The
rules are spelled out in docs/workloads.md; tests/oracle/test_trainer_oracle.py compares the
result with Trainer's and JobSet's own code. Without the runtime the pod groups are unknown;
the TrainJob's own secret references are still recorded so the secrets check can run.
"""

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from typing import Any

from webhook import quantity
from webhook.config import Settings
from webhook.kube import JOBSET_API_VERSION, QUEUE_LABEL
from webhook.workloads import podspec
from webhook.workloads.base import PodGroup, RuntimeLookup, Workload
from webhook.workloads.shape import ListOf, Schema, clean, listing, mapping, plain_json, str_map, string, wrong

API_GROUP = "trainer.kubeflow.org"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
RUNTIME_SNAPSHOT_SUFFIX = "-runtime-snapshot"  # T:pkg/runtime/core/snapshot.go
# role (ancestor step) → the container Trainer writes into
ROLE_CONTAINER = {
    "trainer": "node",
    "dataset-initializer": "dataset-initializer",
    "model-initializer": "model-initializer",
}

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
    "spec": {
        "replicatedJobs": ListOf(REPLICATED_JOB),
        "suspend": "boolean",
        "volumeClaimPolicies": ListOf({"templates": ListOf({"metadata": podspec.OBJECT_META})}),
    },
}
_INITIALIZER: dict[str, Schema] = {
    "storageUri": "string",
    "env": ListOf(podspec.ENV_VAR),
    "secretRef": {"name": "string"},
}
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
        "mpi": {
            "runLauncherAsNode": "boolean",
            "numProcPerNode": "integer",
            "sshAuthMountPath": "string",
            "mpiImplementation": "string",
        },
        "flux": {"numProcPerNode": "integer"},
        "jax": {},
        "xgboost": {},
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
    "claims": "name",
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
                refs.append(
                    (ref["name"], ref.get("key"), bool(ref.get("optional", False)), f"{path}[{e.get('name', '?')}]")
                )

    env_refs((spec.get("trainer") or {}).get("env") or [], "spec.trainer.env")
    for kind in ("dataset", "model"):
        section = (spec.get("initializer") or {}).get(kind) or {}
        env_refs(section.get("env") or [], f"spec.initializer.{kind}.env")
        sref = section.get("secretRef") or {}
        if sref.get("name"):
            refs.append((sref["name"], None, False, f"spec.initializer.{kind}.secretRef"))
    return refs


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
            wl.incomplete_reason = (
                f'{rt_kind} "{rt_name}"{where} was not found (offline: put it in the same input file)'
            )
    if runtime is None:
        wl.extra_secret_refs = _own_secret_refs(spec)
        return wl
    wl.runtime = runtime
    rt_path = f'{rt_kind} "{rt_name}" spec'
    rt_spec = _runtime_spec(mapping(runtime, f'{rt_kind} "{rt_name}"'), rt_path)
    if (rt_spec.get("mlPolicy") or {}).get("flux") is not None and spec.get("trainer") is None:
        # T:pkg/runtime/framework/plugins/flux/flux.go EnforceMLPolicy reads spec.trainer.env and
        # sets spec.trainer.command without a nil check: the controller fails on every reconcile
        wl.render_errors.append(
            f'Kubeflow Trainer v2.3 cannot render a TrainJob on the Flux runtime {rt_kind} "{rt_name}" without '
            "spec.trainer (its Flux plugin reads spec.trainer), so no JobSet or pod is ever created. "
            "Fix: set spec.trainer, e.g. trainer: {numNodes: 1}."
        )
    _render(wl, spec, patches, rt_spec)
    # Trainer applies a copy of the runtime as `<name>-runtime-snapshot` before it builds anything
    # (T:pkg/runtime/core/snapshot.go createRuntimeSnapshot, called from NewObjects of both runtime
    # kinds): one more ConfigMap in the namespace, for every TrainJob whose runtime exists. Its
    # content is the runtime itself; only its identity matters to the checks (count/configmaps).
    wl.derived["runtimeSnapshot"] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{wl.name}{RUNTIME_SNAPSHOT_SUFFIX}", "namespace": wl.namespace},
    }
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
    """The JobSet from the validated `spec` and runtime spec; `patches` are the raw (validated) runtimePatches.

    The steps and their order are Trainer's (T = kubeflow/trainer v2.3.0, J = sigs.k8s.io/jobset v0.12.0):
    1. runtimePatches strategic-merged, replicatedJob order restored (T:pkg/runtime/core/trainingruntime.go
       mergeRuntimePatches);
    2. per replicatedJob the pod count and resourcesPerNode (T:…/trainingruntime.go newRuntimeInfo);
    3. the ML policy plugins' counts, volumes, init containers and env (T:…/framework/plugins/{plainml,torch,
       jax,xgboost,mpi,flux}, EnforceMLPolicy);
    4. the JobSet builder: images, trainer env, initializers, replicas, parallelism = completions = count
       (T:…/plugins/jobset/{jobset.go,builder.go});
    5. JobSet's volumeClaimPolicies volumes in every Job that mounts them (J:pkg/controllers/volume_claim_policy.go).
    """
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

    ml = rt_spec.get("mlPolicy")  # None: no ML policy at all (plainml rules, template parallelism)
    mpi = ml.get("mpi") if ml is not None else None
    flux = ml.get("flux") if ml is not None else None
    launcher_as_node = bool(mpi is not None and mpi.get("runLauncherAsNode", False))
    trainer = spec.get("trainer") or {}
    tj_nodes = trainer.get("numNodes")
    res_per_node = trainer.get("resourcesPerNode")
    init = spec.get("initializer") or {}

    # 2. newRuntimeInfo: the count of each replicatedJob, resourcesPerNode into its `node` container
    counts: dict[str, int] = {}
    for rj in ordered:
        name, role, pod = str(rj.get("name")), _role(rj), _pod_spec(rj)
        parallelism = rj["template"]["spec"].get("parallelism")
        count = 1 if parallelism is None else int(parallelism)
        if role == "trainer" and ml is not None:
            count = ml.get("numNodes") if ml.get("numNodes") is not None else 1
        if res_per_node is not None and (
            (role == "trainer" and ml is not None) or (launcher_as_node and name == "node")
        ):
            node = _container(pod, "node")
            if node is not None:
                node["resources"] = _merge_resources(node.get("resources") or {}, res_per_node)
        counts[name] = max(count, 1)

    # 3. EnforceMLPolicy
    first_trainer = next((rj for rj in ordered if _role(rj) == "trainer"), None)
    if mpi is not None:
        # T:…/plugins/mpi/mpi.go: numNodes sizes the job *named* `node`; the trainer (launcher) keeps its count
        if tj_nodes is not None and "node" in counts:
            counts["node"] = max(tj_nodes - 1, 1) if launcher_as_node else tj_nodes
        mpi = dict(mpi, numProcPerNode=_mpi_slots(ordered, mpi, trainer, res_per_node))
        _mpi_policy(wl.name, ordered, mpi)
    elif first_trainer is not None and tj_nodes is not None:
        # torch, jax, xgboost, and plainml (no policy, or flux): numNodes sizes the first trainer job
        counts[str(first_trainer.get("name"))] = tj_nodes
    if flux is not None:
        _flux_policy(wl.name, ordered, trainer)
    if first_trainer is not None and ml is not None and spec.get("trainer") is not None:
        node = _container(_pod_spec(first_trainer), "node")
        n = counts[str(first_trainer.get("name"))]
        if node is not None and ml.get("torch") is not None:
            _torch_env(node, wl.name, n, trainer, res_per_node, _pod_spec(first_trainer))
        elif node is not None and ml.get("jax") is not None:
            _framework_env(node, _jax_env(wl.name, n))
        elif node is not None and ml.get("xgboost") is not None:
            gpus = _gpus(res_per_node if res_per_node is not None else _node_resources(ordered))
            _framework_env(node, _xgboost_env(wl.name, n * max(gpus, 1)))

    # 4. the JobSet builder
    for rj in ordered:
        name, role, pod = str(rj.get("name")), _role(rj), _pod_spec(rj)
        job_spec = rj["template"]["spec"]
        if role == "trainer":
            node = _container(pod, "node")
            if node is not None:
                for field in ("image", "command", "args"):
                    if trainer.get(field) is not None:
                        node[field] = _copy(trainer[field])
        if role == "trainer" or (launcher_as_node and name == "node"):
            node = _container(pod, "node")
            if node is not None and trainer.get("env"):
                _upsert_env(node, trainer["env"])
        if role in ("dataset-initializer", "model-initializer"):
            section = init.get(role.split("-")[0])
            c = _container(pod, ROLE_CONTAINER[role])
            if section is not None and c is not None:
                if section.get("storageUri") is not None:
                    _upsert_env(c, [{"name": "STORAGE_URI", "value": section["storageUri"]}])
                _upsert_env(c, section.get("env") or [])
                sref = section.get("secretRef") or {}
                if sref.get("name"):
                    c["envFrom"] = list(c.get("envFrom") or []) + [{"secretRef": {"name": sref["name"]}}]
        if role in ("trainer", "dataset-initializer", "model-initializer"):
            rj["replicas"] = 1
        count = counts[name]
        job_spec["parallelism"] = job_spec["completions"] = count

    # 5. JobSet: PVC volumes of volumeClaimPolicies
    claims = [
        str((t.get("metadata") or {}).get("name"))
        for policy in jobset_spec.get("volumeClaimPolicies") or []
        for t in policy.get("templates") or []
        if (t.get("metadata") or {}).get("name")
    ]
    for rj in ordered:
        pod = _pod_spec(rj)
        if claims:
            mounted = {m.get("name") for _, c in podspec.all_containers(pod) for m in c.get("volumeMounts") or []}
            for claim in claims:
                if claim in mounted:
                    pod["volumes"] = list(pod.get("volumes") or []) + [
                        {"name": claim, "persistentVolumeClaim": {"claimName": f"{claim}-{wl.name}"}}
                    ]
        job_spec = rj["template"]["spec"]
        replicas = 1 if rj.get("replicas") is None else int(rj["replicas"])
        wl.pod_groups.append(
            PodGroup(
                name=str(rj.get("name")),
                pods=replicas * job_spec["parallelism"],
                pod_spec=pod,
                pod_metadata=job_spec["template"].get("metadata") or {},
                role=_role(rj) or str(rj.get("name")),
                depends_on=[(str(d.get("name")), str(d.get("status"))) for d in rj.get("dependsOn") or []],
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
    wl.derived = {
        "jobSet": {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": metadata, "spec": jobset_spec}
    }
    # objects Trainer creates besides the JobSet, only for the runtimes that create them
    if mpi is not None:
        wl.managed_secrets = {f"{wl.name}{MPI_SSH_SECRET_SUFFIX}"}
        wl.derived["configMap"] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{wl.name}-mpi-hostfile", "namespace": wl.namespace},
            "data": {"hostfile": _hostfile(wl.name, ordered, counts, launcher_as_node, mpi)},
        }
    elif flux is not None:
        wl.managed_secrets = {f"{wl.name}-flux-curve"}
        wl.derived["configMap"] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{wl.name}-flux-entrypoint", "namespace": wl.namespace},
        }


def _merge_resources(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """resourcesPerNode over the runtime's resources: per key for requests/limits, claims by name
    (T:pkg/util/trainingruntime/trainingruntime.go MergeResourceRequirements)."""
    out: dict[str, Any] = {}
    for key in ("limits", "requests"):
        merged = dict(base.get(key) or {})
        merged.update(override.get(key) or {})
        if merged or key in base or key in override:
            out[key] = merged
    claims = strategic_merge(base.get("claims") or [], override.get("claims") or [], "claims")
    if claims:
        out["claims"] = claims
    return out


def _upsert(items: list[dict[str, Any]], item: dict[str, Any], key: str) -> None:
    """T:pkg/apply upsert: an entry with the same key is replaced whole, else the item is appended."""
    for i, existing in enumerate(items):
        if existing.get(key) == item.get(key):
            items[i] = item
            return
    items.append(item)


def _upsert_env(container: dict[str, Any], env: list[dict[str, Any]]) -> None:
    """UpsertEnvVars(apply.EnvVars(env)): same-name entries are replaced whole, never merged field by field
    (an entry with valueFrom carries no value; one without valueFrom is its value, "" when unset)."""
    out = [_copy(e) for e in container.get("env") or []]
    for e in env:
        entry: dict[str, Any] = {"name": e.get("name")}
        if e.get("valueFrom") is not None:
            entry["valueFrom"] = _copy(e["valueFrom"])
        else:
            entry["value"] = e.get("value") or ""
        _upsert(out, entry, "name")
    container["env"] = out


def _upsert_volumes(pod: dict[str, Any], volumes: list[dict[str, Any]]) -> None:
    out = list(pod.get("volumes") or [])
    for v in volumes:
        _upsert(out, v, "name")
    pod["volumes"] = out


def _upsert_mounts(container: dict[str, Any], mounts: list[dict[str, Any]]) -> None:
    out = list(container.get("volumeMounts") or [])
    for m in mounts:
        _upsert(out, m, "mountPath")
    container["volumeMounts"] = out


MPI_SSH_SECRET_SUFFIX = "-mpi-ssh-auth"


def _node_resources(ordered: list[dict[str, Any]]) -> dict[str, Any]:
    """T:pkg/runtime/runtime.go ExtractResourcePerNodeFromRuntime: container `node` of the first job
    named `node` or labelled trainer that has resources."""
    for rj in ordered:
        if rj.get("name") == "node" or _role(rj) == "trainer":
            for c in _pod_spec(rj).get("containers") or []:
                if c.get("name") == "node" and c.get("resources") is not None:
                    return c["resources"]
    return {}


def _mpi_slots(
    ordered: list[dict[str, Any]], mpi: dict[str, Any], trainer: dict[str, Any], res_per_node: dict[str, Any] | None
) -> int:
    """Processes per node (hostfile slots): trainer.numProcPerNode, else the runtime's; a runtime value
    of 1 becomes the GPUs per node when there are more (T:…/plugins/mpi/mpi.go EnforceMLPolicy)."""
    if trainer.get("numProcPerNode") is not None:
        try:
            return int(trainer["numProcPerNode"])
        except (TypeError, ValueError):
            pass
    nproc: Any = mpi.get("numProcPerNode") if mpi.get("numProcPerNode") is not None else 1
    if nproc == 1:
        gpus = _gpus(res_per_node if res_per_node is not None else _node_resources(ordered))
        if gpus > 1:
            return gpus
    return int(nproc)


def _mpi_policy(name: str, ordered: list[dict[str, Any]], mpi: dict[str, Any]) -> None:
    """The SSH Secret volume on the jobs named `launcher` and `node`, the hostfile on `launcher`, and
    OpenMPI's env on the launcher's `node` container (T:…/plugins/mpi/mpi.go EnforceMLPolicy)."""
    ssh_path = mpi.get("sshAuthMountPath") or "/root/.ssh"
    ssh_volume = {
        "name": "mpi-ssh-auth",
        "secret": {
            "secretName": f"{name}{MPI_SSH_SECRET_SUFFIX}",
            "defaultMode": 0o400,
            "items": [
                {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
                {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
                {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
            ],
        },
    }
    hostfile_volume = {
        "name": "mpi-hostfile",
        "configMap": {
            "name": f"{name}-mpi-hostfile",
            "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
        },
    }
    nproc = mpi.get("numProcPerNode") if mpi.get("numProcPerNode") is not None else 1
    for rj in ordered:
        rname = rj.get("name")
        if rname not in ("node", "launcher"):
            continue
        pod = _pod_spec(rj)
        _upsert_volumes(pod, [ssh_volume] + ([hostfile_volume] if rname == "launcher" else []))
        node = _container(pod, "node")
        if node is None:
            continue
        _upsert_mounts(node, [{"name": "mpi-ssh-auth", "mountPath": ssh_path}])
        if rname == "launcher":
            _upsert_mounts(node, [{"name": "mpi-hostfile", "mountPath": "/etc/mpi"}])
            _upsert_env(
                node,
                [
                    {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                    {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
                    {"name": "OMPI_MCA_orte_set_default_slots", "value": str(nproc)},
                    {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
                ],
            )


def _hostfile(
    name: str, ordered: list[dict[str, Any]], counts: dict[str, int], launcher_as_node: bool, mpi: dict[str, Any]
) -> str:
    """The hostfile ConfigMap's content (T:…/plugins/mpi/mpi.go buildHostFileConfigMap), for its size."""
    slots = mpi.get("numProcPerNode") if mpi.get("numProcPerNode") is not None else 1
    lines = []
    for rj in ordered:
        rname = str(rj.get("name"))
        if rname == "node" or (launcher_as_node and rname == "launcher"):
            replicas = 1 if rj.get("replicas") is None else int(rj["replicas"])
            for r in range(replicas):
                for i in range(counts[rname]):
                    lines.append(f"{name}-{rname}-{r}-{i}.{name} slots={slots}\n")
    return "".join(lines)


FLUX_INSTALLER_IMAGE = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"


def _flux_policy(name: str, ordered: list[dict[str, Any]], trainer: dict[str, Any]) -> None:
    """The flux-installer init container and Flux's volumes on the job named `node`
    (T:…/plugins/flux/flux.go EnforceMLPolicy). FLUX_VIEW_IMAGE picks the installer's image: the
    trainer container's env in the runtime, then the TrainJob's trainer.env."""
    image = FLUX_INSTALLER_IMAGE
    first_trainer = next((rj for rj in ordered if _role(rj) == "trainer"), None)
    if first_trainer is not None:
        node = _container(_pod_spec(first_trainer), "node")
        for e in (node or {}).get("env") or []:
            if e.get("name") == "FLUX_VIEW_IMAGE" and e.get("value") is not None:
                image = e["value"]
    for e in trainer.get("env") or []:
        if e.get("name") == "FLUX_VIEW_IMAGE":
            image = e.get("value") or ""
    cm = f"{name}-flux-entrypoint"
    volumes = [
        {"name": "spack-install", "emptyDir": {}},
        {"name": "flux-install", "emptyDir": {}},
        {"name": cm, "configMap": {"name": cm, "defaultMode": 0o755}},
        {"name": "shared-memory", "emptyDir": {"medium": "Memory"}},
        {"name": "flux-curve", "secret": {"secretName": f"{name}-flux-curve", "defaultMode": 0o400}},
    ]
    installer = {
        "name": "flux-installer",
        "image": image,
        "command": ["/bin/bash", "/etc/flux-config/init.sh"],
        "volumeMounts": [
            {"name": "flux-install", "mountPath": "/mnt/flux"},
            {"name": cm, "mountPath": "/etc/flux-config", "readOnly": True},
        ],
    }
    for rj in ordered:
        if rj.get("name") != "node":
            continue
        pod = _pod_spec(rj)
        _upsert_volumes(pod, volumes)
        pod["initContainers"] = list(pod.get("initContainers") or []) + [_copy(installer)]
        node = _container(pod, "node")
        if node is not None:
            _upsert_mounts(
                node,
                [
                    {"name": "flux-install", "mountPath": "/mnt/flux"},
                    {"name": "spack-install", "mountPath": "/opt/software"},
                    {"name": cm, "mountPath": "/etc/flux-config", "readOnly": True},
                    {"name": "flux-curve", "mountPath": "/curve", "readOnly": True},
                    {"name": "shared-memory", "mountPath": "/dev/shm", "readOnly": True},
                ],
            )


def _torch_env(
    node: dict[str, Any],
    name: str,
    num_nodes: int,
    trainer: dict[str, Any],
    res_per_node: dict[str, Any] | None,
    pod: dict[str, Any],
) -> None:
    """The PET_* variables the torch plugin sets on `node` (T:…/plugins/torch/torch.go EnforceMLPolicy)."""
    res = res_per_node if res_per_node is not None else (node.get("resources") or {})
    nproc: str = str(trainer["numProcPerNode"]) if trainer.get("numProcPerNode") is not None else "auto"
    if nproc == "auto" and _gpus(res) == 0:
        nproc = str(max(1, _cpus(res)))
    if trainer.get("env"):
        _upsert_env(node, trainer["env"])
    env: list[dict[str, Any]] = [
        {"name": "PET_NNODES", "value": str(num_nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": nproc},
        {
            "name": "PET_NODE_RANK",
            "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
            },
        },
    ]
    if trainer.get("command") != ["tune", "run"]:
        env += [
            {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": "29500"},
        ]
    _upsert_env(node, env)
    ports = list(node.get("ports") or [])
    if not any(p.get("containerPort") == 29500 for p in ports):
        ports.append({"containerPort": 29500})
    node["ports"] = ports


_COMPLETION_INDEX = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def _framework_env(node: dict[str, Any], env: list[dict[str, Any]]) -> None:
    _upsert_env(node, env)
    ports = list(node.get("ports") or [])
    if not any(p.get("containerPort") == 29500 for p in ports):
        ports.append({"containerPort": 29500})
    node["ports"] = ports


def _jax_env(name: str, num_nodes: int) -> list[dict[str, Any]]:
    """T:…/plugins/jax/jax.go EnforceMLPolicy."""
    return [
        {"name": "JAX_NUM_PROCESSES", "value": str(num_nodes)},
        {"name": "JAX_PROCESS_ID", "valueFrom": _COMPLETION_INDEX},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{name}-node-0-0.{name}:29500"},
    ]


def _xgboost_env(name: str, workers: int) -> list[dict[str, Any]]:
    """T:…/plugins/xgboost/xgboost.go EnforceMLPolicy: one worker per GPU (or per node without GPUs)."""
    return [
        {"name": "DMLC_TRACKER_URI", "value": f"{name}-node-0-0.{name}"},
        {"name": "DMLC_TRACKER_PORT", "value": "29500"},
        {"name": "DMLC_TASK_ID", "valueFrom": _COMPLETION_INDEX},
        {"name": "DMLC_NUM_WORKER", "value": str(workers)},
    ]


def _first_number(resources: dict[str, Any], match: Any) -> int:
    """The first matching resource's value rounded up (Quantity.Value()), requests first, then limits."""
    for key in ("requests", "limits"):
        for rname, q in (resources.get(key) or {}).items():
            if match(rname):
                try:
                    v = int(math.ceil(quantity.parse_quantity(q)))
                except (ValueError, TypeError, ArithmeticError):
                    v = 0
                if v:
                    return v
                break
    return 0


def _gpus(res: dict[str, Any]) -> int:
    """T:pkg/runtime/runtime.go GetNumGPUPerNode: a resource named *gpu*, requests first, then limits."""
    return _first_number(res, lambda n: "gpu" in n.lower())


def _cpus(res: dict[str, Any]) -> int:
    return _first_number(res, lambda n: n == "cpu")
