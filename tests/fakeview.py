"""A small in-memory ClusterView for unit tests of pure check logic.

Only for unit tests: end-to-end tests use the live view against the real apiserver.
Objects are plain dicts; `secrets` maps (namespace, name) to the key set or an ApiError
to raise; `dry_run_errors` maps (kind, name) to the ApiError a dry-run create raises.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from webhook.cluster.view import ApiError, ClusterView
from webhook.deadline import Deadline
from webhook.registry.keyring import PullSecret

CLUSTER_SCOPED = {
    "namespaces",
    "nodes",
    "clustertrainingruntimes",
    "clusterqueues",
    "admissionchecks",
    "cohorts",
    "resourceflavors",
    "nodepools",
    "storageclasses",
    "persistentvolumes",
    "deviceclasses",
    "resourceslices",
}


class FakeView:
    def __init__(
        self,
        objects: dict[str, list[dict[str, Any]]] | None = None,
        *,
        secrets: dict[tuple[str, str], set[str] | ApiError] | None = None,
        served: set[str] | None = None,
        version: tuple[int, int] | None = (1, 34),
        cache_ages: dict[str, float | None] | None = None,
        dry_run_errors: dict[tuple[str, str], ApiError] | None = None,
        live: dict[tuple[str, str | None, str], dict[str, Any] | ApiError] | None = None,
        lists: dict[tuple[str, str, str], list[dict[str, Any]] | ApiError] | None = None,
    ) -> None:
        self.objects = {k: list(v) for k, v in (objects or {}).items()}
        self.secrets = dict(secrets or {})
        #: pull Secrets as the Image Pull check reads them: (namespace, name) -> PullSecret | ApiError
        self.pull_secrets: dict[tuple[str, str], PullSecret | ApiError] = {}
        self._served = set(
            served if served is not None else {"v1", "jobset.x-k8s.io/v1alpha2", "trainer.kubeflow.org/v1alpha1"}
        )
        self.version = version
        self.cache_ages = dict(cache_ages or {})
        self.dry_run_errors = dict(dry_run_errors or {})
        self.live = dict(live or {})
        #: live LISTs: (resource, namespace, labelSelector) -> objects, or an ApiError to raise
        self.lists = dict(lists or {})
        self.object_reads: list[tuple[str, str | None, str]] = []
        #: the query of each live GET, in order (None: none)
        self.object_queries: list[dict[str, str] | None] = []
        #: pages a paged read may take (ClusterView.max_pages): 1 as at apply; an audit test sets more
        self.max_pages = 1
        #: every secret read and dry run, for assertions
        self.secret_reads: list[tuple[str, str]] = []
        self.dry_runs: list[tuple[str, str, str, dict[str, Any]]] = []
        #: what admission makes of an accepted dry run: (kind, body) -> the object as admitted (None: not told)
        self.admit: Callable[[str, dict[str, Any]], dict[str, Any] | None] | None = None
        #: the live reads this view answers as kept (ClusterView.kept): "secret_keys", "get_object", "list_objects"
        self.keeps: set[str] = set()
        #: each kept answer given: (read, its first arguments)
        self.kept_reads: list[tuple[Any, ...]] = []

    def add(self, resource: str, obj: dict[str, Any]) -> None:
        self.objects.setdefault(resource, []).append(obj)

    # --- cached ---
    def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        out = []
        for o in self.objects.get(resource, []):
            ns = (o.get("metadata") or {}).get("namespace")
            if namespace is None or resource in CLUSTER_SCOPED or ns == namespace:
                out.append(copy.deepcopy(o))
        return out

    def get_cached(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        for o in self.list_cached(resource, None if resource in CLUSTER_SCOPED else namespace):
            if (o.get("metadata") or {}).get("name") == name:
                return o
        return None

    def cache_age(self, resource: str) -> float | None:
        return self.cache_ages.get(resource, 1.0)

    def cache_version(self, resource: str) -> tuple[int, int] | None:
        """None: this view copies on every read and keeps no counter (checks compare the lists)."""
        return None

    # --- live ---
    async def secret_keys(self, namespace: str, name: str, deadline: Deadline) -> set[str] | None:
        self.secret_reads.append((namespace, name))
        got = self.secrets.get((namespace, name))
        if isinstance(got, ApiError):
            raise got
        return None if got is None else set(got)

    async def pull_secret(self, namespace: str, name: str, deadline: Deadline) -> PullSecret | None:
        """`pull_secrets` maps (namespace, name) to the PullSecret, or an ApiError to raise."""
        self.secret_reads.append((namespace, name))
        got = self.pull_secrets.get((namespace, name))
        if isinstance(got, ApiError):
            raise got
        return got

    async def dry_run_create(
        self, api_version: str, kind: str, namespace: str, body: dict[str, Any], deadline: Deadline
    ) -> dict[str, Any] | None:
        name = (body.get("metadata") or {}).get("name", "")
        self.dry_runs.append((api_version, kind, namespace, copy.deepcopy(body)))
        err = self.dry_run_errors.get((kind, name)) or self.dry_run_errors.get((kind, "*"))
        if err is not None:
            raise err
        return None if self.admit is None else self.admit(kind, copy.deepcopy(body))

    async def get_object(
        self,
        api_version: str,
        resource: str,
        namespace: str | None,
        name: str,
        deadline: Deadline,
        *,
        ttl: float = 0.0,
        subresource: str = "",
        query: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        if subresource:  # keyed "clusterqueues/pendingworkloads"
            resource = f"{resource}/{subresource}"
        self.object_reads.append((resource, namespace, name))
        self.object_queries.append(None if query is None else dict(query))
        got = self.live.get((resource, namespace, name))
        if isinstance(got, ApiError):
            raise got
        got = copy.deepcopy(got)
        if got is not None and subresource == "pendingworkloads":
            # the whole queue is kept; Kueue v0.17.0 answers items [offset, offset+limit), limit 1000 unless
            # asked (apis/visibility/v1beta2/defaults.go, pkg/visibility/storage/pending_workloads_cq.go)
            offset, limit = int((query or {}).get("offset", 0)), int((query or {}).get("limit", 0)) or 1000
            got["items"] = (got.get("items") or [])[offset : offset + limit]
        return got

    async def list_objects(
        self,
        api_version: str,
        resource: str,
        namespace: str,
        label_selector: str,
        deadline: Deadline,
        ttl: float = 0.0,
    ) -> list[dict[str, Any]]:
        got = self.lists.get((resource, namespace, label_selector), [])
        if isinstance(got, ApiError):
            raise got
        return copy.deepcopy(got)

    def kept(self, read: str, *args: Any, **kw: Any) -> tuple[Any] | None:
        """The reads named in `keeps` are answered from the same stores as kept (an error never is: None);
        the others are not kept, and made (and written down in the lists above)."""
        if read not in self.keeps:
            return None
        self.kept_reads.append((read, *args[:4]))
        if read == "secret_keys":
            got: Any = self.secrets.get((args[0], args[1]))
            return None if isinstance(got, ApiError) else (None if got is None else set(got),)
        if read == "get_object":
            got = self.live.get((args[1], args[2], args[3]))
        else:
            got = self.lists.get((args[1], args[2], args[3]), [])
        return None if isinstance(got, ApiError) else (copy.deepcopy(got),)

    # --- discovery ---
    def served(self, group_version: str) -> bool:
        return group_version in self._served

    def server_version(self) -> tuple[int, int] | None:
        return self.version

    ready = True
    ready_reason = "ready"

    def capabilities(self) -> list[dict[str, str]]:
        return []

    async def close(self) -> None:
        pass

    def check_capability(self, check: Any) -> tuple[bool, str]:
        for api in check.apis:
            if api not in self._served:
                return False, f"{api} is not served"
        return True, ""


def meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name}
    if namespace is not None:
        m["namespace"] = namespace
    m.update(extra)
    return m


# --- building inputs for unit tests -------------------------------------------------------


def pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A PodSpec with the given containers and extra PodSpec fields."""
    out: dict[str, Any] = {"containers": list(containers)}
    out.update(spec)
    return out


def container(
    name: str, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "ghcr.io/acme/x:1"}
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    if res:
        c["resources"] = res
    c.update(extra)
    return c


def workload(
    groups: list[Any] | None = None,
    *,
    kind: str = "TrainJob",
    name: str = "llama-ft",
    namespace: str = "team-a",
    obj: dict[str, Any] | None = None,
    **fields: Any,
) -> Any:
    from dataclasses import replace

    from webhook.kube import MULTIKUEUE
    from webhook.workloads import aiperf, aiperf_sweep, trainjob
    from webhook.workloads.base import KindFacts, Workload

    # the kind facts the kind's adapter sets (webhook/workloads/*/adapter.py FACTS)
    facts = {"TrainJob": trainjob.FACTS, "AIPerfJob": aiperf.FACTS, "AIPerfSweep": aiperf_sweep.FACTS}.get(
        kind, KindFacts()
    )
    if kind == "TrainJob" and fields.get("managed_by") == MULTIKUEUE:
        facts = replace(facts, controllers=())
    fields.setdefault("facts", facts)
    api = "trainer.kubeflow.org/v1alpha1" if kind == "TrainJob" else "aiperf.nvidia.com/v1alpha1"
    obj = obj or {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": {}}
    return Workload(
        kind=kind, api_version=api, name=name, namespace=namespace, obj=obj, pod_groups=list(groups or []), **fields
    )


async def run_check_all(check: Any, wl: Any, view: Any, settings: Any = None, budget: float = 5.0) -> list[Any]:
    """Run one check directly; returns every CheckResult it gives."""
    from webhook.checks.base import CheckContext
    from webhook.config import Settings

    ctx = CheckContext(workload=wl, deadline=Deadline(budget), settings=settings or Settings(), view=view)
    kept = _kept_run(check, ctx)
    out = await check.run(ctx)
    results = out if isinstance(out, list) else [out]
    if kept is not None:
        # the engine's first try, every live read kept, says the same as the run that made them
        assert [dataclasses.replace(r, duration_ms=None) for r in kept] == results
    return results


def _kept_run(check: Any, ctx: Any) -> list[Any] | None:
    """A Check.kept_reads check run as the engine first tries it, with a view that keeps every read it can (an
    error is never kept: then None, as for a check that does not keep its reads)."""
    from webhook.engine import _answered_from_kept

    view = ctx.view
    if not check.kept_reads or type(view) is not FakeView or view.keeps:  # a subclass reads its own way
        return None
    view.keeps = {"secret_keys", "get_object", "list_objects"}
    broke: list[logging.LogRecord] = []
    catch = _Catch(broke)
    engine_log = logging.getLogger("webhook.engine")
    engine_log.addHandler(catch)
    try:
        return _answered_from_kept(check, ctx)
    finally:
        engine_log.removeHandler(catch)
        view.keeps = set()
        view.kept_reads.clear()
        # the contract of Check.kept_reads: every await is a read_live, or comes after heavy_turn or needs_a_task
        assert not broke, [r.getMessage() for r in broke]


class _Catch(logging.Handler):
    """The engine's complaint that a kept-only run awaited outside read_live (engine._answered_from_kept)."""

    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        if "kept-only run" in record.getMessage():
            self.into.append(record)


async def run_check(check: Any, wl: Any, view: Any, settings: Any = None, budget: float = 5.0) -> Any:
    """Run one check directly; returns its single CheckResult."""
    out = await run_check_all(check, wl, view, settings, budget)
    assert len(out) == 1, out
    return out[0]


def _conforms(view: FakeView) -> ClusterView:
    """mypy (files in pyproject.toml) proves here that the fake keeps the ClusterView protocol:
    a method the checks gain on the real view cannot be missing from the fake."""
    return view


class EventClient:
    """An apiserver client that takes the Events the audit controller POSTs in `namespace` (its only
    write) and keeps their bodies; any other request fails the test."""

    def __init__(self, namespace: str = "team-a") -> None:
        self.path = f"/api/v1/namespaces/{namespace}/events"
        self.bodies: list[dict[str, Any]] = []

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        assert method == "POST" and path == self.path
        self.bodies.append(kw["body"])
        return dict(kw["body"])
