"""Kueue's visibility API served on the real node, and the numbers the webhook and the audit controller
take from it checked against it (issue 39).

The node's apiserver runs the aggregation layer as kubeadm configures it (front-proxy CA and client
certificate, the ``--requestheader-*`` and ``--proxy-client-*`` flags:
``aggregation_layer_flags`` in e2e/harness/controlplane.py), and the stack applies Kueue v0.17.0's
visibility APIServices (``v1beta1`` and ``v1beta2.visibility.kueue.x-k8s.io``) as its ``config/default``
renders them, served by the Kueue controller behind the Service ``kueue-visibility-server``
(e2e/harness/stack.py waits until each is Available). On it:

* a ClusterQueue of cpu 100m is held full by a running JobSet (Kueue admitted its Workload, its two
  pods run), and two more JobSets of the same size wait behind it: real Workloads Kueue created,
  pending, listed by ``GET /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/<cq>/pendingworkloads``;
* the webhook's Kueue Capacity warns that a new JobSet on the same LocalQueue will wait, says its
  count ahead comes from the visibility API, and the count is the length of that list, read just
  before and just after the evaluation (the same both times);
* the audit controller records, for each waiting JobSet, the position Kueue's visibility API gives:
  its Report result (``waits at position N``) and its ``PreflightWaiting`` Event (``position N in
  ClusterQueue …, M in LocalQueue …``) equal ``positionInClusterQueue`` + 1 and
  ``positionInLocalQueue`` + 1 (Kueue counts from 0), read again after they were recorded;
* a namespace deletion completes while the aggregated API is served (an unavailable one would leave
  every deleted namespace ``Terminating``: the reason the APIService was once left out).

The webhook's path (adapter, checks, policy) runs in process on a live view of the node's apiserver;
the audit controller in process too (``AuditRun``, what ``preflight-webhook audit`` runs). Marked
``node``, in ``make conformance`` (e2e/tiers.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.fidelity import scenarios_base
from e2e.harness.audit import OPENREPORTS_CRDS, install_openreports, until
from e2e.harness.controlplane import ControlPlane
from e2e.harness.live import live_evaluate, result_of
from e2e.harness.node import poll_until
from e2e.harness.stack import WORKLOAD_IMAGE, SharedStack, Stack
from webhook.audit.events import WAITING
from webhook.audit.runner import AuditRun
from webhook.checks import all_checks
from webhook.cluster.live import open_cluster_view
from webhook.config import Settings
from webhook.results import Status

pytestmark = pytest.mark.node

NS = "kueue-visibility"
#: a namespace this module deletes and waits to be gone
GONE_NS = "kueue-visibility-gone"
CQ, LQ, FLAVOR = "vis-cq", "vis-lq", "vis-flavor"
HOLDER, WAITING_JOBS, NEW = "vis-holder", ("vis-wait-1", "vis-wait-2"), "vis-new"
KUEUE = "kueue.x-k8s.io/v1beta2"
VISIBILITY = "visibility.kueue.x-k8s.io/v1beta2"
PENDING_PATH = f"/apis/{VISIBILITY}/clusterqueues/{CQ}/pendingworkloads"
CAPACITY = "Kueue Capacity"
#: how long a condition may take on the node (its controllers share 2 cores with the other helpers)
WAIT = 180.0

CLUSTER_OBJECTS = [
    {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": CQ}},
    {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
    *(
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name}}
        for name in ("reports.openreports.io", "clusterreports.openreports.io")
    ),
]
assert len(list(OPENREPORTS_CRDS.glob("*.yaml"))) == 2


def _cluster_queue() -> dict[str, Any]:
    """Room for exactly one JobSet (two pods of cpu 50m, memory 32Mi), in no cohort."""
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": CQ},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "100m"},
                                {"name": "memory", "nominalQuota": "64Mi"},
                            ],
                        }
                    ],
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def stack(shared_stack: SharedStack) -> Iterator[Stack]:
    """The shared node (e2e/conftest.py) with the report CRDs, this module's queues and namespaces,
    deleted afterwards."""
    with shared_stack.borrowed(namespaces=[NS, GONE_NS], objects=CLUSTER_OBJECTS) as st:
        install_openreports(st.cp)
        st.namespace(NS)
        st.cp.apply(
            [
                {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
                _cluster_queue(),
                {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": LQ, "namespace": NS},
                 "spec": {"clusterQueue": CQ}},
            ]
        )  # fmt: skip
        yield st


def jobset(name: str) -> dict[str, Any]:
    """A JobSet of two pods (cpu 50m, memory 32Mi each) that run an hour, on LocalQueue LQ."""
    container = {
        "name": "trainer",
        "image": WORKLOAD_IMAGE,
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
        "env": [{"name": "WORKLOAD_SLEEP_SECONDS", "value": "3600"}],
    }
    js = scenarios_base.jobset(name, NS, container, run_once=True)
    js["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": LQ}
    return js


def _get(cp: ControlPlane, *args: str) -> dict[str, Any]:
    out = cp.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 and out.stdout else {}


def pending(cp: ControlPlane) -> list[dict[str, Any]]:
    """The ClusterQueue's pending workloads as Kueue's visibility API lists them now."""
    status, body = cp.get_raw(PENDING_PATH)
    assert status == 200, (status, body[:500])
    items: list[dict[str, Any]] = json.loads(body)["items"]
    return items


def positions(cp: ControlPlane, uids: dict[str, str]) -> dict[str, tuple[int, int]]:
    """job name → (positionInClusterQueue, positionInLocalQueue) of its pending Workload (its owner's
    uid: Kueue v0.17.0 pkg/visibility/storage/utils.go newPendingWorkload keeps the ownerReferences)."""
    out: dict[str, tuple[int, int]] = {}
    for item in pending(cp):
        assert item["localQueueName"] == LQ, item
        for ref in item["metadata"].get("ownerReferences") or []:
            for name, uid in uids.items():
                if ref.get("uid") == uid:
                    out[name] = (item["positionInClusterQueue"], item["positionInLocalQueue"])
    return out


def _uid(cp: ControlPlane, name: str) -> str:
    uid: str = _get(cp, "jobset", name, "-n", NS)["metadata"]["uid"]
    return uid


def _holder_runs(cp: ControlPlane) -> bool | str:
    """The holder's Workload is admitted and both its pods run."""
    wls = [w for w in _get(cp, "workloads", "-n", NS).get("items", [])
           if any(r.get("name") == HOLDER for r in w["metadata"].get("ownerReferences") or [])]  # fmt: skip
    admitted = any(
        c.get("type") == "Admitted" and c.get("status") == "True"
        for w in wls
        for c in (w.get("status") or {}).get("conditions") or []
    )
    pods = _get(cp, "pods", "-n", NS, "-l", f"jobset.sigs.k8s.io/jobset-name={HOLDER}").get("items", [])
    phases = sorted((p.get("status") or {}).get("phase", "?") for p in pods)
    return True if admitted and phases == ["Running", "Running"] else f"admitted={admitted} pods={phases}"


def _queue_status(cp: ControlPlane) -> tuple[int, str]:
    """(status.pendingWorkloads, cpu in flavorsUsage) of the ClusterQueue, as Kueue wrote them."""
    status = _get(cp, "clusterqueue", CQ).get("status") or {}
    used = [
        r.get("total")
        for f in status.get("flavorsUsage") or []
        if f.get("name") == FLAVOR
        for r in f.get("resources") or []
        if r.get("name") == "cpu"
    ]
    return int(status.get("pendingWorkloads") or 0), str(used[0] if used else "0")


def report_messages(cp: ControlPlane, check: str) -> dict[str, str]:
    """job name → the message of ``check``'s result in the namespace's Report; {} while there is none."""
    report = _get(cp, "reports.openreports.io", "preflight-webhook", "-n", NS)
    return {r["resources"][0]["name"]: r["message"] for r in report.get("results") or [] if r["policy"] == check}


def waiting_events(cp: ControlPlane) -> dict[str, list[str]]:
    """job name → the messages of the PreflightWaiting Events on it."""
    out: dict[str, list[str]] = {}
    for e in _get(cp, "events", "-n", NS).get("items", []):
        if e.get("reason") == WAITING:
            out.setdefault(e["involvedObject"]["name"], []).append(e["message"])
    return out


@pytest.fixture(scope="module")
def queue(stack: Stack) -> dict[str, str]:
    """The holder running, then the two waiting JobSets, each pending in the visibility API before the
    next is created (so their order in the queue is their creation order); job name → uid."""
    cp = stack.cp
    cp.apply(jobset(HOLDER))
    poll_until(f"JobSet {HOLDER} admitted by Kueue and its pods Running", lambda: _holder_runs(cp), WAIT)
    uids: dict[str, str] = {}
    for name in WAITING_JOBS:
        cp.apply(jobset(name))
        uids[name] = _uid(cp, name)
        poll_until(
            f"the Workload of {name} pending in the visibility API",
            lambda u=dict(uids): len(positions(cp, u)) == len(u) or f"pending: {positions(cp, u)}",
            WAIT,
        )
    poll_until(
        "ClusterQueue status: 2 pending, cpu 100m in use",
        lambda: _queue_status(cp) == (2, "100m") or f"status {_queue_status(cp)}",
        WAIT,
    )
    return uids


def test_the_visibility_apiservices_are_available_and_served(stack: Stack) -> None:
    cp = stack.cp
    group = VISIBILITY.split("/")[0]
    services = [a for a in _get(cp, "apiservices").get("items", []) if a["spec"].get("group") == group]
    assert f"v1beta2.{group}" in {a["metadata"]["name"] for a in services}
    for a in services:  # each as Kueue renders it, proxied to Kueue's controller through its Service
        ref = a["spec"]["service"]
        assert ref["namespace"] == "kueue-system", ref
        assert _get(cp, "service", ref["name"], "-n", ref["namespace"]), ref
        conds = {c["type"]: c["status"] for c in a["status"]["conditions"]}
        assert conds["Available"] == "True", a["status"]
    # discovery lists the subresources, as the webhook's cluster view reads them
    status, body = cp.get_raw(f"/apis/{VISIBILITY}")
    assert status == 200, body
    names = {r["name"] for r in json.loads(body)["resources"]}
    assert {"clusterqueues/pendingworkloads", "localqueues/pendingworkloads"} <= names, names


async def test_the_will_wait_count_is_the_visibility_apis(stack: Stack, queue: dict[str, str]) -> None:
    cp = stack.cp
    settings = Settings.model_validate({"publicRegistries": ["localhost"]})
    view = await open_cluster_view(settings, kubeconfig=str(cp.kubeconfig), checks=all_checks(), wait_seconds=60)
    try:
        assert await view.wait_synced(60), view.ready_reason
        assert view.served(VISIBILITY)
        before = await asyncio.to_thread(pending, cp)
        ev = await live_evaluate(jobset(NEW), view, settings)
        after = await asyncio.to_thread(pending, cp)
    finally:
        await view.close()
    names = [[i["metadata"]["name"] for i in items] for items in (before, after)]
    assert names[0] == names[1], names  # nothing moved in the queue meanwhile: the same moment
    assert [i["priority"] for i in after] == [0, 0]
    r = result_of(ev, CAPACITY)
    assert r.status is Status.WARN, r.message
    head, _, age = r.message.rpartition(" (ClusterQueue status as watched ")
    assert head == (
        f'JobSet "{NEW}" will wait in ClusterQueue "{CQ}": it needs cpu 100m, 0 free now (flavor "{FLAVOR}": 100m of '
        f"100m in use and 0 reserved), and {len(after)} workloads of priority ≥ 0 (no priority class) are pending ahead "
        f'of it (Kueue\'s visibility API, read within 5s); ClusterQueue "{CQ}" is in no cohort: it cannot borrow; it '
        "preempts nothing (withinClusterQueue Never). Fix: nothing to fix; it starts once cpu is released"
    )
    assert age.endswith("s ago).")
    assert len(after) == len(WAITING_JOBS)
    assert r.details == [f'blocking: ClusterQueue "{CQ}" has too little cpu free for the job']


async def test_the_audit_controllers_positions_are_the_visibility_apis(stack: Stack, queue: dict[str, str]) -> None:
    cp = stack.cp
    settings = Settings.model_validate(
        {"publicRegistries": ["localhost"], "audit": {"leaseNamespace": NS, "debounceSeconds": 0.5}}
    )
    before = await asyncio.to_thread(positions, cp, queue)
    assert sorted(before.values()) == [(0, 0), (1, 1)], before
    run = await AuditRun.start(settings, kubeconfig=str(cp.kubeconfig), identity="vis-a", checks=all_checks())
    try:

        async def recorded() -> bool:
            reports = await asyncio.to_thread(report_messages, cp, CAPACITY)
            events = await asyncio.to_thread(waiting_events, cp)
            return all(" waits at position " in reports.get(n, "") and events.get(n) for n in WAITING_JOBS)

        await until("a Report result and a PreflightWaiting Event for each waiting JobSet", recorded, timeout=WAIT)
        reports = await asyncio.to_thread(report_messages, cp, CAPACITY)
        events = await asyncio.to_thread(waiting_events, cp)
        now = await asyncio.to_thread(positions, cp, queue)
    finally:
        await run.stop()
    assert now == before  # the queue did not move: the recorded positions are Kueue's at this moment
    for name in WAITING_JOBS:
        at_cq, at_lq = (p + 1 for p in now[name])
        ahead = now[name][0]
        assert reports[name].startswith(
            f'JobSet "{name}" waits at position {at_cq} in ClusterQueue "{CQ}": it needs cpu 100m, 0 free now '
            f'(flavor "{FLAVOR}": 100m of 100m in use and 0 reserved), and {ahead} workload{"" if ahead == 1 else "s"} '
            f"{'is' if ahead == 1 else 'are'} ahead of it (Kueue's visibility API, read within 5s);"
        ), reports[name]
        (event,) = events[name]  # one: what blocks it did not change
        assert event.startswith(
            f'JobSet {name} waits: ClusterQueue "{CQ}" has too little cpu free for the job '
            f'(position {at_cq} in ClusterQueue "{CQ}", {at_lq} in LocalQueue "{LQ}"). '
        ), event


def test_a_namespace_is_deleted_while_the_aggregated_api_is_served(stack: Stack) -> None:
    cp = stack.cp
    stack.namespace(GONE_NS)
    cp.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": GONE_NS}})
    cp.kubectl("delete", "namespace", GONE_NS, "--wait=false")

    def gone() -> bool | str:
        proc = cp.kubectl("get", "namespace", GONE_NS, "-o", "json", check=False)
        if proc.returncode != 0 and "NotFound" in proc.stderr:
            return True
        return json.dumps((json.loads(proc.stdout).get("status") or {}).get("conditions") or [])[:800]

    poll_until(f"namespace {GONE_NS} deleted by the namespace controller", gone, WAIT)
