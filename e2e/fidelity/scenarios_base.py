"""The fidelity matrix's scenario type and the builders every kind of job uses.

:class:`Scenario` and the shared builders (Secrets, secret env, quotas) live here so that the
TrainJob table (e2e/fidelity/scenarios.py) and the AIPerfJob table
(e2e/fidelity/aiperf_scenarios.py) import them without importing each other; scenarios.py
re-exports them and joins the two tables into ``SCENARIOS``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from e2e.harness.trainer_manifests import train_job

NS_PREFIX = "fx-"
#: TrainJob workloads run this image (e2e/nodeimage/workload), loaded into the node's containerd
WORKLOAD_IMAGE = "localhost/preflight/workload:local"
#: the label every scenario namespace carries; the matrix webhook's namespaceSelector matches it
MATRIX_LABEL = {"preflight-fidelity": "true"}


@dataclass
class Scenario:
    name: str
    note: str
    job: dict[str, Any]
    prereqs: list[dict[str, Any]] = field(default_factory=list)
    #: cluster-scoped prerequisites (Kueue ClusterQueues, ResourceFlavors, AdmissionChecks, policies)
    cluster_prereqs: list[dict[str, Any]] = field(default_factory=list)
    namespace_labels: dict[str, str] = field(default_factory=dict)
    covers: str = ""
    known: str | None = None
    #: how long the runner watches this job after the creates (None: the runner's default for its kind)
    bound: float | None = None
    #: the checks whose warnings are about this job (the only ones it may carry; e2e/test_fidelity.py)
    warns: tuple[str, ...] = ()
    #: the warnings the job gets, word for word as kubectl shows them (``[Check] text``), ``{s}`` standing
    #: for a whole number of seconds (a cache's age); e2e/test_fidelity.py asserts each row that declares them
    says: tuple[str, ...] = ()
    #: jobs that run first and hold the queue (TrainJobs or JobSets, in the scenario's namespace): the
    #: runner creates them after the prerequisites and waits until Kueue has admitted each, its pods run
    #: and its ClusterQueue's status counts it, before any verdict; it ends them (deletes them) once Kueue
    #: has kept the scenario's job pending, or once the job's outcome is in, and records the order of
    #: admission it saw (e2e/fidelity/run.py ``QueueOrder``). None of them is judged.
    before: list[dict[str, Any]] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """The job's kind: ``TrainJob``, ``JobSet`` or ``AIPerfJob`` (what the runner lists and how it reads it)."""
        return str(self.job["kind"])

    @property
    def namespace(self) -> str:
        return NS_PREFIX + self.name

    def objects(self) -> list[dict[str, Any]]:
        """The namespace, then the prerequisites, all in the scenario's namespace."""
        ns = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": self.namespace, "labels": {**MATRIX_LABEL, **self.namespace_labels}},
        }
        out = [ns, *copy.deepcopy(self.cluster_prereqs)]
        for obj in copy.deepcopy(self.prereqs):
            obj.setdefault("metadata", {})["namespace"] = self.namespace
            out.append(obj)
        return out

    def before_objects(self) -> list[dict[str, Any]]:
        """The ``before`` jobs, in the scenario's namespace."""
        out = copy.deepcopy(self.before)
        for obj in out:
            obj.setdefault("metadata", {})["namespace"] = self.namespace
        return out

    def job_object(self) -> dict[str, Any]:
        obj = copy.deepcopy(self.job)
        obj["metadata"]["namespace"] = self.namespace
        return obj


def twins(
    make: Callable[..., Scenario],
    slug: str,
    violating: tuple[str, dict[str, Any]],
    compliant: tuple[str, dict[str, Any]],
    **shared: Any,
) -> list[Scenario]:
    """A job that breaks a rule (``{slug}-violating``) and its twin that keeps it (``{slug}-compliant``):
    each a (note, job); the rule and what it covers (``shared``: prereqs, labels, covers) alike.
    ``make`` is Scenario or a kind's own maker (aiperf_scenarios._scenario)."""
    return [
        make(f"{slug}-{outcome}", note, job, **copy.deepcopy(shared))
        for outcome, (note, job) in (("violating", violating), ("compliant", compliant))
    ]


# --------------------------------------------------------------------------- shared builders


def secret(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data}


def secret_env(var: str, name: str, key: str, optional: bool | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": name, "key": key}
    if optional is not None:
        ref["optional"] = optional
    return {"name": var, "valueFrom": {"secretKeyRef": ref}}


def quota(hard: dict[str, str], name: str = "quota", scopes: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"hard": hard}
    if scopes:
        spec["scopes"] = scopes
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": spec}


def jobset(name: str, namespace: str, container: dict[str, Any], *, run_once: bool = False) -> dict[str, Any]:
    """A JobSet (jobset.x-k8s.io/v1alpha2) of one replicatedJob ``workers``: 2 Jobs of one pod running
    ``container``; ``run_once``: a pod is not restarted and a Job not retried (restartPolicy Never,
    backoffLimit 0), so a run that fails stays failed."""
    job: dict[str, Any] = {"parallelism": 1, "completions": 1}
    pod: dict[str, Any] = {"containers": [container]}
    if run_once:
        job["backoffLimit"] = 0
        pod = {"restartPolicy": "Never", **pod}
    job["template"] = {"spec": pod}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": job}}]},
    }


def trainjob(
    name: str = "train",
    *,
    runtime: str = "torch-distributed",
    num_nodes: int | None = 1,
    env: list[dict[str, Any]] | None = None,
    resources: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    pod: dict[str, Any] | None = None,
    container: dict[str, Any] | None = None,
    image: str = WORKLOAD_IMAGE,
    suspend: bool | None = None,
) -> dict[str, Any]:
    """A TrainJob on one of Trainer's own ClusterTrainingRuntimes; ``pod``/``container`` go into a
    runtimePatch of the ``node`` replicatedJob's pod template (pod spec fields / the node container);
    ``suspend``: ``spec.suspend`` (true: Trainer v2.3.0 creates its JobSet suspended, no pod starts)."""
    trainer: dict[str, Any] = {}
    if env:
        trainer["env"] = env
    if resources:
        trainer["resourcesPerNode"] = resources
    patches: list[dict[str, Any]] = []
    if pod or container:
        pod_spec = dict(pod or {})
        if container:
            pod_spec["containers"] = [{"name": "node", **container}]
        patches = [
            {
                "manager": "preflight.webhook.io/fidelity",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}]
                        }
                    }
                },
            }
        ]
    return train_job(
        name,
        runtime,
        labels=labels,
        suspend=suspend,
        image=image,
        num_nodes=num_nodes,
        trainer=trainer,
        runtime_patches=patches,
    )


def requests(**res: str) -> dict[str, Any]:
    res = {k.replace("_", "."): v for k, v in res.items()}
    return {"requests": dict(res), "limits": dict(res)}
