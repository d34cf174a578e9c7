"""Network Policies: every status and the exact wording; the NetworkPolicy semantics it follows."""

from __future__ import annotations

import pytest

from tests.fakeview import FakeView, container, meta, pod, run_check, workload
from webhook.checks.netpol import NetworkPolicies
from webhook.models.netpol import Labels, Port, policy_types, port_matches, selector_matches
from webhook.results import Status
from webhook.workloads.base import PodGroup

SERVED = {"v1", "networking.k8s.io/v1"}


def _ns(name: str, **labels: str) -> dict:
    return {"metadata": meta(name, labels={"kubernetes.io/metadata.name": name, **labels})}


NAMESPACES = [_ns("bench"), _ns("models", team="ml"), _ns("kube-system"), _ns("train")]
SVC = {
    "metadata": meta("llm", "models"),
    "spec": {"clusterIP": "10.96.0.5", "ports": [{"port": 8000, "targetPort": 8080}], "selector": {"app": "llm"}},
}
URL = "http://llm.models.svc.cluster.local:8000/v1"


def _np(name: str, ns: str, pod_selector: dict | None = None, **spec: object) -> dict:
    return {"metadata": meta(name, ns), "spec": {"podSelector": pod_selector or {}, **spec}}


def _bench() -> object:
    obj = {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "metadata": {"name": "b", "namespace": "bench"},
        "spec": {"benchmark": {"endpoint": {"urls": [URL]}}},
    }
    g = PodGroup("workers", 2, pod(container("worker-0")), {"labels": {"app": "aiperf"}}, role="workers")
    return workload([g], kind="AIPerfJob", name="b", namespace="bench", obj=obj)


def _view(*policies: dict) -> FakeView:
    return FakeView({"namespaces": NAMESPACES, "services": [SVC], "networkpolicies": list(policies)}, served=SERVED)


DENY_EGRESS = _np("default-deny-egress", "bench", policyTypes=["Egress"])
ALLOW_DNS = _np(
    "allow-dns",
    "bench",
    policyTypes=["Egress"],
    egress=[
        {
            "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
            "ports": [{"protocol": "UDP", "port": 53}],
        }
    ],
)


async def test_no_policies_pass() -> None:
    r = await run_check(NetworkPolicies(), _bench(), _view())
    assert (r.status, r.message) == (
        Status.PASS,
        'No NetworkPolicy in namespace "bench", "kube-system", "models": traffic is not restricted',
    )


async def test_default_deny_egress_drops_the_requests_and_dns() -> None:
    r = await run_check(NetworkPolicies(), _bench(), _view(DENY_EGRESS))
    assert r.status is Status.WARN
    assert r.details[:2] == [
        'NetworkPolicies drop the workers pods\' requests to Service "llm" in "models" (port 8080/TCP): '
        'NetworkPolicy "default-deny-egress" in "bench" isolates their egress and no rule allows it, so the '
        'benchmark hangs. Fix: add an egress rule allowing it to a NetworkPolicy in "bench"',
        "NetworkPolicies drop the workers pods' DNS lookups (kube-dns in kube-system) (port 53/UDP): NetworkPolicy "
        '"default-deny-egress" in "bench" isolates their egress and no rule allows it, so the endpoint\'s name does '
        'not resolve. Fix: add an egress rule allowing it to a NetworkPolicy in "bench"',
    ]
    assert r.details[-1] == "judged from the policy objects; enforcement depends on the cluster's CNI"


async def test_policies_add_up_allowing_egress_passes() -> None:
    allow_llm = _np(
        "allow-llm",
        "bench",
        {"matchLabels": {"app": "aiperf"}},
        policyTypes=["Egress"],
        egress=[
            {
                "to": [
                    {
                        "namespaceSelector": {"matchLabels": {"team": "ml"}},
                        "podSelector": {"matchLabels": {"app": "llm"}},
                    }
                ],
                "ports": [{"port": 8000, "endPort": 8100}],
            }
        ],
    )
    r = await run_check(NetworkPolicies(), _bench(), _view(DENY_EGRESS, ALLOW_DNS, allow_llm))
    assert (r.status, r.message) == (
        Status.PASS,
        'The NetworkPolicies of "bench", "kube-system", "models" allow the job\'s 2 connection paths',
    )


async def test_ingress_of_the_endpoint_pods() -> None:
    only_ops = _np(
        "llm-from-ops",
        "models",
        {"matchLabels": {"app": "llm"}},
        ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops"}}}]}],
    )
    r = await run_check(NetworkPolicies(), _bench(), _view(only_ops))
    assert (r.status, r.message) == (
        Status.WARN,
        'NetworkPolicies drop the workers pods\' requests to Service "llm" in "models" (port 8080/TCP): NetworkPolicy '
        '"llm-from-ops" in "models" isolates the ingress of those pods and no rule allows it, so the benchmark hangs. '
        'Fix: add an ingress rule allowing it to a NetworkPolicy in "models"',
    )


async def test_unknown_labels_and_ip_blocks_cannot_tell() -> None:
    gpu_only = _np("gpu-pods", "models", {"matchLabels": {"tier": "gpu"}}, ingress=[])
    r = await run_check(NetworkPolicies(), _bench(), _view(gpu_only))
    assert (r.status, r.message) == (
        Status.WARN,
        'Cannot tell whether NetworkPolicies allow the workers pods\' requests to Service "llm" in "models" '
        '(port 8080/TCP): NetworkPolicy "gpu-pods" select by labels, named ports or ipBlocks the webhook cannot resolve',
    )
    cidr = _np("to-10", "bench", policyTypes=["Egress"], egress=[{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}])
    r = await run_check(NetworkPolicies(), _bench(), _view(cidr))
    assert r.status is Status.WARN and r.message.startswith("Cannot tell whether")
    anywhere = _np("anywhere", "bench", policyTypes=["Egress"], egress=[{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}])
    r = await run_check(NetworkPolicies(), _bench(), _view(anywhere))
    assert r.status is Status.PASS


def _trainjob(pods: int = 2) -> object:
    p = pod(container("node", ports=[{"containerPort": 29500}]))
    init = PodGroup("dataset-initializer", 1, pod(container("dataset-initializer")), role="dataset-initializer")
    node = PodGroup("node", pods, p, {"labels": {"app": "ft"}}, role="trainer")
    return workload([init, node], name="ft", namespace="train")


async def test_training_pods_reach_each_other_on_every_port() -> None:
    rdzv_only = _np(
        "rdzv-only",
        "train",
        {"matchLabels": {"app": "ft"}},
        ingress=[{"from": [{"podSelector": {"matchLabels": {"app": "ft"}}}], "ports": [{"port": 29500}]}],
    )
    view = FakeView({"namespaces": NAMESPACES, "networkpolicies": [rdzv_only]}, served=SERVED)
    r = await run_check(NetworkPolicies(), _trainjob(), view)
    assert (r.status, r.message) == (
        Status.WARN,
        "NetworkPolicies drop the node pods' collective traffic to the node pods (every TCP port): NetworkPolicy "
        '"rdzv-only" in "train" isolates the ingress of the node pods and no rule allows it, so NCCL, Gloo and MPI '
        'open connections on ports of their own choosing. Fix: add an ingress rule allowing it to a NetworkPolicy in "train"',
    )
    same_job = _np(
        "same-job",
        "train",
        ingress=[{"from": [{"podSelector": {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "ft"}}}]}],
        egress=[{"to": [{"podSelector": {}}]}],
        policyTypes=["Ingress", "Egress"],
    )
    view = FakeView({"namespaces": NAMESPACES, "networkpolicies": [same_job]}, served=SERVED)
    r = await run_check(NetworkPolicies(), _trainjob(), view)
    assert (r.status, r.message) == (
        Status.PASS,
        'The NetworkPolicies of "train" allow the job\'s 2 connection paths',
    )
    deny = _np("deny", "train", policyTypes=["Ingress"])
    r = await run_check(
        NetworkPolicies(), _trainjob(), FakeView({"namespaces": NAMESPACES, "networkpolicies": [deny]}, served=SERVED)
    )
    assert r.details[0] == (
        'NetworkPolicies drop the node pods\' traffic to the node pods (port 29500/TCP): NetworkPolicy "deny" in '
        '"train" isolates the ingress of the node pods and no rule allows it, so the training hangs at rendezvous. '
        'Fix: add an ingress rule allowing it to a NetworkPolicy in "train"'
    )


async def test_single_pod_job_opens_no_connection() -> None:
    r = await run_check(NetworkPolicies(), _trainjob(1), FakeView(served=SERVED))
    assert (r.status, r.message) == (Status.SKIP, "The job's pods open no connection to judge")


# --- the API's semantics -------------------------------------------------------------------


def test_policy_types_default() -> None:
    assert policy_types(_np("a", "n")) == {"Ingress"}
    assert policy_types(_np("a", "n", egress=[{}])) == {"Ingress", "Egress"}
    assert policy_types(_np("a", "n", policyTypes=["Egress"])) == {"Egress"}


@pytest.mark.parametrize(
    "rule_ports,port,named,expected",
    [
        (None, Port(80), None, True),
        ([{"port": 80}], Port(80), None, True),
        ([{"port": 80, "protocol": "UDP"}], Port(80), None, False),
        ([{"port": 8000, "endPort": 8100}], Port(8080), None, True),
        ([{"protocol": "TCP"}], Port(80), None, True),
        ([{"port": "http"}], Port(8080), {"http": 8080}, True),
        ([{"port": "http"}], Port(8080), {"http": 9090}, False),
        ([{"port": "http"}], Port(8080), None, None),
        ([{"port": 8080}], Port(None, "http"), None, None),
        ([{"port": 1, "endPort": 65535}], Port(None, any_port=True), None, True),
        ([{"port": 29500}], Port(None, any_port=True), None, False),
    ],
)
def test_port_matches(rule_ports: list | None, port: Port, named: dict | None, expected: bool | None) -> None:
    assert port_matches(rule_ports, port, named) is expected


def test_selector_three_valued() -> None:
    pods = Labels({"app": "aiperf"}, open_prefixes=("jobset.sigs.k8s.io/",))
    assert selector_matches({}, pods) is True
    assert selector_matches({"matchLabels": {"app": "aiperf"}}, pods) is True
    assert selector_matches({"matchLabels": {"app": "llm"}}, pods) is False
    assert selector_matches({"matchLabels": {"role": "db"}}, pods) is False  # no controller adds it
    assert selector_matches({"matchLabels": {"jobset.sigs.k8s.io/job-index": "0"}}, pods) is None
    partial = Labels({"app": "llm"}, complete=False)
    assert selector_matches({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, partial) is None
    assert selector_matches({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x"]}]}, partial)


async def test_the_operator_reaches_the_controller_api_and_results() -> None:
    ports = [
        {"containerPort": 5663, "name": "pub-frontend"},
        {"containerPort": 9090, "name": "api"},
        {"containerPort": 9091, "name": "results"},
        {"containerPort": 8088, "name": "health"},
    ]
    ctrl = PodGroup(
        "controller", 1, pod(container("proxy", ports=ports)), {"labels": {"app": "aiperf"}}, role="controller"
    )
    workers = PodGroup("workers", 1, pod(container("worker-0")), {"labels": {"app": "aiperf"}}, role="workers")
    obj = {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "metadata": {"name": "b", "namespace": "bench"},
    }
    wl = workload([ctrl, workers], kind="AIPerfJob", name="b", namespace="bench", obj=obj | {"spec": {}})
    same_ns = _np("same-namespace-only", "bench", ingress=[{"from": [{"podSelector": {}}]}])
    view = FakeView({"namespaces": NAMESPACES + [_ns("aiperf-system")], "networkpolicies": [same_ns]}, served=SERVED)
    r = await run_check(NetworkPolicies(), wl, view)
    assert r.status is Status.WARN
    assert r.details[:2] == [
        f"NetworkPolicies drop the AIPerf operator's requests to the controller pods (port {p}/TCP): NetworkPolicy "
        '"same-namespace-only" in "bench" isolates the ingress of the controller pods and no rule allows it, so the '
        'operator cannot read the job\'s progress or results. Fix: add an ingress rule allowing it to a NetworkPolicy in "bench"'
        for p in (9090, 9091)
    ]
    assert len(r.details) == 3  # workers → controller on 5663 is allowed (same namespace); health is the kubelet's
    from_operator = _np(
        "from-operator",
        "bench",
        ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "aiperf-system"}}}]}],
    )
    view = FakeView(
        {"namespaces": NAMESPACES + [_ns("aiperf-system")], "networkpolicies": [same_ns, from_operator]}, served=SERVED
    )
    r = await run_check(NetworkPolicies(), wl, view)
    assert (r.status, r.message) == (
        Status.PASS,
        'The NetworkPolicies of "aiperf-system", "bench" allow the job\'s 3 connection paths',
    )


async def test_malformed_pod_specs_are_judged_not_crashed_on() -> None:
    """The AIPerfJob CRD keeps unknown fields: a pod template may hold anything."""
    from webhook.checks.nodes import NodeSelectorMatch

    bad = {
        "nodeSelector": {"pool": 3},
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ["x", 1]}}
        },
        "tolerations": ["x", {"key": 1}],
        "containers": ["x", {"name": "c", "ports": 5}, {"name": "d", "ports": ["a", {"containerPort": "80"}]}],
    }
    g = PodGroup("workers", 2, bad, {"labels": "not-a-map"}, role="workers")
    wl = workload([g], kind="AIPerfJob", name="b", namespace="bench", obj={"spec": {}, "metadata": {"name": "b"}})
    view = FakeView({"namespaces": NAMESPACES, "networkpolicies": [DENY_EGRESS], "nodes": []}, served=SERVED)
    r = await run_check(NetworkPolicies(), wl, view)
    assert r.status is Status.SKIP
    from webhook.models import provisioning

    assert provisioning.pod_requirement_options(bad)
    assert provisioning.nodepools_for(bad, []) == []
    r = await run_check(NodeSelectorMatch(), wl, view)
    assert r.status is Status.WARN  # no nodes visible
    node = {
        "metadata": meta("n", labels={"pool": "3"}),
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    r = await run_check(NodeSelectorMatch(), wl, FakeView({"nodes": [node]}, served=SERVED))
    assert r.status is Status.FAIL and r.message.startswith(
        "No node matches nodeSelector {pool=3}"
    )  # judged, not crashed


def test_lowered_without_the_api_or_the_cache_permissions() -> None:
    from webhook.cluster.capabilities import PermissionResult, capability_of

    check = NetworkPolicies()
    granted = {p: PermissionResult(True) for p in check.permissions}
    cap = capability_of(check, served=lambda gv: gv == "v1", perms=granted)
    assert (cap.value, cap.reason) == ("no", "networking.k8s.io/v1 is not served")
    denied = dict(granted) | {p: PermissionResult(False) for p in check.permissions if p.resource == "networkpolicies"}
    cap = capability_of(check, served=lambda gv: True, perms=denied)
    assert (cap.value, cap.reason) == (
        "no",
        "not permitted to list networkpolicies.networking.k8s.io, watch networkpolicies.networking.k8s.io",
    )


async def test_other_kube_system_policies_leave_dns_alone() -> None:
    metrics = _np("metrics-server", "kube-system", {"matchLabels": {"app": "metrics-server"}}, ingress=[])
    r = await run_check(NetworkPolicies(), _bench(), _view(metrics))
    assert r.status is Status.PASS
    dns_only_from_system = _np(
        "dns-from-system",
        "kube-system",
        {"matchLabels": {"k8s-app": "kube-dns"}},
        ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}]}],
    )
    r = await run_check(NetworkPolicies(), _bench(), _view(dns_only_from_system))
    assert r.status is Status.WARN
    assert r.message.startswith(
        "NetworkPolicies drop the workers pods' DNS lookups (kube-dns in kube-system) (port 53/UDP): NetworkPolicy "
        '"dns-from-system" in "kube-system" isolates the ingress of the kube-dns pods and no rule allows it'
    )


async def test_host_network_pods_are_not_judged() -> None:
    p = pod(container("node", ports=[{"containerPort": 29500}]), hostNetwork=True)
    wl = workload([PodGroup("node", 2, p, role="trainer")], name="ft", namespace="train")
    deny = _np("deny", "train", policyTypes=["Ingress"])
    r = await run_check(
        NetworkPolicies(), wl, FakeView({"namespaces": NAMESPACES, "networkpolicies": [deny]}, served=SERVED)
    )
    assert (r.status, r.message) == (Status.SKIP, "The job's pods open no connection to judge")
