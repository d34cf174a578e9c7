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

import datetime as dt
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.harness.audit import initializer_claim, sample_runtime, suspended_trainjob, until
from e2e.harness.controlplane import ControlPlane
from webhook.audit.runner import AuditRun
from webhook.audit.sink import JobRef, Judgement
from webhook.checks import all_checks
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


def _lease(name: str) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": NS},
        "spec": {"holderIdentity": f"{name}-pod", "renewTime": now, "acquireTime": now, "leaseDurationSeconds": 3600},
    }  # fmt: skip


def _queued(name: str) -> dict[str, Any]:
    job = suspended_trainjob(name, NS, RUNTIME, "1")
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    return job


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
    leases = [_lease(n) for n in ("jobset-leader", "trainer-leader", "kueue-leader", "admission-leader")]
    cp.apply([initializer_claim(NS), *leases, *(_queued(n) for n in JOBS)])
    yield cp
    # the controller is cluster-wide: leave no waiting job for another test's controller to judge
    cp.kubectl("delete", "trainjobs", "--all", "-n", NS, "--wait=true")
    cp.kubectl("delete", "clusterqueue", CQ, "admissioncheck", GATE, "--ignore-not-found")


class _Last:
    """A sink that keeps each job's last judgement."""

    def __init__(self) -> None:
        self.last: dict[str, Judgement] = {}

    async def publish(self, j: Judgement) -> None:
        self.last[j.job.name] = j

    async def forget(self, job: JobRef, why: str) -> None:
        return None

    async def scan_done(self, judged: int, not_judged: dict[str, int]) -> None:
        return None


@pytest.fixture
async def audit(cluster: ControlPlane) -> AsyncIterator[tuple[AuditRun, _Last, Counter[str]]]:
    last = _Last()
    run = await AuditRun.start(
        SETTINGS, kubeconfig=str(cluster.kubeconfig), identity="kueue-lease", checks=all_checks(), extra_sinks=[last]
    )
    sent: Counter[str] = Counter()
    client = run.view.client
    inner = client.request

    async def counted(method: str, path: str, **kw: Any) -> Any:
        q = kw.get("query") or {}
        kind = (
            "dry run" if q.get("dryRun")
            else "admission lease" if path.endswith(ADMISSION_LEASE)
            else "lease" if "/leases/" in path
            else ""
        )  # fmt: skip
        sent[f"{method} {kind}".strip()] += 1
        return await inner(method, path, **kw)

    client.request = counted  # type: ignore[method-assign]
    try:
        yield run, last, sent
    finally:
        await run.stop()


def _gate(j: Judgement) -> Any:
    return {r.name: r for r in j.evaluation.results.checks}["Kueue Admission Checks"]


async def test_a_periodic_rescan_reads_the_admission_lease_once_per_window_and_judges_each_job_once(
    audit: tuple[AuditRun, _Last, Counter[str]],
) -> None:
    run, last, sent = audit
    c = run.controller
    mine = {("trainjobs", NS, n) for n in JOBS}
    await until(
        "the first full scan judged every queued job completely",
        lambda: c.scans >= 1 and mine <= set(c.judged) and not (mine & c.partial),
        WAIT,
    )
    ok = f'1 AdmissionCheck(s) of ClusterQueue "{CQ}" exist and are Active: {GATE}'
    for n in JOBS:
        gate = _gate(last.last[n])
        assert last.last[n].complete and (gate.status.value, gate.message) == ("pass", ok)
    # the first scan too (counted from when the controller had started): at most one GET for all the jobs
    assert sent["GET admission lease"] <= 1, dict(sent)

    judged: Counter[tuple[str, str, str]] = Counter()
    judge = c.judge

    async def counting(key: Any, reason: str, *, cheap: bool = False) -> str:
        judged[key] += 1
        return await judge(key, reason, cheap=cheap)

    c.judge = counting  # type: ignore[method-assign]
    sent.clear()
    await c.full_scan("period")
    # each job judged once: complete from the cheap pass, none left for the request pass
    assert {k: judged[k] for k in mine} == dict.fromkeys(mine, 1)
    assert not (mine & c.partial) and all(last.last[n].complete for n in JOBS)
    # within kueue.leaseTtlSeconds the admission Lease is not read again, for any of the jobs; no dry run
    assert sent["GET admission lease"] == 0 and sent["POST dry run"] == 0, dict(sent)
    for n in JOBS:
        gate = _gate(last.last[n])
        assert (gate.status.value, gate.message) == ("pass", ok)
