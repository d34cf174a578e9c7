"""The names JobSet derives for a job's Jobs and pods: JobSet v0.12.0 names each Job
`<jobset>-<replicatedJob>-<jobIdx>` (kubernetes-sigs/jobset pkg/controllers/jobset_controller.go
genJobName) and each pod `<jobset>-<replicatedJob>-<jobIdx>-<podIdx>-xxxxx` (the Job controller's
generateName for an Indexed Job's pods), and its webhook rejects a JobSet whose longest such name is not a DNS-1035
label (at most MAX_LABEL characters). Name Length and Sweep Children both read them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from webhook.workloads.base import Workload

MAX_LABEL = 63
RANDOM_SUFFIX = "-xxxxx"


class DerivedName(NamedTuple):
    """The longest name of one kind ("Job" or "pod") for one replicatedJob (a tuple: built
    per replicatedJob on every request, a frozen dataclass costs ten times as much)."""

    what: str
    replicated_job: str
    name: str
    # characters of the name that are not the JobSet name
    fixed: int


def jobset_name(wl: Workload) -> str:
    """The JobSet the job's controller creates: derived["jobSet"], else the controller's rule."""
    js = wl.derived.get("jobSet") or {}
    name = (js.get("metadata") or {}).get("name")
    if isinstance(name, str) and name:
        return name
    return f"{wl.facts.jobset_prefix}{wl.name}"


def replicated_jobs(wl: Workload) -> list[tuple[str, int, int]]:
    """(name, replicas, pods per Job) for every replicatedJob of the derived JobSet.

    Pods per Job is `completions` (what JobSet's webhook uses), else `parallelism`, else 1.
    Without a derived JobSet, each pod group is one replicatedJob with one Job of `pods` pods.
    """
    js = wl.derived.get("jobSet") or {}
    rjobs = (js.get("spec") or {}).get("replicatedJobs")
    if not isinstance(rjobs, list) or not rjobs:
        return [(g.name, 1, max(g.pods, 1)) for g in wl.pod_groups]
    out = []
    for rj in rjobs:
        if not isinstance(rj, dict):
            continue
        spec = ((rj.get("template") or {}).get("spec")) or {}
        per_job = _int(spec.get("completions"), _int(spec.get("parallelism"), 1))
        out.append((str(rj.get("name") or ""), max(_int(rj.get("replicas"), 1), 1), max(per_job, 1)))
    return out


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def longest_names(js_name: str, rjobs: list[tuple[str, int, int]]) -> list[DerivedName]:
    out = []
    for rj, replicas, per_job in rjobs:
        job = f"{js_name}-{rj}-{replicas - 1}"
        pod = f"{job}-{per_job - 1}{RANDOM_SUFFIX}"
        out.append(DerivedName("Job", rj, job, len(job) - len(js_name)))
        out.append(DerivedName("pod", rj, pod, len(pod) - len(js_name)))
    return out
