"""Cluster checks end to end: objects created with kubectl in the real kube-apiserver, then
`webhook.preflight.evaluate()` with the live view, asserting exact verdicts and text.

Covered: Secrets (missing Secret, missing key, 403 "cannot verify" without hiding the
rest), Resource Quotas (exceeded), Dry Run (Pod Security rejection), Kueue Queue
(LocalQueue missing, then a working queue), Node Selector Match (no node matches).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane
from e2e.harness.kueue import active_status, cluster_queue
from e2e.harness.live import live_evaluate, result_of
from webhook.config import Settings
from webhook.results import Status

SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "oracle" / "samples"
RUNTIME = "chk-torch"


def _runtime() -> dict[str, Any]:
    rt = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())
    rt["metadata"]["name"] = RUNTIME
    rt["spec"]["mlPolicy"]["torch"] = {}  # the sample's numProcPerNode is not in Trainer v2.3's CRD schema
    return rt


def _trainjob(ns: str, *, queue: str | None = None, patches: bool = True, secrets: bool = True) -> dict[str, Any]:
    tj = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
    tj["metadata"]["namespace"] = ns
    tj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    tj["spec"]["runtimeRef"]["name"] = RUNTIME
    if not patches:
        tj["spec"].pop("runtimePatches", None)
    if not secrets:
        tj["spec"]["trainer"].pop("env", None)
        tj["spec"]["initializer"]["model"].pop("secretRef", None)
    return tj


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> ControlPlane:
    cp = control_plane
    cp.apply(_runtime())
    return cp


# --- Secrets ---------------------------------------------------------------------------------


async def test_secrets_missing_secret_and_missing_key(cluster: ControlPlane, open_view: Any) -> None:
    ns = "chk-secrets"
    cluster.ensure_namespace(ns)
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf-token", "namespace": ns},
            "stringData": {"hf_token": "value-that-must-not-leak"},
        }
    )
    view = await open_view()
    ev = await live_evaluate(_trainjob(ns), view)
    fail, warn = [r for r in ev.results.checks if r.name == "Secrets"]
    assert (fail.status, fail.message) == (
        Status.FAIL,
        f'Secret "hf-token" in namespace "{ns}" has no key "token" (referenced by env HF_TOKEN of container node). '
        f'Fix: kubectl patch secret hf-token -n {ns} --type merge -p \'{{"stringData":{{"token":"…"}}}}\'',
    )
    # a missing pull Secret only warns: the kubelet pulls anonymously (privateRegistries makes it deny)
    assert (warn.status, warn.message) == (
        Status.WARN,
        f'Secret "ghcr-pull" not found in namespace "{ns}" (referenced by imagePullSecrets of the node pods); '
        "the kubelet pulls without it, which works only for public images. "
        f"Fix: kubectl create secret docker-registry ghcr-pull -n {ns} --docker-server=<registry> "
        "--docker-username=<user> --docker-password=…",
    )
    assert not ev.decision.allowed
    assert '[Secrets] Secret "hf-token" in namespace' in (ev.decision.message or "")
    assert "value-that-must-not-leak" not in json.dumps(ev.results.to_dict())

    # fixed: both exist with the keys used
    cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "hf-token", "namespace": ns},
                "stringData": {"token": "x"},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "ghcr-pull", "namespace": ns},
                "type": "kubernetes.io/dockerconfigjson",
                "stringData": {".dockerconfigjson": '{"auths":{}}'},
            },
        ]
    )
    view = await open_view(Settings(secretTtlSeconds=0))
    r = result_of(await live_evaluate(_trainjob(ns), view), "Secrets")
    assert (r.status, r.message) == (Status.PASS, "2 Secrets exist with the keys used: ghcr-pull, hf-token")


async def test_secrets_forbidden_warns_without_hiding_a_missing_key(cluster: ControlPlane, open_view: Any) -> None:
    """The webhook may list and watch everything but, after start-up, loses `get secrets`:
    every read is "cannot verify"; then it may get only hf-token, whose missing key still fails."""
    ns = "chk-secrets-403"
    cluster.ensure_namespace(ns)
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf-token", "namespace": ns},
            "stringData": {"other": "x"},
        }
    )
    reads = cluster.grant(
        [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["list", "watch"]},
            {"apiGroups": ["", "jobset.x-k8s.io"], "resources": ["pods", "jobsets"], "verbs": ["create"]},
        ]
    )
    secrets = cluster.grant([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])
    only_hf = ""
    try:
        view = await open_view(Settings(secretTtlSeconds=0), kubeconfig=cluster.dev_kubeconfig)
        cluster.revoke(secrets)
        _wait_for_can(cluster, "get", "secrets/hf-token", ns, False)
        tj = _trainjob(ns)
        r = result_of(await live_evaluate(tj, view), "Secrets")
        fix = (
            f'Fix: add "{ns}" to the chart\'s rbac.jobNamespaces and run helm upgrade '
            "(the webhook may get Secrets only in the namespaces listed there)"
        )
        assert r.status is Status.WARN
        assert r.message == (
            f'Cannot verify Secret "ghcr-pull" in namespace "{ns}" (not permitted to get secrets); '
            f'Cannot verify Secret "hf-token" in namespace "{ns}" (not permitted to get secrets). {fix}'
        )
        only_hf = cluster.grant(
            [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["hf-token"], "verbs": ["get"]}],
            namespace=ns,
        )
        _wait_for_can(cluster, "get", "secrets/hf-token", ns, True)
        ev = await live_evaluate(tj, view)
        fail, warn = [r for r in ev.results.checks if r.name == "Secrets"]
        assert (fail.status, fail.message) == (
            Status.FAIL,
            f'Secret "hf-token" in namespace "{ns}" has no key "token" (referenced by env HF_TOKEN of container node). '
            f'Fix: kubectl patch secret hf-token -n {ns} --type merge -p \'{{"stringData":{{"token":"…"}}}}\'',
        )
        assert (warn.status, warn.message) == (
            Status.WARN,
            f'Cannot verify Secret "ghcr-pull" in namespace "{ns}" (not permitted to get secrets). {fix}',
        )
        assert not ev.decision.allowed
        assert f'[Secrets] Cannot verify Secret "ghcr-pull" in namespace "{ns}"' in " ".join(ev.decision.warnings)
    finally:
        cluster.revoke(reads)
        cluster.revoke(secrets)
        if only_hf:
            cluster.revoke(only_hf, namespace=ns)


def _wait_for_can(cluster: ControlPlane, verb: str, resource: str, ns: str, allowed: bool) -> None:
    """Poll `kubectl auth can-i` as dev until RBAC says `allowed` (the authorizer follows informers)."""
    for _ in range(100):
        out = cluster.kubectl("auth", "can-i", verb, resource, "-n", ns, kubeconfig=cluster.dev_kubeconfig, check=False)
        if (out.stdout.strip() == "yes") is allowed:
            return
    raise AssertionError(f"dev: can-i {verb} {resource} -n {ns} never became {allowed}")


# --- Resource Quotas -------------------------------------------------------------------------


async def test_quota_exceeded(cluster: ControlPlane, open_view: Any) -> None:
    ns = "chk-quota"
    cluster.ensure_namespace(ns)
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "team-quota", "namespace": ns},
            "spec": {"hard": {"requests.cpu": "16", "requests.nvidia.com/gpu": "64", "pods": "20"}},
        }
    )
    # no quota controller here: set status.used as it would
    status = {
        "status": {
            "hard": {"requests.cpu": "16", "requests.nvidia.com/gpu": "64", "pods": "20"},
            "used": {"requests.cpu": "4", "requests.nvidia.com/gpu": "0", "pods": "1"},
        }
    }
    cluster.kubectl(
        "patch",
        "resourcequota",
        "team-quota",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    view = await open_view()
    ev = await live_evaluate(_trainjob(ns, patches=False, secrets=False), view)
    r = result_of(ev, "Resource Quotas")
    assert r.status is Status.FAIL
    assert r.message == (
        'ResourceQuota "team-quota": requests.cpu would be 132 (used 4 + job 128 at its peak stage) but hard is 16. '
        f"Fix: raise hard requests.cpu to at least 132 (kubectl edit resourcequota team-quota -n {ns}), "
        "or reduce the job's pods or requests."
    )
    assert 'ResourceQuota "team-quota": requests.nvidia.com/gpu 32 of 64 (used 0 + job 32)' in r.details
    assert 'ResourceQuota "team-quota": pods 5 of 20 (used 1 + job 4 at its peak stage)' in r.details
    # the apiserver agrees: the dry-run of a trainer pod is refused by the quota
    dry = result_of(ev, "Dry Run")
    assert dry.status is Status.FAIL
    assert "Pod for node rejected by the apiserver: " in dry.message and "exceeded quota: team-quota" in dry.message
    assert f"Fix: see Resource Quotas (kubectl describe resourcequota -n {ns})" in dry.message


# --- Dry Run ---------------------------------------------------------------------------------


async def test_dry_run_pod_security_rejection(cluster: ControlPlane, open_view: Any) -> None:
    ns = "chk-restricted"
    cluster.ensure_namespace(ns)
    cluster.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted", "--overwrite")
    view = await open_view()
    ev = await live_evaluate(_trainjob(ns, patches=False, secrets=False), view)
    r = result_of(ev, "Dry Run")
    assert r.status is Status.FAIL
    assert r.message.startswith(
        'Pod for model-initializer rejected by the apiserver: pods "llama-ft-model-initializer-0-0-dryrn" is forbidden: '
        'violates PodSecurity "restricted:latest": '
    )
    assert (
        'Pod for node rejected by the apiserver: pods "llama-ft-node-0-0-dryrn" is forbidden: violates PodSecurity "restricted:latest": '
        in r.message
    )
    assert r.message.endswith(
        f'Fix: make the pod spec meet the Pod Security level of namespace "{ns}" (label pod-security.kubernetes.io/enforce), '
        "or ask an admin to relax it."
    )
    assert "[Dry Run] Pod for model-initializer rejected by the apiserver" in (ev.decision.message or "")
    # nothing was written
    assert cluster.kubectl("get", "pods,jobsets", "-n", ns, "-o", "name").stdout.strip() == ""


async def test_dry_run_accepts_a_valid_job(cluster: ControlPlane, open_view: Any) -> None:
    ns = "chk-dryrun-ok"
    cluster.ensure_namespace(ns)
    view = await open_view()
    r = result_of(await live_evaluate(_trainjob(ns, patches=False, secrets=False), view), "Dry Run")
    assert (r.status, r.message) == (
        Status.PASS,
        'The apiserver accepts (dryRun=All) JobSet "llama-ft", a Job of each replicatedJob (model-initializer, node) '
        "and a pod of each group (model-initializer, node)",
    )


# --- Kueue -----------------------------------------------------------------------------------


async def test_kueue_localqueue_missing_then_working(cluster: ControlPlane, open_view: Any) -> None:
    ns = "chk-kueue"
    cluster.ensure_namespace(ns)
    view = await open_view()
    ev = await live_evaluate(_trainjob(ns, queue="team-a-queue", patches=False, secrets=False), view)
    r = result_of(ev, "Kueue Queue")
    assert r.status is Status.FAIL
    assert r.message == (
        f'LocalQueue "team-a-queue" not found in namespace "{ns}" (label kueue.x-k8s.io/queue-name), so Kueue would keep '
        f'the job suspended (the namespace has no LocalQueue). Fix: create LocalQueue "team-a-queue" in namespace "{ns}" '
        "pointing at a ClusterQueue, or correct label kueue.x-k8s.io/queue-name."
    )
    assert (
        result_of(ev, "Kueue Capacity").message == 'Skipped: LocalQueue "team-a-queue" does not exist (see Kueue Queue)'
    )

    cluster.apply(
        [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "chk-h100"}},
            cluster_queue(
                "chk-gpu-cq",
                flavor="chk-h100",
                quotas={"cpu": "256", "memory": "4Ti", "nvidia.com/gpu": "16"},
                namespace=ns,
            ),
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "team-a-queue", "namespace": ns},
                "spec": {"clusterQueue": "chk-gpu-cq"},
            },
        ]
    )
    active = active_status()
    cluster.kubectl(
        "patch", "clusterqueue", "chk-gpu-cq", "--subresource=status", "--type=merge", "-p", json.dumps(active)
    )
    cluster.kubectl(
        "patch",
        "localqueue",
        "team-a-queue",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(active),
    )
    view = await open_view()
    ev = await live_evaluate(_trainjob(ns, queue="team-a-queue", patches=False, secrets=False), view)
    r = result_of(ev, "Kueue Queue")
    assert (r.status, r.message) == (
        Status.PASS,
        f'LocalQueue "team-a-queue" → ClusterQueue "chk-gpu-cq": both Active, and the ClusterQueue selects namespace "{ns}"',
    )
    cap = result_of(ev, "Kueue Capacity")
    assert cap.status is Status.FAIL
    assert cap.message.startswith(
        'The job needs nvidia.com/gpu 32 but ClusterQueue "chk-gpu-cq" can provide at most 16 (flavor "chk-h100": nominalQuota 16)'
    )


# --- Nodes -----------------------------------------------------------------------------------


async def test_node_selector_matches_no_node(cluster: ControlPlane, open_view: Any) -> None:
    ns = "chk-nodes"
    cluster.ensure_namespace(ns)
    cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "chk-cpu-1", "labels": {"pool": "cpu"}}})
    ready = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "ok",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
        }
    }
    cluster.kubectl("patch", "node", "chk-cpu-1", "--subresource=status", "--type=merge", "-p", json.dumps(ready))
    # the TaintNodesByCondition admission plugin taints new nodes not-ready; with no node lifecycle
    # controller here, remove it as that controller would once the node is Ready
    cluster.kubectl("taint", "node", "chk-cpu-1", "node.kubernetes.io/not-ready:NoSchedule-", check=False)
    view = await open_view()
    nodes = len(view.list_cached("nodes"))
    ev = await live_evaluate(_trainjob(ns, secrets=False), view)  # the runtime patch sets nodeSelector pool=gpu-h100
    r = result_of(ev, "Node Selector Match")
    karpenter = (
        f"no Karpenter NodePool matches (of {len(view.list_cached('nodepools'))})"
        if view.served("karpenter.sh/v1")
        else "Karpenter not installed"
    )
    assert r.status is Status.FAIL
    assert r.message == (
        f"No node matches nodeSelector {{pool=gpu-h100}} of the node pods (0 of {nodes} node{'s' if nodes != 1 else ''}), "
        f"and nothing could add one ({karpenter}, no cluster-autoscaler status ConfigMap kube-system/cluster-autoscaler-status, "
        f"no Kueue ResourceFlavor matches (of {len(view.list_cached('resourceflavors'))})). "
        "Fix: label a node (kubectl label node <name> pool=gpu-h100) or correct nodeSelector (in the runtime or spec.runtimePatches)."
    )
    # nothing could add such a node (no Karpenter NodePool, cluster-autoscaler or ResourceFlavor): it denies
    assert "Node Selector Match" in ev.decision.denied_checks
    # the initializer has no selector and fits nowhere either: 2 cpu fits, so Per-Node passes for it only
    per = result_of(ev, "Per-Node Schedulability")
    assert per.status is Status.PASS
    assert per.message.startswith("Each pod fits a node: model-initializer (cpu 2, memory 4Gi) fits ")
