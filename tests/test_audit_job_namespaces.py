"""Where the audit controller watches Secrets: namespace by namespace when the chart granted them only
in the job namespaces (rbac.jobNamespaces, rendered as `jobNamespaces`), cluster-wide when it granted
them everywhere (`jobNamespaces: null`, rbac.clusterWide). With per-namespace grants a cluster-wide
watch is refused (403): the controller logged warnings, waited 60 s more at start and noticed a
changed Secret only at the next full scan. e2e/test_audit_job_namespaces_live.py runs it on the real
apiserver with the chart's per-namespace RBAC."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from webhook.audit import rbac
from webhook.audit.client import AuditClient
from webhook.audit.controller import (
    JOB_NAMESPACE_WATCHES,
    MAX_NAMESPACED_WATCHES,
    OWN_TRIGGER_SPECS,
    TRIGGER_SPECS,
    AuditController,
    JoinedCache,
    NamespacedReflector,
    watch_connections,
    watch_namespaces,
)
from webhook.audit.deps import ANY, Dep
from webhook.audit.jobs import job_kinds
from webhook.cluster.cache import CACHE_SPECS, CacheSpec, Reflector
from webhook.config import Settings


class _Client:
    """The apiserver as the controller's Reflectors see it: every list answers `objects` of its path,
    every watch sends `events` of its path, then stays open. Records each list and watch path."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self.objects = objects or {}
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.lists: list[str] = []
        self.watches: list[str] = []

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        self.lists.append(path)
        return {"items": self.objects.get(path, []), "metadata": {"resourceVersion": "1"}}

    async def stream(self, path: str, **kw: Any) -> AsyncIterator[dict[str, Any]]:
        self.watches.append(path)
        for event in self.events.pop(path, []):
            yield event
        await asyncio.Event().wait()


class _View:
    """What AuditController reads of the cluster view here: its client, what is served, its namespaces cache."""

    def __init__(self, client: _Client, namespaces: list[str] | None = None) -> None:
        self.client = client
        self.reflectors: dict[str, Reflector] = {}
        if namespaces is not None:
            r = Reflector(CacheSpec("namespaces", "", "v1", False), client)
            r.cache.replace([{"metadata": {"name": n}} for n in namespaces], "1")
            self.reflectors["namespaces"] = r

    def served(self, group_version: str) -> bool:
        return group_version == "v1"


def _secret(ns: str, name: str, rv: str = "2") -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name, "resourceVersion": rv}}


async def _started(
    job_namespaces: list[str] | None, client: _Client, seen: list[tuple[str, str, str]] | None = None, **view: Any
) -> AuditController:
    """The controller's watches, synced; `seen` gets each change its watches of what jobs read report."""
    settings = Settings.model_validate({"jobNamespaces": job_namespaces})
    c = AuditController(settings, _View(client, **view), checks=[], sinks=[])  # type: ignore[arg-type]
    if seen is not None:
        c._on_dependency = lambda res, t, o: seen.append((res, t, o["metadata"]["name"]))  # type: ignore[method-assign]
    c.start_watches()
    assert await c.wait_synced(5)
    return c


def test_only_the_resources_the_chart_grants_per_namespace_are_watched_per_namespace() -> None:
    per_namespace = {p.resource for p in rbac.JOB_NAMESPACE_PERMISSIONS if p.verb in ("list", "watch")}
    assert per_namespace == JOB_NAMESPACE_WATCHES == {"secrets"}
    assert JOB_NAMESPACE_WATCHES <= {s.resource for s in TRIGGER_SPECS}


def test_watch_namespaces(caplog: pytest.LogCaptureFixture) -> None:
    assert watch_namespaces("secrets", None, None) is None  # granted cluster-wide
    assert watch_namespaces("configmaps", ["team-a"], None) is None  # granted cluster-wide by the audit ClusterRole
    assert watch_namespaces("secrets", ["team-b", "team-a", "team-b"], None) == ["team-a", "team-b"]
    assert watch_namespaces("secrets", [], None) == []
    with caplog.at_level(logging.WARNING):
        assert watch_namespaces("secrets", ["team-a", "gone"], {"team-a", "kube-system"}) == ["team-a"]
    assert caplog.messages == ["audit: not watching secrets in 1 namespace(s) that no longer exist: gone"]
    caplog.clear()
    many = [f"ns-{i}" for i in range(MAX_NAMESPACED_WATCHES + 1)]
    assert watch_namespaces("secrets", many[:-1], None) == sorted(many[:-1])
    with caplog.at_level(logging.WARNING):
        assert watch_namespaces("secrets", many, None) == []
    assert caplog.messages == [
        "audit: jobNamespaces lists 201 namespaces, more than 200 watches (a connection each): secrets are not "
        "watched, a changed one re-checks its jobs at the next scan (audit.periodSeconds); rbac.clusterWide=true "
        "grants one cluster-wide watch"
    ]


async def test_secrets_are_watched_in_each_job_namespace_and_every_change_reaches_the_controller() -> None:
    client = _Client({"/api/v1/namespaces/team-a/secrets": [_secret("team-a", "hf-token")]})
    client.events["/api/v1/namespaces/team-b/secrets"] = [{"type": "ADDED", "object": _secret("team-b", "pull", "3")}]
    seen: list[tuple[str, str, str]] = []
    c = await _started(["team-b", "team-a"], client, seen)
    try:
        for _ in range(50):  # the watch's first event: a few loop turns, no clock
            if seen:
                break
            await asyncio.sleep(0)
        secret_paths = sorted(p for p in client.lists if p.endswith("/secrets"))
        assert secret_paths == ["/api/v1/namespaces/team-a/secrets", "/api/v1/namespaces/team-b/secrets"]
        assert "/api/v1/configmaps" in client.lists  # the rest stays cluster-wide
        r = c.reflectors["secrets"]
        assert isinstance(r, NamespacedReflector) and isinstance(r.cache, JoinedCache)
        assert seen == [("secrets", "ADDED", "pull")]
        assert r.cache.get("team-a", "hf-token") is not None and r.cache.get("team-b", "pull") is not None
        assert len(r.cache) == 2 and [o["metadata"]["name"] for o in r.cache.objects("team-b")] == ["pull"]
        # what a kept result read is versioned only where it is watched
        assert c.version_of(Dep("secrets", "team-a", "hf-token")) == "2"
        assert c.version_of(Dep("secrets", "team-a", "other")) == ""
        assert c.version_of(Dep("secrets", "team-c", "hf-token")) is None
        assert c.version_of(Dep("secrets", "", ANY)) is None
    finally:
        await c.close()


async def test_secrets_are_watched_cluster_wide_when_granted_cluster_wide() -> None:
    client = _Client()
    c = await _started(None, client)
    try:
        assert "/api/v1/secrets" in client.lists
        assert not any(p.startswith("/api/v1/namespaces/") for p in client.lists)
        assert type(c.reflectors["secrets"]) is Reflector
    finally:
        await c.close()


async def test_no_secret_watch_where_no_job_namespace_exists() -> None:
    client = _Client()
    c = await _started(["gone"], client, namespaces=["team-a"])
    try:
        assert "secrets" not in c.reflectors
        assert not any(p.endswith("/secrets") for p in client.lists)
        assert c.version_of(Dep("secrets", "gone", "x")) is None  # never reused: the period re-reads it
    finally:
        await c.close()


async def test_the_audit_clients_pool_holds_every_watch_besides_the_requests() -> None:
    """Each open watch holds a connection of the client's pool: an audit process held 39 watch streams in
    a pool of 40 (16 requests + 24), so one Secret watch per job namespace left the requests waiting for a
    watch to end. The pool now counts them (e2e/test_audit_job_namespaces_live.py counts the real ones)."""
    base = watch_connections(Settings.model_validate({"jobNamespaces": None}))
    # the JobSets' watch is the JobSet kind's job watch
    # the kinds the view caches come from its caches, not from a watch of the controller's own
    assert base == len(CACHE_SPECS) + len(job_kinds()) + 1 + len(OWN_TRIGGER_SPECS)
    assert {sp.resource for sp in OWN_TRIGGER_SPECS} == {"secrets", "configmaps", "persistentvolumeclaims"}
    assert watch_connections(Settings.model_validate({"jobNamespaces": ["a", "b", "c", "a"]})) == base + 2
    assert watch_connections(Settings.model_validate({"jobNamespaces": []})) == base - 1
    many = [f"ns-{i}" for i in range(MAX_NAMESPACED_WATCHES + 1)]
    assert watch_connections(Settings.model_validate({"jobNamespaces": many})) == base - 1
    cfg = k8s_client.Configuration()
    cfg.host = "https://127.0.0.1:1"
    client = AuditClient(cfg, 16, watches=base + 2)
    try:
        assert cfg.connection_pool_maxsize == 16 + base + 2
    finally:
        await client.close()


async def test_kinds_the_view_caches_are_followed_on_its_cache_not_watched_again() -> None:
    """Issue 38: the controller's own watch of a kind the view already caches held every object a second
    time (~65,000 at Kubernetes' thresholds). It follows the view's cache (`ResourceCache.object_listeners`):
    each change, also across a relist, reaches `_on_dependency` once the view holds it; the rest is watched."""
    client = _Client()
    seen: list[tuple[str, str, str]] = []
    c = await _started(None, client, seen, namespaces=["team-a"])
    view_ns = c.view.reflectors["namespaces"].cache
    try:
        assert "/api/v1/namespaces" not in client.lists and "namespaces" not in c.reflectors
        assert c.followed["namespaces"][0] is view_ns and "namespaces" in c.watched
        assert {"secrets", "configmaps", "serviceaccounts", "resourcequotas"} <= c.watched
        view_ns.apply("ADDED", {"metadata": {"name": "team-b", "resourceVersion": "2"}})
        view_ns.apply("BOOKMARK", {"metadata": {"resourceVersion": "3"}})
        view_ns.replace([{"metadata": {"name": "team-b", "resourceVersion": "4"}}], "4")  # a relist: a gone, b changed
        assert seen == [("namespaces", "ADDED", "team-b"), ("namespaces", "MODIFIED", "team-b"),
                        ("namespaces", "DELETED", "team-a")]  # fmt: skip
        assert c.version_of(Dep("namespaces", "", "team-b")) == "4"  # the view's cache versions what it holds
        # the view's cache dropped (its API no longer served): let go, and watched by the controller itself
        del c.view.reflectors["namespaces"]
        c.start_watches()
        assert await c.wait_synced(5)
        assert "namespaces" not in c.followed and view_ns.object_listeners == []
        assert "/api/v1/namespaces" in client.lists and "namespaces" in c.reflectors
        # the view caches it again: followed again, the controller's own watch stopped
        r = Reflector(CacheSpec("namespaces", "", "v1", False), client)
        r.cache.replace([], "1")
        c.view.reflectors["namespaces"] = r
        c.start_watches()
        assert "namespaces" not in c.reflectors and c.followed["namespaces"][0] is r.cache
    finally:
        await c.close()
    assert r.cache.object_listeners == []
