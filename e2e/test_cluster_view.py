"""LiveClusterView against the real kube-apiserver: caches, capabilities, live reads, dry runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from e2e.harness.controlplane import ControlPlane, kubernetes_minor
from webhook.checks import all_checks
from webhook.checks.base import Check, Permission
from webhook.cluster.cache import SPECS_BY_RESOURCE
from webhook.cluster.client import KubeClient, load_configuration
from webhook.cluster.live import LiveClusterView, open_cluster_view
from webhook.cluster.view import ApiError
from webhook.config import Settings
from webhook.deadline import Deadline

NS = "cv-team-a"


class QuotaReader(Check):
    name = "Quota Reader"
    needs_cluster = True
    permissions: ClassVar[tuple[Permission, ...]] = (
        Permission("list", "resourcequotas"),
        Permission("watch", "resourcequotas"),
    )


class SecretReader(Check):
    name = "Secret Reader"
    needs_cluster = True
    permissions: ClassVar[tuple[Permission, ...]] = (Permission("get", "secrets"),)


class KueueReader(Check):
    name = "Kueue Reader"
    needs_cluster = True
    permissions: ClassVar[tuple[Permission, ...]] = (Permission("list", "localqueues", "kueue.x-k8s.io"),)
    apis: ClassVar[tuple[str, ...]] = ("kueue.x-k8s.io/v1beta2",)


class NotServed(Check):
    name = "Not Served"
    needs_cluster = True
    apis: ClassVar[tuple[str, ...]] = ("example.com/v9",)


CHECKS: list[Check] = [QuotaReader(), SecretReader(), KueueReader(), NotServed()]


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> ControlPlane:
    cp = control_plane
    cp.ensure_namespace(NS)
    cp.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "q1", "namespace": NS},
                "spec": {"hard": {"pods": "10"}},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "hf-token", "namespace": NS},
                "stringData": {"token": "s3cr3t-value", "user": "me"},
            },
        ]
    )
    return cp


async def _view(kubeconfig: Path | str, checks: list[Check] | None = None, **settings: Any) -> LiveClusterView:
    client = KubeClient(await load_configuration(str(kubeconfig)), 8)
    view = LiveClusterView(Settings(**settings), client, checks=checks if checks is not None else CHECKS)
    await view.start(wait_seconds=60)
    return view


@pytest.fixture
async def admin_view(cluster: ControlPlane) -> AsyncIterator[LiveClusterView]:
    view = await _view(cluster.kubeconfig)
    try:
        yield view
    finally:
        await view.close()


def _names(view: LiveClusterView, resource: str, ns: str | None) -> set[str]:
    return {o["metadata"]["name"] for o in view.list_cached(resource, ns)}


async def test_open_cluster_view_with_kubeconfig_syncs_and_is_ready(cluster: ControlPlane) -> None:
    view = await open_cluster_view(Settings(), kubeconfig=str(cluster.kubeconfig), checks=all_checks(), wait_seconds=60)
    try:
        assert view.ready, view.ready_reason
        assert view.ready_reason == "ready"
        assert view.server_version() == kubernetes_minor()  # the release this run built (versions.env or the override)
        assert view.served("v1") and view.served("jobset.x-k8s.io/v1alpha2")
        assert view.served("trainer.kubeflow.org/v1alpha1") and view.served("kueue.x-k8s.io/v1beta2")
        assert not view.served("example.com/v9")
        caches = {c["resource"]: c for c in view.cache_status()}
        # every cache whose API is served runs; Karpenter's CRD is not installed here (unless a test did)
        served = {r for r in caches if view.served(SPECS_BY_RESOURCE[r].group_version)}
        assert all(caches[r]["cached"] and caches[r]["synced"] for r in served), caches
        assert all(
            caches[r]["reason"] == f"{SPECS_BY_RESOURCE[r].group_version} is not served" for r in set(caches) - served
        )
        assert served >= {"namespaces", "nodes", "services", "resourceflavors", "networkpolicies"}
        assert view.get_cached("namespaces", None, NS) is not None
        assert view.cache_age("namespaces") is not None and view.cache_age("namespaces") < 60
        caps = view.capabilities()
        assert [c["check"] for c in caps] == [c.name for c in view.checks]
        assert all(c["value"] in ("yes", "no", "unknown") and c["source"] in ("probed", "declared") for c in caps)
    finally:
        await view.close()


async def test_caches_follow_create_update_delete(cluster: ControlPlane, admin_view: LiveClusterView) -> None:
    view = admin_view
    assert view.ready
    q1 = view.get_cached("resourcequotas", NS, "q1")
    assert q1 is not None and q1["spec"]["hard"] == {"pods": "10"}
    assert "managedFields" not in q1["metadata"]

    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "q2", "namespace": NS},
            "spec": {"hard": {"requests.cpu": "4"}},
        }
    )
    assert await view.wait_for("resourcequotas", lambda v: "q2" in _names(v, "resourcequotas", NS), 30)

    # an update: the quota's spec (the cache holds a quota's spec and status, not its labels: cache.PROJECTIONS)
    cluster.kubectl(
        "patch", "resourcequota", "q2", "-n", NS, "--type", "merge", "-p", '{"spec":{"hard":{"requests.cpu":"8"}}}'
    )
    assert await view.wait_for(
        "resourcequotas",
        lambda v: (v.get_cached("resourcequotas", NS, "q2") or {}).get("spec", {}).get("hard") == {"requests.cpu": "8"},
        30,
    )

    cluster.kubectl("delete", "resourcequota", "q2", "-n", NS)
    assert await view.wait_for("resourcequotas", lambda v: v.get_cached("resourcequotas", NS, "q2") is None, 30)
    assert _names(view, "resourcequotas", NS) == {"q1"}

    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cv-cq"},
            "spec": {"namespaceSelector": {}},
        }
    )
    assert await view.wait_for("clusterqueues", lambda v: v.get_cached("clusterqueues", None, "cv-cq") is not None, 30)


async def test_secret_keys_found_missing_and_coalesced(admin_view: LiveClusterView) -> None:
    view = admin_view
    before = view.client.requests["GET secret"]
    answers = await asyncio.gather(*(view.secret_keys(NS, "hf-token", Deadline(5)) for _ in range(40)))
    assert all(a == {"token", "user"} for a in answers)
    assert view.client.requests["GET secret"] - before == 1  # 40 identical reads, one request
    assert await view.secret_keys(NS, "hf-token", Deadline(5)) == {"token", "user"}  # TTL: no new request
    assert view.client.requests["GET secret"] - before == 1
    assert await view.secret_keys(NS, "no-such-secret", Deadline(5)) is None
    assert await view.secret_keys(NS, "no-such-secret", Deadline(5)) is None
    assert view.client.requests["GET secret"] - before == 3  # a 404 is never cached


async def test_get_object_live(cluster: ControlPlane) -> None:
    cluster.apply(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "ctrl", "namespace": NS},
            "spec": {"holderIdentity": "pod-1"},
        }
    )
    # only named reads the settings declare are sent: these two Leases are a controller's and Kueue's admission Lease
    view = await _view(
        cluster.kubeconfig,
        all_checks(),
        controllers={"jobset": {"namespace": NS, "lease": "ctrl"}},
        kueue={"admissionLease": f"{NS}/nope"},
    )
    try:
        lease = await view.get_object("coordination.k8s.io/v1", "leases", NS, "ctrl", Deadline(5))
        assert lease is not None and lease["spec"]["holderIdentity"] == "pod-1"
        assert await view.get_object("coordination.k8s.io/v1", "leases", NS, "nope", Deadline(5)) is None
    finally:
        await view.close()


def _pod(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"limits": {"cpu": cpu}, "requests": {"cpu": cpu}}}
            ]
        },
    }


async def test_dry_run_rejection_carries_the_apiservers_text(
    cluster: ControlPlane, admin_view: LiveClusterView
) -> None:
    ns = "cv-limits"
    cluster.ensure_namespace(ns)
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "max-cpu", "namespace": ns},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]},
        }
    )
    pod = _pod("big", "2")
    with pytest.raises(ApiError) as info:
        await admin_view.dry_run_create("v1", "Pod", ns, pod, Deadline(10))
    assert info.value.status == 403
    kubectl = cluster.kubectl("create", "--dry-run=server", "-n", ns, "-f", "-", input=json.dumps(pod), check=False)
    assert kubectl.returncode != 0
    assert info.value.message == 'pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
    assert info.value.message in kubectl.stderr

    await admin_view.dry_run_create("v1", "Pod", ns, _pod("small", "500m"), Deadline(10))  # accepted
    for name in ("big", "small"):  # and nothing was written
        got = cluster.kubectl("get", "pod", name, "-n", ns, check=False)
        assert got.returncode != 0 and "NotFound" in got.stderr


async def test_dry_run_of_a_custom_resource_uses_discovery(cluster: ControlPlane, admin_view: LiveClusterView) -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                            }
                        }
                    },
                }
            ]
        },
    }
    await admin_view.dry_run_create("jobset.x-k8s.io/v1alpha2", "JobSet", NS, jobset, Deadline(10))
    bad = json.loads(json.dumps(jobset))
    bad["spec"]["replicatedJobs"][0]["replicas"] = "many"
    with pytest.raises(ApiError) as info:
        await admin_view.dry_run_create("jobset.x-k8s.io/v1alpha2", "JobSet", NS, bad, Deadline(10))
    assert info.value.status in (400, 422)
    assert "replicas" in info.value.message
    assert cluster.kubectl("get", "jobset", "js", "-n", NS, check=False).returncode != 0
    with pytest.raises(ApiError) as missing:
        await admin_view.dry_run_create("example.com/v9", "Widget", NS, {}, Deadline(5))
    assert missing.value.message == "Widget (example.com/v9) is not served by this cluster"


async def test_the_view_cannot_write_without_dry_run(admin_view: LiveClusterView) -> None:
    with pytest.raises(ValueError, match="never writes"):
        await admin_view.client.request("POST", f"/api/v1/namespaces/{NS}/configmaps", body={}, timeout=5)


async def test_limited_user_gets_skip_reasons(cluster: ControlPlane) -> None:
    kubeconfig = cluster.write_user_kubeconfig("cv-limited")
    cluster.grant(
        [
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["list", "watch"]},
        ],
        user="cv-limited",
    )
    cluster.grant(
        [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}], user="cv-limited", namespace="default"
    )
    view = await _view(kubeconfig)
    try:
        assert view.ready, view.ready_reason
        caps = {c["check"]: c for c in view.capabilities()}
        assert caps["Quota Reader"] == {
            "check": "Quota Reader",
            "value": "no",
            "source": "probed",
            "reason": "not permitted to list resourcequotas, watch resourcequotas",
        }
        assert view.check_capability(QuotaReader()) == (
            False,
            "not permitted to list resourcequotas, watch resourcequotas",
        )
        # get secrets only in one namespace is not "permitted" cluster-wide
        assert caps["Secret Reader"]["reason"] == "not permitted to get secrets"
        assert caps["Kueue Reader"] == {"check": "Kueue Reader", "value": "yes", "source": "probed", "reason": ""}
        assert caps["Not Served"]["reason"] == "example.com/v9 is not served"
        assert view.list_cached("resourcequotas", NS) == []
        status = {c["resource"]: c for c in view.cache_status()}
        assert status["resourcequotas"] == {
            "resource": "resourcequotas",
            "cached": False,
            "reason": "not permitted to list resourcequotas, watch resourcequotas",
        }
        assert status["localqueues"]["cached"] and status["namespaces"]["cached"]
        with pytest.raises(ApiError) as denied:
            await view.secret_keys(NS, "hf-token", Deadline(5))
        assert denied.value.status == 403 and "s3cr3t" not in denied.value.message
    finally:
        await view.close()


async def test_user_who_cannot_read_namespaces_is_never_ready(cluster: ControlPlane) -> None:
    kubeconfig = cluster.write_user_kubeconfig("cv-nobody")
    view = await _view(kubeconfig)
    try:
        assert view.ready is False
        assert view.ready_reason.startswith(
            "cannot decide anything: not permitted to list namespaces, watch namespaces (namespace mode labels cannot be read)"
        )
        summary = view.capability_summary()
        assert "list namespaces" in summary["missingPermissions"]
        assert summary["ready"] is False
    finally:
        await view.close()


async def test_unreachable_apiserver_is_not_ready_and_says_why(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "clusters": [
                    {"name": "x", "cluster": {"server": f"https://127.0.0.1:{port}", "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "x", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
            }
        )
    )
    view = await open_cluster_view(Settings(), kubeconfig=str(kubeconfig), checks=all_checks(), wait_seconds=30)
    try:
        assert view.ready is False
        assert view.ready_reason.startswith("cannot read the apiserver's discovery: cannot reach the apiserver")
        assert {c["value"] for c in view.capabilities() if c["source"] == "probed"} <= {"unknown"}
    finally:
        await view.close()
