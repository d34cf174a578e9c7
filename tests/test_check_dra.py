"""Device Allocation (DRA): every status and its exact wording, on the issue's cases (one node, two
H100 devices of gpu.example.com published by a hand-made ResourceSlice, no driver)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakeview import FakeView, container, meta, pod, run_check, run_check_all, workload
from webhook.checks.dra import DeviceAllocation
from webhook.models.dra.allocate import Claim, Device, Request, fit
from webhook.models.dra.cel import device_matches, outside_subset
from webhook.results import Status
from webhook.workloads.base import PodGroup
from webhook.workloads.podspec import PodClaim, clean_pod_spec, resource_claims

DRIVER = "gpu.example.com"
NONE = (
    ", and nothing could add one (Karpenter not installed, no cluster-autoscaler status ConfigMap "
    "kube-system/cluster-autoscaler-status, Kueue not installed)"
)


def _node(name: str = "node-1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": meta(name, labels=labels or {}),
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "8", "pods": "110"}},
    }


def _slice(node: str = "node-1", models: tuple[str, ...] = ("H100", "H100"), **pool: Any) -> dict[str, Any]:
    return {
        "metadata": meta(f"{node}-{DRIVER}"),
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1, **pool},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"model": {"string": m}, "index": {"int": i}}}
                for i, m in enumerate(models)
            ],
        },
    }


def _class(name: str = DRIVER, selectors: list[str] | None = None) -> dict[str, Any]:
    sel = selectors if selectors is not None else [f'device.driver == "{DRIVER}"']
    return {"metadata": meta(name), "spec": {"selectors": [{"cel": {"expression": e}} for e in sel]}}


def _template(name: str = "gpus", *, cls: str = DRIVER, count: int = 2, selectors: list[str] | None = None,
              mode: str = "ExactCount") -> dict[str, Any]:  # fmt: skip
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {
        "metadata": meta(name, "team-a"),
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}},
    }


def _wl(pods: int = 1, claim: dict[str, str] | None = None) -> Any:
    c = container("node", {"cpu": "1"})
    c["resources"]["claims"] = [{"name": "gpus"}]
    p = pod(c)
    p["resourceClaims"] = [{"name": "gpus", **(claim or {"resourceClaimTemplateName": "gpus"})}]
    return workload([PodGroup("node", pods, p)], kind="TrainJob", namespace="team-a")


def _view(*extra: tuple[str, dict[str, Any]], template: dict[str, Any] | None = None) -> FakeView:
    view = FakeView(
        {
            "nodes": [_node()],
            "resourceslices": [_slice()],
            "deviceclasses": [_class()],
            "resourceclaimtemplates": [template or _template()],
        }
    )
    for resource, obj in extra:
        view.add(resource, obj)
    return view


async def test_no_claims_skips() -> None:
    r = await run_check(DeviceAllocation(), workload([PodGroup("node", 1, pod(container("node", {})))]), FakeView())
    assert (r.status, r.message) == (Status.SKIP, "No pod uses a DRA ResourceClaim")


async def test_two_devices_on_two_device_node_passes() -> None:
    r = await run_check(DeviceAllocation(), _wl(), _view())
    assert (r.status, r.message) == (Status.PASS, "DRA claims can be allocated: the node pods' claims fit on node-1")


async def test_missing_device_class_fails() -> None:
    r = await run_check(DeviceAllocation(), _wl(), _view(template=_template(cls="nosuch.example.com")))
    assert r.status is Status.FAIL
    assert r.message == (
        'ResourceClaimTemplate "gpus" request "gpus" (pod claim "gpus" of the node pods) asks for DeviceClass '
        '"nosuch.example.com", which does not exist (the scheduler: device class nosuch.example.com does not exist, '
        "and the pods stay Pending). Fix: install the DRA driver that provides it, or correct deviceClassName."
    )


async def test_four_devices_on_two_device_node_fails() -> None:
    r = await run_check(DeviceAllocation(), _wl(), _view(template=_template(count=4)))
    assert r.status is Status.FAIL
    assert r.message == (
        "No node can allocate the claims of the node pods at once (the scheduler: cannot allocate all claims): "
        'ResourceClaimTemplate "gpus" request "gpus" wants 4 devices of DeviceClass "gpu.example.com"; the best of '
        '1 eligible node, node-1, offers 2 free matching devices for ResourceClaimTemplate "gpus" request "gpus"'
        f"{NONE}. Fix: ask for what one node offers (count, selectors), or add nodes whose DRA driver publishes "
        "such devices."
    )


async def test_selector_for_b200_fails() -> None:
    t = _template(count=1, selectors=[f'device.attributes["{DRIVER}"].model == "B200"'])
    r = await run_check(DeviceAllocation(), _wl(), _view(template=t))
    assert r.status is Status.FAIL
    assert "offers 0 free matching devices" in r.message


async def test_missing_template_and_claim_fail() -> None:
    view = FakeView({"nodes": [_node()], "resourceslices": [_slice()], "deviceclasses": [_class()]})
    r = await run_check(DeviceAllocation(), _wl(), view)
    assert (r.status, r.message) == (
        Status.FAIL,
        'ResourceClaimTemplate "gpus" not found in namespace "team-a" (pod claim "gpus" of the node pods): no '
        "claim is made for the pods, so they stay Pending. Fix: create it in team-a, or correct "
        "resourceClaimTemplateName.",
    )
    r = await run_check(DeviceAllocation(), _wl(claim={"resourceClaimName": "shared"}), view)
    assert r.message == (
        'ResourceClaim "shared" not found in namespace "team-a" (pod claim "gpus" of the node pods): the scheduler '
        'answers resourceclaim "shared" not found. Fix: create it in team-a, or correct resourceClaimName.'
    )


async def test_devices_allocated_to_other_claims_are_not_free() -> None:
    other = {
        "metadata": meta("other", "team-b"),
        "spec": {},
        "status": {"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": "node-1", "device": "gpu-0"}]}}},
    }  # fmt: skip
    r = await run_check(DeviceAllocation(), _wl(), _view(("resourceclaims", other)))
    assert r.status is Status.FAIL
    assert "offers 1 free matching devices" in r.message


async def test_gang_needs_devices_for_every_pod() -> None:
    view = _view(template=_template(count=1))
    r = await run_check(DeviceAllocation(), _wl(pods=2), view)
    assert (r.status, r.message) == (
        Status.PASS,
        "DRA claims can be allocated: all 2 node pods' claims fit at once on node-1",
    )
    r = await run_check(DeviceAllocation(), _wl(pods=3), view)
    assert r.status is Status.FAIL
    assert r.message == (
        'The 3 node pods need their claims allocated at once, at least 3 devices (ResourceClaimTemplate "gpus" '
        'request "gpus" wants 1 device of DeviceClass "gpu.example.com" per pod), but the eligible nodes hold devices '
        "for at most 2 of them (devices already allocated excluded): the JobSet's pods would wait for each other "
        "forever. Fix: lower the number of pods or the devices per pod, or add nodes with such devices."
    )


async def test_groups_competing_for_the_devices_warn_never_deny() -> None:
    c = container("node", {"cpu": "1"})
    p = pod(c)
    p["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "gpus"}]
    wl = workload([PodGroup("controller", 1, p), PodGroup("workers", 1, p)], kind="AIPerfJob", namespace="team-a")
    rs = await run_check_all(DeviceAllocation(), wl, _view())
    assert [(r.status, r.message) for r in rs] == [
        (
            Status.WARN,
            "Cannot verify that all 1 workers pods' claims fit beside the job's other pods (0 surely do)",
        )
    ]


async def test_a_group_takes_devices_for_its_own_pods_only_and_leaves_the_other_nodes_to_the_next() -> None:
    # two nodes of two GPUs; each group's one pod takes both GPUs of a node: the scheduler puts the
    # controller on one node and the worker on the other. Taking a node's devices for every node the
    # first group could use left the second group nothing, and it was warned about wrongly.
    c = container("node", {"cpu": "1"})
    p = pod(c)
    p["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "gpus"}]
    wl = workload([PodGroup("controller", 1, p), PodGroup("workers", 1, p)], kind="AIPerfJob", namespace="team-a")
    view = _view(("nodes", _node("node-2")), ("resourceslices", _slice("node-2")))
    rs = await run_check_all(DeviceAllocation(), wl, view)
    assert [(r.status, r.message) for r in rs] == [
        (
            Status.PASS,
            "DRA claims can be allocated: the controller pods' claims fit on node-1, node-2; "
            "the workers pods' claims fit on node-1, node-2",
        )
    ]


async def test_the_walk_over_the_nodes_stops_once_every_pod_is_placed_and_three_nodes_are_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from webhook.models.dra.allocate import SliceIndex

    names = [f"node-{i}" for i in range(1, 8)]
    view = _view()
    for n in names[1:]:
        view.add("nodes", _node(n))
        view.add("resourceslices", _slice(n))
    walked: list[str] = []
    devices = SliceIndex.devices

    def recorded(self: SliceIndex, node: dict[str, Any], term_matches: Any) -> Any:
        walked.append(node["metadata"]["name"])
        return devices(self, node, term_matches)

    monkeypatch.setattr(SliceIndex, "devices", recorded)
    r = await run_check(DeviceAllocation(), _wl(pods=2), view)
    assert (r.status, r.message) == (
        Status.PASS,
        "DRA claims can be allocated: all 2 node pods' claims fit at once on node-1, node-2, node-3",
    )
    assert walked == names[:3]  # two nodes place the two pods; the third is the last one the message names


async def test_selector_outside_subset_warns_never_denies() -> None:
    t = _template(count=4, selectors=[f'device.capacity["{DRIVER}"].memory.compareTo(quantity("80Gi")) >= 0'])
    r = await run_check(DeviceAllocation(), _wl(), _view(template=t))
    assert (r.status, r.message) == (
        Status.WARN,
        'Cannot verify the claims of the node pods: request "gpus" has a selector not evaluated: it reads device capacity',
    )


async def test_no_slices_warns() -> None:
    view = FakeView({"nodes": [_node()], "deviceclasses": [_class()], "resourceclaimtemplates": [_template()]})
    r = await run_check(DeviceAllocation(), _wl(), view)
    assert (r.status, r.message) == (
        Status.WARN,
        "Cannot verify the claims of the node pods: no ResourceSlice offers devices on them yet",
    )


async def test_incomplete_pool_warns() -> None:
    view = _view(template=_template(count=4))
    view.objects["resourceslices"] = [_slice(resourceSliceCount=2)]
    r = await run_check(DeviceAllocation(), _wl(), view)
    assert r.status is Status.WARN
    assert (
        r.message
        == "Cannot verify the claims of the node pods: pool node-1 of gpu.example.com is incomplete (1 of 2 slices)"
    )


async def test_allocated_claim_full_of_consumers_fails() -> None:
    rc = {
        "metadata": meta("shared", "team-a"),
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {
            "allocation": {"devices": {"results": []}},
            "reservedFor": [{"resource": "pods", "name": f"p{i}", "uid": str(i)} for i in range(256)],
        },
    }
    r = await run_check(DeviceAllocation(), _wl(claim={"resourceClaimName": "shared"}), _view(("resourceclaims", rc)))
    assert r.status is Status.FAIL
    assert r.message.startswith(
        'ResourceClaim "shared" (pod claim "gpus" of the node pods) is reserved for 256 consumers'
    )


# --- the pieces ---


def test_pod_spec_keeps_claim_sources() -> None:
    spec = clean_pod_spec(
        {"containers": [{"name": "c", "resources": {"claims": [{"name": "g", "request": "r"}]}}],
         "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]},
        "spec",
    )  # fmt: skip
    assert resource_claims(spec) == [PodClaim("g", None, "t", ("c/r",))]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ('device.attributes["gpu.example.com"].model == "H100"', True),
        ('device.attributes["gpu.example.com"].index > 0', False),
        ('"model" in device.attributes["other.example.com"]', False),
        ('device.attributes["other.example.com"].model == "H100"', None),  # no such key: a runtime error
        ('device.attributes["gpu.example.com"].model.lowerAscii() == "h100"', None),
    ],
)
def test_cel_subset(expr: str, expected: bool | None) -> None:
    attrs = {"model": {"string": "H100"}, "index": {"int": 0}}
    assert device_matches(expr, DRIVER, attrs) is expected


def test_outside_subset_reasons() -> None:
    assert outside_subset('device.attributes["a"].x.lowerAscii() == "y"') == "it calls lowerAscii"
    assert outside_subset('device.driver == "x"') == ""


def test_first_available_and_match_attribute() -> None:
    devs = [Device((DRIVER, "p", f"g{i}"), {"model": {"string": m}}) for i, m in enumerate(["A", "B", "B"])]
    big = Request("r/big", DRIVER, "ExactCount", 3, [])
    small = Request("r/small", DRIVER, "ExactCount", 2, [])
    assert fit([Claim("c", [[big, small]])], devs, set()).ok is True
    same = Claim("c", [[Request("r", DRIVER, "ExactCount", 2, [])]], [(set(), f"{DRIVER}/model")])
    assert fit([same], devs, set()).ok is True
    assert fit([same], devs, {(DRIVER, "p", "g1")}).ok is False
    every = Claim("c", [[Request("r", DRIVER, "All", 0, [])]])
    assert fit([every], devs, {(DRIVER, "p", "g1")}).ok is False  # All: a matching device in use
