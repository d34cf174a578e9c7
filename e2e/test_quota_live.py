"""Resource Quotas against the real kube-apiserver: our prediction, then the pods created for real.

No scheduler or kubelet is needed: ResourceQuota admission charges a pod when it is created,
and writes the new status.used itself. So each test runs the check through the live view,
then creates every pod of the job in the apiserver and compares the quota's status.used with
what the check predicted (or the apiserver's refusal with the check's FAIL). There is no
quota controller here: each quota's status (hard, used 0) is written by the test, as the
controller would.

Covered: a `limits.nvidia.com/gpu` quota charges nothing and does not deny; a PriorityClass
quota that sees the job's pods only through the cluster's globalDefault PriorityClass; the
defaulting order (requests from limits at decode, before LimitRanger's defaultRequest); a
TrainJob through the adapter and the live runtime cache, its pods then created for real; a
webhook identity that may not list PriorityClasses warns "cannot verify" instead of denying.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from e2e.harness.controlplane import ControlPlane
from webhook.checks import all_checks
from webhook.checks.base import CheckContext
from webhook.checks.quotas import ResourceQuotas
from webhook.cluster.live import LiveClusterView, open_cluster_view
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.models import quota as Q
from webhook.quantity import parse_quantity
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup, Workload

IMAGE = "registry.k8s.io/pause:3.10"


@pytest.fixture
async def view(open_view: Any) -> LiveClusterView:
    return await open_view()


@pytest.fixture
def global_default(control_plane: ControlPlane) -> Iterator[str]:
    """A globalDefault PriorityClass for one test (cluster-wide: removed afterwards)."""
    name = "chk-quota-default"
    control_plane.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": 100,
            "globalDefault": True,
        }
    )
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "priorityclass", name, "--ignore-not-found")


def _container(
    name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return {"name": name, "image": IMAGE, "resources": res}


def _quota(cp: ControlPlane, ns: str, name: str, hard: dict[str, str], **spec: Any) -> None:
    """A ResourceQuota with the status the quota controller would write (hard, used 0)."""
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"hard": hard, **spec},
        }
    )
    status = {"status": {"hard": hard, "used": {k: "0" for k in hard}}}
    cp.kubectl(
        "patch", "resourcequota", name, "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(status)
    )


def _used(cp: ControlPlane, ns: str, name: str) -> dict[str, Decimal]:
    q = json.loads(cp.kubectl("get", "resourcequota", name, "-n", ns, "-o", "json").stdout)
    return {k: parse_quantity(v) for k, v in ((q.get("status") or {}).get("used") or {}).items()}


async def _wait_cached(view: LiveClusterView, resource: str, ns: str | None, names: set[str]) -> None:
    """Until the watch-backed cache holds `names` (the view is event-driven; bounded wait)."""
    cache = view.reflectors[resource].cache
    seen = asyncio.Event()

    def check() -> None:
        have = {(o.get("metadata") or {}).get("name") for o in cache.objects(ns)}
        if names <= have:
            seen.set()

    cache.listeners.append(check)
    try:
        check()
        await asyncio.wait_for(seen.wait(), 30)
    finally:
        cache.listeners.remove(check)


async def _run(view: LiveClusterView, wl: Workload) -> list[CheckResult]:
    ctx = CheckContext(workload=wl, deadline=Deadline(10), settings=Settings(), view=view)
    out = await ResourceQuotas().run(ctx)
    return out if isinstance(out, list) else [out]


def _create_pods(cp: ControlPlane, wl: Workload) -> str:
    """Create every pod of the job for real, group by group; the first refusal's text, or ""."""
    for g in wl.pod_groups:
        for i in range(g.pods):
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{wl.name}-{g.name}-{i}", "namespace": wl.namespace},
                "spec": copy.deepcopy(g.pod_spec),
            }
            proc = cp.kubectl("create", "-f", "-", input=json.dumps(body), check=False)
            if proc.returncode != 0:
                return proc.stderr.strip()
    return ""


def _prediction(view: LiveClusterView, wl: Workload, quota: str) -> dict[str, Decimal]:
    """status.used the check predicts once every pod exists (they never finish here: no stages)."""
    lrs = sorted(view.list_cached("limitranges", wl.namespace), key=lambda o: o["metadata"]["name"])
    default_pc = Q.default_priority_class(view.list_cached("priorityclasses"))
    specs = [(g, Q.admitted_pod(g.pod_spec, lrs, default_pc)) for g in wl.pod_groups]
    q = view.get_cached("resourcequotas", wl.namespace, quota)
    assert q is not None
    p = Q.project(q, wl, specs)
    return {r: p.used.get(r, Decimal(0)) + p.summed.get(r, Decimal(0)) for r in p.hard}


def _workload(ns: str, name: str, groups: list[PodGroup]) -> Workload:
    return Workload(
        kind="TrainJob", api_version="trainer.kubeflow.org/v1alpha1", name=name, namespace=ns, obj={}, pod_groups=groups
    )


async def test_limits_gpu_quota_does_not_deny(control_plane: ControlPlane, view: LiveClusterView) -> None:
    cp, ns = control_plane, "chk-quota-gpu"
    cp.ensure_namespace(ns)
    _quota(cp, ns, "gpu", {"limits.nvidia.com/gpu": "0", "requests.nvidia.com/gpu": "16", "count/pods": "10"})
    await _wait_cached(view, "resourcequotas", ns, {"gpu"})
    node = {"containers": [_container("node", {"cpu": "1"}, {"nvidia.com/gpu": "8"})]}
    wl = _workload(ns, "gpu-job", [PodGroup("node", 2, node)])
    [r] = await _run(view, wl)
    assert (r.status, r.message) == (Status.PASS, f'The job fits 1 ResourceQuota in namespace "{ns}": gpu')
    assert r.details == [
        'ResourceQuota "gpu": limits.nvidia.com/gpu is not charged for pods (extended resources count only as requests.nvidia.com/gpu)',
        'ResourceQuota "gpu": count/pods 2 of 10 (used 0 + job 2)',
        'ResourceQuota "gpu": requests.nvidia.com/gpu 16 of 16 (used 0 + job 16)',
    ]
    want = _prediction(view, wl, "gpu")
    assert _create_pods(cp, wl) == ""  # the apiserver admits both pods despite limits.nvidia.com/gpu: 0
    assert _used(cp, ns, "gpu") == want == {"limits.nvidia.com/gpu": 0, "requests.nvidia.com/gpu": 16, "count/pods": 2}


async def test_priority_class_quota_sees_pods_through_the_global_default(
    control_plane: ControlPlane, view: LiveClusterView, global_default: str
) -> None:
    cp, ns = control_plane, "chk-quota-prio"
    cp.ensure_namespace(ns)
    scope = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": [global_default]}]}
    _quota(cp, ns, "by-class", {"requests.cpu": "3", "pods": "10"}, scopeSelector=scope)
    await _wait_cached(view, "resourcequotas", ns, {"by-class"})
    await _wait_cached(view, "priorityclasses", None, {global_default})
    wl = _workload(
        ns, "prio-job", [PodGroup("node", 4, {"containers": [_container("node", {"cpu": "1", "memory": "64Mi"})]})]
    )
    [r] = await _run(view, wl)
    assert r.status is Status.FAIL
    assert r.message == (
        'ResourceQuota "by-class": requests.cpu would be 4 (used 0 + job 4) but hard is 3. Fix: raise hard requests.cpu '
        f"to at least 4 (kubectl edit resourcequota by-class -n {ns}), or reduce the job's pods or requests."
    )
    # the apiserver agrees: the fourth pod is refused by that quota, the first three are charged
    refusal = _create_pods(cp, wl)
    assert "exceeded quota: by-class" in refusal and "prio-job-node-3" in refusal
    assert _used(cp, ns, "by-class") == {"requests.cpu": 3, "pods": 3}
    # and a quota on pods *without* a class (DoesNotExist) does not see them
    _quota(
        cp,
        ns,
        "no-class",
        {"requests.cpu": "0"},
        scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}]},
    )
    await _wait_cached(view, "resourcequotas", ns, {"no-class"})
    results = await _run(view, _workload(ns, "prio-job2", [PodGroup("node", 1, wl.pod_groups[0].pod_spec)]))
    assert 'ResourceQuota "no-class" does not apply to the job\'s pods (scopes)' in results[0].details


async def test_limit_range_defaulting_order(control_plane: ControlPlane, view: LiveClusterView) -> None:
    cp, ns = control_plane, "chk-quota-lr"
    cp.ensure_namespace(ns)
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "defaults", "namespace": ns},
            "spec": {
                "limits": [
                    {"type": "Container", "default": {"cpu": "1", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"}}
                ]
            },
        }
    )
    hard = {"requests.cpu": "20", "limits.cpu": "20", "requests.memory": "8Gi", "limits.memory": "8Gi", "pods": "10"}
    _quota(cp, ns, "compute", hard)
    await _wait_cached(view, "resourcequotas", ns, {"compute"})
    await _wait_cached(view, "limitranges", ns, {"defaults"})
    groups = [
        # limit only: the request defaults to the limit (2) at decode, not to defaultRequest (100m)
        PodGroup("limited", 2, {"containers": [_container("a", None, {"cpu": "2"})]}),
        # nothing set: LimitRanger's defaults (cpu 100m/1; memory request from the default limit)
        PodGroup("bare", 3, {"containers": [_container("b")]}),
        # a sidecar and an init container, each defaulted too
        PodGroup(
            "sidecar",
            1,
            {
                "initContainers": [
                    {**_container("side", {"cpu": "500m"}), "restartPolicy": "Always"},
                    _container("setup", {"cpu": "3"}, {"cpu": "3"}),
                ],
                "containers": [_container("main", {"cpu": "1"})],
            },
        ),
    ]
    wl = _workload(ns, "lr-job", groups)
    [r] = await _run(view, wl)
    assert r.status is Status.PASS, r.message
    # 2 × 2 (limited) + 3 × 100m (bare) + max(500m + 1, 500m + 3) (sidecar pod: init peak) = 7800m
    assert 'ResourceQuota "compute": requests.cpu 7800m of 20 (used 0 + job 7800m)' in r.details
    want = _prediction(view, wl, "compute")
    assert _create_pods(cp, wl) == ""
    assert _used(cp, ns, "compute") == want
    assert want["requests.cpu"] == Decimal("7.8")


async def test_trainjob_pods_charge_what_the_check_predicts(control_plane: ControlPlane, view: LiveClusterView) -> None:
    """The whole path: a TrainJob through the adapter (runtime from the live cache), then its pods for real."""
    from pathlib import Path

    import yaml

    from webhook.preflight import evaluate

    cp, ns = control_plane, "chk-quota-tj"
    cp.ensure_namespace(ns)
    samples = Path(__file__).resolve().parents[1] / "tests" / "oracle" / "samples"
    rt = yaml.safe_load((samples / "clustertrainingruntime.yaml").read_text())
    rt["metadata"]["name"] = "chk-quota-torch"
    rt["spec"]["mlPolicy"]["torch"] = {}  # the sample's numProcPerNode is not in Trainer v2.3's CRD schema
    cp.apply(rt)
    tj = yaml.safe_load((samples / "trainjob.yaml").read_text())
    tj["metadata"].update(namespace=ns, labels={})
    tj["spec"]["runtimeRef"]["name"] = "chk-quota-torch"
    tj["spec"].pop("runtimePatches", None)
    tj["spec"]["trainer"].pop("env", None)
    tj["spec"]["initializer"]["model"].pop("secretRef", None)
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "defaults", "namespace": ns},
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "64", "memory": "512Gi"}}]},
        }
    )
    hard = {
        "requests.cpu": "1000",
        "limits.cpu": "1000",
        "requests.memory": "10Ti",
        "limits.memory": "100Ti",
        "requests.nvidia.com/gpu": "64",
        "limits.nvidia.com/gpu": "0",
        "pods": "100",
        "count/pods": "100",
    }
    _quota(cp, ns, "team", hard)
    await _wait_cached(view, "resourcequotas", ns, {"team"})
    await _wait_cached(view, "limitranges", ns, {"defaults"})
    await _wait_cached(view, "clustertrainingruntimes", None, {"chk-quota-torch"})
    ev = await evaluate(tj, settings=Settings(), deadline=Deadline(15), view=view)
    assert ev.workload is not None and ev.workload.pod_groups
    [r] = [r for r in ev.results.checks if r.name == "Resource Quotas"]
    assert r.status is Status.PASS, r.message
    want = _prediction(view, ev.workload, "team")
    assert _create_pods(cp, ev.workload) == ""
    assert _used(cp, ns, "team") == want
    assert want["requests.nvidia.com/gpu"] == 32 and want["limits.nvidia.com/gpu"] == 0


async def test_priority_classes_not_readable_warns_never_denies(
    control_plane: ControlPlane, global_default: str
) -> None:
    """A webhook identity without list/watch priorityclasses: PriorityClass quotas are 'cannot verify'."""
    from webhook.cluster.capabilities import rbac_rules, required_permissions

    cp, ns, user = control_plane, "chk-quota-nopc", "quota-no-priorityclasses"
    cp.ensure_namespace(ns)
    rules = [r for r in rbac_rules(required_permissions(all_checks())) if r["resources"] != ["priorityclasses"]]
    role = cp.grant(rules, user=user)
    kubeconfig = cp.write_user_kubeconfig(user)
    scope = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": [global_default]}]}
    _quota(cp, ns, "by-class", {"requests.cpu": "1"}, scopeSelector=scope)
    v = await open_cluster_view(Settings(), kubeconfig=str(kubeconfig), checks=all_checks(), wait_seconds=60)
    try:
        assert await v.wait_synced(60), v.ready_reason
        assert "priorityclasses" not in v.reflectors and v.cache_age("priorityclasses") is None
        await _wait_cached(v, "resourcequotas", ns, {"by-class"})
        wl = _workload(ns, "nopc-job", [PodGroup("node", 2, {"containers": [_container("node", {"cpu": "1"})]})])
        [r] = await _run(v, wl)
        assert (r.status, r.message) == (
            Status.WARN,
            'Cannot verify ResourceQuota "by-class" (PriorityClass scope) for the node pods: the cluster\'s globalDefault '
            "PriorityClass cannot be read (not permitted to list priorityclasses.scheduling.k8s.io)",
        )
    finally:
        await v.close()
        cp.revoke(role)
