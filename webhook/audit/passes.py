"""The two passes of a full scan, and the results kept between them: which checks send requests.

A full scan of 10,000 waiting jobs cannot wait for the checks that send requests: the Dry Run
check alone sends about five dry-run creates per TrainJob, and the controller paces every
request by `audit.qps` (20 by default, client-go's rest.Config default is 5), so 10,000 jobs
cost ~50,000 requests, ~40 min (docs/benchmarks/audit-scale.md). The scan is therefore made in
two passes:

1. **the cheap pass**: every job is judged by the checks that send no request of its own
   (`request_free`): those that read only the Workload and the watch caches (a check's `synchronous`
   contract, webhook/checks/base.py: its run() never awaits), in milliseconds, and those whose few
   reads every job shares, reused by the view for a ttl (`Check.shares_reads`: Controllers, a few
   Leases and Deployments per ttl window for every job at once; Kueue Admission Checks, the one
   kueue.admissionLease per kueue.leaseTtlSeconds). Their results depend on time (a
   Lease renewed or not), so they are judged again on every scan, never kept. A check that sends
   requests per job is stood for by what it found the last time on the same inputs
   (`Remembered`), or by a skip that says it has not run yet (`Pending`); a judgement with a
   `Pending` in it is **partial**.
2. **the request pass**: every job whose cheap judgement is partial is judged again with every
   check, job by job, paced by `audit.qps`: a complete judgement.

What a partial judgement may publish (webhook/audit/sink.py `Judgement.complete`):
- the reports and the metrics show it (a job whose cheap checks fail shows `fail` at once, since
  no other check can make enforce admit it); the checks not judged yet say so, as `skip`;
- never an Event: `PreflightFailed`/`PreflightPassed` are written from complete judgements only,
  so an Event never flips on half the facts (a partial judgement's text would lack the Dry Run
  failure, and the complete one would then be a second, different `PreflightFailed`);
- a job that already has a complete judgement published keeps it: a partial one does not replace it.

`Kept` is the verdict cache: a request-sending check's results, with the job's resourceVersion
and the resourceVersion of every object that check read (its reads are told apart by `READER`,
webhook/audit/deps.py). They stand for the check while all of these are unchanged and they are
younger than `audit.requestChecksReuseSeconds`; what no watch reports (a registry, another
admission webhook) is bounded by that age alone, as the webhook's own `dryRunCacheSeconds` is.
Only results the check returned are kept: not a timeout, a transient error (the engine turns
those into results outside `run`), nor "not run" after a blocking check failed.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.audit.deps import READER, Dep
from webhook.checks.base import Check, CheckContext
from webhook.config import Settings
from webhook.kube import Permission
from webhook.results import CheckResult, Status
from webhook.workloads.admitted import Admission

#: what a check the cheap pass did not run says in a partial judgement (reports, `report`)
PENDING_TEXT = "not judged yet: this check sends requests (paced by audit.qps) and runs after every job's cheap checks"


def request_free(check: Check, settings: Settings) -> bool:
    """The check sends no request for one job: it reads only the Workload and the watch caches (its
    `synchronous` contract, webhook/checks/base.py: run() never awaits), or only a fixed few objects every
    job shares, each answer reused for a ttl (`Check.shares_reads`). Controllers is one: a Lease read live
    has no watch to version it (and a renewed Lease changes every few seconds), so a kept result would
    never hold and every periodic scan would judge every job a second time in the request pass."""
    return check.synchronous or check.shares_reads(settings)


#: the attributes Check declares (name, kinds, needs, permissions, ...): what a stand-in copies
_DECLARED = tuple(k for k, v in vars(Check).items() if not k.startswith("_") and not callable(v))
_ATTRIBUTES: weakref.WeakKeyDictionary[Check, dict[str, Any]] = weakref.WeakKeyDictionary()


def _attributes(check: Check) -> dict[str, Any]:
    """The check's declared attributes, read once per check (a scan makes a stand-in per job and check)."""
    got = _ATTRIBUTES.get(check)
    if got is None:
        got = _ATTRIBUTES[check] = {k: getattr(check, k) for k in _DECLARED}
    return got


class _StandIn(Check):
    """Stands for `inner` in one evaluation with the same name, kinds, needs and permissions, so the
    engine's applicability and preconditions (webhook/engine.py) are exactly those of `inner`."""

    def __init__(self, inner: Check) -> None:
        self.__dict__.update(_attributes(inner))
        self.inner = inner

    def named_permissions(self, settings: Settings) -> tuple[Permission, ...]:
        return self.inner.named_permissions(settings)


class Tracked(_StandIn):
    """Runs `inner`; its reads are attributed to it (`READER`) and what its run returned lands in `ran`."""

    def __init__(self, inner: Check, ran: dict[str, list[CheckResult]]) -> None:
        super().__init__(inner)
        self.ran = ran

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        token = READER.set(self.name)
        try:
            out = await self.inner.run(ctx)
        finally:
            READER.reset(token)
        got = copy.deepcopy(out if isinstance(out, list) else [out])
        if self.admits and ctx.admission is not None:
            got = _AdmittedResults(got, ctx.admission)
        self.ran[self.name] = got
        return out


class Remembered(_StandIn):
    """Answers, without a request, what `inner` found the last time on the same inputs (and gives back what
    it learnt of the pods as admission creates them, `admission`: the engine judges them as it did then)."""

    def __init__(self, inner: Check, results: list[CheckResult], admission: Any = None) -> None:
        super().__init__(inner)
        self.__dict__["synchronous"] = True
        self.results = results
        self.admission = admission

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        if self.admission is not None:  # the engine judges the pods as admitted, as it did then
            ctx.admission = self.admission
        return copy.deepcopy(list(self.results))


class Pending(_StandIn):
    """Not run in the cheap pass: a skip that says so. When the engine asks it (the check applies, its
    preconditions hold, no blocking check failed), its name lands in `pending`: the judgement is partial."""

    def __init__(self, inner: Check, pending: set[str]) -> None:
        super().__init__(inner)
        self.__dict__["synchronous"] = True
        self.pending = pending

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        self.pending.add(self.name)
        return CheckResult(self.name, Status.SKIP, PENDING_TEXT, duration_ms=0.0)


class _SharedResults(list[CheckResult]):
    """A kept results list that every job with equal results holds (a list subclass: weakly referable)."""


class _SharedReads(dict[Dep, str | None]):
    """A kept reads mapping that every job with equal reads holds."""


#: equal kept results and reads are one object for every job that has them (most jobs' Image Pull, Kueue
#: and Node Selector skips are word for word the same; the jobs of one namespace read the same objects):
#: a kept result costs a pointer per job instead of a copy. Nothing changes a kept list or mapping
#: (`Remembered` answers a deep copy); an entry goes with the last Kept that holds it.
_RESULTS: weakref.WeakValueDictionary[tuple[Any, ...], _SharedResults] = weakref.WeakValueDictionary()
_READS: weakref.WeakValueDictionary[tuple[Any, ...], _SharedReads] = weakref.WeakValueDictionary()


def _result_key(r: CheckResult) -> tuple[Any, ...]:
    return (r.name, r.status, r.message, tuple(r.details), tuple(r.hints), r.duration_ms, tuple(r.caveats), r.timed_out)


class _AdmittedResults(list[CheckResult]):
    """The Dry Run's results on one job with what it learnt of its pods as admission creates them
    (CheckContext.admission, webhook.workloads.admitted.Admission), as `Tracked` leaves them in `ran` for
    one judgement. What is kept is the results, shared, and the admission beside them (`Kept.admission`):
    `Remembered` gives that back to the engine, so a scan that reuses the Dry Run judges the pods as admitted
    as the run it stands for did (webhook/engine.py judge_admitted)."""

    def __init__(self, results: list[CheckResult], admission: Any) -> None:
        super().__init__(results)
        self.admission = admission


#: the admissions that saw no pod changed (`Admission.pods` empty), by what they saw: one object for every job
_ADMISSIONS: weakref.WeakValueDictionary[tuple[tuple[str, ...], tuple[str, ...]], Admission] = (
    weakref.WeakValueDictionary()
)


def _shared_admission(admission: Any) -> Any:
    """`admission`, or the equal one another job's kept Dry Run holds when it holds no pod (the pods as admitted
    name the job: those stay its own). Nothing changes an Admission (engine.judge_admitted reads it)."""
    if not isinstance(admission, Admission) or admission.pods:
        return admission
    key = (tuple(admission.seen), tuple(admission.unseen))
    got = _ADMISSIONS.get(key)
    if got is None:
        got = _ADMISSIONS[key] = admission
    return got


def shared_results(results: list[CheckResult]) -> list[CheckResult]:
    """`results`, or the equal list another kept result already holds (webhook/results.py CheckResult's fields).
    The Dry Run's with the job's admission (`_AdmittedResults`): the results are shared all the same, and the
    admission is not part of what is compared (`admission_of` keeps it beside them)."""
    key = tuple(_result_key(r) for r in results)
    got = _RESULTS.get(key)
    if got is None:
        got = _RESULTS[key] = _SharedResults(results)
    return got


def shared_reads(reads: Mapping[Dep, str | None]) -> Mapping[Dep, str | None]:
    """`reads`, or the equal mapping (same reads, same versions, same order) another kept result holds."""
    key = tuple(reads.items())
    got = _READS.get(key)
    if got is None:
        got = _READS[key] = _SharedReads(reads)
    return got


def admission_of(results: list[CheckResult]) -> Any:
    """What a check's run learnt of the job's pods as admission creates them (`Tracked`: the Dry Run's), shared
    when it names no pod (`_shared_admission`), or None."""
    return _shared_admission(results.admission) if isinstance(results, _AdmittedResults) else None


@dataclass(frozen=True, slots=True)
class Kept:
    """A request-sending check's results on one job, and the inputs they were found on."""

    #: the resourceVersion of the job (a sweep's child: of its sweep) judged
    job_version: str
    #: each object the check read -> its resourceVersion when it read it ("" absent; a list: a digest of its
    #: members; None: not known, the results never hold)
    reads: Mapping[Dep, str | None]
    #: when (the controller's clock)
    at: float
    results: list[CheckResult]
    #: what the run learnt of the pods as admission creates them (`admission_of`), given back by `Remembered`
    admission: Any = None

    def holds(self, job_version: str, version_of: Callable[[Dep], str | None], now: float, max_age: float) -> bool:
        """Whether these results still stand: same job, every read at the same version, young enough.
        A read whose version cannot be told (`version_of` gives None: a kind no watch follows) never holds."""
        if job_version != self.job_version or now - self.at >= max_age:
            return False
        return all(was is not None and version_of(dep) == was for dep, was in self.reads.items())


#: the tuples of check names the jobs' `JobKept` hold: one tuple for every job with the same checks kept
_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}


def _one_or_all(values: tuple[Any, ...]) -> Any:
    """`values` as one value when every one is equal (a judgement's checks share the job's version and
    the time), else the tuple."""
    first = values[0]
    return first if all(v == first for v in values) else values


class JobKept(Mapping[str, Kept]):
    """One job's kept results, check name -> `Kept`, in one record (issue 38: 10,000 waiting jobs each keep
    ~7 checks' results; a dict of `Kept` objects cost ~1.4 KiB a job, this ~0.3). The names tuple is shared by
    every job that keeps the same checks; the job's version and the time are held once when the checks share
    them; reads and results are the shared objects (`shared_reads`, `shared_results`). A `Kept` is made when
    asked for. Never changed: `merged` gives the next one."""

    __slots__ = ("_admission", "_admission_at", "_ats", "_names", "_reads", "_results", "_versions")

    def __init__(self, kept: Mapping[str, Kept]) -> None:
        items = tuple(kept.values())
        names = tuple(kept)
        self._names = _NAMES.setdefault(names, names) if len(_NAMES) < 4096 or names in _NAMES else names
        self._versions: str | tuple[str, ...] = _one_or_all(tuple(k.job_version for k in items)) if items else ""
        self._ats: float | tuple[float, ...] = _one_or_all(tuple(k.at for k in items)) if items else 0.0
        self._reads = tuple(k.reads for k in items)
        self._results = tuple(k.results for k in items)
        # the check that learnt the pods as admitted (`Check.admits`: the Dry Run alone today) by its index and its
        # admission; -1: none. Several (-2): `_admission` is the tuple of every check's.
        admitted = [i for i, k in enumerate(items) if k.admission is not None]
        self._admission_at = -1
        self._admission: Any = None
        if len(admitted) == 1:
            self._admission_at = admitted[0]
            self._admission = items[admitted[0]].admission
        elif admitted:
            self._admission_at = -2
            self._admission = tuple(k.admission for k in items)

    def _at(self, i: int) -> Kept:
        v, at, adm_at = self._versions, self._ats, self._admission_at
        return Kept(
            v if isinstance(v, str) else v[i],
            self._reads[i],
            at if isinstance(at, float) else at[i],
            self._results[i],
            self._admission if adm_at == i else self._admission[i] if adm_at == -2 else None,
        )

    def __getitem__(self, name: str) -> Kept:
        try:
            i = self._names.index(name)
        except ValueError:
            raise KeyError(name) from None
        return self._at(i)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def merged(self, fresh: Mapping[str, Kept], job_version: str) -> JobKept:
        """These results with `fresh` in place of the checks it ran again, without those found on another
        version of the job (resourceVersions only move on: they never hold again)."""
        names = self._names
        kept = {n: k for i, n in enumerate(names) if n not in fresh and (k := self._at(i)).job_version == job_version}
        return JobKept({**kept, **fresh})


#: a job nothing is kept for
NOTHING_KEPT = JobKept({})


def checks_for(
    checks: list[Check],
    kept: Mapping[str, Kept],
    *,
    cheap: bool,
    pending: set[str],
    ran: dict[str, list[CheckResult]],
    job_version: str,
    version_of: Callable[[Dep], str | None],
    now: float,
    max_age: float,
    settings: Settings,
) -> list[Check]:
    """The checks of one judgement, in the registry's order: the request-free ones as they are; each
    other one `Remembered` when its kept results hold, else `Pending` in the cheap pass and `Tracked`
    (run, its reads and results kept) in a complete judgement."""
    out: list[Check] = []
    for c in checks:
        free = request_free(c, settings)
        k = None if free else kept.get(c.name)
        if free:
            out.append(c)
        elif k is not None and k.holds(job_version, version_of, now, max_age):
            out.append(Remembered(c, k.results, k.admission))
        else:
            out.append(Pending(c, pending) if cheap else Tracked(c, ran))
    return out
