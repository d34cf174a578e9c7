"""Which jobs the audit controller judges: the ones that have not started yet.

A job that runs has already met the cluster (its pods exist, or failed to); judging it again
would only repeat what its own status says. So, per kind, from the upstream status fields:

- AIPerfJob (AIPerf 0.13.0 `aiperf/kubernetes/phase.py`, `Phase`): judged while `status.phase`
  is unset, `Pending` or `Queued` (JobSet suspended by Kueue); `Initializing`/`Running` run;
  `Completed`/`Failed`/`Cancelled` are finished.
- AIPerfSweep: judged until every child exists: each child its sweep controller has not created
  yet is judged as the AIPerfJob it will be (webhook/audit/sweeps.py). Its phases (AIPerf 0.13.0
  `operator/handlers/sweep/create.py` Pending, `sweep_controller/status_writer.py` Running, the
  rollup's Aggregating, `child_rollup.py` TERMINAL_PHASES): `Aggregating` means every child ran;
  Succeeded, Failed, Cancelled, PartiallyFailed (and Completed) are finished. The children the
  sweep controller already created are AIPerfJobs and are judged on their own while they wait.
- TrainJob (Trainer v2.3 `pkg/apis/trainer/v1alpha1/trainjob_types.go`): finished when the
  `Complete` or `Failed` condition is True; else judged when `spec.suspend` is true, when its
  Kueue Workload (owned by the TrainJob, `kueue.x-k8s.io` Workload) is not admitted (no
  `Admitted` condition True, Kueue `apis/kueue/v1beta2/workload_types.go` WorkloadAdmitted),
  or when its JobSet (the TrainJob's name, Trainer's jobset plugin) does not exist yet.

Everything here is pure: objects in, a verdict on "started?" out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: judged ("not started") or not judged, with the reason shown in the report and logs
JUDGED, RUNNING, FINISHED = "judged", "running", "finished"

AIPERF_WAITING = frozenset({"", "Pending", "Queued"})
AIPERF_RUNNING = frozenset({"Initializing", "Running"})
AIPERF_TERMINAL = frozenset({"Completed", "Failed", "Cancelled"})
#: child_rollup.py TERMINAL_PHASES (PARENT_TERMINAL_PHASES and the rollup's Completed)
SWEEP_TERMINAL = frozenset({"Succeeded", "Failed", "Cancelled", "PartiallyFailed", "Completed"})


@dataclass(frozen=True)
class JobKind:
    """A kind the controller lists and watches."""

    kind: str
    group: str
    version: str
    resource: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


AIPERFJOB = JobKind("AIPerfJob", "aiperf.nvidia.com", "v1alpha1", "aiperfjobs")
AIPERFSWEEP = JobKind("AIPerfSweep", "aiperf.nvidia.com", "v1alpha1", "aiperfsweeps")
TRAINJOB = JobKind("TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs")
JOB_KINDS = (AIPERFJOB, AIPERFSWEEP, TRAINJOB)
KIND_BY_RESOURCE = {k.resource: k for k in JOB_KINDS}


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def condition_true(obj: dict[str, Any], ctype: str) -> bool:
    for c in _dict(obj.get("status")).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == ctype and c.get("status") == "True":
            return True
    return False


def uid_of(obj: dict[str, Any]) -> str:
    uid = _dict(obj.get("metadata")).get("uid")
    return uid if isinstance(uid, str) else ""


def owned_by(obj: dict[str, Any], uid: str) -> bool:
    refs = _dict(obj.get("metadata")).get("ownerReferences") or []
    return bool(uid) and any(isinstance(r, dict) and r.get("uid") == uid for r in refs)


def workload_admitted(workload: dict[str, Any]) -> bool:
    """Kueue's Workload is admitted: the `Admitted` condition is True (workload.IsAdmitted)."""
    return condition_true(workload, "Admitted")


def aiperf_state(obj: dict[str, Any]) -> tuple[str, str]:
    phase = _dict(obj.get("status")).get("phase") or ""
    phase = phase if isinstance(phase, str) else ""
    if phase in AIPERF_TERMINAL:
        return FINISHED, f"phase {phase}"
    if phase in AIPERF_RUNNING:
        return RUNNING, f"phase {phase}"
    return JUDGED, f"phase {phase or 'not set'}"


def sweep_state(obj: dict[str, Any]) -> tuple[str, str]:
    phase = _dict(obj.get("status")).get("phase") or ""
    phase = phase if isinstance(phase, str) else ""
    if phase in SWEEP_TERMINAL:
        return FINISHED, f"phase {phase}"
    if phase == "Aggregating":
        return RUNNING, "phase Aggregating: every child ran"
    return JUDGED, "remaining children" if phase else "phase not set"


def trainjob_state(
    obj: dict[str, Any], *, jobset: dict[str, Any] | None, workloads: list[dict[str, Any]]
) -> tuple[str, str]:
    """`workloads`: the Kueue Workloads of the TrainJob's namespace (those it owns are looked at)."""
    if condition_true(obj, "Complete") or condition_true(obj, "Failed"):
        return FINISHED, "finished"
    if _dict(obj.get("spec")).get("suspend") is True:
        return JUDGED, "suspended"
    uid = uid_of(obj)
    mine = [w for w in workloads if owned_by(w, uid)]
    if mine and not any(workload_admitted(w) for w in mine):
        return JUDGED, "Kueue Workload not admitted"
    if jobset is None:
        return JUDGED, "no JobSet yet"
    return RUNNING, "running"
