"""Pure logic of the watch-backed caches: event application, slimming, 410 relists, backoff."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from webhook.cluster.cache import (
    LAST_APPLIED,
    SPECS_BY_RESOURCE,
    Reflector,
    ResourceCache,
    backoff_delay,
    event_action,
    freeze_heap,
    share_map,
    slim,
)
from webhook.cluster.view import ApiError


def obj(name: str, ns: str = "", rv: str = "1", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv}
    if ns:
        meta["namespace"] = ns
    return {"metadata": meta, **extra}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_replace_then_events_follow_create_update_delete() -> None:
    c = ResourceCache("resourcequotas")
    c.replace([obj("q1", "a"), obj("q2", "b")], "10")
    assert c.synced and c.resource_version == "10"
    assert [o["metadata"]["name"] for o in c.objects("a")] == ["q1"]
    assert len(c.objects()) == 2

    c.apply("ADDED", obj("q3", "a", "11"))
    c.apply("MODIFIED", obj("q1", "a", "12", spec={"hard": {"pods": "5"}}))
    assert sorted(o["metadata"]["name"] for o in c.objects("a")) == ["q1", "q3"]
    assert c.get("a", "q1")["spec"] == {"hard": {"pods": "5"}}
    assert c.resource_version == "12"

    c.apply("DELETED", obj("q2", "b", "13"))
    assert c.get("b", "q2") is None
    assert c.objects("b") == []
    assert c.resource_version == "13"


def test_bookmark_moves_resource_version_only() -> None:
    c = ResourceCache("nodes")
    c.replace([obj("n1")], "5")
    c.apply("BOOKMARK", {"metadata": {"resourceVersion": "99"}})
    assert c.resource_version == "99"
    assert [o["metadata"]["name"] for o in c.objects()] == ["n1"]


def test_relist_replaces_everything_and_counts() -> None:
    c = ResourceCache("namespaces")
    c.replace([obj("a"), obj("b")], "1")
    c.replace([obj("b")], "7")
    assert [o["metadata"]["name"] for o in c.objects()] == ["b"]
    assert c.get(None, "a") is None
    assert c.relists == 1


def test_age_grows_without_news_and_resets_on_event() -> None:
    clock = Clock()
    c = ResourceCache("nodes", clock=clock)
    assert c.age() is None
    c.replace([], "1")
    clock.now += 30
    assert c.age() == 30
    c.apply("BOOKMARK", {"metadata": {"resourceVersion": "2"}})
    assert c.age() == 0


def test_cluster_scoped_and_namespaced_keys_do_not_collide() -> None:
    c = ResourceCache("serviceaccounts")
    c.replace([obj("default", "a"), obj("default", "b")], "1")
    assert c.get("a", "default") is not c.get("b", "default")
    assert c.get(None, "default") is None


def test_slim_drops_managed_fields_last_applied_and_node_images() -> None:
    node = obj("n1")
    node["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    node["metadata"]["annotations"] = {LAST_APPLIED: "{...}", "keep": "me"}
    node["status"] = {"images": [{"names": ["x"]}], "allocatable": {"cpu": "4"}}
    out = slim("nodes", node)
    assert "managedFields" not in out["metadata"]
    assert out["metadata"]["annotations"] == {"keep": "me"}
    assert out["status"] == {"allocatable": {"cpu": "4"}}

    only_last = obj("x", "a")
    only_last["metadata"]["annotations"] = {LAST_APPLIED: "{}"}
    assert "annotations" not in slim("resourcequotas", only_last)["metadata"]


def test_slim_keeps_service_account_pull_secrets() -> None:
    sa = obj("default", "a", secrets=[{"name": "tok"}], imagePullSecrets=[{"name": "reg"}])
    out = slim("serviceaccounts", sa)
    assert out["imagePullSecrets"] == [{"name": "reg"}]
    assert "secrets" not in out


@pytest.mark.parametrize(
    ("event", "action"),
    [
        ({"type": "ADDED", "object": {}}, "apply"),
        ({"type": "BOOKMARK", "object": {}}, "apply"),
        ({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}, "relist"),
        ({"type": "ERROR", "object": {"kind": "Status", "reason": "Gone"}}, "relist"),
        ({"type": "ERROR", "object": {"kind": "Status", "code": 500}}, "error"),
        ({"type": "MODIFIED"}, "error"),
    ],
)
def test_event_action(event: dict[str, Any], action: str) -> None:
    assert event_action(event) == action


def test_backoff_is_exponential_capped_and_jittered() -> None:
    lows = [backoff_delay(n, rand=lambda: 0.0) for n in range(10)]
    highs = [backoff_delay(n, rand=lambda: 1.0) for n in range(10)]
    assert lows[:4] == [0.25, 0.5, 1.0, 2.0]
    assert highs[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(highs) == 30.0 and max(lows) == 15.0  # capped, never ~0
    assert backoff_delay(3, rand=lambda: 0.5) == 3.0


class FakeClient:
    """Scripted list pages and watch streams for the reflector loop."""

    def __init__(self, lists: list[dict[str, Any]], watches: list[list[dict[str, Any]] | ApiError]) -> None:
        self.lists = lists
        self.watches = watches
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.idle = asyncio.Event()

    async def request(
        self, method: str, path: str, *, query: dict[str, Any], timeout: float, kind: str
    ) -> dict[str, Any]:
        self.calls.append(("LIST", dict(query)))
        return self.lists.pop(0)

    async def stream(self, path: str, *, query: dict[str, Any], read_timeout: float, kind: str):
        self.calls.append(("WATCH", dict(query)))
        if not self.watches:
            self.idle.set()
            await asyncio.Event().wait()  # nothing more to say: block like a quiet watch
        script = self.watches.pop(0)
        if isinstance(script, ApiError):
            raise script
        for ev in script:
            yield ev


async def run_until_idle(r: Reflector, client: FakeClient) -> None:
    r.start()
    await client.idle.wait()
    await r.stop()


async def test_reflector_relists_on_410_error_event_and_resumes_from_new_version() -> None:
    spec = SPECS_BY_RESOURCE["resourcequotas"]
    client = FakeClient(
        lists=[
            {"metadata": {"resourceVersion": "10"}, "items": [obj("q1", "a")]},
            {"metadata": {"resourceVersion": "50"}, "items": [obj("q9", "a")]},
        ],
        watches=[
            [
                {"type": "ADDED", "object": obj("q2", "a", "11")},
                {"type": "ERROR", "object": {"code": 410, "reason": "Expired"}},
            ],
        ],
    )
    r = Reflector(spec, client, rand=lambda: 0.0)
    await run_until_idle(r, client)
    kinds = [c[0] for c in client.calls]
    assert kinds == ["LIST", "WATCH", "LIST", "WATCH"]
    assert client.calls[1][1]["resourceVersion"] == "10"
    assert client.calls[1][1]["allowWatchBookmarks"] == "true"
    assert client.calls[3][1]["resourceVersion"] == "50"
    assert [o["metadata"]["name"] for o in r.cache.objects()] == ["q9"]
    assert r.cache.relists == 1


async def test_reflector_relists_on_http_410_when_opening_the_watch() -> None:
    spec = SPECS_BY_RESOURCE["nodes"]
    client = FakeClient(
        lists=[
            {"metadata": {"resourceVersion": "1"}, "items": []},
            {"metadata": {"resourceVersion": "2"}, "items": [obj("n")]},
        ],
        watches=[ApiError(410, "too old resource version")],
    )
    r = Reflector(spec, client, rand=lambda: 0.0)
    await run_until_idle(r, client)
    assert [c[0] for c in client.calls] == ["LIST", "WATCH", "LIST", "WATCH"]
    assert r.cache.get(None, "n") is not None


async def test_reflector_rewatches_without_relist_after_a_clean_end() -> None:
    spec = SPECS_BY_RESOURCE["namespaces"]
    client = FakeClient(
        lists=[{"metadata": {"resourceVersion": "3"}, "items": [obj("a")]}],
        watches=[[{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}}], []],
    )
    r = Reflector(spec, client, rand=lambda: 0.0)
    await run_until_idle(r, client)
    assert [c[0] for c in client.calls] == ["LIST", "WATCH", "WATCH", "WATCH"]
    assert [c[1].get("resourceVersion") for c in client.calls[1:]] == ["3", "8", "8"]


async def test_reflector_paginates_and_replaces_only_when_complete() -> None:
    spec = SPECS_BY_RESOURCE["services"]
    client = FakeClient(
        lists=[
            {"metadata": {"resourceVersion": "", "continue": "tok"}, "items": [obj("s1", "a")]},
            {"metadata": {"resourceVersion": "20"}, "items": [obj("s2", "a")]},
        ],
        watches=[],
    )
    r = Reflector(spec, client, rand=lambda: 0.0)
    await run_until_idle(r, client)
    assert client.calls[1] == ("LIST", {"limit": 500, "continue": "tok"})
    assert sorted(o["metadata"]["name"] for o in r.cache.objects("a")) == ["s1", "s2"]
    assert r.cache.resource_version == "20"


async def test_reflector_marks_denied_on_403_and_keeps_no_data() -> None:
    spec = SPECS_BY_RESOURCE["clusterqueues"]

    class Denied(FakeClient):
        async def request(self, *a: Any, **kw: Any) -> dict[str, Any]:
            self.idle.set()
            raise ApiError(403, "clusterqueues.kueue.x-k8s.io is forbidden")

    client = Denied([], [])
    r = Reflector(spec, client, rand=lambda: 0.0)
    await run_until_idle(r, client)
    assert r.denied == "not permitted to list clusterqueues.kueue.x-k8s.io"
    assert not r.cache.synced


def test_slim_keeps_what_persistent_volume_matching_reads() -> None:
    """webhook/checks/storage/match.py reads FindMatchingVolume's fields; the volume source is dropped."""
    affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}}
    pv = {
        "metadata": {"name": "pv-1", "labels": {"tier": "fast"}, "managedFields": [{}]},
        "spec": {
            "capacity": {"storage": "20Gi"},
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            "storageClassName": "",
            "claimRef": {"namespace": "a", "name": "c"},
            "nodeAffinity": affinity,
            "volumeAttributesClassName": "gold",
            "csi": {"driver": "d", "volumeHandle": "h", "volumeAttributes": {"big": "x" * 1000}},
            "mountOptions": ["ro"],
        },
        "status": {"phase": "Available", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z"},
    }
    assert slim("persistentvolumes", pv) == {
        "metadata": {"name": "pv-1", "labels": {"tier": "fast"}},
        "spec": {
            "capacity": {"storage": "20Gi"},
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            "storageClassName": "",
            "claimRef": {"namespace": "a", "name": "c"},
            "nodeAffinity": affinity,
            "volumeAttributesClassName": "gold",
        },
        "status": {"phase": "Available"},
    }


async def test_the_heap_is_frozen_after_each_complete_list_with_the_listed_objects_in_it() -> None:
    """serve and the audit controller pass freeze_heap: after the first list and after a relist
    (410), the cached objects are in the collector's permanent generation (cache.freeze_heap)."""
    import gc

    spec = SPECS_BY_RESOURCE["resourcequotas"]
    client = FakeClient(
        lists=[
            {"metadata": {"resourceVersion": "10"}, "items": [obj("q1", "a", spec={"hard": {"pods": "1"}})]},
            {"metadata": {"resourceVersion": "50"}, "items": [obj("q9", "a", spec={"hard": {"pods": "2"}})]},
        ],
        watches=[[{"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}]],
    )
    seen: list[tuple[bool, list[str], bool]] = []

    def after_list() -> None:
        freeze_heap()
        q = r.cache.objects()
        tracked = {id(o) for o in gc.get_objects()}  # the permanent generation is not listed
        seen.append((r.cache.synced, [o["metadata"]["name"] for o in q], any(id(o) in tracked for o in q)))

    r = Reflector(spec, client, rand=lambda: 0.0, after_list=after_list)
    try:
        await run_until_idle(r, client)
    finally:
        gc.unfreeze()
    assert seen == [(True, ["q1"], False), (True, ["q9"], False)]


def test_the_live_view_freezes_after_lists_only_when_asked() -> None:
    from webhook.cluster.live import LiveClusterView
    from webhook.config import Settings

    frozen = LiveClusterView(Settings(), client=None, checks=[], freeze_after_lists=True)  # type: ignore[arg-type]
    plain = LiveClusterView(Settings(), client=None, checks=[])  # type: ignore[arg-type]
    assert frozen._after_list is freeze_heap
    assert plain._after_list is None


async def test_each_list_page_is_slimmed_as_it_arrives_not_once_the_list_is_complete() -> None:
    """A resource is never held unslimmed whole (the peak, and the heap it fragmented): when the
    second page is asked for, the first page's objects have been projected already (no managedFields,
    annotations, token Secrets); the cache holds the slimmed objects themselves, slimmed once."""
    spec = SPECS_BY_RESOURCE["serviceaccounts"]
    ann = {LAST_APPLIED: "{}", "team": "a"}
    first = obj("sa1", "a")
    first["metadata"].update(managedFields=[{"manager": "kubectl"}], annotations=dict(ann))
    first["secrets"] = [{"name": "sa1-token"}]
    second = obj("sa2", "a")
    seen_at_second: list[dict[str, Any]] = []

    class Paged(FakeClient):
        async def request(self, *a: Any, query: dict[str, Any], **kw: Any) -> dict[str, Any]:
            if query.get("continue"):
                seen_at_second.append(dict(first["metadata"]) | {"secrets": "secrets" in first})
                return {"metadata": {"resourceVersion": "7"}, "items": [second]}
            return {"metadata": {"resourceVersion": "7", "continue": "p2"}, "items": [first]}

    client = Paged([], [])
    r = Reflector(spec, client, rand=lambda: 0.0)
    await r.list_once()
    assert seen_at_second == [{"name": "sa1", "namespace": "a", "resourceVersion": "1", "secrets": False}]
    assert r.cache.get("a", "sa1") is first
    assert sorted(o["metadata"]["name"] for o in r.cache.objects("a")) == ["sa1", "sa2"]


def test_the_projected_kinds_keep_what_their_readers_read_and_nothing_else() -> None:
    """cache.PROJECTIONS: name, namespace, resourceVersion (the dry-run probe's cache versions, the audit
    relist diff) and the fields the checks read; a Namespace keeps its labels, nothing of its status."""
    meta = {"name": "default", "namespace": "team-a", "resourceVersion": "9", "uid": "u", "labels": {"x": "y"},
            "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": {"a": "b"}}  # fmt: skip
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta), "secrets": [{"name": "t"}],
          "imagePullSecrets": [{"name": "regcred"}], "automountServiceAccountToken": False}  # fmt: skip
    kept = {"name": "default", "namespace": "team-a", "resourceVersion": "9"}
    assert slim("serviceaccounts", sa) == {"metadata": kept, "imagePullSecrets": [{"name": "regcred"}]}
    svc = {"metadata": dict(meta), "spec": {"type": "ClusterIP", "ports": [{"port": 80}], "selector": {"app": "llm"},
           "clusterIP": "10.0.0.1", "sessionAffinity": "None"}, "status": {"loadBalancer": {}}}  # fmt: skip
    assert slim("services", svc) == {
        "metadata": kept,
        "spec": {"type": "ClusterIP", "ports": [{"port": 80}], "selector": {"app": "llm"}, "clusterIP": "10.0.0.1"},
    }
    rq = {"metadata": dict(meta), "spec": {"hard": {"pods": "10"}, "scopes": ["NotBestEffort"]},
          "status": {"hard": {"pods": "10"}, "used": {"pods": "1"}}}  # fmt: skip
    assert slim("resourcequotas", rq) == {"metadata": kept, "spec": rq["spec"], "status": rq["status"]}
    lr = {"metadata": dict(meta), "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]}}
    assert slim("limitranges", lr) == {
        "metadata": kept,
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]},
    }
    ns = {"metadata": {**meta, "namespace": ""}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
    assert slim("namespaces", ns) == {"metadata": {"name": "default", "resourceVersion": "9", "labels": {"x": "y"}}}


def test_identical_small_maps_are_held_once_and_read_as_before() -> None:
    """Two Nodes of one shape share their capacity and allocatable maps, two quotas of one template their
    hard and used maps; a map that differs is its own; values that are not strings are left alone."""

    def node(name: str, cpu: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {"pool": "gpu"}},
                "status": {"capacity": {"cpu": cpu, "pods": "110"}, "allocatable": {"cpu": cpu, "pods": "110"}}}  # fmt: skip

    a, b, c = slim("nodes", node("a", "96")), slim("nodes", node("b", "96")), slim("nodes", node("c", "64"))
    assert a["status"]["capacity"] is b["status"]["capacity"] == {"cpu": "96", "pods": "110"}
    assert a["metadata"]["labels"] is b["metadata"]["labels"] is c["metadata"]["labels"] == {"pool": "gpu"}
    assert (
        c["status"]["capacity"] == {"cpu": "64", "pods": "110"}
        and c["status"]["capacity"] is not a["status"]["capacity"]
    )
    q1, q2 = (slim("resourcequotas", {"metadata": {"name": "q", "namespace": ns}, "spec": {"hard": {"pods": "5"}},
                                      "status": {"hard": {"pods": "5"}, "used": {"pods": "0"}}}) for ns in ("x", "y"))  # fmt: skip
    assert q1["spec"]["hard"] is q2["spec"]["hard"] is q1["status"]["hard"]
    assert q1["status"]["used"] is q2["status"]["used"] == {"pods": "0"}
    odd = {"k": True}
    assert share_map(odd) is odd and share_map({"k": "1"}) is not odd
