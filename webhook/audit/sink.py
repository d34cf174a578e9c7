"""The contract between the audit controller and the places its findings go.

The controller (webhook/audit/controller.py) judges jobs and hands each judgement to every sink;
a sink (Events, Policy Reports, metrics) decides what to write. Sinks never judge: the verdict is
`Judgement.evaluation.decision`, made by the domain (webhook.policy) exactly as for the webhook.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from webhook.preflight import Evaluation


@dataclass(frozen=True, slots=True)
class JobRef:
    """One judged job: an AIPerfJob, a TrainJob, or one remaining child of an AIPerfSweep
    (then `parent` names the sweep, and Events go on the sweep)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    parent: JobRef | None = None

    @property
    def key(self) -> str:
        """What names the job in what is kept of it (the controller's kept results, a report's entries): its
        uid, or its sweep's uid and its name (a remaining child has no uid yet)."""
        return self.uid if self.parent is None else f"{self.parent.uid}/{self.name}"


@dataclass(frozen=True, slots=True)
class Judgement:
    job: JobRef
    evaluation: Evaluation
    #: the job's metadata.generation (or resourceVersion) the judgement was made on
    generation: str
    judged_at: dt.datetime
    #: why this re-check ran: "scan", "job changed", 'Secret "team-a/hf-token" deleted', "period", ...
    reason: str
    #: False: the cheap pass of a full scan judged the job without the checks that send requests
    #: (their results say "not judged yet"); the reports and metrics show it, no Event is written from it
    complete: bool = True


class FindingSink(Protocol):
    """Where judgements go. Each method is called by the leader only, never concurrently for one job."""

    async def publish(self, judgement: Judgement) -> None:
        """A job was judged (a full scan, a change of the job, of something it reads, or the period)."""

    async def forget(self, job: JobRef, why: str) -> None:
        """The job is no longer judged: deleted, started ("running jobs are not judged") or finished."""

    async def scan_done(self, judged: int, not_judged: dict[str, int]) -> None:
        """A full scan ended: `judged` jobs, and the ones skipped by reason (e.g. {"running": 3})."""
