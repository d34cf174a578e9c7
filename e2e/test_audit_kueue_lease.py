"""The audit controller's periodic scan with kueue.admissionLease set, against the real kube-apiserver + etcd.

The Kueue Admission Checks check reads the admission controller's Lease (kueue.admissionLease) live: no
watch versions it, so a kept result would never hold. Its read is reused for kueue.leaseTtlSeconds, and it
is its only live read, so it runs in the cheap pass (webhook/audit/passes.py `request_free`,
`Check.shares_reads`): a periodic re-scan of many waiting jobs sends at most one GET of that Lease per window
and judges each job once, completely. Before, every job was judged a second time in the request pass, with
one GET of the Lease each. Proven on the real apiserver: the queues, AdmissionCheck and Lease are real
objects read by the live view, the requests are those the controller's client sent.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.harness.audit import (
    LastJudgements,
    a_rescan_judges_each_once,
    counted_audit,
    initializer_claim,
    judged_completely,
    live_lease,
    result_named,
    sample_runtime,
    suspended_trainjob,
)
from e2e.harness.controlplane import ControlPlane
from webhook.audit.runner import AuditRun
from webhook.config import Settings

NS = "audit-kueue-lease"
RUNTIME = "audit-kueue-lease-torch"
KUEUE = "kueue.x-k8s.io/v1beta2"
CQ = "audit-kueue-lease-cq"
GATE = "audit-kueue-lease-gate"
CONTROLLER = "example.com/admission"
JOBS = [f"queued-{i:02d}" for i in range(12)]
WAIT = 90.0
ADMISSION_LEASE = f"/namespaces/{NS}/leases/admission-leader"
#: a 5-minute reuse window for both Lease reads; the admission Lease must have been renewed within an hour
#: (nothing renews it here: the bound itself is proven by the unit tests, tests/test_check_kueue.py)
SETTINGS = Settings.model_validate(
    {
        "audit": {"leaseNamespace": NS, "debounceSeconds": 0.5, "leaseDurationSeconds": 4,
                  "renewDeadlineSeconds": 3, "retryPeriodSeconds": 0.5},
        "controllers": {"ttlSeconds": 300,
                        "jobset": {"namespace": NS, "lease": "jobset-leader"},
                        "trainer": {"namespace": NS, "lease": "trainer-leader"},
                        "kueue": {"namespace": NS, "lease": "kueue-leader"}},
        "kueue": {"admissionCheckController": CONTROLLER, "admissionLease": f"{NS}/admission-leader",
                  "leaseMaxAgeSeconds": 3600, "leaseTtlSeconds": 300},
    }
)  # fmt: skip


def _queued(name: str) -> dict[str, Any]:
    return suspended_trainjob(name, NS, RUNTIME, "1", labels={"kueue.x-k8s.io/queue-name": "lq"})


ACTIVE = {"status": {"conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "ok",
                                     "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}  # fmt: skip


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Any:
    cp = control_plane
    cp.apply(sample_runtime(RUNTIME))
    cp.ensure_namespace(NS)
    cp.apply(
        [
            {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": GATE},
             "spec": {"controllerName": CONTROLLER}},
            {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": CQ},
             "spec": {"namespaceSelector": {}, "admissionChecksStrategy": {"admissionChecks": [{"name": GATE}]}}},
            {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": NS},
             "spec": {"clusterQueue": CQ}},
        ]
    )  # fmt: skip
    # no Kueue controller on the control plane: set the Active conditions as it would
    for kind, name, ns in (("admissioncheck", GATE, None), ("clusterqueue", CQ, None), ("localqueue", "lq", NS)):
        where = ("-n", ns) if ns else ()
        cp.kubectl("patch", kind, name, *where, "--subresource=status", "--type=merge", "-p", json.dumps(ACTIVE))
    leases = [live_lease(n, NS) for n in ("jobset-leader", "trainer-leader", "kueue-leader", "admission-leader")]
    cp.apply([initializer_claim(NS), *leases, *(_queued(n) for n in JOBS)])
    yield cp
    # the controller is cluster-wide: leave no waiting job for another test's controller to judge
    cp.kubectl("delete", "trainjobs", "--all", "-n", NS, "--wait=true")
    cp.kubectl("delete", "clusterqueue", CQ, "admissioncheck", GATE, "--ignore-not-found")


def _kind(path: str, query: dict[str, Any]) -> str:
    return (
        "dry run" if query.get("dryRun")
        else "admission lease" if path.endswith(ADMISSION_LEASE)
        else "lease" if "/leases/" in path
        else ""
    )  # fmt: skip


@pytest.fixture
async def audit(cluster: ControlPlane) -> AsyncIterator[tuple[AuditRun, LastJudgements, Counter[str]]]:
    async with counted_audit(SETTINGS, cluster, "kueue-lease", _kind) as got:
        yield got


async def test_a_periodic_rescan_reads_the_admission_lease_once_per_window_and_judges_each_job_once(
    audit: tuple[AuditRun, LastJudgements, Counter[str]],
) -> None:
    run, last, sent = audit
    c = run.controller
    mine = {("trainjobs", NS, n) for n in JOBS}
    await judged_completely(c, mine, WAIT)
    ok = f'1 AdmissionCheck(s) of ClusterQueue "{CQ}" exist and are Active: {GATE}'
    for n in JOBS:
        gate = result_named(last.last[n], "Kueue Admission Checks")
        assert last.last[n].complete and (gate.status.value, gate.message) == ("pass", ok)
    # the first scan too (counted from when the controller had started): at most one GET for all the jobs
    assert sent["GET admission lease"] <= 1, dict(sent)

    sent.clear()
    await a_rescan_judges_each_once(c, last, mine)
    # within kueue.leaseTtlSeconds the admission Lease is not read again, for any of the jobs; no dry run
    assert sent["GET admission lease"] == 0 and sent["POST dry run"] == 0, dict(sent)
    for n in JOBS:
        gate = result_named(last.last[n], "Kueue Admission Checks")
        assert (gate.status.value, gate.message) == ("pass", ok)
