"""The audit controller against the real kube-apiserver + etcd (e2e/harness/controlplane.py).

Controllers run in process (`webhook.audit.runner.AuditRun`, what `preflight-webhook audit` runs)
against the control plane's admin kubeconfig. Proven here, each by waiting on a condition with a
deadline:
- a suspended TrainJob is stored and judged; its Secret is deleted: a `PreflightFailed` Event on
  the TrainJob names the Secret and the fix; the Secret is put back: `PreflightPassed` follows;
- restarting the controller while the job fails writes no second `PreflightFailed`;
- with two controllers only the Lease holder judges and writes;
- a deleted job is forgotten (no longer judged, nothing left in the reverse index).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from e2e.fidelity.scenarios_base import secret
from e2e.harness.audit import (
    audit_runs,
    initializer_claim,
    preflight_events,
    quick_settings,
    sample_runtime,
    suspended_trainjob,
)
from e2e.harness.audit import until as wait_until
from e2e.harness.controlplane import ControlPlane, free_ports, stop_pid
from webhook.audit.events import FAILED, PASSED

NS = "audit-e2e"
RUNTIME = "audit-torch"
JOB = "waiting-ft"
#: what the Events must show within (the issue's bound on the real node)
WAIT = 30.0
SETTINGS = quick_settings(NS)


def _trainjob() -> dict[str, Any]:
    env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
    return suspended_trainjob(JOB, NS, RUNTIME, "1", env=env)


def _secret() -> dict[str, Any]:
    obj = secret("hf-token", token="value-that-must-not-leak")
    obj["metadata"]["namespace"] = NS
    return obj


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> ControlPlane:
    cp = control_plane
    cp.apply(sample_runtime(RUNTIME))
    cp.ensure_namespace(NS)
    cp.apply([_secret(), initializer_claim(NS), _trainjob()])
    excluded = _trainjob()
    excluded["metadata"]["namespace"] = "kube-system"  # never judged, as the webhook never judges it
    cp.apply(excluded)
    return cp


@pytest.fixture
async def start_audit(cluster: ControlPlane) -> AsyncIterator[Callable[..., Any]]:
    """Factory: `run = await start_audit("a")`, an in-process audit controller; stopped at teardown."""
    async with audit_runs(SETTINGS, cluster) as start:
        yield start


async def until(what: str, cond: Callable[[], Any], timeout: float = WAIT) -> Any:
    return await wait_until(what, cond, timeout)


async def events(cp: ControlPlane) -> list[dict[str, Any]]:
    return await preflight_events(cp, NS, JOB)


async def test_secret_deleted_then_restored_restart_and_two_replicas(
    cluster: ControlPlane, start_audit: Callable[..., Any]
) -> None:
    a = await start_audit("audit-a")
    await until("audit-a leads and scanned once", lambda: a.controller.is_leader and a.controller.scans >= 1)
    key = ("trainjobs", NS, JOB)
    assert key in a.controller.judged  # suspended: not started, judged
    assert ("trainjobs", "kube-system", JOB) not in a.controller.judged
    assert await a.controller.judge(("trainjobs", "kube-system", JOB), "test") == "excluded"
    assert await events(cluster) == []  # it passes: nothing to say
    # the reverse index holds what the evaluation read
    assert key in a.controller.index.jobs_for("secrets", NS, "hf-token")
    assert key in a.controller.index.jobs_for("persistentvolumeclaims", NS, "initializer")
    assert key not in a.controller.index.jobs_for("secrets", NS, "other")

    # the Secret goes: a PreflightFailed Event on the TrainJob, naming it and the fix
    await asyncio.to_thread(cluster.kubectl, "delete", "secret", "hf-token", "-n", NS)
    got = await until("a PreflightFailed Event", lambda: events(cluster))
    assert [e["reason"] for e in got] == [FAILED]
    ev = got[0]
    uid = json.loads(cluster.kubectl("get", "trainjob", JOB, "-n", NS, "-o", "json").stdout)["metadata"]["uid"]
    assert ev["type"] == "Warning"
    assert ev["involvedObject"] == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": JOB, "namespace": NS, "uid": uid,
    }  # fmt: skip
    assert ev["message"] == (
        f'TrainJob "{JOB}" in namespace "{NS}" failed 1 preflight check:\n'
        f'[Secrets] Secret "hf-token" not found in namespace "{NS}" (referenced by env HF_TOKEN of container node). '
        f"Fix: kubectl create secret generic hf-token -n {NS} --from-literal=token=…"
    )
    assert ev["reportingInstance"] == "audit-a"
    assert "value-that-must-not-leak" not in json.dumps(got)
    # kubectl describe lists it
    described = (await asyncio.to_thread(cluster.kubectl, "describe", "trainjob", JOB, "-n", NS)).stdout
    assert "PreflightFailed" in described and 'Secret "hf-token" not found' in described
    assert a.controller.evaluations["secrets"] >= 1  # re-checked because of the Secret

    # the periodic full scan writes nothing new: the result did not change
    await a.controller.full_scan("period")
    assert [e["reason"] for e in await events(cluster)] == [FAILED]

    # restart: the new controller reads the last Event back and writes no duplicate
    await a.stop()
    b = await start_audit("audit-b")
    await until("audit-b leads and scanned once", lambda: b.controller.is_leader and b.controller.scans >= 1)
    assert key in b.controller.judged
    assert [e["reason"] for e in await events(cluster)] == [FAILED]
    assert b.events.written == 0

    # a second replica: it does not lead, judges nothing and writes nothing
    c = await start_audit("audit-c")
    await until("audit-c tried the Lease", lambda: c.elector._observed is not None)
    assert not c.controller.is_leader and c.controller.judged == {}

    # the Secret is back: PreflightPassed, written by the leader only
    await asyncio.to_thread(cluster.apply, _secret())
    got = await until("a PreflightPassed Event", lambda: _has(events(cluster), PASSED))
    passed = [e for e in got if e["reason"] == PASSED]
    assert len(passed) == 1 and passed[0]["type"] == "Normal"
    assert passed[0]["reportingInstance"] == "audit-b"
    assert c.events.written == 0 and c.controller.evaluations == {}
    lease = json.loads(cluster.kubectl("get", "lease", "preflight-webhook-audit", "-n", NS, "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"] == "audit-b"

    # the job is deleted: forgotten
    await asyncio.to_thread(cluster.kubectl, "delete", "trainjob", JOB, "-n", NS)
    await until("the job is forgotten", lambda: key not in b.controller.judged)
    assert b.controller.index.jobs_for("secrets", NS, "hf-token") == set()


async def _has(got: Any, reason: str) -> list[dict[str, Any]] | None:
    items = await got
    return items if any(e["reason"] == reason for e in items) else None


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The exposition's samples by (name, sorted labels), read with prometheus_client's own parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _cli_trainjob() -> dict[str, Any]:
    tj = _trainjob()
    tj["metadata"]["name"] = "cli-ft"
    tj["spec"]["trainer"]["env"][0]["valueFrom"]["secretKeyRef"] = {"name": "cli-token", "key": "token"}
    return tj


async def test_the_cli_runs_the_controller_serves_metrics_and_releases_its_lease(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    """`preflight-webhook audit` as a process: it judges, writes the Event, serves /metrics, and on
    SIGTERM releases its Lease and exits 0."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"audit": {"leaseNamespace": NS, "leaseName": "cli-audit", "debounceSeconds": 0.5}}))
    cluster.apply(_cli_trainjob())
    (port,) = free_ports(1)
    log = tmp_path / "audit.log"
    out = log.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "audit", "--config", str(cfg), "--kubeconfig", str(cluster.kubeconfig),
         "--identity", "cli-a", "--metrics-host", "127.0.0.1", "--metrics-port", str(port)],
        stdout=out, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:

        async def failed() -> list[dict[str, Any]]:
            return [e for e in await preflight_events(cluster, NS, "cli-ft") if e["reason"] == FAILED]

        got = await until(f"the CLI's PreflightFailed Event (log: {log})", failed, timeout=90)
        assert got[0]["reportingInstance"] == "cli-a"
        assert '[Secrets] Secret "cli-token" not found in namespace "audit-e2e"' in got[0]["message"]

        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                return str(r.read().decode())

        # the sinks publish one after another: the Event can be written before the metrics sink counts
        # the job. The controller is cluster-wide and the control plane is shared by the session, so
        # other tests' waiting jobs count too: ask for this job's own finding, and at least one judged.
        async def counted() -> bool:
            samples = _samples(await asyncio.to_thread(scrape))
            mine = (
                "preflight_audit_findings",
                (("check", "Secrets"), ("kind", "TrainJob"), ("namespace", NS), ("result", "fail")),
            )
            return (
                samples.get(mine, 0.0) >= 1
                and samples.get(("preflight_audit_jobs_watched", (("state", "judged"),)), 0.0) >= 1
            )

        await until("the judged job and its Secrets fail counted in /metrics", counted, timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0
        lease = json.loads(cluster.kubectl("get", "lease", "cli-audit", "-n", NS, "-o", "json").stdout)
        assert lease["spec"]["holderIdentity"] == ""  # released: a successor starts at once
    finally:
        if proc.poll() is None:
            stop_pid(proc.pid, proc=proc)
        out.close()
        cluster.kubectl("delete", "trainjob", "cli-ft", "-n", NS, "--ignore-not-found")


async def test_a_scan_that_fills_its_client_never_delays_the_lease_renewals(
    start_audit: Callable[..., Any], cluster: ControlPlane
) -> None:
    """The election has its own client (webhook/audit/runner.py, as controller-runtime's leader election
    builds its own clients): a full scan that has used its qps for the next 100 s (10,000 jobs' dry
    runs and 1,000 Report writes) leaves the renewals alone. On one shared client a renewal queued
    behind the scan's requests, the leader lost its Lease after renewDeadline, and the scan began again."""
    run = await start_audit("busy")
    await until("the controller leads", lambda: run.controller.is_leader)
    scan_client = run.view.client
    assert run.elector.client is not scan_client
    for _ in range(int(scan_client.limiter.qps * 100)):  # the scan's next 100 s of requests, reserved
        scan_client.limiter.reserve()

    def renew_time() -> str:
        out = cluster.kubectl("get", "lease", SETTINGS.audit.lease_name, "-n", NS, "-o", "json").stdout
        return str(json.loads(out)["spec"]["renewTime"])

    seen = {await asyncio.to_thread(renew_time)}

    async def renewed_three_times() -> bool:
        seen.add(await asyncio.to_thread(renew_time))
        return len(seen) >= 4

    # renewDeadline is 3 s: three renewals past it, each within retryPeriod (0.5 s) on an idle election client
    await until("the Lease renewed 3 times while the scan's client is booked for 100 s", renewed_three_times)
    assert run.controller.is_leader and run.elector.is_leader
