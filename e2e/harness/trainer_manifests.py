"""Kubeflow Trainer runtimes and TrainJobs written as plain dicts, for the e2e harness, the fidelity matrix
and bench/.

:func:`training_runtime` builds the shape every runtime here shares: one replicatedJob ``node``
carrying the label ``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` (trainer v2.3.0
pkg/constants/constants.go ``LabelTrainJobAncestor``: the Job whose ``node`` container Trainer
fills from ``spec.trainer``), whose pod spec is given; :func:`train_job` a TrainJob on a runtime.
Written out here, not imported from webhook/, so that the objects the tests send do not share a
mistake with the code they test. Trainer's own runtimes (manifests/overlays/runtimes) and the
samples (tests/oracle/samples) stay the YAML they are.
"""

from __future__ import annotations

from typing import Any

API_VERSION = "trainer.kubeflow.org/v1alpha1"
#: the label that marks a runtime's trainer Job (Trainer's LabelTrainJobAncestor)
ANCESTOR_STEP = "trainer.kubeflow.org/trainjob-ancestor-step"


def training_runtime(
    name: str,
    pod: dict[str, Any],
    *,
    kind: str = "TrainingRuntime",
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    num_nodes: int = 1,
    ml_policy: dict[str, Any] | None = None,
    job_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``kind`` (TrainingRuntime or ClusterTrainingRuntime) named ``name``: ``spec.mlPolicy`` is
    ``numNodes: num_nodes`` plus ``ml_policy`` (e.g. ``{"torch": {}}``); one trainer Job ``node``
    whose Job spec is ``job_spec`` (e.g. ``{"backoffLimit": 0}``) and whose pod spec is ``pod``
    (the dict itself, not a copy). ``namespace`` and ``labels`` go into metadata when given."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = labels
    job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {ANCESTOR_STEP: "trainer"}},
            "spec": {**(job_spec or {}), "template": {"spec": pod}},
        },
    }
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "mlPolicy": {"numNodes": num_nodes, **(ml_policy or {})},
            "template": {"spec": {"replicatedJobs": [job]}},
        },
    }


def train_job(
    name: str,
    runtime: str,
    *,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    runtime_kind: str | None = None,
    suspend: bool | None = None,
    image: str | None = None,
    num_nodes: int | None = None,
    trainer: dict[str, Any] | None = None,
    runtime_patches: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A TrainJob named ``name`` on ``runtime`` (trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go).

    ``runtimeRef`` is the name alone (Trainer defaults apiGroup and kind ClusterTrainingRuntime), or with
    ``runtime_kind`` the full reference. ``spec.trainer`` is ``image``, ``numNodes`` and then ``trainer``'s
    fields in their order, present only when one of them is given. ``namespace``, ``labels`` (when not
    empty), ``suspend`` and ``runtime_patches`` (when not empty) are set only when given. The one builder
    of the e2e harness, the fidelity matrix and bench/: its keys come in a fixed order, so the objects
    (and the YAML kubectl is given) are the same wherever a TrainJob is written."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    spec: dict[str, Any] = {}
    if suspend is not None:
        spec["suspend"] = suspend
    spec["runtimeRef"] = (
        {"name": runtime}
        if runtime_kind is None
        else {"apiGroup": "trainer.kubeflow.org", "kind": runtime_kind, "name": runtime}
    )
    if image is not None or num_nodes is not None or trainer is not None:
        fields: dict[str, Any] = {} if image is None else {"image": image}
        if num_nodes is not None:
            fields["numNodes"] = num_nodes
        spec["trainer"] = {**fields, **(trainer or {})}
    if runtime_patches:
        spec["runtimePatches"] = runtime_patches
    return {"apiVersion": API_VERSION, "kind": "TrainJob", "metadata": metadata, "spec": spec}
