"""Which jobs the audit controller judges: the ones that have not started yet.

A job that runs has already met the cluster (its pods exist, or failed to); judging it again
would only repeat what its own status says. Each kind says how that is read from its upstream's
status fields, in its KindSpec (webhook/workloads/kinds.py, `state`), next to its adapter:

- AIPerfJob (webhook/workloads/aiperf `aiperf_state`): judged while `status.phase` is unset,
  `Pending` or `Queued`.
- AIPerfSweep (webhook/workloads/aiperf_sweep `sweep_state`): judged until every child exists: each
  child its sweep controller has not created yet is judged as the AIPerfJob it will be
  (webhook/audit/sweeps.py). The children the sweep controller already created are AIPerfJobs and
  are judged on their own while they wait.
- TrainJob (webhook/workloads/trainjob `trainjob_state`): judged while suspended, while its Kueue
  Workload is not admitted, or before its JobSet exists.
- JobSet applied directly (webhook/workloads/jobset `jobset_state`): judged while suspended or while
  its Kueue Workload is not admitted. A JobSet a judged job owns is not a job here (`KindSpec.skips`):
  its owner is judged.

Everything here is pure: objects in, a verdict on "started?" out. The kinds are the registered
KindSpecs with a state reader (`job_kinds`).
"""

from __future__ import annotations

from webhook.workloads.aiperf import KIND_SPEC as AIPERFJOB
from webhook.workloads.aiperf import aiperf_state
from webhook.workloads.aiperf_sweep import KIND_SPEC as AIPERFSWEEP
from webhook.workloads.aiperf_sweep import sweep_state
from webhook.workloads.jobset import jobset_state
from webhook.workloads.kinds import (
    FINISHED,
    JUDGED,
    RUNNING,
    KindSpec,
    Related,
    audited_kinds,
    condition_true,
    owned_by,
    uid_of,
    workload_admitted,
)
from webhook.workloads.trainjob import KIND_SPEC as TRAINJOB
from webhook.workloads.trainjob import trainjob_state

#: a kind the controller lists and watches
JobKind = KindSpec


def job_kinds() -> tuple[KindSpec, ...]:
    """The kinds the controller lists, watches and judges, in registration order."""
    return tuple(audited_kinds())


def kind_by_resource(resource: str) -> KindSpec | None:
    return next((k for k in audited_kinds() if k.plural == resource), None)


__all__ = [
    "AIPERFJOB",
    "AIPERFSWEEP",
    "FINISHED",
    "JUDGED",
    "RUNNING",
    "TRAINJOB",
    "JobKind",
    "Related",
    "aiperf_state",
    "condition_true",
    "job_kinds",
    "jobset_state",
    "kind_by_resource",
    "owned_by",
    "sweep_state",
    "trainjob_state",
    "uid_of",
    "workload_admitted",
]
