"""One `KindSpec` per kind: everything the product needs to know of a kind, in its own package.

Each kind package (webhook/workloads/{aiperf,aiperf_sweep,trainjob,jobset}) says in its ``KIND_SPEC``
what its API is (group, version, plural, kind), which adapter renders it, how the audit controller
reads whether a job of it has started, whether it owns the JobSets it makes, and which metadata its
render never reads. `KIND_PACKAGES` is the one registration; every list of kinds is derived from it:
the adapters (webhook/workloads/__init__.py), the render cache's tables (render_cache.py), the
owners whose JobSets are not judged again (jobset/adapter.py), the jobs the audit controller
watches and its RBAC (webhook/audit/jobs.py, rbac.py), and the chart's webhook rules and their CEL
(charts/preflight-webhook/values.yaml ``webhook.kinds``, which tests/test_chart_kinds.py compares
with the specs). What differs between kinds inside the checks is in the Workload's `KindFacts`,
which the adapter sets.

The state readers are pure: the job object and what else its status depends on (`Related`) in,
(judged | running | finished, why) out. The audit controller gives them its watch caches, the
``report --live`` CLI what it read live.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.workloads.base import Workload

#: judged ("not started") or not judged, with the reason shown in the report and logs
JUDGED, RUNNING, FINISHED = "judged", "running", "finished"

#: builds the Workload; None for an object of its kind that is not judged (a JobSet a judged job owns)
Adapter = Callable[..., Workload | None]


@dataclass(frozen=True)
class Related:
    """What a job's state depends on besides the job: its JobSet (the job's name, in its namespace),
    and the Kueue Workloads (kueue.x-k8s.io) that it owns. Filled only when its spec `reads` them."""

    jobset: dict[str, Any] | None = None
    workloads: tuple[dict[str, Any], ...] = ()


#: (judged | running | finished, why) of one job object
StateReader = Callable[[dict[str, Any], Related], tuple[str, str]]
#: what a StateReader may need besides the job (`Related`'s fields)
READS_JOBSET, READS_WORKLOADS = "jobset", "workloads"


@dataclass(frozen=True)
class KindSpec:
    """One kind the webhook judges."""

    kind: str
    group: str
    version: str
    #: the resource name (the REST path, the webhook rule, RBAC)
    plural: str
    adapter: Adapter
    #: how the audit controller reads whether the job started; None: the audit controller never lists it
    state: StateReader | None = None
    #: what `state` reads besides the job (READS_JOBSET, READS_WORKLOADS)
    reads: frozenset[str] = frozenset()
    #: the kind makes JobSets that own no judgement of their own: a JobSet it owns is not judged again
    #: (webhook/workloads/jobset/adapter.py, the chart's matchCondition not-owned-by-a-judged-job)
    owns_jobsets: bool = False
    #: an object of the kind that is not judged (a JobSet a judged job owns): the adapter returns None
    #: for it, and the audit controller never lists it as a job
    skips: Callable[[dict[str, Any]], bool] | None = None
    #: metadata its adapter never reads, left out of the render cache's key (render_cache.py)
    unread_metadata: frozenset[str] = frozenset()
    #: "module:function" giving the per-create value its render copies besides the uid (an AIPerfJob's
    #: run epoch key, its adapter's ``epoch=``): rendered once with placeholders (render_cache.py)
    per_create: str | None = None
    #: one object renders many jobs (an AIPerfSweep's children): the server renders it off the event loop
    renders_many: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def resource(self) -> str:
        """The plural, as the audit controller's watches name it."""
        return self.plural

    @property
    def group_kind(self) -> tuple[str, str]:
        return (self.group, self.kind)

    def skipped(self, obj: dict[str, Any]) -> bool:
        return self.skips is not None and self.skips(obj)


#: the one registration: each package's ``KIND_SPEC`` is its KindSpec, in this order (the audit controller
#: lists the kinds in it: AIPerfJobs before AIPerfSweeps, whose created children they are)
KIND_PACKAGES: list[str] = [
    "webhook.workloads.aiperf",
    "webhook.workloads.aiperf_sweep",
    "webhook.workloads.trainjob",
    "webhook.workloads.jobset",
]

#: (group, kind) → KindSpec, filled from KIND_PACKAGES on first use (a test registers a kind here)
_REGISTRY: dict[tuple[str, str], KindSpec] = {}


def registry() -> dict[tuple[str, str], KindSpec]:
    """Every registered kind by (group, kind), in registration order. The packages are imported on
    first use, not when this module is (their adapters import the shared modules of this package)."""
    if not _REGISTRY:
        for name in KIND_PACKAGES:
            spec: KindSpec = importlib.import_module(name).KIND_SPEC
            _REGISTRY[spec.group_kind] = spec
    return _REGISTRY


def kinds() -> list[KindSpec]:
    return list(registry().values())


def kind_spec(group: str, kind: str) -> KindSpec | None:
    return registry().get((group, kind))


def judged_owners() -> frozenset[tuple[str, str]]:
    """(API group, kind) of the owners whose JobSets were judged when the owner was applied."""
    return frozenset(s.group_kind for s in kinds() if s.owns_jobsets)


def audited_kinds() -> list[KindSpec]:
    """The kinds the audit controller lists, watches and judges (those with a state reader)."""
    return [s for s in kinds() if s.state is not None]


# --------------------------------------------------------------------------- for the state readers


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
    """Kueue's Workload is admitted: the `Admitted` condition is True (Kueue
    apis/kueue/v1beta2/workload_types.go WorkloadAdmitted, workload.IsAdmitted)."""
    return condition_true(workload, "Admitted")


def phase_of(obj: dict[str, Any]) -> str:
    phase = _dict(obj.get("status")).get("phase") or ""
    return phase if isinstance(phase, str) else ""


def queued_state(obj: dict[str, Any], related: Related) -> tuple[str, str] | None:
    """JUDGED while `spec.suspend` is true or its Kueue Workload is not admitted; None otherwise."""
    if _dict(obj.get("spec")).get("suspend") is True:
        return JUDGED, "suspended"
    mine = [w for w in related.workloads if owned_by(w, uid_of(obj))]
    if mine and not any(workload_admitted(w) for w in mine):
        return JUDGED, "Kueue Workload not admitted"
    return None
