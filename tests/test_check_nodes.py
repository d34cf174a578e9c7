"""Node Selector Match, Per-Node Schedulability, Tolerations: every status, exact wording."""

from __future__ import annotations

import pytest

from tests.fakeview import FakeView, container, meta, pod, run_check, workload
from webhook.checks.nodes import NodeSelectorMatch, PerNodeSchedulability, Tolerations
from webhook.models.nodes import selects, tolerates
from webhook.results import Status
from webhook.workloads.base import PodGroup


def _node(
    name: str,
    labels: dict | None = None,
    *,
    ready: bool = True,
    cordoned: bool = False,
    taints: list | None = None,
    alloc: dict | None = None,
) -> dict:
    n = {
        "metadata": meta(name, labels=labels or {}),
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "allocatable": alloc or {"cpu": "64", "memory": "512Gi", "pods": "110"},
        },
    }
    if cordoned:
        n["spec"]["unschedulable"] = True
    if taints:
        n["spec"]["taints"] = taints
    return n


def _wl(kind: str = "TrainJob", **spec) -> object:
    p = pod(container("node", {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"}), **spec)
    return workload([PodGroup("node", 4, p)], kind=kind)


#: what the placement checks say when nothing could add a node (FakeView: no Karpenter, no Kueue, no ConfigMap)
NONE = (
    ", and nothing could add one (Karpenter not installed, no cluster-autoscaler status ConfigMap "
    "kube-system/cluster-autoscaler-status, Kueue not installed)"
)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_ALLOC = {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}


# --- Node Selector Match ---


async def test_selector_skip_when_unset() -> None:
    r = await run_check(NodeSelectorMatch(), _wl(), FakeView())
    assert (r.status, r.message) == (Status.SKIP, "No nodeSelector or required node affinity set")


async def test_selector_no_match_fails_with_label_fix() -> None:
    view = FakeView({"nodes": [_node("cpu-1", {"pool": "cpu"}), _node("cpu-2", {"pool": "cpu"})]})
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu-h100"}), view)
    assert r.status is Status.FAIL
    assert r.message == (
        f"No node matches nodeSelector {{pool=gpu-h100}} of the node pods (0 of 2 nodes){NONE}. Fix: label a node "
        "(kubectl label node <name> pool=gpu-h100) or correct nodeSelector (in the runtime or spec.runtimePatches)."
    )
    r = await run_check(NodeSelectorMatch(), _wl("AIPerfJob", nodeSelector={"pool": "gpu-h100"}), view)
    assert r.message.endswith("or correct spec.podTemplate.nodeSelector.")


async def test_selector_matching_nodes_cordoned_or_not_ready_only_warns() -> None:
    view = FakeView(
        {"nodes": [_node("gpu-1", {"pool": "gpu"}, cordoned=True), _node("gpu-2", {"pool": "gpu"}, ready=False)]}
    )
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), view)
    assert r.status is Status.WARN
    assert r.message == (
        "The 2 nodes matching nodeSelector {pool=gpu} of the node pods are not Ready or cordoned "
        "(gpu-1: cordoned, gpu-2: NotReady): the pods wait until one is back. "
        "Fix: uncordon (kubectl uncordon gpu-1) or repair them, or label another node to match."
    )


async def test_selector_pass_and_affinity() -> None:
    view = FakeView(
        {"nodes": [_node("gpu-1", {"pool": "gpu", "zone": "a"}), _node("gpu-2", {"pool": "gpu", "zone": "b"})]}
    )
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), view)
    assert (r.status, r.message) == (
        Status.PASS,
        "nodeSelector {pool=gpu} of the node pods matches 2 Ready, schedulable nodes",
    )
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["c"]}]}]
            }
        }
    }
    r = await run_check(NodeSelectorMatch(), _wl(affinity=aff), view)
    assert r.status is Status.FAIL
    assert r.message == (
        f"No node matches required node affinity (zone In [c]) of the node pods (0 of 2 nodes){NONE}. Fix: label a node to "
        "satisfy it, or correct nodeSelector (in the runtime or spec.runtimePatches) / affinity."
    )


async def test_selector_no_nodes_warns() -> None:
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), FakeView())
    assert (r.status, r.message) == (Status.WARN, "No nodes are visible, so the pods' node selection cannot be matched")


@pytest.mark.parametrize(
    "expr,expected",
    [
        ({"key": "gen", "operator": "Gt", "values": ["3"]}, True),
        ({"key": "gen", "operator": "Lt", "values": ["3"]}, False),
        ({"key": "pool", "operator": "NotIn", "values": ["cpu"]}, True),
        ({"key": "spot", "operator": "DoesNotExist"}, True),
        ({"key": "spot", "operator": "Exists"}, False),
    ],
)
def test_affinity_operators(expr: dict, expected: bool) -> None:
    node = _node("n", {"gen": "4", "pool": "gpu"})
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}
            }
        }
    }
    assert selects(spec, node) is expected


# --- Per-Node Schedulability ---


async def test_fits_a_node() -> None:
    view = FakeView({"nodes": [_node("gpu-1", taints=[GPU_TAINT], alloc=GPU_ALLOC), _node("cpu-1")]})
    wl = _wl(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    r = await run_check(PerNodeSchedulability(), wl, view)
    assert (r.status, r.message) == (
        Status.PASS,
        "Each pod fits a node: node (cpu 32, memory 256Gi, nvidia.com/gpu 8) fits 1 of 2 eligible nodes",
    )


async def test_largest_pod_fits_no_node() -> None:
    view = FakeView(
        {"nodes": [_node("gpu-1", alloc={"cpu": "16", "memory": "1Ti", "nvidia.com/gpu": "8"}), _node("cpu-1")]}
    )
    r = await run_check(PerNodeSchedulability(), _wl(), view)
    assert r.status is Status.FAIL
    assert r.message == (
        "No single node can fit a node pod (cpu 32, memory 256Gi, nvidia.com/gpu 8): none of the 2 eligible nodes "
        f"has all of it at once{NONE}. Fix: add nodes with that much allocatable, or reduce the pod's requests."
    )
    view = FakeView({"nodes": [_node("cpu-1")]})
    r = await run_check(PerNodeSchedulability(), _wl(), view)
    assert r.message.startswith(
        "No single node can fit a node pod (cpu 32, memory 256Gi, nvidia.com/gpu 8): the most any of the 1 eligible node "
        "offers is nvidia.com/gpu 0 (cpu-1), and nothing could add one"
    )


async def test_untolerated_taint_fails_with_toleration_fix() -> None:
    view = FakeView({"nodes": [_node("gpu-1", {"pool": "gpu"}, taints=[GPU_TAINT], alloc=GPU_ALLOC)]})
    r = await run_check(PerNodeSchedulability(), _wl("AIPerfJob", nodeSelector={"pool": "gpu"}), view)
    assert r.status is Status.FAIL
    assert r.message == (
        "Every Ready node the node pods may use has a taint they do not tolerate (gpu-1: nvidia.com/gpu=present:NoSchedule)"
        f"{NONE}. Fix: add a toleration such as {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}} to "
        "spec.podTemplate.tolerations, or use untainted nodes."
    )


async def test_no_selected_node_is_left_to_selector_check() -> None:
    view = FakeView({"nodes": [_node("cpu-1", {"pool": "cpu"})]})
    r = await run_check(PerNodeSchedulability(), _wl(nodeSelector={"pool": "gpu"}), view)
    assert (r.status, r.message) == (
        Status.SKIP,
        "No Ready, schedulable node matches the node selection of the node pods (see Node Selector Match)",
    )
    r = await run_check(PerNodeSchedulability(), _wl(), FakeView())
    assert (r.status, r.message) == (Status.SKIP, "No nodes are visible")


# --- Tolerations ---


@pytest.mark.parametrize(
    "tol,expected",
    [
        ({"operator": "Exists"}, True),
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
        ({"key": "nvidia.com/gpu", "value": "present"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
    ],
)
def test_tolerates(tol: dict, expected: bool) -> None:
    assert tolerates(tol, GPU_TAINT) is expected


async def test_tolerations_statuses() -> None:
    view = FakeView({"nodes": [_node("gpu-1", taints=[GPU_TAINT])]})
    r = await run_check(Tolerations(), _wl(), view)
    assert (r.status, r.message) == (Status.SKIP, "No tolerations set")
    r = await run_check(Tolerations(), _wl(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]), view)
    assert (r.status, r.message) == (Status.PASS, "Every toleration matches a taint on at least one node")
    r = await run_check(
        Tolerations(), _wl(tolerations=[{"key": "nvidia.com/gpus", "operator": "Exists", "effect": "NoSchedule"}]), view
    )
    assert (r.status, r.message) == (
        Status.WARN,
        "No node has a taint matching toleration nvidia.com/gpus:NoSchedule (node pods): misspelled or unneeded?",
    )
    assert r.details == ["toleration nvidia.com/gpus:NoSchedule of the node pods matches no node's taint"]


async def test_keyless_exists_and_condition_taints_never_warn() -> None:
    view = FakeView({"nodes": [_node("plain")]})
    wl = _wl(
        tolerations=[
            {"operator": "Exists"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ]
    )
    r = await run_check(Tolerations(), wl, view)
    assert (r.status, r.message) == (
        Status.PASS,
        "The tolerations match any taint (key-less Exists) or node condition taints",
    )
