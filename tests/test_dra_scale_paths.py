"""Device Allocation's fast paths answer exactly what the direct ones do (issue 26, the scale benchmark).

- `SliceIndex` (slices indexed by node, devices read once per slice version) against `node_devices`
  (every slice visited for every node), on generated clusters with every way a slice targets nodes;
- `matches_grouped` (one CEL answer for the devices alike in what a selector names) against
  `device_matches` (each device evaluated), on generated selectors and devices;
- the ResourceSlice cache's projection (webhook/cluster/cache.py) loses nothing the check reads.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from tests.fakeview import FakeView, container, meta, pod, run_check_all, workload
from webhook.checks.dra import DeviceAllocation
from webhook.checks.dra import check as check_module
from webhook.cluster.cache import slim
from webhook.models.dra import allocate
from webhook.models.dra.allocate import SliceIndex, node_devices
from webhook.models.dra.cel import device_matches, matches_grouped, reads
from webhook.models.nodes import term_matches
from webhook.results import Status
from webhook.workloads.base import PodGroup

DRIVER = "gpu.example.com"
MODELS = ["H100", "B200", "A100"]

SELECTORS = [
    'device.driver == "gpu.example.com"',
    'device.driver != "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "{m}"',
    "device.attributes['gpu.example.com'].model != '{m}'",
    'device.attributes["gpu.example.com"].model.startsWith("{p}")',
    'device.attributes["gpu.example.com"].model in ["H100", "{m}"]',
    'device.attributes["gpu.example.com"].index >= {n}',
    'device.attributes["gpu.example.com"].index % 2 == {b}',
    'device.attributes["gpu.example.com"].nvlink',
    '"nvlink" in device.attributes["gpu.example.com"]',
    '"model" in device.attributes["other.example.com"]',
    'has(device.attributes["gpu.example.com"].model)',
    'device.attributes["other.example.com"].model == "{m}"',  # a runtime error where absent
    'device.attributes["gpu.example.com"]["model"] == "{m}"',
    'device .attributes ["gpu.example.com"].uuid == "u-{n}"',
    'device.attributes["gpu.example.com"].driverVersion == "1.0.0"',  # a version: not held
    'size(device.attributes["gpu.example.com"]) == {n}',  # reads the whole map
    'device.attributes["gpu.example.com"] == {{"model": "{m}"}}',  # a map compared
    'device.attributes[device.driver].model == "{m}"',  # a computed domain
    'device.attributes["gpu.example.com"].mo\\u0064el == "{m}"',  # an escape (does not parse)
    '"H1" + "00" in device.attributes["gpu.example.com"]',  # a computed key
    "device.attributes['gpu.example.com'].model == \"{m}\" && device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0'",
]


def _selector(rng: random.Random) -> str:
    return rng.choice(SELECTORS).format(
        m=rng.choice(MODELS), p=rng.choice(["H", "B", "A1"]), n=rng.randint(0, 4), b=rng.randint(0, 1)
    )


def _attributes(rng: random.Random, i: int) -> dict[str, Any]:
    a: dict[str, Any] = {
        "model": {"string": rng.choice(MODELS)},
        "index": {"int": i % 4},
        "uuid": {"string": f"u-{rng.randint(0, 4)}"},
    }
    if rng.random() < 0.5:
        a["nvlink"] = {"bool": rng.random() < 0.5}
    if rng.random() < 0.3:
        a["driverVersion"] = {"version": "1.0.0"}
    if rng.random() < 0.3:
        a["resource.kubernetes.io/pcieRoot"] = {"string": rng.choice(["pci0", "pci1"])}
    if rng.random() < 0.2:
        a[f"{DRIVER}/model"] = {"string": rng.choice(MODELS)}  # the qualified twin of `model`
    return a


def test_reads_names_only_what_a_selector_can_read() -> None:
    assert reads('device.attributes["d"].model == "x"') >= {"model", "d"}  # type: ignore[operator]
    assert reads('"uuid" in device.attributes["d"]') >= {"uuid"}  # type: ignore[operator]
    assert reads('size(device.attributes["d"]) == 2') is None
    assert reads('device.attributes[device.driver].model == "x"') is None
    assert reads("device == 1") is None
    assert reads('device.attributes["d"].model + "a" in device.attributes["d"]') is None  # a computed key
    assert reads('x == 1 || "uuid" in device.attributes["d"]') is not None
    assert reads('device.attributes["d"].m\\u0064 == "x"') is None


def test_grouped_answers_equal_the_direct_ones() -> None:
    rng = random.Random(20261202)
    exprs = [_selector(rng) for _ in range(120)]
    devices = [(rng.choice([DRIVER, "other.example.com"]), _attributes(rng, i)) for i in range(60)]
    pairs = [(e, d, a) for e in exprs for d, a in devices]
    rng.shuffle(pairs)  # groups filled by other devices first
    misses = [(e, a) for e, d, a in pairs if matches_grouped(e, d, a) != device_matches(e, d, a)]
    assert misses == []
    assert {device_matches(e, d, a) for e, d, a in pairs} == {True, False, None}  # every answer was met


# ----------------------------------------------------------------------------- slices


def _node(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"n{i}", "labels": {"rack": f"r{i % 3}"}}, "spec": {}, "status": {}}


def _slice(rng: random.Random, k: int, nodes: int) -> dict[str, Any]:
    how = rng.choice(["nodeName", "nodeName", "nodeName", "allNodes", "nodeSelector", "perDevice", "shared", "none"])
    pool = rng.choice([f"p{rng.randint(0, nodes)}", "shared-pool"])
    spec: dict[str, Any] = {
        "driver": rng.choice([DRIVER, DRIVER, "nic.example.com"]),
        "pool": {"name": pool, "generation": rng.choice([1, 1, 2]), "resourceSliceCount": rng.choice([1, 1, 2])},
        "devices": [
            {"name": f"d{k}-{j}", "attributes": _attributes(rng, j), **({"taints": [{"key": "x"}]} if rng.random() < 0.05 else {})}
            for j in range(rng.randint(0, 4))
        ],
    }  # fmt: skip
    if how == "nodeName":
        spec["nodeName"] = f"n{rng.randint(0, nodes)}"
    elif how == "allNodes":
        spec["allNodes"] = True
    elif how == "nodeSelector":
        spec["nodeSelector"] = {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]
        }
    elif how == "perDevice":
        spec["perDeviceNodeSelection"] = True
        for d in spec["devices"]:
            d["nodeName" if rng.random() < 0.7 else "allNodes"] = (
                f"n{rng.randint(0, nodes)}" if rng.random() < 0.7 else True
            )
    elif how == "shared":
        spec["sharedCounters"] = [{"name": "c"}]
        spec["nodeName"] = f"n{rng.randint(0, nodes)}"
    meta: dict[str, Any] = {"name": f"s{k}"}
    if rng.random() < 0.6:  # the cache's objects carry both; a test's often neither
        meta.update(uid=f"uid-{k}", resourceVersion=str(k + 1))
    return {"metadata": meta, "spec": spec}


def _view(devs: tuple[list[Any], list[str]]) -> tuple[list[tuple[Any, ...]], list[str]]:
    return [(d.id, d.attributes, d.unmodelled) for d in devs[0]], devs[1]


@pytest.mark.parametrize("seed", range(40))
def test_slice_index_equals_the_walk_over_every_slice(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [_node(i) for i in range(rng.randint(1, 8))]
    slices = [_slice(rng, k + 1000 * seed, len(nodes)) for k in range(rng.randint(0, 25))]
    for _ in range(2):  # the second time from the devices kept per slice version
        index = SliceIndex(slices)
        for n in nodes:
            assert _view(index.devices(n, term_matches)) == _view(node_devices(slices, n, term_matches))


def test_devices_are_read_again_when_the_slice_changes() -> None:
    rng = random.Random(7)
    s = _slice(rng, 1, 1)
    s["spec"].update(nodeName="n0", devices=[{"name": "a", "attributes": {"model": {"string": "H100"}}}])
    s["spec"].pop("allNodes", None)
    s["metadata"].update(uid="u", resourceVersion="5")
    s["spec"]["pool"]["resourceSliceCount"] = 1
    first = SliceIndex([s]).devices(_node(0), term_matches)[0]
    assert [d.attributes for d in first] == [{"model": {"string": "H100"}}]
    changed = copy.deepcopy(s)
    changed["metadata"]["resourceVersion"] = "6"
    changed["spec"]["devices"][0]["attributes"]["model"] = {"string": "B200"}
    again = SliceIndex([changed]).devices(_node(0), term_matches)[0]
    assert [d.attributes for d in again] == [{"model": {"string": "B200"}}]
    assert ("s1", "u", "5") in allocate._PREPARED and ("s1", "u", "6") in allocate._PREPARED


def _nvidia_slice(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": f"node-{i}-gpu.nvidia.com-x",
            "uid": f"uid-{i}",
            "resourceVersion": str(i + 10),
            "generateName": f"node-{i}-gpu.nvidia.com-",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": f"node-{i}", "uid": "n"}],
            "managedFields": [{"manager": "gpu-kubelet-plugin", "fieldsV1": {}}],
        },
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": f"node-{i}",
            "pool": {"name": f"node-{i}", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{g}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "uuid": {"string": f"GPU-{i}-{g}"},
                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                        "driverVersion": {"version": "580.95.5"},
                        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{g}"},
                    },
                    "capacity": {"memory": {"value": "81559Mi"}},
                }
                for g in range(8)
            ],
        },
    }


def test_the_cache_projection_keeps_what_the_check_reads() -> None:
    raw = [_nvidia_slice(i) for i in range(3)]
    cached = [slim("resourceslices", json.loads(json.dumps(s))) for s in raw]
    node = {"metadata": {"name": "node-1"}}
    assert _view(node_devices(cached, node, term_matches)) == _view(node_devices(raw, node, term_matches))
    got = cached[1]
    assert got["metadata"] == {"name": "node-1-gpu.nvidia.com-x", "uid": "uid-1", "resourceVersion": "11"}
    assert "capacity" not in got["spec"]["devices"][0]
    assert set(got["spec"]) == {"driver", "nodeName", "pool", "devices"}
    # the values devices share are held once; a device's own (its uuid) stay its own
    a, b = got["spec"]["devices"][0]["attributes"], cached[2]["spec"]["devices"][5]["attributes"]
    assert a["productName"] is b["productName"] and a["type"] is b["type"]
    assert a["uuid"] == {"string": "GPU-1-0"} and b["uuid"] == {"string": "GPU-2-5"}


# ----------------------------------------------------------------------------- the check's verdicts


def _ready(i: int) -> dict[str, Any]:
    n = _node(i)
    n["status"] = {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "64", "pods": "110"}}
    return n


def _exactly(rng: random.Random) -> dict[str, Any]:
    e: dict[str, Any] = {"deviceClassName": "gpu"}
    if rng.random() < 0.1:
        e["allocationMode"] = "All"
    else:
        e["count"] = rng.randint(1, 3)
    if rng.random() < 0.5:
        e["selectors"] = [{"cel": {"expression": _selector(rng)}}]
    return e


def _cluster(rng: random.Random, seed: int) -> tuple[Any, FakeView]:
    nodes = [_ready(i) for i in range(rng.randint(1, 10))]
    slices = [_slice(rng, k + 1000 * seed, len(nodes)) for k in range(rng.randint(1, 20))]
    # most clusters are pools alike: copies of a node's slice on the other nodes
    for k, n in enumerate(nodes):
        if rng.random() < 0.6 and slices:
            s = copy.deepcopy(rng.choice(slices))
            s["metadata"] = {"name": f"copy-{seed}-{k}"}
            s["spec"].update(nodeName=n["metadata"]["name"])
            s["spec"]["pool"]["name"] = f"copy-{k}"
            for flag in ("allNodes", "nodeSelector", "perDeviceNodeSelection"):
                s["spec"].pop(flag, None)
            slices.append(s)
    templates, groups = [], []
    for gi in range(rng.randint(1, 3)):
        requests: list[dict[str, Any]] = []
        for r in range(rng.randint(1, 2)):
            if rng.random() < 0.2:
                requests.append(
                    {"name": f"r{r}", "firstAvailable": [{"name": f"s{k}", **_exactly(rng)} for k in range(2)]}
                )
            else:
                requests.append({"name": f"r{r}", "exactly": _exactly(rng)})
        devices: dict[str, Any] = {"requests": requests}
        if rng.random() < 0.2:
            devices["constraints"] = [{"matchAttribute": f"{DRIVER}/model"}]
        templates.append({"metadata": meta(f"t{gi}", "team-a"), "spec": {"spec": {"devices": devices}}})
        c = container("main", {"cpu": "1"})
        c["resources"]["claims"] = [{"name": "c"}]
        p = pod(c)
        p["resourceClaims"] = [{"name": "c", "resourceClaimTemplateName": f"t{gi}"}]
        groups.append(PodGroup(f"g{gi}", rng.randint(1, 4), p))
    allocated = [
        {"request": "x", "driver": s["spec"]["driver"], "pool": s["spec"]["pool"]["name"], "device": d["name"]}
        for s in slices
        for d in s["spec"]["devices"]
        if rng.random() < 0.1
    ]
    view = FakeView(
        {
            "nodes": nodes,
            "resourceslices": slices,
            "deviceclasses": [{"metadata": meta("gpu"), "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}],
            "resourceclaimtemplates": templates,
            "resourceclaims": [{"metadata": meta("other", "team-b"), "spec": {}, "status": {"allocation": {"devices": {"results": allocated}}}}],
        },
        served={"v1", "resource.k8s.io/v1"},
    )  # fmt: skip
    return workload(groups, kind="TrainJob", namespace="team-a"), view


def _said(results: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.status, r.message, tuple(r.details)) for r in results]


async def test_nodes_alike_judged_once_give_the_node_by_node_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    statuses = set()
    for seed in range(150):
        rng = random.Random(seed)
        wl, view = _cluster(rng, seed)
        fast = await run_check_all(DeviceAllocation(), wl, view)
        monkeypatch.setattr(check_module, "SHAPES", False)
        slow = await run_check_all(DeviceAllocation(), wl, view)
        monkeypatch.setattr(check_module, "SHAPES", True)
        assert _said(fast) == _said(slow), seed
        statuses.update(r.status for r in fast)
    assert statuses == {Status.PASS, Status.FAIL, Status.WARN}  # the generated clusters reach every verdict


class _Versioned(FakeView):
    """A view that names its cache versions, as the live one does."""

    version = (10**9, 0)

    def cache_version(self, resource: str) -> tuple[int, int] | None:
        return self.version


def test_the_slice_index_is_kept_while_the_slice_cache_version_holds() -> None:
    s = _nvidia_slice(1)
    view = _Versioned({"resourceslices": [s]})
    first = check_module._slice_index(view)
    assert check_module._slice_index(view) is first
    view.version = (10**9, 1)  # a slice added, changed or removed
    second = check_module._slice_index(view)
    assert second is not first
    assert check_module._slice_index(FakeView({"resourceslices": [s]})) is not check_module._slice_index(
        FakeView({"resourceslices": [s]})
    )  # no version: a new index every review


def test_a_kept_index_reads_a_changed_node_again() -> None:
    s = _nvidia_slice(1)
    s["spec"].pop("nodeName")
    s["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["yes"]}]}]
    }
    index = SliceIndex([s])
    node = {"metadata": {"name": "node-1", "labels": {"gpu": "yes"}}}
    assert len(index.devices(node, term_matches)[0]) == 8
    changed = {"metadata": {"name": "node-1", "labels": {"gpu": "no"}}}  # the cache's new object for the node
    assert index.devices(changed, term_matches)[0] == []
