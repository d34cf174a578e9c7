"""Per-Node Schedulability judges nodes alike in what it reads once (webhook/models/nodes.py `_walk`):
the memoized walk must give exactly the lists the node-by-node reading gives, in the same order."""

from __future__ import annotations

import copy
import random
from decimal import Decimal
from typing import Any

import pytest

from webhook.models import nodes as N

KEYS = ["pool", "zone", "gpu", "kubernetes.io/hostname"]


def _node(rng: random.Random, i: int, with_rv: bool) -> dict[str, Any]:
    labels = {k: rng.choice(["a", "b", "1", "7"]) for k in KEYS[:3] if rng.random() < 0.8}
    labels["kubernetes.io/hostname"] = f"n{i}"
    taints = [
        {"key": rng.choice(["gpu", "spot"]), "value": rng.choice(["x", ""]), "effect": rng.choice(["NoSchedule", "NoExecute", "PreferNoSchedule"])}
        for _ in range(rng.choice([0, 0, 1, 2]))
    ]  # fmt: skip
    alloc = {"cpu": rng.choice(["4", "8", "500m"]), "memory": rng.choice(["8Gi", "64Gi"])}
    if rng.random() < 0.3:
        alloc["nvidia.com/gpu"] = rng.choice(["0", "8"])
    meta: dict[str, Any] = {"name": f"n{i}", "labels": labels}
    if with_rv:
        meta["resourceVersion"] = str(rng.randrange(1, 5))
    return {
        "metadata": meta,
        "spec": {"taints": taints, "unschedulable": rng.random() < 0.1},
        "status": {
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": rng.choice(["True", "True", "True", "False"])}],
        },
    }


def _pod_spec(rng: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if rng.random() < 0.5:
        spec["nodeSelector"] = {rng.choice(KEYS[:3]): rng.choice(["a", "b"])}
    if rng.random() < 0.5:
        expr = {"key": rng.choice(KEYS), "operator": rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])}
        expr["values"] = [rng.choice(["a", "1", "5", "n3"])]
        term: dict[str, Any] = {"matchExpressions": [expr]}
        if rng.random() < 0.2:
            term["matchFields"] = [{"key": "metadata.name", "operator": "In", "values": ["n1", "n4"]}]
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    if rng.random() < 0.5:
        spec["tolerations"] = [{"key": rng.choice(["gpu", "spot"]), "operator": "Exists"}]
    return spec


def _naive(
    nodes: list[dict[str, Any]], pod_spec: dict[str, Any], need: dict[str, Decimal]
) -> tuple[list[str], list[str], list[str]]:
    selected = [n for n in nodes if N._usable(n) and N.selects(pod_spec, n)]
    eligible = [n for n in selected if not N.blocking_taints(pod_spec, n)]
    fits = [n for n in eligible if N._fits(need, n)]
    return tuple([N.node_name(n) for n in xs] for xs in (selected, eligible, fits))  # type: ignore[return-value]


@pytest.mark.parametrize("seed", range(400))
def test_the_memoized_walk_gives_the_node_by_node_lists(seed: int) -> None:
    rng = random.Random(seed)
    N._STATIC.clear()
    # a few pools: many nodes alike but for their name and hostname, as in a real cluster
    pools = [_node(rng, i, with_rv=seed % 3 != 0) for i in range(rng.randrange(1, 4))]
    nodes = []
    for i in range(rng.randrange(1, 40)):
        n = copy.deepcopy(rng.choice(pools))
        n["metadata"]["name"] = n["metadata"]["labels"]["kubernetes.io/hostname"] = f"n{i}"
        nodes.append(n)
    if seed % 2:  # or every node drawn on its own
        nodes = [_node(rng, i, with_rv=seed % 3 != 0) for i in range(len(nodes))]
    spec = _pod_spec(rng)
    need = {"cpu": Decimal(rng.choice(["1", "6"])), "memory": Decimal(2**30 * rng.choice([4, 32]))}
    if rng.random() < 0.3:
        need["nvidia.com/gpu"] = Decimal(8)
    for _ in range(2):  # the second walk reads the kept static shapes
        got = tuple([N.node_name(n) for n in xs] for xs in N._walk(nodes, spec, need))
        assert got == _naive(nodes, spec, need)
        # Device Allocation's eligible nodes: usable, selected, tolerated
        assert [N.node_name(n) for n in N.eligible_nodes(nodes, spec)] == _naive(nodes, spec, need)[1]
        # Node Selector Match's two lists, and Tolerations' taints, from the same grouping
        matching = [n for n in nodes if N.selects(spec, n)]
        want_ns = ([N.node_name(n) for n in matching], [N.node_name(n) for n in matching if N._usable(n)])
        got_ns = N._by_shape(nodes, spec, N._selected_and_usable(spec), 2)
        assert ([N.node_name(n) for n in got_ns[0]], [N.node_name(n) for n in got_ns[1]]) == want_ns
        every = [t for n in nodes for t in N.taints(n)]
        assert sorted(map(repr, N._distinct_taints(nodes))) == sorted({repr(t) for t in every})


def test_a_changed_node_is_read_again_under_its_new_resource_version() -> None:
    N._STATIC.clear()
    node = {
        "metadata": {"name": "n1", "resourceVersion": "1", "labels": {}},
        "spec": {},
        "status": {"allocatable": {"cpu": "4"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    need = {"cpu": Decimal(8)}
    assert N._walk([node], {}, need)[2] == []
    bigger = {**node, "metadata": {**node["metadata"], "resourceVersion": "2"}, "status": {**node["status"], "allocatable": {"cpu": "16"}}}  # fmt: skip
    assert N._walk([bigger], {}, need)[2] == [bigger]


def test_nodes_alike_but_for_their_hostname_are_judged_once(monkeypatch: pytest.MonkeyPatch) -> None:
    N._STATIC.clear()
    calls = []
    real = N.selects

    def counting(pod_spec: dict[str, Any], node: dict[str, Any]) -> bool:
        calls.append(N.node_name(node))
        return real(pod_spec, node)

    monkeypatch.setattr(N, "selects", counting)
    pool = [
        {
            "metadata": {"name": f"n{i}", "resourceVersion": "1", "labels": {"pool": "gpu", "kubernetes.io/hostname": f"n{i}"}},
            "spec": {},
            "status": {"allocatable": {"cpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]},
        }
        for i in range(500)
    ]  # fmt: skip
    selected, eligible, fits = N._walk(pool, {"nodeSelector": {"pool": "gpu"}}, {"cpu": Decimal(4)})
    assert len(selected) == len(eligible) == len(fits) == 500
    assert calls == ["n0"]


class _CacheView:
    """The live view's two reads of the Node cache: its objects (not copied) and its version."""

    def __init__(self) -> None:
        from webhook.cluster.cache import ResourceCache

        self.cache = ResourceCache("nodes")

    def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.cache.objects()

    def cache_version(self, resource: str) -> tuple[int, int]:
        return (self.cache.generation, self.cache.changes)


def _ready(name: str, cpu: str, rv: str = "1", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": rv, "labels": labels},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_the_grouping_is_kept_across_reviews_and_a_node_added_changed_or_removed_is_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    N._STATIC.clear()
    N._KEPT.clear()
    calls: list[str] = []
    real = N.selects

    def counting(pod_spec: dict[str, Any], node: dict[str, Any]) -> bool:
        calls.append(N.node_name(node))
        return real(pod_spec, node)

    monkeypatch.setattr(N, "selects", counting)
    view = _CacheView()
    view.cache.replace([_ready(f"n{i}", "8", pool="gpu") for i in range(300)], "1")
    spec, need = {"nodeSelector": {"pool": "gpu"}}, {"cpu": Decimal(16)}

    def review() -> tuple[list[str], list[str], list[str]]:
        lists = N._walk(N._listing(view), spec, need)  # type: ignore[arg-type]
        mark = len(calls)
        want = _naive(view.cache.objects(), spec, need)
        del calls[mark:]  # count the walk's readings only
        got = tuple([N.node_name(n) for n in xs] for xs in lists)
        assert got == want
        return got  # type: ignore[return-value]

    assert review()[2] == []
    assert review()[2] == []
    assert calls == ["n0", "n0"]  # one shape, judged once per review; the grouping was kept
    assert N._listing(view) is N._KEPT[0].nodes  # the same version: no new listing

    view.cache.apply("ADDED", _ready("big", "32", pool="gpu"))
    assert review()[2] == ["big"]
    view.cache.apply("MODIFIED", _ready("n7", "64", rv="2", pool="gpu"))
    assert review()[2] == ["n7", "big"]
    view.cache.apply("MODIFIED", _ready("n7", "64", rv="3", pool="cpu"))  # no longer selected
    assert review()[2] == ["big"]
    view.cache.apply("DELETED", _ready("big", "32", pool="gpu"))
    assert review()[2] == []
    assert len(review()[0]) == 299
    view.cache.replace([_ready("r1", "32", pool="gpu")], "9")  # a relist
    assert review()[2] == ["r1"]


def test_a_view_that_copies_keeps_the_shapes_and_hands_out_its_own_nodes() -> None:
    N._STATIC.clear()
    N._KEPT.clear()
    nodes = [_ready(f"n{i}", "8") for i in range(20)]
    first = N._walk(copy.deepcopy(nodes), {}, {"cpu": Decimal(4)})
    again = copy.deepcopy(nodes)
    second = N._walk(again, {}, {"cpu": Decimal(4)})
    assert [N.node_name(n) for n in first[2]] == [N.node_name(n) for n in second[2]]
    assert all(a is b for a, b in zip(second[2], again, strict=True))
    changed = copy.deepcopy(nodes)  # the next copy, with one Node changed (no resourceVersion moved)
    changed[3]["status"]["allocatable"]["cpu"] = "1"
    N._STATIC.clear()
    assert "n3" not in [N.node_name(n) for n in N._walk(changed, {}, {"cpu": Decimal(4)})[2]]


@pytest.mark.parametrize("seed", range(60))
def test_a_cache_that_keeps_changing_is_judged_as_node_by_node_after_every_change(seed: int) -> None:
    """Nodes added, changed (a new resourceVersion, as the apiserver gives) and deleted one at a
    time, and relists: after each, the walk over the kept grouping, which carries the shapes of
    the unchanged Nodes over, gives the node-by-node lists."""
    rng = random.Random(seed)
    N._STATIC.clear()
    N._KEPT.clear()
    view = _CacheView()
    rv = iter(range(10, 10**6))

    def fresh(i: int) -> dict[str, Any]:
        n = _node(rng, i, with_rv=True)
        n["metadata"]["resourceVersion"] = str(next(rv))
        return n

    view.cache.replace([fresh(i) for i in range(rng.randrange(1, 30))], "1")
    specs = [_pod_spec(rng) for _ in range(3)]
    need = {"cpu": Decimal(rng.choice(["1", "6"])), "memory": Decimal(2**30 * 4)}
    for step in range(40):
        names = [N.node_name(n) for n in view.cache.objects()]
        op = rng.random()
        if op < 0.5 and names:
            view.cache.apply("MODIFIED", {**fresh(0), "metadata": {**fresh(0)["metadata"], "name": rng.choice(names)}})
        elif op < 0.7:
            view.cache.apply("ADDED", fresh(1000 + step))
        elif op < 0.9 and len(names) > 1:
            view.cache.apply("DELETED", view.cache.get(None, rng.choice(names)) or {})
        else:
            view.cache.replace([fresh(i) for i in range(rng.randrange(1, 30))], str(step))
        for spec in specs:
            nodes = N._listing(view)  # type: ignore[arg-type]
            got = tuple([N.node_name(n) for n in xs] for xs in N._walk(nodes, spec, need))
            assert got == _naive(view.cache.objects(), spec, need), (seed, step)
