"""Device Allocation (DRA) against the real outcome: the real kube-scheduler on the real node.

A hand-made DeviceClass `gpu.example.com` and one ResourceSlice publishing two H100 devices of driver
`gpu.example.com` on the node (no driver runs: the scheduler needs none to decide). Four pods, each
with one claim from a ResourceClaimTemplate (the resourceclaim controller of the real
kube-controller-manager makes the claims):

- a claim on DeviceClass `nosuch.example.com` → Pending: `device class nosuch.example.com does not exist`;
- 4 devices where the node has 2 → Pending: `cannot allocate all claims`;
- a CEL selector for model B200 → Pending: `cannot allocate all claims`;
- 2 devices → scheduled (the kubelet then waits for a DRA driver that never registers).

The check, in process on a live cluster view of the same cluster, denies the first three with the
texts of tests/test_check_dra.py and admits the fourth.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

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
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{NODE_NAME}-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": NODE_NAME,
                "pool": {"name": NODE_NAME, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "H100"}}} for i in range(2)],
            },
        },
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


def _pod_spec(template: str) -> dict[str, Any]:
    return {
        "containers": [
            {
                "name": "main",
                "image": "registry.example/none:1",
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
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": _pod_spec(name)}
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
        results = verdicts[name]
        assert [r.status for r in results] == [ours], [(r.status, r.message) for r in results]
        if ours is Status.FAIL:
            assert results[0].message.endswith(".") and "Fix:" in results[0].message
