"""Issue 33's Secret churn against the real kube-apiserver + etcd (e2e/harness/controlplane.py), with
the openreports.io CRDs the chart installs.

A Secret read by every waiting job of a namespace is deleted and created again, over and over; the
audit controller (in process, every check) keeps one queued state a job, whatever the number of
changes, and once the Secret is back for good, every job's Report result goes back to `pass`: no
stale DENY. bench/audit_scale.py --churn measures the same at 2,000 jobs for minutes (memory, CPU,
scans, how long until the Reports say pass: docs/benchmarks/audit-churn.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.fidelity.scenarios_base import secret
from e2e.harness.audit import (
    LastJudgements,
    initializer_claim,
    install_openreports,
    judged_completely,
    quick_settings,
    report_results,
    sample_runtime,
    suspended_trainjob,
    until,
)
from e2e.harness.controlplane import ControlPlane
from webhook.audit.runner import AuditRun
from webhook.checks import all_checks

NS = "audit-churn"
RUNTIME = "audit-churn-torch"
JOBS = [f"reads-{i:02d}" for i in range(12)]
CYCLES = 15
WAIT = 120.0


def _secret() -> dict[str, Any]:
    s = secret("hf-token", token="value-that-must-not-leak")
    s["metadata"]["namespace"] = NS
    return s


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    cp = control_plane
    install_openreports(cp)
    cp.apply(sample_runtime(RUNTIME))
    cp.ensure_namespace(NS)
    env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
    cp.apply([_secret(), initializer_claim(NS), *(suspended_trainjob(n, NS, RUNTIME, "1", env=env) for n in JOBS)])
    yield cp
    # the controller is cluster-wide: leave no waiting job for another test's controller to judge
    cp.kubectl("delete", "trainjobs", "--all", "-n", NS, "--wait=true")


def _secrets_results(cp: ControlPlane) -> dict[str, str]:
    """Each job's Secrets result in the namespace's stored Report."""
    return {job: result for (job, check), result in report_results(cp, NS).items() if check == "Secrets"}


async def test_secret_churn_keeps_one_state_a_job_and_the_reports_go_back_to_pass(cluster: ControlPlane) -> None:
    cp = cluster
    last = LastJudgements()
    run = await AuditRun.start(
        quick_settings(NS), kubeconfig=str(cp.kubeconfig), identity="churn", checks=all_checks(), extra_sinks=[last]
    )
    try:
        c = run.controller
        keys = {("trainjobs", NS, n) for n in JOBS}
        await judged_completely(c, keys, WAIT)
        await until(
            "the Report says pass for every job's Secrets",
            lambda: asyncio.to_thread(lambda: _secrets_results(cp) == dict.fromkeys(JOBS, "pass")),
            timeout=WAIT,
        )
        watch = c.reflectors["secrets"].cache
        most_queued = most_processing = 0
        for _ in range(CYCLES):
            await asyncio.to_thread(cp.kubectl, "delete", "secret", "hf-token", "-n", NS)
            await until("the controller saw the deletion", lambda: watch.get(NS, "hf-token") is None, timeout=WAIT)
            most_queued, most_processing = (
                max(most_queued, len(c.debouncer)),
                max(most_processing, c.debouncer.processing),
            )
            await asyncio.to_thread(cp.apply, _secret())
            await until(
                "the controller saw the Secret again", lambda: watch.get(NS, "hf-token") is not None, timeout=WAIT
            )
            most_queued, most_processing = (
                max(most_queued, len(c.debouncer)),
                max(most_processing, c.debouncer.processing),
            )
        # one queued entry a job and at most audit.workers judged at once, whatever the number of changes
        assert most_queued <= len(JOBS) and most_processing <= c.audit.workers, (most_queued, most_processing)
        # the Secret is back for good: every job's last judgement, and the stored Report, say pass
        await until(
            "every job's last judgement has no denied check",
            lambda: all(last.last[n].evaluation.decision.denied_checks == [] for n in JOBS),
            timeout=WAIT,
        )
        await until(
            "the Report says pass for every job's Secrets again",
            lambda: asyncio.to_thread(lambda: _secrets_results(cp) == dict.fromkeys(JOBS, "pass")),
            timeout=WAIT,
        )
        await until("the queue drained", lambda: len(c.debouncer) == 0 and c.debouncer.processing == 0, timeout=WAIT)
        assert c.view_waits == 0
    finally:
        await run.stop()
