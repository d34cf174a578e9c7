"""What a job reads, and which jobs read an object: the reverse index behind "re-check on change".

The references are not guessed from the job's spec: `RecordingView` wraps the ClusterView for one
evaluation and records every read the checks actually made (a Secret's keys, a cached
LocalQueue, a namespace's list of ResourceQuotas, a live GET of a ConfigMap). That record is
exact and kind-neutral: a new check, or a new kind, is covered without a line here.

A read is a `Dep`: (resource, namespace, name), where name "*" stands for a list of the
resource in that namespace ("" namespace: cluster-wide). A change of an object touches its own
Dep and the lists that hold it.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Hashable, Iterable
from typing import Any, NamedTuple

from webhook.cluster.view import ClusterView

ANY = "*"
#: the check whose run is making a read now (set by the audit controller around a check's run; None: not set),
#: so that `RecordingView.by_reader` can tell which check read what (its verdict is kept on those reads)
READER: contextvars.ContextVar[str | None] = contextvars.ContextVar("preflight_audit_reader", default=None)


class Dep(NamedTuple):
    resource: str
    namespace: str
    name: str


def touched(resource: str, namespace: str, name: str) -> tuple[Dep, ...]:
    """The Deps a change of one object touches: itself, its namespace's list, the cluster-wide list."""
    out = [Dep(resource, namespace, name), Dep(resource, namespace, ANY)]
    if namespace:
        out.append(Dep(resource, "", ANY))
    return tuple(out)


#: What each read of the ClusterView names: method -> (its arguments -> the (resource, namespace, name)
#: it read). A dry run reads what the apiserver's admission reads in that namespace: its LimitRanges
#: and ResourceQuotas and the namespace itself (Pod Security labels); those are recorded for it.
_READS: dict[str, Callable[..., Iterable[tuple[str, str | None, str]]]] = {
    "list_cached": lambda resource, namespace=None: [(resource, namespace, ANY)],
    "get_cached": lambda resource, namespace, name: [(resource, namespace, name)],
    # a check that asks a cache's version reads its whole list (it answers from a kept listing)
    "cache_version": lambda resource: [(resource, None, ANY)],
    "secret_keys": lambda namespace, name, deadline: [("secrets", namespace, name)],
    "pull_secret": lambda namespace, name, deadline: [("secrets", namespace, name)],
    "dry_run_create": lambda api_version, kind, namespace, body, deadline: [
        ("namespaces", None, namespace),
        ("limitranges", namespace, ANY),
        ("resourcequotas", namespace, ANY),
    ],
    "get_object": lambda api_version, resource, namespace, name, deadline, *, ttl=0.0, subresource="", query=None: [
        (resource, namespace, name)
    ],
    "list_objects": lambda api_version, resource, namespace, label_selector, deadline, ttl=0.0: [
        (resource, namespace, ANY)
    ],
}
#: The ClusterView's members that read no object (discovery, capabilities, life cycle): passed through.
_NOT_READS = frozenset(
    {"cache_age", "served", "server_version", "check_capability", "ready", "ready_reason", "capabilities", "max_pages"}
)


class RecordingView:
    """A ClusterView that answers from `inner` and writes down every read in `reads` (what each
    method reads: `_READS`); the members that read no object pass through (`_NOT_READS`). One
    delegate for every method, so the ClusterView's signatures are stated once (webhook/cluster/view.py).
    A member in neither table is an AttributeError: a new read cannot go unrecorded.

    `on_read` is told of each new Dep at the moment of the read, before the evaluation ends: the
    controller indexes it at once, so a change of that object while the evaluation still runs (a
    Secret deleted after the Secrets check read it) re-checks the job instead of being lost."""

    def __init__(
        self,
        inner: ClusterView,
        on_read: Callable[[Dep], None] | None = None,
        stamp: Callable[[Dep], str | None] | None = None,
        canonical: Callable[[Dep], Dep] | None = None,
    ) -> None:
        self.inner = inner
        #: the one Dep object every job's record shares for a read (ReverseIndex.canonical), or None
        self.canonical = canonical
        self.reads: set[Dep] = set()
        #: the reads by who made them (`READER`: a check's name, or None), each with `stamp(dep)` at its
        #: first read by that reader (the object's resourceVersion then: what the reader saw at most)
        self.by_reader: dict[str | None, dict[Dep, str | None]] = {}
        self.on_read = on_read
        self.stamp = stamp

    def __getattr__(self, attr: str) -> Any:
        if attr in _NOT_READS:
            return getattr(self.inner, attr)
        names = _READS.get(attr)
        if names is None:
            raise AttributeError(
                f"RecordingView does not know ClusterView.{attr}: add it to _READS (what it reads) "
                "or _NOT_READS (it reads no object) in webhook/audit/deps.py"
            )
        target = getattr(self.inner, attr)

        @functools.wraps(target)
        def recorded(*args: Any, **kw: Any) -> Any:
            reader = self.by_reader.setdefault(READER.get(), {})
            for resource, namespace, name in names(*args, **kw):
                dep = Dep(resource, namespace or "", name)
                if self.canonical is not None:
                    dep = self.canonical(dep)
                if dep not in reader:
                    reader[dep] = None if self.stamp is None else self.stamp(dep)
                if dep not in self.reads:
                    self.reads.add(dep)
                    if self.on_read is not None:
                        self.on_read(dep)
            return target(*args, **kw)

        return recorded

    async def close(self) -> None:  # the wrapped view belongs to the controller
        return None


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
