"""The checks the real stack showed were missing, against the real kube-apiserver (issue 10, "Also"):

* Node Selector Match denies only when nothing could add a node: then Karpenter's own NodePool
  CRD (installed here from its Go module) with a NodePool that could, a Kueue ResourceFlavor
  that could, cluster-autoscaler's status ConfigMap — each turns the deny into a warning;
  a source the webhook may not read is a warning too;
* Controllers from real Deployments (status written through the status subresource) and
  Leases, in namespaces set by configuration; a missing permission lowers the check to skip;
* Endpoint Service reads the Service's real EndpointSlices;
* Network Policies judges real NetworkPolicy objects.

No controller runs here, so objects a controller would write (Deployment status, Leases,
EndpointSlices) are written as that controller would, with kubectl.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane
from e2e.harness.live import live_evaluate, result_of
from e2e.harness.live import live_evaluate as _live_evaluate
from webhook.config import Settings
from webhook.results import Status

ROOT = Path(__file__).resolve().parents[1]
AIPERF = yaml.safe_load((ROOT / "e2e" / "samples" / "aiperfjob-good.yaml").read_text())
OPTIONAL_CRDS = "crds-optional"


def _aiperfjob(ns: str, url: str, **pod_template: Any) -> dict[str, Any]:
    job = json.loads(json.dumps(AIPERF))
    job["metadata"] = {"name": "bench10", "namespace": ns}
    job["spec"]["benchmark"]["endpoint"]["urls"] = [url]
    if pod_template:
        job["spec"]["podTemplate"] = pod_template
    return job


def _rfc3339(age: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _optional_crds_dir() -> Path:
    out = subprocess.run(["bash", str(ROOT / "e2e" / "build.sh"), "optional-crds"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    path = subprocess.run(["bash", str(ROOT / "e2e" / "build.sh"), "path"], capture_output=True, text=True)
    return Path(path.stdout.strip()) / OPTIONAL_CRDS


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> ControlPlane:
    """The control plane with one Ready node labelled pool=chk10-cpu (no kubelet: its status written as one would)."""
    cp = control_plane
    cp.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "chk10-cpu-1", "labels": {"pool": "chk10-cpu"}}})
    now = _rfc3339(0)
    ready = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "ok",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
        }
    }
    cp.kubectl("patch", "node", "chk10-cpu-1", "--subresource=status", "--type=merge", "-p", json.dumps(ready))
    # TaintNodesByCondition taints a new node not-ready; no node lifecycle controller here removes it
    cp.kubectl("taint", "node", "chk10-cpu-1", "node.kubernetes.io/not-ready:NoSchedule-", check=False)
    return cp


# --- Node Selector Match: deny only when nothing could add a node -----------------------------


async def test_placement_denies_only_when_nothing_could_add_a_node(cluster: ControlPlane, open_view: Any) -> None:
    ns = "chk10-nodes"
    cluster.ensure_namespace(ns)
    job = _aiperfjob(ns, "https://api.example.com/v1", nodeSelector={"pool": "chk10-gpu"})
    view = await open_view()
    assert not view.served("karpenter.sh/v1"), "this module installs Karpenter's CRDs itself"
    nodes, flavors = len(view.list_cached("nodes")), len(view.list_cached("resourceflavors"))
    ev = await live_evaluate(job, view)
    r = result_of(ev, "Node Selector Match")
    head = f"No node matches nodeSelector {{pool=chk10-gpu}} of the controller pods (0 of {nodes} node{'s' * (nodes != 1)})"
    fix = "Fix: label a node (kubectl label node <name> pool=chk10-gpu) or correct spec.podTemplate.nodeSelector."
    assert r.status is Status.FAIL
    assert r.details[0] == (
        f"{head}, and nothing could add one (Karpenter not installed, no cluster-autoscaler status ConfigMap "
        f"kube-system/cluster-autoscaler-status, no Kueue ResourceFlavor matches (of {flavors})). {fix}"
    )
    assert "Node Selector Match" in ev.decision.denied_checks

    # Karpenter installed: a NodePool that cannot launch such a node changes nothing, one that can does
    crds = _optional_crds_dir()
    cluster.kubectl("apply", "--server-side", "-f", str(crds))
    cluster.wait_for_crds(["nodepools.karpenter.sh", "nodeclaims.karpenter.sh"])

    def nodepool(name: str, labels: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                    },
                }
            },
        }

    cluster.apply(nodepool("chk10-cpu", {"pool": "chk10-cpu"}))
    view = await open_view()
    r = result_of(await live_evaluate(job, view), "Node Selector Match")
    assert r.status is Status.FAIL
    assert "no Karpenter NodePool matches (of 1)" in r.message
    cluster.apply(nodepool("chk10-gpu", {"pool": "chk10-gpu"}))
    try:
        view = await open_view()
        ev = await live_evaluate(job, view)
        r = result_of(ev, "Node Selector Match")
        assert r.status is Status.WARN
        assert r.details[0] == f'{head}, but a node could still be added (Karpenter NodePool "chk10-gpu"). {fix}'
        assert "Node Selector Match" not in ev.decision.denied_checks
    finally:
        cluster.kubectl("delete", "nodepool", "chk10-gpu", "--wait=false")

    # a Kueue ResourceFlavor whose nodes carry the label
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "chk10-gpu"},
        "spec": {"nodeLabels": {"pool": "chk10-gpu"}},
    }
    cluster.apply(flavor)
    try:
        view = await open_view()
        r = result_of(await live_evaluate(job, view), "Node Selector Match")
        assert (r.status, r.details[0]) == (
            Status.WARN,
            f'{head}, but a node could still be added (Kueue ResourceFlavor "chk10-gpu"). {fix}',
        )
    finally:
        cluster.kubectl("delete", "resourceflavor", "chk10-gpu", "--wait=false")

    # cluster-autoscaler's status ConfigMap, where it was configured to write it
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca-status", "namespace": ns}, "data": {}}
    cluster.apply(cm)
    settings = Settings.model_validate({"nodeProvisioning": {"clusterAutoscalerStatus": f"{ns}/ca-status"}})
    view = await open_view(settings)
    r = result_of(await live_evaluate(job, view, settings), "Node Selector Match")
    assert (r.status, r.details[0]) == (
        Status.WARN,
        f"{head}, but a node could still be added (cluster-autoscaler (its status ConfigMap {ns}/ca-status exists)). {fix}",
    )


async def test_placement_warns_when_a_source_cannot_be_read(cluster: ControlPlane, open_view: Any) -> None:
    """The webhook may list and watch everything but not get ConfigMaps: cluster-autoscaler is unknown."""
    ns = "chk10-nodes-403"
    cluster.ensure_namespace(ns)
    reads = cluster.grant(
        [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list", "watch"]}], name="chk10-reads-no-configmaps"
    )
    try:
        view = await open_view(kubeconfig=cluster.dev_kubeconfig)
        job = _aiperfjob(ns, "https://api.example.com/v1", nodeSelector={"pool": "chk10-none"})
        ev = await live_evaluate(job, view)
        r = result_of(ev, "Node Selector Match")
        assert r.status is Status.WARN
        assert (
            "and whether a node could be added is unknown (cluster-autoscaler status ConfigMap "
            "kube-system/cluster-autoscaler-status unreadable: not permitted to get configmaps)" in r.message
        )
        assert "Node Selector Match" not in ev.decision.denied_checks
    finally:
        cluster.revoke(reads)


# --- Controllers ----------------------------------------------------------------------------


def _deployment(ns: str, name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "manager", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


def _lease(ns: str, name: str, age: float) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"holderIdentity": f"{name}-pod_1", "leaseDurationSeconds": 15, "renewTime": _rfc3339(age)},
    }


async def test_controllers_from_deployments_and_leases(cluster: ControlPlane, open_view: Any) -> None:
    ns, job_ns = "chk10-controllers", "chk10-ctl-jobs"
    cluster.ensure_namespace(ns)
    cluster.ensure_namespace(job_ns)
    settings = Settings.model_validate(
        {
            "controllers": {
                "aiperf": {"namespace": ns, "deployment": "aiperf-operator"},
                "jobset": {"namespace": ns, "deployment": "jobset-controller-manager", "lease": "jobset-leader"},
                # not installed: a namespace that does not exist (its reads are "not found", never "not permitted")
                "trainer": {"namespace": "chk10-not-installed", "deployment": "t", "lease": "t"},
                "kueue": {"namespace": "chk10-not-installed", "deployment": "k", "lease": "k"},
                "ttlSeconds": 0,
            }
        }
    )
    cluster.apply([_deployment(ns, "aiperf-operator"), _deployment(ns, "jobset-controller-manager")])
    job = _aiperfjob(job_ns, "https://api.example.com/v1")
    view = await open_view(settings)
    r = result_of(await live_evaluate(job, view, settings), "Controllers")
    assert (r.status, r.message) == (
        Status.WARN,
        f"AIPerf operator controller looks down (Deployment {ns}/aiperf-operator 0/1 ready): an AIPerfJob admitted now "
        f"waits until it runs. Fix: kubectl get pods -n {ns}, or set controllers.aiperf to where it runs; JobSet "
        f"controller looks down (no Lease {ns}/jobset-leader; Deployment {ns}/jobset-controller-manager 0/1 ready): "
        f"an AIPerfJob admitted now waits until it runs. Fix: kubectl get pods -n {ns}, or set controllers.jobset to "
        "where it runs",
    )
    # the deployment controller's status, and the leader's Lease, as they would write them
    ready = json.dumps({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}})
    cluster.kubectl(
        "patch", "deployment", "aiperf-operator", "-n", ns, "--subresource=status", "--type=merge", "-p", ready
    )
    cluster.apply(_lease(ns, "jobset-leader", 1))
    r = result_of(await live_evaluate(job, view, settings), "Controllers")
    assert r.status is Status.PASS
    assert r.message.startswith(
        f"Running: AIPerf operator (Deployment {ns}/aiperf-operator 1/1 ready), JobSet (Lease {ns}/jobset-leader renewed "
    )
    # the leader stopped renewing: down, even though nothing else changed
    cluster.apply(_lease(ns, "jobset-leader", 600))
    ev = await live_evaluate(job, view, settings)
    r = result_of(ev, "Controllers")
    assert r.status is Status.WARN
    assert r.message.startswith(
        f"JobSet controller looks down (Lease {ns}/jobset-leader renewed 10m ago (leaseDurationSeconds 15): its "
        f"leader stopped renewing; Deployment {ns}/jobset-controller-manager 0/1 ready)"
    )
    assert ev.decision.allowed  # never a deny on its own

    # without the permissions the check is lowered to skip, with the reason (as /capabilities shows)
    reads = cluster.grant([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list", "watch"]}], name="chk10-reads")
    try:
        dev = await open_view(settings, kubeconfig=cluster.dev_kubeconfig)
        cap = {c["check"]: c for c in dev.capabilities()}["Controllers"]
        # every named read in an existing namespace refused (the chart's Roles grant them one by one);
        # those in the namespace that does not exist are not counted
        why = (
            f"not permitted to get deployments.apps {ns}/aiperf-operator, get deployments.apps "
            f"{ns}/jobset-controller-manager, get leases.coordination.k8s.io {ns}/jobset-leader"
        )
        assert (cap["value"], cap["reason"]) == ("no", why)
        r = result_of(await live_evaluate(job, dev, settings), "Controllers")
        assert (r.status, r.message) == (Status.SKIP, f"Skipped: {why}")
    finally:
        cluster.revoke(reads)


# --- Endpoint Service: EndpointSlices --------------------------------------------------------


def _service(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "llm", "namespace": ns},
        "spec": {"selector": {"app": "llm"}, "ports": [{"port": 8000, "targetPort": 8080}]},
    }


def _slice(ns: str, ready: bool) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "llm-1", "namespace": ns, "labels": {"kubernetes.io/service-name": "llm"}},
        "addressType": "IPv4",
        "ports": [{"port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["10.244.7.10"], "conditions": {"ready": ready}}],
    }


async def test_endpoint_service_reads_endpointslices(cluster: ControlPlane, open_view: Any) -> None:
    ns = "chk10-endpoints"
    cluster.ensure_namespace(ns)
    cluster.apply(_service(ns))
    view = await open_view()
    await view.wait_for("services", lambda v: v.get_cached("services", ns, "llm") is not None, 30)
    job = _aiperfjob(ns, f"http://llm.{ns}.svc.cluster.local:8000")
    # each review sees the slices as they are now (the default reuses a list for 5 s)
    fresh = Settings.model_validate({"endpointSliceTtlSeconds": 0})

    async def live_evaluate(job: dict[str, Any], view: Any) -> Any:
        return await _live_evaluate(job, view, fresh)

    r = result_of(await live_evaluate(job, view), "Endpoint Service")
    assert (r.status, r.message) == (
        Status.WARN,
        f'Service "llm" in "{ns}" has no ready endpoint (no EndpointSlice labelled kubernetes.io/service-name=llm): the '
        f"benchmark's requests would fail until one is. Fix: start the server's pods (kubectl get pods -n {ns} -l app=llm)",
    )
    cluster.apply(_slice(ns, False))
    r = result_of(await live_evaluate(job, view), "Endpoint Service")
    assert r.message.startswith(
        f'Service "llm" in "{ns}" has no ready endpoint (0 of 1 endpoint ready in 1 EndpointSlice)'
    )
    cluster.apply(_slice(ns, True))
    r = result_of(await live_evaluate(job, view), "Endpoint Service")
    assert (r.status, r.message) == (Status.PASS, f'Service "llm" in namespace "{ns}" exists and has ready endpoints')


# --- Network Policies -----------------------------------------------------------------------


async def test_network_policies_from_the_policy_objects(cluster: ControlPlane, open_view: Any) -> None:
    bench, models = "chk10-np-bench", "chk10-np-models"
    for ns in (bench, models):
        cluster.ensure_namespace(ns)
    cluster.apply([_service(models), _slice(models, True)])
    deny = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny-egress", "namespace": bench},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"]},
    }
    cluster.apply(deny)
    view = await open_view()
    await view.wait_for("networkpolicies", lambda v: bool(v.list_cached("networkpolicies", bench)), 30)
    job = _aiperfjob(bench, f"http://llm.{models}.svc.cluster.local:8000")
    ev = await live_evaluate(job, view)
    r = result_of(ev, "Network Policies")
    assert r.status is Status.WARN
    assert r.details[0] == (
        f'NetworkPolicies drop the workers pods\' requests to Service "llm" in "{models}" (port 8080/TCP): NetworkPolicy '
        f'"default-deny-egress" in "{bench}" isolates their egress and no rule allows it, so the benchmark hangs. '
        f'Fix: add an egress rule allowing it to a NetworkPolicy in "{bench}"'
    )
    assert r.details[-1] == "judged from the policy objects; enforcement depends on the cluster's CNI"
    assert ev.decision.allowed and "Network Policies" not in ev.decision.denied_checks

    allow = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "allow-bench", "namespace": bench},
        "spec": {
            "podSelector": {"matchLabels": {"app": "aiperf"}},
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [{"podSelector": {}}]},  # the job's own pods
                {
                    "to": [
                        {
                            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": models}},
                            "podSelector": {"matchLabels": {"app": "llm"}},
                        }
                    ],
                    "ports": [{"port": 8080}],
                },
                {"to": [{"namespaceSelector": {}}], "ports": [{"protocol": "UDP", "port": 53}]},
            ],
        },
    }
    cluster.apply(allow)
    assert await view.wait_for("networkpolicies", lambda v: len(v.list_cached("networkpolicies", bench)) == 2, 30)
    r = result_of(await live_evaluate(job, view), "Network Policies")
    assert r.status is Status.PASS
    # the namespaces of every path: the AIPerf operator's (it reads progress and results), the job's, the endpoint's, DNS
    assert r.message.startswith(
        f'The NetworkPolicies of "aiperf-system", "{bench}", "{models}", "kube-system" allow the job\'s '
    )


# --- the view's on-demand reads ------------------------------------------------------------


async def test_live_list_by_label_and_get_with_ttl(cluster: ControlPlane, open_view: Any) -> None:
    from webhook.deadline import Deadline

    ns = "chk10-reads"
    cluster.ensure_namespace(ns)
    other = _slice(ns, True)
    other["metadata"] = {"name": "other-1", "namespace": ns, "labels": {"kubernetes.io/service-name": "other"}}
    cluster.apply([_slice(ns, True), other, _lease(ns, "leader", 1)])
    # the Lease is a declared named read (a controller's), as every single-object read must be
    view = await open_view(Settings.model_validate({"controllers": {"jobset": {"namespace": ns, "lease": "leader"}}}))
    got = await view.list_objects(
        "discovery.k8s.io/v1", "endpointslices", ns, "kubernetes.io/service-name=llm", Deadline(10)
    )
    assert [s["metadata"]["name"] for s in got] == ["llm-1"]
    assert all("managedFields" not in s["metadata"] for s in got)
    # a list with a TTL is reused within it (endpointSliceTtlSeconds); without one it sees the change
    sel = "kubernetes.io/service-name=other"
    cached = await view.list_objects("discovery.k8s.io/v1", "endpointslices", ns, sel, Deadline(10), ttl=60)
    assert [s["metadata"]["name"] for s in cached] == ["other-1"]
    cluster.kubectl("delete", "endpointslice", "other-1", "-n", ns)
    reused = await view.list_objects("discovery.k8s.io/v1", "endpointslices", ns, sel, Deadline(10), ttl=60)
    assert reused == cached
    assert await view.list_objects("discovery.k8s.io/v1", "endpointslices", ns, sel, Deadline(10)) == []
    first = await view.get_object("coordination.k8s.io/v1", "leases", ns, "leader", Deadline(10), ttl=60)
    assert first is not None and first["spec"]["holderIdentity"] == "leader-pod_1"
    cluster.kubectl("delete", "lease", "leader", "-n", ns)
    # within its TTL the answer is reused; without one the GET sees the deletion
    again = await view.get_object("coordination.k8s.io/v1", "leases", ns, "leader", Deadline(10), ttl=60)
    assert again == first
    assert await view.get_object("coordination.k8s.io/v1", "leases", ns, "leader", Deadline(10)) is None


async def _kept_for_a_minute(cluster: ControlPlane, open_view: Any, ns: str) -> tuple[Any, dict[str, Any], list[float]]:
    """A Lease, a ready EndpointSlice and a Secret in `ns`, and a view keeping what it reads for 60 s by a clock
    moved by hand: (the view, the Secret, the clock's [now])."""
    cluster.ensure_namespace(ns)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "token", "namespace": ns},
        "data": {"a": "eA=="},
    }
    cluster.apply([_lease(ns, "leader", 1), _slice(ns, True), secret])
    view = await open_view(
        Settings.model_validate(
            {"controllers": {"jobset": {"namespace": ns, "lease": "leader"}}, "secretTtlSeconds": 60}
        )
    )
    now = [1000.0]
    view._read_ttl.clock = view._secret_ttl.clock = lambda: now[0]  # the lifetimes' clock, moved by hand
    return view, secret, now


async def test_live_reads_in_use_are_read_again_ahead_of_their_expiry(cluster: ControlPlane, open_view: Any) -> None:
    """A kept answer used in the last quarter of its TTL answers that review at once and is read again in the
    background (webhook/reused.py): the next review sees what the apiserver holds now, and no review waits for
    an expiry. Each kind of on-demand read: a named GET, a list by label, a Secret's keys (and a Secret
    deleted meanwhile is forgotten, not kept: a 404 is never kept)."""
    from webhook.deadline import Deadline

    ns = "chk10-renew"
    view, secret, now = await _kept_for_a_minute(cluster, open_view, ns)

    async def holder() -> str:
        got = await view.get_object("coordination.k8s.io/v1", "leases", ns, "leader", Deadline(10), ttl=60)
        assert got is not None
        return str(got["spec"]["holderIdentity"])

    async def ready() -> list[bool]:
        got = await view.list_objects(
            "discovery.k8s.io/v1", "endpointslices", ns, "kubernetes.io/service-name=llm", Deadline(10), ttl=60
        )
        return [e["conditions"]["ready"] for s in got for e in s["endpoints"]]

    async def keys() -> set[str] | None:
        return await view.secret_keys(ns, "token", Deadline(10))

    assert (await holder(), await ready(), await keys()) == ("leader-pod_1", [True], {"a"})
    lease = _lease(ns, "leader", 1)
    lease["spec"]["holderIdentity"] = "leader-pod_2"
    secret["data"]["b"] = "eQ=="
    cluster.apply([lease, _slice(ns, False), secret])
    now[0] += 44  # before the last quarter: the kept answers, nothing read
    assert (await holder(), await ready(), await keys()) == ("leader-pod_1", [True], {"a"})
    assert (view._read_ttl.renewals, view._secret_ttl.renewals) == (0, 0)
    now[0] += 1  # 45 of 60 s: the kept answers still, each read again in the background
    assert (await holder(), await ready(), await keys()) == ("leader-pod_1", [True], {"a"})
    await view._read_ttl.renewed()
    await view._secret_ttl.renewed()
    assert (view._read_ttl.renewals, view._secret_ttl.renewals) == (2, 1)
    assert (await holder(), await ready(), await keys()) == ("leader-pod_2", [False], {"a", "b"})
    # the new answers have lifetimes of their own: past the first ones' end they stand, and nothing is read
    now[0] += 20
    cluster.kubectl("delete", "secret", "token", "-n", ns)
    assert (await holder(), await ready(), await keys()) == ("leader-pod_2", [False], {"a", "b"})
    # a Secret deleted meanwhile: the read ahead finds none and the kept keys are forgotten at once
    now[0] += 30
    assert await keys() == {"a", "b"}
    await view._secret_ttl.renewed()
    assert await keys() is None


async def test_kept_answers_are_given_without_a_request_until_their_end(cluster: ControlPlane, open_view: Any) -> None:
    """ClusterView.kept: what each live read would answer now without a request or a wait (the engine's kept-only
    run, webhook/models/context.py read_live). Nothing before the first read; the read's own answer within its
    ttl, read again in the background in its last quarter (as the read itself does); nothing once it ended; and
    a name no object can have is answered at once, as the read answers it."""
    from webhook.deadline import Deadline

    ns = "chk10-kept"
    view, _, now = await _kept_for_a_minute(cluster, open_view, ns)
    lease = ("coordination.k8s.io/v1", "leases", ns, "leader", Deadline(10))
    slices = ("discovery.k8s.io/v1", "endpointslices", ns, "kubernetes.io/service-name=llm", Deadline(10))
    token = (ns, "token", Deadline(10))

    def kept() -> tuple[Any, ...]:
        return (
            view.kept("get_object", *lease, ttl=60),
            view.kept("list_objects", *slices, ttl=60),
            view.kept("secret_keys", *token),
        )

    assert kept() == (None, None, None)
    await view.get_object(*lease, ttl=60)
    await view.list_objects(*slices, ttl=60)
    await view.secret_keys(*token)
    calls = (view._object_reads.calls, view._list_reads.calls, view._secret_reads.calls)
    got = kept()
    assert got[0][0]["spec"]["holderIdentity"] == "leader-pod_1" and got[2] == ({"a"},)
    assert [e["conditions"]["ready"] for s in got[1][0] for e in s["endpoints"]] == [True]
    assert view.kept("get_object", *lease) is None  # no ttl asked: never kept
    now[0] += 45  # the last quarter: still the kept answers, each read again in the background
    assert kept()[2] == ({"a"},)
    await view._read_ttl.renewed()
    await view._secret_ttl.renewed()
    assert (view._read_ttl.renewals, view._secret_ttl.renewals) == (2, 1)
    assert (view._object_reads.calls, view._list_reads.calls, view._secret_reads.calls) == tuple(c + 1 for c in calls)
    now[0] += 61  # past the renewed answers' end: nothing kept, nothing read
    assert kept() == (None, None, None)
    # names no object can have: answered at once, as the reads answer them
    assert view.kept("get_object", "apps/v1", "deployments", ns, "Not_A_Name", Deadline(10), ttl=60) == (None,)
    assert view.kept("list_objects", "discovery.k8s.io/v1", "endpointslices", "Bad_NS", "x=y", Deadline(10)) == ([],)
    assert view.kept("secret_keys", ns, "a..b", Deadline(10)) == (None,)
    assert view.kept("dry_run_create", "v1", "Pod", ns, {}, Deadline(10)) is None  # never kept
