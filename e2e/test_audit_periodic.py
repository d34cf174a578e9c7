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

import datetime as dt
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.fidelity.scenarios_base import secret
from e2e.harness.audit import initializer_claim, sample_runtime, suspended_trainjob, until
from e2e.harness.controlplane import ControlPlane
from webhook.audit.runner import AuditRun
from webhook.audit.sink import JobRef, Judgement
from webhook.checks import all_checks
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


def _lease(name: str) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": NS},
        "spec": {"holderIdentity": f"{name}-pod", "renewTime": now, "acquireTime": now, "leaseDurationSeconds": 3600},
    }  # fmt: skip


def _objects() -> list[dict[str, Any]]:
    s = secret("hf-token", token="value-that-must-not-leak")
    s["metadata"]["namespace"] = NS
    env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
    jobs = [suspended_trainjob(n, NS, RUNTIME, "1", env=env) for n in JOBS]
    return [s, initializer_claim(NS), _lease("jobset-leader"), _lease("trainer-leader"), *jobs]


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Any:
    cp = control_plane
    cp.apply(sample_runtime(RUNTIME))
    cp.ensure_namespace(NS)
    cp.apply(_objects())
    yield cp
    # the controller is cluster-wide: leave no waiting job for another test's controller to judge
    cp.kubectl("delete", "trainjobs", "--all", "-n", NS, "--wait=true")


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
        SETTINGS, kubeconfig=str(cluster.kubeconfig), identity="periodic", checks=all_checks(), extra_sinks=[last]
    )
    sent: Counter[str] = Counter()
    client = run.view.client
    inner = client.request

    async def counted(method: str, path: str, **kw: Any) -> Any:
        q = kw.get("query") or {}
        kind = (
            "dry run" if q.get("dryRun") else "lease" if "/leases/" in path else "secret" if "/secrets/" in path else ""
        )
        sent[f"{method} {kind}".strip()] += 1
        return await inner(method, path, **kw)

    client.request = counted  # type: ignore[method-assign]
    try:
        yield run, last, sent
    finally:
        await run.stop()


def _controllers(j: Judgement) -> Any:
    return {r.name: r for r in j.evaluation.results.checks}["Controllers"]


async def test_a_periodic_scan_judges_each_waiting_job_once_with_no_request_of_its_own(
    audit: tuple[AuditRun, _Last, Counter[str]],
) -> None:
    run, last, sent = audit
    c = run.controller
    mine = {("trainjobs", NS, n) for n in JOBS}
    await until(
        "the first full scan judged the three jobs completely",
        lambda: c.scans >= 1 and mine <= set(c.judged) and not (mine & c.partial),
        WAIT,
    )
    for n in JOBS:
        ctl = _controllers(last.last[n])
        assert last.last[n].complete and ctl.status.value == "pass", ctl.message
        assert ctl.message.startswith(f"Running: Trainer (Lease {NS}/trainer-leader renewed ")
        assert f", JobSet (Lease {NS}/jobset-leader renewed " in ctl.message

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
    # no dry run, no Secret read; the Leases read for every job at once: within controllers.ttlSeconds, not again
    assert sent["POST dry run"] == 0 and sent["GET secret"] == 0 and sent["GET lease"] <= 2, dict(sent)
    for n in JOBS:
        assert _controllers(last.last[n]).status.value == "pass"
