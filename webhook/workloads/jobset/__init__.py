"""A JobSet (jobset.x-k8s.io/v1alpha2) that a user applies directly: its replicatedJobs are the
pod groups, and the JobSet itself, defaulted as JobSet's webhook defaults it, is the derived
JobSet every check reads. A JobSet that a TrainJob, an AIPerfJob or an AIPerfSweep owns is not
judged again (its owner was judged at its own apply, and a denial would wedge the owner's
controller): `build` returns None for it, and the chart's matchConditions keep the apiserver from
even sending it (charts/preflight-webhook/templates/validatingwebhookconfiguration.yaml)."""

from __future__ import annotations

from typing import Any

from webhook.kube import JOBSET_API_VERSION
from webhook.workloads.jobset.adapter import FACTS, KIND, build, owned_by_a_judged_job, pods_per_job
from webhook.workloads.kinds import FINISHED, READS_WORKLOADS, RUNNING, KindSpec, Related, condition_true, queued_state


def jobset_state(obj: dict[str, Any], related: Related) -> tuple[str, str]:
    """Whether a JobSet applied directly started (sigs.k8s.io/jobset v0.12.0 api/jobset/v1alpha2
    jobset_types.go): finished when the `Completed` or `Failed` condition is True; judged while
    `spec.suspend` is true or its Kueue Workload (Kueue's jobset integration, owned by the JobSet) is
    not admitted; else its Jobs are made (pkg/controllers/jobset_controller.go): running."""
    if condition_true(obj, "Completed") or condition_true(obj, "Failed"):
        return FINISHED, "finished"
    return queued_state(obj, related) or (RUNNING, "running")


KIND_SPEC = KindSpec(
    kind=KIND,
    group=JOBSET_API_VERSION.split("/")[0],
    version=JOBSET_API_VERSION.split("/")[1],
    plural="jobsets",
    adapter=build,
    state=jobset_state,
    reads=frozenset({READS_WORKLOADS}),
    skips=owned_by_a_judged_job,
    # the adapter discards read_metadata's uid and never looks at creationTimestamp
    unread_metadata=frozenset({"uid", "creationTimestamp"}),
)

__all__ = ["FACTS", "KIND_SPEC", "build", "jobset_state", "owned_by_a_judged_job", "pods_per_job"]
