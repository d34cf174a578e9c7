"""The JobSet Trainer builds from a TrainJob and its runtime, and the pods JobSet makes of it.

T = kubeflow/trainer v2.3.0, J = sigs.k8s.io/jobset v0.12.0: T:pkg/runtime/core/trainingruntime.go
(mergeRuntimePatches, newRuntimeInfo), the ML policy plugins (./plugins), the JobSet builder
(T:pkg/runtime/framework/plugins/jobset/{jobset.go,builder.go}) and JobSet's volumeClaimPolicies
volumes (J:pkg/controllers/volume_claim_policy.go).
"""

from __future__ import annotations

from typing import Any

from webhook.kube import JOBSET_API_VERSION
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
        name, role, pod = str(rj.get("name")), role_of(rj), pod_spec(rj)
        parallelism = rj["template"]["spec"].get("parallelism")
        count = 1 if parallelism is None else int(parallelism)
        if role == "trainer" and ml is not None:
            count = ml.get("numNodes") if ml.get("numNodes") is not None else 1
        if res_per_node is not None and (
            (role == "trainer" and ml is not None) or (launcher_as_node and name == "node")
        ):
            node = container(pod, "node")
            if node is not None:
                node["resources"] = merge_resources(node.get("resources") or {}, res_per_node)
        counts[name] = max(count, 1)

    # 3. EnforceMLPolicy
    first_trainer = next((rj for rj in ordered if role_of(rj) == "trainer"), None)
    if mpi is not None:
        # T:…/plugins/mpi/mpi.go: numNodes sizes the job *named* `node`; the trainer (launcher) keeps its count
        if tj_nodes is not None and "node" in counts:
            counts["node"] = max(tj_nodes - 1, 1) if launcher_as_node else tj_nodes
        mpi = dict(mpi, numProcPerNode=mpi_slots(ordered, mpi, trainer, res_per_node))
        mpi_policy(wl.name, ordered, mpi)
    elif first_trainer is not None and tj_nodes is not None:
        # torch, jax, xgboost, and plainml (no policy, or flux): numNodes sizes the first trainer job
        counts[str(first_trainer.get("name"))] = tj_nodes
    if flux is not None:
        flux_policy(wl.name, ordered, trainer)
    if first_trainer is not None and ml is not None and spec.get("trainer") is not None:
        node = container(pod_spec(first_trainer), "node")
        n = counts[str(first_trainer.get("name"))]
        if node is not None and ml.get("torch") is not None:
            torch_env(node, wl.name, n, trainer, res_per_node)
        elif node is not None and ml.get("jax") is not None:
            framework_env(node, jax_env(wl.name, n))
        elif node is not None and ml.get("xgboost") is not None:
            n_gpus = gpus(res_per_node if res_per_node is not None else node_resources(ordered))
            framework_env(node, xgboost_env(wl.name, n * max(n_gpus, 1)))

    # 4. the JobSet builder
    for rj in ordered:
        name, role, pod = str(rj.get("name")), role_of(rj), pod_spec(rj)
        job_spec = rj["template"]["spec"]
        if role == "trainer":
            node = container(pod, "node")
            if node is not None:
                for field in ("image", "command", "args"):
                    if trainer.get(field) is not None:
                        node[field] = copy_json(trainer[field])
        if role == "trainer" or (launcher_as_node and name == "node"):
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

    # 5. JobSet: PVC volumes of volumeClaimPolicies
    claims = [
        str((t.get("metadata") or {}).get("name"))
        for policy in jobset_spec.get("volumeClaimPolicies") or []
        for t in policy.get("templates") or []
        if (t.get("metadata") or {}).get("name")
    ]
    for rj in ordered:
        pod = pod_spec(rj)
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
    # objects Trainer creates besides the JobSet, only for the runtimes that create them
    if mpi is not None:
        wl.managed_secrets = {f"{wl.name}{MPI_SSH_SECRET_SUFFIX}"}
        hosts = hostfile(wl.name, ordered, counts, launcher_as_node, mpi)
        wl.derived["configMap"] = config_map(wl, "-mpi-hostfile", {"hostfile": hosts})
    elif flux is not None:
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
