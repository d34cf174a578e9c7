"""TrainJob → Workload: the JobSet Kubeflow Trainer v2.3.0 builds from a TrainJob and its runtime,
and the pods JobSet v0.12.0 creates from it.

Mirrors, in their order: pkg/runtime/core/trainingruntime.go (runtimePatches, newRuntimeInfo:
pod counts and resourcesPerNode), the ML policy plugins' EnforceMLPolicy
(pkg/runtime/framework/plugins/{plainml,torch,jax,xgboost,mpi,flux}), the JobSet builder
(plugins/jobset/{jobset.go,builder.go}, with pkg/apply's whole-entry env upsert), and JobSet's
volumeClaimPolicies volumes (sigs.k8s.io/jobset pkg/controllers/volume_claim_policy.go). The
rules are spelled out in docs/workloads.md; tests/oracle/test_trainer_oracle.py compares the
result with Trainer's and JobSet's own code.

The package follows Trainer's seams: `schema` (API names, the shapes read, the cache of
validated runtime specs), `merge` (strategic merge, resources merge, pkg/apply upserts),
`runtime` (reading a replicatedJob as T:pkg/runtime/runtime.go does), `plugins/` (one module
per ML policy plugin: torch, mpi, flux, jax, xgboost), `jobset` (the JobSet renderer, incl.
volumeClaimPolicies) and `adapter` (`build`: one TrainJob to a Workload). Every public name is
importable from `webhook.workloads.trainjob`.
"""

from __future__ import annotations

from typing import Any

from webhook.workloads.kinds import (
    FINISHED,
    JUDGED,
    READS_JOBSET,
    READS_WORKLOADS,
    RUNNING,
    KindSpec,
    Related,
    condition_true,
    queued_state,
)
from webhook.workloads.trainjob.adapter import FACTS, build
from webhook.workloads.trainjob.merge import strategic_merge
from webhook.workloads.trainjob.plugins import FLUX_INSTALLER_IMAGE, MPI_SSH_SECRET_SUFFIX
from webhook.workloads.trainjob.schema import (
    ANCESTOR_LABEL,
    API_GROUP,
    JOBSET_TEMPLATE,
    REPLICATED_JOB,
    ROLE_CONTAINER,
    RUNTIME_KINDS,
    RUNTIME_SNAPSHOT_SUFFIX,
    RUNTIME_SPEC,
    TRAINJOB_SPEC,
)


def trainjob_state(obj: dict[str, Any], related: Related) -> tuple[str, str]:
    """Whether a TrainJob started (Trainer v2.3 `pkg/apis/trainer/v1alpha1/trainjob_types.go`): finished when
    the `Complete` or `Failed` condition is True; else judged when `spec.suspend` is true, when its Kueue
    Workload (owned by the TrainJob) is not admitted, or when its JobSet (the TrainJob's name, Trainer's
    jobset plugin) does not exist yet."""
    if condition_true(obj, "Complete") or condition_true(obj, "Failed"):
        return FINISHED, "finished"
    queued = queued_state(obj, related)
    if queued is not None:
        return queued
    if related.jobset is None:
        return JUDGED, "no JobSet yet"
    return RUNNING, "running"


KIND_SPEC = KindSpec(
    kind="TrainJob",
    group=API_GROUP,
    version="v1alpha1",
    plural="trainjobs",
    adapter=build,
    state=trainjob_state,
    reads=frozenset({READS_JOBSET, READS_WORKLOADS}),
    owns_jobsets=True,
    # the adapter discards read_metadata's uid and never looks at creationTimestamp
    unread_metadata=frozenset({"uid", "creationTimestamp"}),
)

__all__ = [
    "ANCESTOR_LABEL",
    "FACTS",
    "KIND_SPEC",
    "API_GROUP",
    "FLUX_INSTALLER_IMAGE",
    "JOBSET_TEMPLATE",
    "MPI_SSH_SECRET_SUFFIX",
    "REPLICATED_JOB",
    "ROLE_CONTAINER",
    "RUNTIME_KINDS",
    "RUNTIME_SNAPSHOT_SUFFIX",
    "RUNTIME_SPEC",
    "TRAINJOB_SPEC",
    "build",
    "trainjob_state",
    "strategic_merge",
]
