"""The JobSet Trainer builds from a TrainJob and its runtime, and the pods JobSet makes of it.

T = kubeflow/trainer v2.3.0, J = sigs.k8s.io/jobset v0.12.0: T:pkg/runtime/core/trainingruntime.go
(mergeRuntimePatches, newRuntimeInfo), the ML policy plugins (./plugins), the JobSet builder
(T:pkg/runtime/framework/plugins/jobset/{jobset.go,builder.go}) and JobSet's volumeClaimPolicies
volumes (J:pkg/controllers/volume_claim_policy.go).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhook.kube import JOBSET_API_VERSION
from webhook.objects import as_object_meta, as_pod_spec
from webhook.workloads import podspec
from webhook.workloads.base import PodGroup, Workload
from webhook.workloads.shape import clean
from webhook.workloads.trainjob.merge import copy_json, merge_resources, strategic_merge, upsert_env
from webhook.workloads.trainjob.plugins import (
    MPI_SSH_SECRET_SUFFIX,
    flux_policy,
    hostfile,
    jax_env,
    mpi_policy,
    mpi_slots,
    torch_env,
    xgboost_env,
)
from webhook.workloads.trainjob.runtime import container, framework_env, gpus, node_resources, pod_spec, role_of
from webhook.workloads.trainjob.schema import JOBSET_TEMPLATE, ROLE_CONTAINER


def render(wl: Workload, spec: dict[str, Any], patches: list[Any], rt_spec: dict[str, Any]) -> None:
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
    Then the pod groups, the JobSet itself, and the objects Trainer creates besides it.
    """
    template, ordered = _merge_runtime_patches(rt_spec, patches)
    jobset_spec: dict[str, Any] = template.get("spec") or {}
    policy = _Policy.read(rt_spec, spec)
    counts = _runtime_info(ordered, policy)
    _enforce_ml_policy(wl.name, ordered, counts, policy)
    _build_jobs(ordered, counts, policy, spec.get("initializer") or {})
    _claim_volumes(wl.name, ordered, jobset_spec)
    for rj in ordered:
        job_spec = rj["template"]["spec"]
        replicas = 1 if rj.get("replicas") is None else int(rj["replicas"])
        wl.pod_groups.append(
            PodGroup(
                name=str(rj.get("name")),
                pods=replicas * job_spec["parallelism"],
                pod_spec=as_pod_spec(pod_spec(rj)),
                pod_metadata=as_object_meta(job_spec["template"].get("metadata") or {}),
                role=role_of(rj) or str(rj.get("name")),
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
    _trainer_objects(wl, ordered, counts, policy)


@dataclass
class _Policy:
    """The runtime's mlPolicy and the TrainJob's trainer, read once for every step."""

    ml: dict[str, Any] | None  # None: no ML policy at all (plainml rules, template parallelism)
    mpi: dict[str, Any] | None
    flux: dict[str, Any] | None
    launcher_as_node: bool
    trainer: dict[str, Any]
    has_trainer: bool  # spec.trainer given at all
    num_nodes: Any  # spec.trainer.numNodes
    res_per_node: Any  # spec.trainer.resourcesPerNode

    @classmethod
    def read(cls, rt_spec: dict[str, Any], spec: dict[str, Any]) -> _Policy:
        ml = rt_spec.get("mlPolicy")
        mpi = ml.get("mpi") if ml is not None else None
        trainer = spec.get("trainer") or {}
        return cls(
            ml=ml,
            mpi=mpi,
            flux=ml.get("flux") if ml is not None else None,
            launcher_as_node=bool(mpi is not None and mpi.get("runLauncherAsNode", False)),
            trainer=trainer,
            has_trainer=spec.get("trainer") is not None,
            num_nodes=trainer.get("numNodes"),
            res_per_node=trainer.get("resourcesPerNode"),
        )


def _merge_runtime_patches(rt_spec: dict[str, Any], patches: list[Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """1. mergeRuntimePatches: the patched JobSet template and its replicatedJobs in the runtime's order."""
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
    return template, [jobs[n] for n in order if n in jobs] + [rj for n, rj in jobs.items() if n not in order]


def _runtime_info(ordered: list[dict[str, Any]], p: _Policy) -> dict[str, int]:
    """2. newRuntimeInfo: the count of each replicatedJob, resourcesPerNode into its `node` container."""
    counts: dict[str, int] = {}
    for rj in ordered:
        name, role, pod = str(rj.get("name")), role_of(rj), pod_spec(rj)
        parallelism = rj["template"]["spec"].get("parallelism")
        count = 1 if parallelism is None else int(parallelism)
        if role == "trainer" and p.ml is not None:
            num_nodes: int | None = p.ml.get("numNodes")
            count = num_nodes if num_nodes is not None else 1
        if p.res_per_node is not None and (
            (role == "trainer" and p.ml is not None) or (p.launcher_as_node and name == "node")
        ):
            node = container(pod, "node")
            if node is not None:
                node["resources"] = merge_resources(node.get("resources") or {}, p.res_per_node)
        counts[name] = max(count, 1)
    return counts


def _enforce_ml_policy(name: str, ordered: list[dict[str, Any]], counts: dict[str, int], p: _Policy) -> None:
    """3. EnforceMLPolicy: the plugins' counts, volumes, init containers and env (`p.mpi` gains numProcPerNode)."""
    first_trainer = next((rj for rj in ordered if role_of(rj) == "trainer"), None)
    if p.mpi is not None:
        # T:…/plugins/mpi/mpi.go: numNodes sizes the job *named* `node`; the trainer (launcher) keeps its count
        if p.num_nodes is not None and "node" in counts:
            counts["node"] = max(p.num_nodes - 1, 1) if p.launcher_as_node else p.num_nodes
        p.mpi = dict(p.mpi, numProcPerNode=mpi_slots(ordered, p.mpi, p.trainer, p.res_per_node))
        mpi_policy(name, ordered, p.mpi)
    elif first_trainer is not None and p.num_nodes is not None:
        # torch, jax, xgboost, and plainml (no policy, or flux): numNodes sizes the first trainer job
        counts[str(first_trainer.get("name"))] = p.num_nodes
    if p.flux is not None:
        flux_policy(name, ordered, p.trainer)
    if first_trainer is not None and p.ml is not None and p.has_trainer:
        node = container(pod_spec(first_trainer), "node")
        n = counts[str(first_trainer.get("name"))]
        if node is not None and p.ml.get("torch") is not None:
            torch_env(node, name, n, p.trainer, p.res_per_node)
        elif node is not None and p.ml.get("jax") is not None:
            framework_env(node, jax_env(name, n))
        elif node is not None and p.ml.get("xgboost") is not None:
            n_gpus = gpus(p.res_per_node if p.res_per_node is not None else node_resources(ordered))
            framework_env(node, xgboost_env(name, n * max(n_gpus, 1)))


def _build_jobs(ordered: list[dict[str, Any]], counts: dict[str, int], p: _Policy, init: dict[str, Any]) -> None:
    """4. The JobSet builder: the trainer's image, command, args and env, the initializers' storage URI,
    env and Secret, one replica per Trainer-managed job, parallelism = completions = the count."""
    trainer = p.trainer
    for rj in ordered:
        name, role, pod = str(rj.get("name")), role_of(rj), pod_spec(rj)
        job_spec = rj["template"]["spec"]
        if role == "trainer":
            node = container(pod, "node")
            if node is not None:
                for field in ("image", "command", "args"):
                    if trainer.get(field) is not None:
                        node[field] = copy_json(trainer[field])
        if role == "trainer" or (p.launcher_as_node and name == "node"):
            node = container(pod, "node")
            if node is not None and trainer.get("env"):
                upsert_env(node, trainer["env"])
        if role in ("dataset-initializer", "model-initializer"):
            section = init.get(role.split("-")[0])
            c = container(pod, ROLE_CONTAINER[role])
            if section is not None and c is not None:
                if section.get("storageUri") is not None:
                    upsert_env(c, [{"name": "STORAGE_URI", "value": section["storageUri"]}])
                upsert_env(c, section.get("env") or [])
                sref = section.get("secretRef") or {}
                if sref.get("name"):
                    c["envFrom"] = list(c.get("envFrom") or []) + [{"secretRef": {"name": sref["name"]}}]
        if role in ("trainer", "dataset-initializer", "model-initializer"):
            rj["replicas"] = 1
        count = counts[name]
        job_spec["parallelism"] = job_spec["completions"] = count


def _claim_volumes(name: str, ordered: list[dict[str, Any]], jobset_spec: dict[str, Any]) -> None:
    """5. volume_claim_policy.go: a PVC volume `<claim>-<jobset>` in every pod that mounts a claim."""
    claims = [
        str((t.get("metadata") or {}).get("name"))
        for policy in jobset_spec.get("volumeClaimPolicies") or []
        for t in policy.get("templates") or []
        if (t.get("metadata") or {}).get("name")
    ]
    if not claims:
        return
    for rj in ordered:
        pod = pod_spec(rj)
        mounted = {m.get("name") for _, c in podspec.all_containers(pod) for m in c.get("volumeMounts") or []}
        for claim in claims:
            if claim in mounted:
                pod["volumes"] = list(pod.get("volumes") or []) + [
                    {"name": claim, "persistentVolumeClaim": {"claimName": f"{claim}-{name}"}}
                ]


def _trainer_objects(wl: Workload, ordered: list[dict[str, Any]], counts: dict[str, int], p: _Policy) -> None:
    """The objects Trainer creates besides the JobSet, only for the runtimes that create them:
    MPI's SSH Secret and hostfile ConfigMap, Flux's CURVE Secret and entrypoint ConfigMap."""
    if p.mpi is not None:
        wl.managed_secrets = {f"{wl.name}{MPI_SSH_SECRET_SUFFIX}"}
        hosts = hostfile(wl.name, ordered, counts, p.launcher_as_node, p.mpi)
        wl.derived["configMap"] = config_map(wl, "-mpi-hostfile", {"hostfile": hosts})
    elif p.flux is not None:
        wl.managed_secrets = {f"{wl.name}-flux-curve"}
        wl.derived["configMap"] = config_map(wl, "-flux-entrypoint")


def config_map(wl: Workload, suffix: str, data: dict[str, str] | None = None) -> dict[str, Any]:
    """A ConfigMap Trainer creates for the TrainJob, named `<trainjob><suffix>` in its namespace."""
    cm: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{wl.name}{suffix}", "namespace": wl.namespace},
    }
    if data is not None:
        cm["data"] = data
    return cm
