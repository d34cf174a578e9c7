"""A JobSet (jobset.x-k8s.io/v1alpha2) that a user applies directly: its replicatedJobs are the
pod groups, and the JobSet itself, defaulted as JobSet's webhook defaults it, is the derived
JobSet every check reads. A JobSet that a TrainJob, an AIPerfJob or an AIPerfSweep owns is not
judged again (its owner was judged at its own apply, and a denial would wedge the owner's
controller): `build` returns None for it, and the chart's matchConditions keep the apiserver from
even sending it (charts/preflight-webhook/templates/validatingwebhookconfiguration.yaml)."""

from webhook.workloads.jobset.adapter import FACTS, JUDGED_OWNERS, build, owned_by_a_judged_job, pods_per_job

__all__ = ["FACTS", "JUDGED_OWNERS", "build", "owned_by_a_judged_job", "pods_per_job"]
