"""Could a node be added? Karpenter NodePools, cluster-autoscaler, Kueue ResourceFlavors, as the
placement checks (Node Selector Match, Per-Node Schedulability) use them: every outcome, exact wording."""

from __future__ import annotations

import pytest

from tests.fakeview import FakeView, container, meta, pod, run_check, run_check_all, workload
from webhook.checks.nodes import NodeSelectorMatch, PerNodeSchedulability
from webhook.config import Settings
from webhook.kube import ApiError
from webhook.models.provisioning import (
    Requirement,
    flavors_for,
    from_expressions,
    from_labels,
    incompatibility,
    nodepools_for,
)
from webhook.results import Status
from webhook.workloads.base import PodGroup

SERVED = {"v1", "karpenter.sh/v1", "kueue.x-k8s.io/v1beta2"}
CA = ("configmaps", "kube-system", "cluster-autoscaler-status")
FIX = "Fix: label a node (kubectl label node <name> pool=gpu) or correct spec.podTemplate.nodeSelector."
HEAD = "No node matches nodeSelector {pool=gpu} of the node pods (0 of 1 node)"


def _nodepool(
    name: str, labels: dict | None = None, requirements: list | None = None, taints: list | None = None
) -> dict:
    spec: dict = {"requirements": requirements or []}
    if taints:
        spec["taints"] = taints
    return {"metadata": meta(name), "spec": {"template": {"metadata": {"labels": labels or {}}, "spec": spec}}}


def _flavor(name: str, labels: dict | None = None, taints: list | None = None, tolerations: list | None = None) -> dict:
    spec: dict = {"nodeLabels": labels or {}}
    if taints:
        spec["nodeTaints"] = taints
    if tolerations:
        spec["tolerations"] = tolerations
    return {"metadata": meta(name), "spec": spec}


def _view(nodepools: list | None = None, flavors: list | None = None, **kw: object) -> FakeView:
    cpu = {
        "metadata": meta("cpu-1", labels={"pool": "cpu"}),
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "4", "memory": "8Gi"}},
    }
    return FakeView(
        {"nodes": [cpu], "nodepools": nodepools or [], "resourceflavors": flavors or []},
        served=set(kw.pop("served", SERVED)),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def _wl(**spec: object) -> object:
    p = pod(container("node", {"cpu": "2"}), **spec)
    return workload([PodGroup("node", 2, p)], kind="AIPerfJob")


async def test_nothing_could_add_a_node_denies_and_names_what_was_read() -> None:
    r = await run_check(
        NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), _view([_nodepool("cpu", {"pool": "cpu"})])
    )
    assert r.status is Status.FAIL
    assert r.message == (
        f"{HEAD}, and nothing could add one (no Karpenter NodePool matches (of 1), no cluster-autoscaler status "
        f"ConfigMap kube-system/cluster-autoscaler-status, no Kueue ResourceFlavor matches (of 0)). {FIX}"
    )


async def test_a_compatible_nodepool_only_warns() -> None:
    view = _view([_nodepool("cpu", {"pool": "cpu"}), _nodepool("gpu", {"pool": "gpu"})])
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), view)
    assert (r.status, r.message) == (
        Status.WARN,
        f'{HEAD}, but a node could still be added (Karpenter NodePool "gpu"). {FIX}',
    )


async def test_cluster_autoscaler_status_configmap_only_warns() -> None:
    view = _view(live={CA: {"metadata": meta("cluster-autoscaler-status", "kube-system")}})
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), view)
    assert (r.status, r.message) == (
        Status.WARN,
        f"{HEAD}, but a node could still be added (cluster-autoscaler (its status ConfigMap "
        f"kube-system/cluster-autoscaler-status exists)). {FIX}",
    )


async def test_configured_autoscaler_location_is_read() -> None:
    settings = Settings.model_validate({"nodeProvisioning": {"clusterAutoscalerStatus": "autoscaler/ca-status"}})
    view = _view(live={("configmaps", "autoscaler", "ca-status"): {"metadata": meta("ca-status", "autoscaler")}})
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), view, settings)
    assert r.status is Status.WARN
    assert "cluster-autoscaler (its status ConfigMap autoscaler/ca-status exists)" in r.message
    off = Settings.model_validate({"nodeProvisioning": {"clusterAutoscalerStatus": ""}})
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), view, off)
    assert r.status is Status.FAIL
    assert "cluster-autoscaler not looked for (nodeProvisioning.clusterAutoscalerStatus is empty)" in r.message


@pytest.mark.parametrize(
    "error,why",
    [
        (ApiError(403, "forbidden", "Forbidden"), "not permitted to get configmaps"),
        (ApiError(0, "timed out"), "timed out"),
    ],
)
async def test_unreadable_autoscaler_status_warns_never_denies(error: ApiError, why: str) -> None:
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), _view(live={CA: error}))
    assert (r.status, r.message) == (
        Status.WARN,
        f"{HEAD}, and whether a node could be added is unknown (cluster-autoscaler status ConfigMap "
        f"kube-system/cluster-autoscaler-status unreadable: {why}). {FIX}",
    )


async def test_unreadable_caches_warn() -> None:
    view = _view(cache_ages={"nodepools": None, "resourceflavors": None})
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), view)
    assert (r.status, r.message) == (
        Status.WARN,
        f"{HEAD}, and whether a node could be added is unknown (Karpenter NodePools unreadable: no list/watch "
        f"permission, or not synced; Kueue ResourceFlavors unreadable: no list/watch permission, or not synced). {FIX}",
    )


async def test_a_resource_flavor_that_could_place_the_pods_warns() -> None:
    taint = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
    tol = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    view = _view(flavors=[_flavor("cpu", {"pool": "cpu"}), _flavor("gpu", {"pool": "gpu"}, [taint], [tol])])
    r = await run_check(NodeSelectorMatch(), _wl(nodeSelector={"pool": "gpu"}), view)
    assert (r.status, r.message) == (
        Status.WARN,
        f'{HEAD}, but a node could still be added (Kueue ResourceFlavor "gpu"). {FIX}',
    )


async def test_per_node_taints_everywhere_deny_unless_a_nodepool_could_add_an_untainted_node() -> None:
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    node = {
        "metadata": meta("gpu-1", labels={"pool": "gpu"}),
        "spec": {"taints": [gpu_taint]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "8"}},
    }
    wl = _wl(nodeSelector={"pool": "gpu"})
    r = await run_check(PerNodeSchedulability(), wl, FakeView({"nodes": [node]}, served=SERVED))
    assert r.status is Status.FAIL
    tainted = _nodepool("gpu", {"pool": "gpu"}, taints=[gpu_taint])
    r = await run_check(PerNodeSchedulability(), wl, FakeView({"nodes": [node], "nodepools": [tainted]}, served=SERVED))
    assert r.status is Status.FAIL  # the NodePool's nodes carry the same taint
    untainted = _nodepool("gpu-open", {"pool": "gpu"})
    out = await run_check_all(
        PerNodeSchedulability(), wl, FakeView({"nodes": [node], "nodepools": [tainted, untainted]}, served=SERVED)
    )
    assert [x.status for x in out] == [Status.WARN]
    assert out[0].message == (
        "Every Ready node the node pods may use has a taint they do not tolerate (gpu-1: nvidia.com/gpu=present:NoSchedule), "
        'but a node could still be added (Karpenter NodePool "gpu-open"). Fix: add a toleration such as '
        "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule} to spec.podTemplate.tolerations, or use untainted nodes."
    )


# --- Karpenter's requirement logic (pkg/scheduling/requirements.go Compatible) ----------------


def _pod_reqs(*exprs: dict) -> dict:
    return from_expressions(list(exprs))


@pytest.mark.parametrize(
    "pool,wanted,ok",
    [
        # a custom label the NodePool does not define: "label … does not have known values"
        ({}, {"key": "pool", "operator": "In", "values": ["gpu"]}, False),
        # ... unless the pod only excludes it
        ({}, {"key": "pool", "operator": "NotIn", "values": ["gpu"]}, True),
        ({}, {"key": "pool", "operator": "DoesNotExist"}, True),
        # well-known labels may stay undefined (AllowUndefinedWellKnownLabels), aliases normalised
        ({}, {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}, True),
        ({}, {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["arm64"]}, True),
        ({}, {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]}, True),
        # defined: the sets must intersect
        ({"pool": "gpu"}, {"key": "pool", "operator": "In", "values": ["gpu", "tpu"]}, True),
        ({"pool": "gpu"}, {"key": "pool", "operator": "NotIn", "values": ["gpu"]}, False),
        ({"pool": "gpu"}, {"key": "pool", "operator": "Exists"}, True),
        ({"pool": "gpu"}, {"key": "pool", "operator": "DoesNotExist"}, False),
        ({"gen": "5"}, {"key": "gen", "operator": "Gt", "values": ["4"]}, True),
        ({"gen": "3"}, {"key": "gen", "operator": "Gt", "values": ["4"]}, False),
        ({"gen": "3"}, {"key": "gen", "operator": "Lt", "values": ["4"]}, True),
        ({"gen": "4"}, {"key": "gen", "operator": "Gte", "values": ["4"]}, True),
        ({"gen": "4"}, {"key": "gen", "operator": "Lt", "values": ["4"]}, False),
        # the NodePool's own name label
        ({}, {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["p"]}, True),
        ({}, {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["other"]}, False),
    ],
)
def test_nodepool_compatibility(pool: dict, wanted: dict, ok: bool) -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [wanted]}]
                }
            }
        }
    }
    assert (nodepools_for(spec, [_nodepool("p", pool)]) == ["p"]) is ok


def test_nodepool_requirements_and_terms() -> None:
    np = _nodepool("p", requirements=[{"key": "zone", "operator": "In", "values": ["a", "b"]}])
    assert nodepools_for({"nodeSelector": {"zone": "b"}}, [np]) == ["p"]
    assert nodepools_for({"nodeSelector": {"zone": "c"}}, [np]) == []
    # terms are alternatives: Karpenter relaxes to the next term
    terms = [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["c"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
    ]
    spec = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    }
    assert nodepools_for(spec, [np]) == ["p"]
    # every template taint must be tolerated, whatever its effect (Taints.Tolerates)
    soft = _nodepool("p", taints=[{"key": "x", "effect": "PreferNoSchedule"}])
    assert nodepools_for({}, [soft]) == []
    assert nodepools_for({"tolerations": [{"key": "x", "operator": "Exists"}]}, [soft]) == ["p"]


def test_requirement_intersections() -> None:
    gt, lt = Requirement.of("g", "Gt", ["2"]), Requirement.of("g", "Lt", ["3"])
    assert gt.intersection(lt).empty()  # v1.13: Gt 2 is gte 3, Lt 3 is lte 2: nothing left
    assert not Requirement.of("g", "Gt", ["2"]).intersection(Requirement.of("g", "Lt", ["4"])).empty()
    both = Requirement.of("k", "NotIn", ["a"]).intersection(Requirement.of("k", "NotIn", ["b"]))
    assert (both.operator, both.values) == ("NotIn", frozenset({"a", "b"}))
    assert incompatibility(from_labels({"k": "a"}), _pod_reqs({"key": "k", "operator": "In", "values": ["b"]})) == (
        "k In ['b'] not in In ['a']"
    )


def test_flavor_taints_and_tolerations() -> None:
    taint = {"key": "gpu", "effect": "NoSchedule"}
    assert flavors_for({"nodeSelector": {"pool": "gpu"}}, [_flavor("f", {"pool": "gpu"}, [taint])]) == []
    assert flavors_for(
        {"nodeSelector": {"pool": "gpu"}},
        [_flavor("f", {"pool": "gpu"}, [taint], [{"key": "gpu", "operator": "Exists"}])],
    ) == ["f"]
    # a flavor without node labels says nothing about a custom label
    assert flavors_for({"nodeSelector": {"pool": "gpu"}}, [_flavor("default")]) == []


def test_a_flavor_counts_only_for_nodes_not_there_yet() -> None:
    """A flavor adds no node: only labels no node carries stand for a pool still to come (docs/fidelity.md)."""
    # no selection at all: a label-less flavor is the nodes already judged, never "could add"
    assert flavors_for({}, [_flavor("default")]) == []
    gpu = _flavor("gpu", {"pool": "gpu"})
    assert flavors_for({}, [gpu], nodes=[]) == ["gpu"]
    assert flavors_for({}, [gpu], nodes=[{"metadata": {"labels": {"pool": "cpu"}}}]) == ["gpu"]
    assert flavors_for({}, [gpu], nodes=[{"metadata": {"labels": {"pool": "gpu", "x": "y"}}}]) == []
