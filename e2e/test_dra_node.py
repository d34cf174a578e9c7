"""Device Allocation (DRA) against the real outcome: the real kube-scheduler and kubelet on the real node.

A DeviceClass `gpu.example.com` and the node's DRA kubelet plugin (e2e/harness/dra_plugin.py,
e2e/draplugin/main.go: driver `gpu.example.com`, registered with the kubelet, publishing one
ResourceSlice of two H100 devices and preparing what is allocated from it). Four pods, each with one
claim from a ResourceClaimTemplate (the resourceclaim controller of the real kube-controller-manager
makes the claims):

- a claim on DeviceClass `nosuch.example.com` → Pending: `device class nosuch.example.com does not exist`;
- 4 devices where the node has 2 → Pending: `cannot allocate all claims`;
- a CEL selector for model B200 → Pending: `cannot allocate all claims`;
- 2 devices → scheduled, its claim allocated from the plugin's pool, prepared by the plugin, and the
  pod Running (without a driver the kubelet refuses it: "DRA driver gpu.example.com is not registered").

The check, in process on a live cluster view of the same cluster, denies the first three with the
texts of tests/test_check_dra.py and admits the fourth.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.harness.dra_plugin import DraPlugin, device_class
from e2e.harness.node import NODE_NAME, Node, poll_until
from webhook.checks import all_checks
from webhook.checks.base import CheckContext
from webhook.checks.dra import DeviceAllocation
from webhook.cluster.live import open_cluster_view
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup, Workload

pytestmark = pytest.mark.node

NS = "dra-e2e"
DRIVER = "gpu.example.com"
#: (template, its `exactly`, what the scheduler says, our status)
CASES: list[tuple[str, dict[str, Any], str, Status]] = [
    ("nosuch", {"deviceClassName": "nosuch.example.com", "count": 1}, "device class nosuch.example.com does not exist", Status.FAIL),
    ("four", {"deviceClassName": DRIVER, "count": 4}, "cannot allocate all claims", Status.FAIL),
    (
        "b200",
        {"deviceClassName": DRIVER, "count": 1,
         "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "B200"'}}]},
        "cannot allocate all claims",
        Status.FAIL,
    ),
    ("two", {"deviceClassName": DRIVER, "count": 2}, "", Status.PASS),
]  # fmt: skip


def _objects() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        device_class(DRIVER),
    ]
    for name, exactly, _, _ in CASES:
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}},
            }
        )
    return objs


def _pod_spec(template: str, image: str = "registry.example/none:1") -> dict[str, Any]:
    return {
        "containers": [
            {
                "name": "main",
                "image": image,
                "resources": {"claims": [{"name": "gpus"}]},
            }
        ],
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
    }


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    node = Node(start_timeout=180)
    node.start()
    try:
        node.wait_node_ready()
        assert node.cp is not None
        node.cp.apply(_objects())
        with DraPlugin(node, driver=DRIVER, devices=2, model="H100"):
            yield node
    finally:
        left = node.stop()
        assert left == [], left


def _pod(node: Node, name: str) -> dict[str, Any]:
    assert node.cp is not None
    return dict(json.loads(node.cp.kubectl("get", "pod", "-n", NS, name, "-o", "json").stdout))


def _condition(pod: dict[str, Any]) -> dict[str, Any]:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return {}


async def _verdicts(node: Node) -> dict[str, list[CheckResult]]:
    """The check on each case's pod, on a live view of the cluster before any pod exists."""
    assert node.cp is not None and node.cp.kubeconfig is not None
    view = await open_cluster_view(Settings(), kubeconfig=str(node.cp.kubeconfig), checks=all_checks(), wait_seconds=60)
    out: dict[str, list[CheckResult]] = {}
    try:
        assert await view.wait_synced(60), view.ready_reason
        for name, *_ in CASES:
            wl = Workload("TrainJob", "trainer.kubeflow.org/v1alpha1", "job", NS, {},
                          pod_groups=[PodGroup("node", 1, _pod_spec(name))])  # fmt: skip
            ctx = CheckContext(workload=wl, deadline=Deadline(15), settings=Settings(), view=view)
            got = await DeviceAllocation().run(ctx)
            out[name] = got if isinstance(got, list) else [got]
    finally:
        await view.close()
    return out


async def test_scheduler_and_check_agree(node: Node) -> None:
    verdicts = await _verdicts(node)
    assert node.cp is not None
    for name, *_ in CASES:
        # the pod that can run runs the node's pause image (loaded, nothing to pull)
        spec = _pod_spec(name, node.pause_image)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}
        node.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))
    for name, _, scheduler_says, ours in CASES:

        def decided(name: str = name) -> bool | str:
            pod = _pod(node, name)
            if pod["spec"].get("nodeName"):
                return True
            cond = _condition(pod)
            if cond.get("status") == "False" and cond.get("message"):
                return True
            return f"no scheduling decision yet: {cond}"

        poll_until(f"the scheduler's decision on pod {name}", decided, timeout=120)
        pod = _pod(node, name)
        if scheduler_says:
            cond = _condition(pod)
            assert not pod["spec"].get("nodeName"), name
            assert (cond["status"], cond["reason"]) == ("False", "Unschedulable"), cond
            assert scheduler_says in cond["message"], cond
        else:
            assert pod["spec"]["nodeName"] == NODE_NAME
            _wait_running(node, name)
        results = verdicts[name]
        assert [r.status for r in results] == [ours], [(r.status, r.message) for r in results]
        if ours is Status.FAIL:
            assert results[0].message.endswith(".") and "Fix:" in results[0].message


def _wait_running(node: Node, name: str) -> None:
    """The scheduled pod starts: its claim allocated from the plugin's pool on the node, then Running."""

    def running() -> bool | str:
        pod = _pod(node, name)
        st = pod.get("status") or {}
        return st.get("phase") == "Running" or f"phase {st.get('phase')}: {st.get('containerStatuses')}"

    poll_until(f"pod {name} Running (its claim prepared by the DRA plugin)", running, timeout=120)
    claim = (_pod(node, name)["status"].get("resourceClaimStatuses") or [{}])[0].get("resourceClaimName")
    assert claim, _pod(node, name)["status"]
    assert node.cp is not None
    got = json.loads(node.cp.kubectl("get", "resourceclaim", "-n", NS, claim, "-o", "json").stdout)
    results = got["status"]["allocation"]["devices"]["results"]
    assert sorted((r["driver"], r["pool"], r["device"]) for r in results) == [
        (DRIVER, NODE_NAME, "gpu-0"),
        (DRIVER, NODE_NAME, "gpu-1"),
    ]
