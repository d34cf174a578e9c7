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

from collections.abc import Hashable, Iterable
from typing import Any, NamedTuple

from webhook.cluster.view import CheckNeeds, ClusterView
from webhook.deadline import Deadline
from webhook.registry.keyring import PullSecret

ANY = "*"


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


class RecordingView:
    """A ClusterView that answers from `inner` and writes down every read in `reads`.

    A dry run reads what the apiserver's admission reads in that namespace: its LimitRanges and
    ResourceQuotas and the namespace itself (Pod Security labels); those are recorded for it."""

    def __init__(self, inner: ClusterView) -> None:
        self.inner = inner
        self.reads: set[Dep] = set()

    def _add(self, resource: str, namespace: str | None, name: str) -> None:
        self.reads.add(Dep(resource, namespace or "", name))

    # --- cached
    def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        self._add(resource, namespace, ANY)
        return self.inner.list_cached(resource, namespace)

    def get_cached(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        self._add(resource, namespace, name)
        return self.inner.get_cached(resource, namespace, name)

    def cache_age(self, resource: str) -> float | None:
        return self.inner.cache_age(resource)

    # --- live
    async def secret_keys(self, namespace: str, name: str, deadline: Deadline) -> set[str] | None:
        self._add("secrets", namespace, name)
        return await self.inner.secret_keys(namespace, name, deadline)

    async def pull_secret(self, namespace: str, name: str, deadline: Deadline) -> PullSecret | None:
        self._add("secrets", namespace, name)
        return await self.inner.pull_secret(namespace, name, deadline)

    async def dry_run_create(
        self, api_version: str, kind: str, namespace: str, body: dict[str, Any], deadline: Deadline
    ) -> None:
        self._add("namespaces", None, namespace)
        self._add("limitranges", namespace, ANY)
        self._add("resourcequotas", namespace, ANY)
        await self.inner.dry_run_create(api_version, kind, namespace, body, deadline)

    async def get_object(
        self,
        api_version: str,
        resource: str,
        namespace: str | None,
        name: str,
        deadline: Deadline,
        *,
        ttl: float = 0.0,
    ) -> dict[str, Any] | None:
        self._add(resource, namespace, name)
        return await self.inner.get_object(api_version, resource, namespace, name, deadline, ttl=ttl)

    async def list_objects(
        self,
        api_version: str,
        resource: str,
        namespace: str,
        label_selector: str,
        deadline: Deadline,
        ttl: float = 0.0,
    ) -> list[dict[str, Any]]:
        self._add(resource, namespace, ANY)
        return await self.inner.list_objects(api_version, resource, namespace, label_selector, deadline, ttl)

    # --- discovery, capabilities, life cycle: not reads of objects
    def served(self, group_version: str) -> bool:
        return self.inner.served(group_version)

    def server_version(self) -> tuple[int, int] | None:
        return self.inner.server_version()

    def check_capability(self, check: CheckNeeds) -> tuple[bool, str]:
        return self.inner.check_capability(check)

    @property
    def ready(self) -> bool:
        return self.inner.ready

    @property
    def ready_reason(self) -> str:
        return self.inner.ready_reason

    def capabilities(self) -> list[dict[str, str]]:
        return self.inner.capabilities()

    async def close(self) -> None:  # the wrapped view belongs to the controller
        return None


class ReverseIndex:
    """Dep -> the jobs that read it, and job -> its Deps (to replace them on the next judgement)."""

    def __init__(self) -> None:
        self._jobs: dict[Dep, set[Hashable]] = {}
        self._deps: dict[Hashable, frozenset[Dep]] = {}

    def __len__(self) -> int:
        return len(self._deps)

    def replace(self, job: Hashable, deps: Iterable[Dep]) -> None:
        """The job's reads are now exactly `deps` (its last evaluation's)."""
        new = frozenset(deps)
        old = self._deps.get(job, frozenset())
        for d in old - new:
            self._drop(d, job)
        for d in new - old:
            self._jobs.setdefault(d, set()).add(job)
        self._deps[job] = new

    def drop(self, job: Hashable) -> None:
        for d in self._deps.pop(job, frozenset()):
            self._drop(d, job)

    def _drop(self, d: Dep, job: Hashable) -> None:
        jobs = self._jobs.get(d)
        if jobs is not None:
            jobs.discard(job)
            if not jobs:
                del self._jobs[d]

    def deps_of(self, job: Hashable) -> frozenset[Dep]:
        return self._deps.get(job, frozenset())

    def jobs_for(self, resource: str, namespace: str, name: str) -> set[Hashable]:
        """The jobs to re-check when the object (resource, namespace, name) changed."""
        out: set[Hashable] = set()
        for d in touched(resource, namespace, name):
            out |= self._jobs.get(d, set())
        return out
