"""The audit controller's periodic scan against the real kube-apiserver + etcd (e2e/harness/controlplane.py).

The Controllers check reads the controllers' leader-election Leases live (no watch; a renewed Lease
changes every few seconds), so its result can never be kept on resourceVersions. It runs in the cheap
pass (webhook/audit/passes.py `request_free`, `Check.shares_reads`): a periodic scan that finds nothing
new judges each waiting job once, completely, with no request of its own, and reads each Lease at most
once per controllers.ttlSeconds for every job at once. Before, each job was judged a second time in the
request pass. Proven on the real apiserver: the Leases are real objects read by the live view, the
requests are those the controller's client sent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.fidelity.scenarios_base import secret
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

NS = "audit-periodic"
RUNTIME = "audit-periodic-torch"
JOBS = [f"waiting-{i}" for i in range(3)]
WAIT = 60.0
#: the controllers' Leases live in the test's namespace (the shared control plane runs no controller);
#: a 5-minute controllers.ttlSeconds: the periodic scan below reads each Lease at most once, whatever its pace
SETTINGS = Settings.model_validate(
    {
        "audit": {"leaseNamespace": NS, "debounceSeconds": 0.5, "leaseDurationSeconds": 4,
                  "renewDeadlineSeconds": 3, "retryPeriodSeconds": 0.5},
        "controllers": {"ttlSeconds": 300,
                        "jobset": {"namespace": NS, "lease": "jobset-leader"},
                        "trainer": {"namespace": NS, "lease": "trainer-leader"}},
    }
)  # fmt: skip


def _objects() -> list[dict[str, Any]]:
    s = secret("hf-token", token="value-that-must-not-leak")
    s["metadata"]["namespace"] = NS
    env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
    jobs = [suspended_trainjob(n, NS, RUNTIME, "1", env=env) for n in JOBS]
    return [s, initializer_claim(NS), live_lease("jobset-leader", NS), live_lease("trainer-leader", NS), *jobs]


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Any:
    cp = control_plane
    cp.apply(sample_runtime(RUNTIME))
    cp.ensure_namespace(NS)
    cp.apply(_objects())
    yield cp
    # the controller is cluster-wide: leave no waiting job for another test's controller to judge
    cp.kubectl("delete", "trainjobs", "--all", "-n", NS, "--wait=true")


def _kind(path: str, query: dict[str, Any]) -> str:
    return (
        "dry run" if query.get("dryRun") else "lease" if "/leases/" in path else "secret" if "/secrets/" in path else ""
    )


@pytest.fixture
async def audit(cluster: ControlPlane) -> AsyncIterator[tuple[AuditRun, LastJudgements, Counter[str]]]:
    async with counted_audit(SETTINGS, cluster, "periodic", _kind) as got:
        yield got


async def test_a_periodic_scan_judges_each_waiting_job_once_with_no_request_of_its_own(
    audit: tuple[AuditRun, LastJudgements, Counter[str]],
) -> None:
    run, last, sent = audit
    c = run.controller
    mine = {("trainjobs", NS, n) for n in JOBS}
    await judged_completely(c, mine, WAIT)
    for n in JOBS:
        ctl = result_named(last.last[n], "Controllers")
        assert last.last[n].complete and ctl.status.value == "pass", ctl.message
        assert ctl.message.startswith(f"Running: Trainer (Lease {NS}/trainer-leader renewed ")
        assert f", JobSet (Lease {NS}/jobset-leader renewed " in ctl.message

    sent.clear()
    await a_rescan_judges_each_once(c, last, mine)
    # no dry run, no Secret read; the Leases read for every job at once: within controllers.ttlSeconds, not again
    assert sent["POST dry run"] == 0 and sent["GET secret"] == 0 and sent["GET lease"] <= 2, dict(sent)
    for n in JOBS:
        assert result_named(last.last[n], "Controllers").status.value == "pass"
