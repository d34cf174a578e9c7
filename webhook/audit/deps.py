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


class _Group:
    """The jobs whose reads are exactly `deps` (one frozenset every such job holds)."""

    __slots__ = ("deps", "jobs")

    def __init__(self, deps: frozenset[Dep]) -> None:
        self.deps = deps
        self.jobs: set[Hashable] = set()


class ReverseIndex:
    """Dep -> the jobs that read it, and job -> its Deps (to replace them on the next judgement).

    Jobs that read the same objects (the jobs of one namespace made from one template) are one group: one
    frozenset of Deps for all of them, and each Dep names the groups that read it, not every job. At 10,000
    jobs a frozenset a job and a set entry a job and read held ~1.7 KiB a job (bench/audit_scale.py
    --in-process --census, issue 38); a group costs a set entry a job."""

    def __init__(self) -> None:
        self._deps: dict[Hashable, frozenset[Dep]] = {}
        #: each distinct set of reads -> its group
        self._groups: dict[frozenset[Dep], _Group] = {}
        #: each Dep -> the groups whose reads hold it
        self._holders: dict[Dep, set[_Group]] = {}
        #: each Dep of `_holders` -> itself: the object `canonical` answers
        self._canon: dict[Dep, Dep] = {}

    def __len__(self) -> int:
        return len(self._deps)

    def canonical(self, dep: Dep) -> Dep:
        """The Dep object the index already holds equal to `dep` (every job that reads it then shares one
        tuple, not one per job and read), else `dep`."""
        return self._canon.get(dep, dep)

    def replace(self, job: Hashable, deps: Iterable[Dep]) -> None:
        """The job's reads are now exactly `deps` (its last evaluation's)."""
        self._set(job, frozenset(deps))

    def add(self, job: Hashable, dep: Dep) -> None:
        """The job reads `dep` too (a read of its evaluation in flight; `replace` settles it at the end)."""
        deps = self._deps.get(job, frozenset())
        if dep not in deps:
            self._set(job, deps | {dep})

    def _set(self, job: Hashable, deps: frozenset[Dep]) -> None:
        old = self._deps.get(job)
        if old is not None:
            if old == deps:
                return
            self._leave(job, old)
        group = self._groups.get(deps)
        if group is None:
            group = self._groups[deps] = _Group(deps)
            for d in deps:
                holders = self._holders.get(d)
                if holders is None:
                    holders = self._holders[d] = set()
                    self._canon[d] = d
                holders.add(group)
        group.jobs.add(job)
        self._deps[job] = group.deps

    def _leave(self, job: Hashable, deps: frozenset[Dep]) -> None:
        group = self._groups.get(deps)
        if group is None:
            return
        group.jobs.discard(job)
        if group.jobs:
            return
        del self._groups[deps]
        for d in deps:
            holders = self._holders.get(d)
            if holders is not None:
                holders.discard(group)
                if not holders:
                    del self._holders[d]
                    self._canon.pop(d, None)

    def drop(self, job: Hashable) -> None:
        old = self._deps.pop(job, None)
        if old is not None:
            self._leave(job, old)

    def deps_of(self, job: Hashable) -> frozenset[Dep]:
        return self._deps.get(job, frozenset())

    def jobs_for(self, resource: str, namespace: str, name: str) -> set[Hashable]:
        """The jobs to re-check when the object (resource, namespace, name) changed."""
        out: set[Hashable] = set()
        for d in touched(resource, namespace, name):
            for group in self._holders.get(d, ()):
                out |= group.jobs
        return out
