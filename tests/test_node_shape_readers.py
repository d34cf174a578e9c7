"""The other checks that read Nodes use the placement checks' grouping (webhook/models/nodes.py
`per_shape`, `label_values`): the Image Pull check's platforms of the selected nodes and Kueue
flavour matching's "some node carries the flavor's labels" (provisioning.py `flavors_for`). Each is
compared with the node-by-node reading on generated clusters, also while the Node cache changes
(a shape carried over from the last listing that no node has any more must not count)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.test_check_nodes_shapes import _CacheView, _node, _pod_spec
from webhook.checks.imagepull import eligible_platforms
from webhook.models import nodes as N
from webhook.models.provisioning import flavors_for
from webhook.registry.platform import ARCH_LABEL, OS_LABEL, node_platform

PLATFORMS = [("linux", "amd64"), ("linux", "arm64"), ("windows", "amd64"), (None, "amd64"), ("linux", None)]


def _platformed(rng: random.Random, i: int, rv: str | None = None) -> dict[str, Any]:
    n = _node(rng, i, with_rv=rv is not None)
    if rv is not None:
        n["metadata"]["resourceVersion"] = rv
    os_, arch = rng.choice(PLATFORMS)
    for key, value in ((OS_LABEL, os_), (ARCH_LABEL, arch)):
        if value is not None:
            n["metadata"]["labels"][key] = value
    return n


def _naive_platforms(nodes: list[dict[str, Any]], pod_spec: dict[str, Any]) -> set[tuple[str, str]]:
    """The check's reading before the grouping: every Node, one by one."""
    return {p for n in nodes if N.selects(pod_spec, n) and (p := node_platform(n)) is not None}


def _naive_flavors(pod_spec: dict[str, Any], flavors: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> list[str]:
    """flavors_for as it read every Node for every flavor."""
    carried = [
        rf
        for rf in flavors
        if any(
            all((n["metadata"].get("labels") or {}).get(k) == v for k, v in rf["spec"]["nodeLabels"].items())
            for n in nodes
        )
    ]
    return flavors_for(pod_spec, [rf for rf in flavors if rf not in carried], [])


def _flavor(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeLabels": labels}}


def _flavors(rng: random.Random) -> list[dict[str, Any]]:
    keys = ["pool", "zone", "gpu", OS_LABEL]
    out = []
    for f in range(rng.randrange(1, 6)):
        chosen = rng.sample(keys, rng.randrange(1, 3))
        out.append(_flavor(f"f{f}", {k: rng.choice(["a", "b", "1", "linux"]) for k in chosen}))
    return out


@pytest.mark.parametrize("seed", range(200))
def test_platforms_and_flavors_per_shape_equal_the_node_by_node_reading(seed: int) -> None:
    rng = random.Random(seed)
    N._STATIC.clear()
    N._KEPT.clear()
    nodes = [
        _platformed(rng, i, rv=str(rng.randrange(1, 4)) if seed % 2 else None) for i in range(rng.randrange(0, 40))
    ]
    flavors = _flavors(rng)
    for _ in range(2):  # the second reading uses the kept grouping
        for spec in [_pod_spec(rng) for _ in range(3)]:
            assert eligible_platforms(nodes, spec) == _naive_platforms(nodes, spec), seed
            assert flavors_for(spec, flavors, nodes) == _naive_flavors(spec, flavors, nodes), seed


@pytest.mark.parametrize("seed", range(40))
def test_while_the_node_cache_changes_the_readings_follow_it(seed: int) -> None:
    rng = random.Random(seed)
    N._STATIC.clear()
    N._KEPT.clear()
    view = _CacheView()
    rv = iter(range(10, 10**6))
    view.cache.replace([_platformed(rng, i, str(next(rv))) for i in range(rng.randrange(1, 25))], "1")
    specs = [_pod_spec(rng) for _ in range(2)]
    flavors = _flavors(rng)
    for step in range(30):
        names = [N.node_name(n) for n in view.cache.objects()]
        op = rng.random()
        if op < 0.5 and names:
            changed = _platformed(rng, 0, str(next(rv)))
            changed["metadata"]["name"] = rng.choice(names)
            view.cache.apply("MODIFIED", changed)
        elif op < 0.7:
            view.cache.apply("ADDED", _platformed(rng, 1000 + step, str(next(rv))))
        elif op < 0.9 and len(names) > 1:
            view.cache.apply("DELETED", view.cache.get(None, rng.choice(names)) or {})
        else:
            view.cache.replace([_platformed(rng, i, str(next(rv))) for i in range(rng.randrange(1, 25))], str(step))
        want = view.cache.objects()
        for spec in specs:
            nodes = N.node_listing(view)  # type: ignore[arg-type]
            assert eligible_platforms(nodes, spec) == _naive_platforms(want, spec), (seed, step)
            assert flavors_for(spec, flavors, nodes) == _naive_flavors(spec, flavors, want), (seed, step)


def test_a_platform_no_node_has_any_more_is_not_eligible() -> None:
    """The arm64 shape stays in the grouping's representatives after its only node changed:
    it must not be read as a platform the pods can land on."""
    N._STATIC.clear()
    N._KEPT.clear()
    view = _CacheView()
    amd = [_ready_on(f"a{i}", "linux", "amd64") for i in range(50)]
    view.cache.replace([*amd, _ready_on("arm", "linux", "arm64")], "1")
    assert eligible_platforms(N.node_listing(view), {}) == {("linux", "amd64"), ("linux", "arm64")}  # type: ignore[arg-type]
    view.cache.apply("MODIFIED", _ready_on("arm", "linux", "amd64", rv="2"))
    assert eligible_platforms(N.node_listing(view), {}) == {("linux", "amd64")}  # type: ignore[arg-type]
    assert N.label_values(N.node_listing(view), (ARCH_LABEL,)) == {("amd64",)}  # type: ignore[arg-type]


def test_nodes_of_one_platform_and_pool_are_judged_once(monkeypatch: pytest.MonkeyPatch) -> None:
    N._STATIC.clear()
    N._KEPT.clear()
    calls: list[str] = []
    real = node_platform

    def counting(node: dict[str, Any]) -> tuple[str, str] | None:
        calls.append(N.node_name(node))
        return real(node)

    monkeypatch.setattr("webhook.checks.imagepull.node_platform", counting)
    nodes = [_ready_on(f"n{i}", "linux", "amd64", pool="gpu") for i in range(2000)]
    nodes.append(_ready_on("m", "linux", "arm64", pool="gpu"))
    assert eligible_platforms(nodes, {"nodeSelector": {"pool": "gpu"}}) == {("linux", "amd64"), ("linux", "arm64")}
    assert sorted(calls) == ["m", "n0"]
    calls.clear()
    assert eligible_platforms(nodes, {"nodeSelector": {"pool": "gpu"}}) == {("linux", "amd64"), ("linux", "arm64")}
    assert sorted(calls) == ["m", "n0"]  # the grouping was kept: two shapes read again, not 2,001 nodes


def test_flavor_matching_reads_no_node_when_no_flavor_names_a_label() -> None:
    class _NoNodes(list[dict[str, Any]]):
        def __iter__(self) -> Any:
            raise AssertionError("a Node was read")

    assert flavors_for({}, [{"metadata": {"name": "default"}, "spec": {}}], _NoNodes([{"metadata": {}}])) == []


def _ready_on(name: str, os_: str, arch: str, rv: str = "1", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": rv, "labels": {OS_LABEL: os_, ARCH_LABEL: arch, **labels}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_label_values_that_are_not_strings_neither_crash_nor_match() -> None:
    """Only a hand-made Node or flavor has them (the apiserver stores strings)."""
    N._STATIC.clear()
    N._KEPT.clear()
    odd = _ready_on("odd", "linux", "amd64")
    odd["metadata"]["labels"]["pool"] = ["gpu"]
    nodes = [odd, _ready_on("n", "linux", "amd64", pool="cpu")]
    assert N.label_values(nodes, ("pool",)) == {("['gpu']",), ("cpu",)}
    flavors = [_flavor("listed", {"pool": ["gpu"]}), _flavor("gpu", {"pool": "gpu"}), _flavor("cpu", {"pool": "cpu"})]  # type: ignore[dict-item]
    assert flavors_for({}, flavors, nodes) == ["listed", "gpu"]
