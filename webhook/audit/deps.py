"""What a job reads, and which jobs read an object: the reverse index behind "re-check on change".

The references are not guessed from the job's spec: `RecordingView` (webhook/cluster/recording.py, shared
with the webhook's check memo) wraps the ClusterView for one evaluation and records every read the checks
actually made (a Secret's keys, a cached
LocalQueue, a namespace's list of ResourceQuotas, a live GET of a ConfigMap). That record is
exact and kind-neutral: a new check, or a new kind, is covered without a line here.

A read is a `Dep`: (resource, namespace, name), where name "*" stands for a list of the
resource in that namespace ("" namespace: cluster-wide). A change of an object touches its own
Dep and the lists that hold it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from webhook.cluster.recording import _NOT_READS, _READS, ANY, READER, Dep, RecordingView

__all__ = ["ANY", "READER", "_NOT_READS", "_READS", "Dep", "RecordingView", "ReverseIndex", "touched"]


def touched(resource: str, namespace: str, name: str) -> tuple[Dep, ...]:
    """The Deps a change of one object touches: itself, its namespace's list, the cluster-wide list."""
    out = [Dep(resource, namespace, name), Dep(resource, namespace, ANY)]
    if namespace:
        out.append(Dep(resource, "", ANY))
    return tuple(out)


class ReverseIndex:
    """Dep -> the jobs that read it, and job -> its Deps (to replace them on the next judgement)."""

    def __init__(self) -> None:
        self._jobs: dict[Dep, set[Hashable]] = {}
        self._deps: dict[Hashable, frozenset[Dep]] = {}
        #: each Dep of `_jobs` -> itself: the object `canonical` answers
        self._canon: dict[Dep, Dep] = {}

    def __len__(self) -> int:
        return len(self._deps)

    def canonical(self, dep: Dep) -> Dep:
        """The Dep object the index already holds equal to `dep` (every job that reads it then shares one
        tuple, not one per job and read), else `dep`."""
        return self._canon.get(dep, dep)

    def replace(self, job: Hashable, deps: Iterable[Dep]) -> None:
        """The job's reads are now exactly `deps` (its last evaluation's)."""
        new = frozenset(deps)
        old = self._deps.get(job, frozenset())
        for d in old - new:
            self._drop(d, job)
        for d in new - old:
            self._link(d, job)
        self._deps[job] = new

    def add(self, job: Hashable, dep: Dep) -> None:
        """The job reads `dep` too (a read of its evaluation in flight; `replace` settles it at the end)."""
        deps = self._deps.get(job, frozenset())
        if dep not in deps:
            self._deps[job] = deps | {dep}
            self._link(dep, job)

    def _link(self, d: Dep, job: Hashable) -> None:
        jobs = self._jobs.get(d)
        if jobs is None:
            jobs = self._jobs[d] = set()
            self._canon[d] = d
        jobs.add(job)

    def drop(self, job: Hashable) -> None:
        for d in self._deps.pop(job, frozenset()):
            self._drop(d, job)

    def _drop(self, d: Dep, job: Hashable) -> None:
        jobs = self._jobs.get(d)
        if jobs is not None:
            jobs.discard(job)
            if not jobs:
                del self._jobs[d]
                self._canon.pop(d, None)

    def deps_of(self, job: Hashable) -> frozenset[Dep]:
        return self._deps.get(job, frozenset())

    def jobs_for(self, resource: str, namespace: str, name: str) -> set[Hashable]:
        """The jobs to re-check when the object (resource, namespace, name) changed."""
        out: set[Hashable] = set()
        for d in touched(resource, namespace, name):
            out |= self._jobs.get(d, set())
        return out
