"""The audit controller and what changes under a waiting job, against the real kube-apiserver + etcd.

Controllers run in process (`webhook.audit.runner.AuditRun`, what `preflight-webhook audit` runs),
with the openreports.io CRDs the chart installs. There is no kube-controller-manager here: each
ResourceQuota's status (hard, used 0) is written by the test, as its quota controller would. The
node versions of both quota tests, with the real resourcequota controller writing the status and
Trainer, JobSet and Kueue running (the TrainJob is then released and completes), are in
e2e/test_audit_quota_node.py.

- An AIPerfSweep is judged per child (webhook/audit/sweeps.py): a ResourceQuota lowered under the
  waiting sweep makes its 700-connection child fail: a `PreflightFailed` Event on the sweep names
  that child (core/v1 `related`), the quota and the fix; the Report holds a fail for that child
  and a pass for the other. The quota is raised again: `PreflightPassed` for that child, the
  Report passes. The sweep controller creates a child: it is no longer a remaining child of the
  sweep, and is judged as the AIPerfJob it now is.
- A ResourceQuota lowered under a suspended TrainJob: `PreflightFailed` on the TrainJob with the
  quota and the fix, a fail in the Report; raised again: `PreflightPassed`, pass.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from e2e.harness.audit import (
    audit_runs,
    initializer_claim,
    install_openreports,
    no_repeats,
    quick_settings,
    quota_sweep,
    report_results,
    sample_runtime,
    sorted_events,
    suspended_trainjob,
    sweep_child,
)
from e2e.harness.audit import report_says as _report_says
from e2e.harness.controlplane import ControlPlane
from e2e.test_audit_live import until
from webhook.audit.events import FAILED, PASSED

NS = "audit-sweep-e2e"
SWEEP = "conc"
RUNTIME = "audit-quota-torch"
SETTINGS = quick_settings(NS)


def _sweep() -> dict[str, Any]:
    return quota_sweep(SWEEP, NS)


def _quota(cp: ControlPlane, name: str, cpu: str) -> None:
    """Set the quota's hard requests.cpu, and its status as the quota controller would (used 0)."""
    hard = {"requests.cpu": cpu}
    cp.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": NS},
              "spec": {"hard": hard}})  # fmt: skip
    status = {"status": {"hard": hard, "used": {"requests.cpu": "0"}}}
    cp.kubectl("patch", "resourcequota", name, "-n", NS, "--subresource=status", "--type=merge", "-p",
               json.dumps(status))  # fmt: skip


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> ControlPlane:
    cp = control_plane
    install_openreports(cp)
    cp.ensure_namespace(NS)
    return cp


@pytest.fixture
async def start_audit(cluster: ControlPlane) -> AsyncIterator[Callable[..., Any]]:
    async with audit_runs(SETTINGS, cluster) as start:
        yield start


async def events(cp: ControlPlane, name: str, reason: str | None = None) -> list[dict[str, Any]] | None:
    return await sorted_events(cp, NS, name, reason)


def _results(cp: ControlPlane, **match: str) -> dict[tuple[str, str], str]:
    return report_results(cp, NS, **match)


async def report_says(cp: ControlPlane, key: tuple[str, str], result: str, **match: str) -> bool:
    return await _report_says(cp, NS, key, result, **match)


async def test_a_sweep_is_judged_per_child_and_a_lowered_quota_names_the_child_that_no_longer_fits(
    cluster: ControlPlane, start_audit: Callable[..., Any]
) -> None:
    cp = cluster
    _quota(cp, "sweep-quota", "100")
    cp.apply(_sweep())  # no webhook here: stored as a pipeline would store it; no operator: it waits
    uid = json.loads(cp.kubectl("get", "aiperfsweep", SWEEP, "-n", NS, "-o", "json").stdout)["metadata"]["uid"]
    a = await start_audit("sweep-a")
    await until("the controller leads and scanned once", lambda: a.controller.is_leader and a.controller.scans >= 1)
    key = ("aiperfsweeps", NS, SWEEP)
    assert {r.key for r in a.controller.published[key]} == {
        f"{uid}/conc-v00",
        f"{uid}/conc-v01",
    }  # each remaining child
    assert key in a.controller.index.jobs_for("resourcequotas", NS, "sweep-quota")
    await until("the Report passes both children", lambda: report_says(cp, ("conc-v01", "Resource Quotas"), "pass"))
    assert await events(cp, SWEEP) == []  # both fit: nothing to say

    # the quota is lowered under the waiting sweep: its 700-connection child no longer fits
    await asyncio.to_thread(_quota, cp, "sweep-quota", "6")
    got = await until("a PreflightFailed Event on the sweep", lambda: events(cp, SWEEP, FAILED))
    assert [e["reason"] for e in got] == [FAILED]
    ev = got[0]
    assert ev["type"] == "Warning"
    assert ev["involvedObject"] == {
        "apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfSweep", "name": SWEEP, "namespace": NS, "uid": uid,
    }  # fmt: skip
    assert ev["related"]["kind"] == "AIPerfJob" and ev["related"]["name"] == "conc-v01"
    assert ev["message"] == (
        f'AIPerfJob "conc-v01", which AIPerfSweep "{SWEEP}" creates later, in namespace "{NS}" failed 1 preflight '
        'check:\n[Resource Quotas] ResourceQuota "sweep-quota": requests.cpu would be 23900m (used 0 + job 23900m) '
        f"but hard is 6. Fix: raise hard requests.cpu to at least 23900m (kubectl edit resourcequota sweep-quota -n "
        f"{NS}), or reduce the job's pods or requests."
    )
    described = (await asyncio.to_thread(cp.kubectl, "describe", "aiperfsweep", SWEEP, "-n", NS)).stdout
    assert "PreflightFailed" in described and "conc-v01" in described
    await until("the Report holds the child's fail", lambda: report_says(cp, ("conc-v01", "Resource Quotas"), "fail"))
    assert _results(cp, name=SWEEP)[("conc-v00", "Resource Quotas")] == "pass"

    # the periodic re-check finds the same: no second Event
    await a.controller.full_scan("period")
    assert [e["reason"] for e in await events(cp, SWEEP) or []] == [FAILED]

    # raised again: PreflightPassed for that child
    await asyncio.to_thread(_quota, cp, "sweep-quota", "100")
    got = await until("a PreflightPassed Event on the sweep", lambda: events(cp, SWEEP, PASSED))
    passed = [e for e in got if e["reason"] == PASSED]
    assert len(passed) == 1 and passed[0]["related"]["name"] == "conc-v01"
    assert passed[0]["message"] == (
        f"AIPerfJob conc-v01, which AIPerfSweep {SWEEP} creates later, passes its preflight checks again"
    )
    await until("the Report passes again", lambda: report_says(cp, ("conc-v01", "Resource Quotas"), "pass"))

    # the sweep controller creates the first child: one child remains; the created one is an AIPerfJob now
    child = next(r for r in a.controller.published[key] if r.key == f"{uid}/conc-v00")
    assert child.parent is not None and child.parent.uid == uid
    await asyncio.to_thread(cp.apply, sweep_child(_sweep(), "conc-v00", uid))
    await until(
        "only conc-v01 remains", lambda: {r.key for r in a.controller.published.get(key, ())} == {f"{uid}/conc-v01"}
    )
    await until("the created child is judged", lambda: ("aiperfjobs", NS, "conc-v00") in a.controller.judged)
    await until(
        "the Report has the created child as an AIPerfJob",
        lambda: report_says(cp, ("conc-v00", "Resource Quotas"), "pass", kind="AIPerfJob"),
    )
    assert ("conc-v00", "Resource Quotas") not in _results(cp, kind="AIPerfSweep")
    await asyncio.to_thread(cp.kubectl, "delete", "aiperfjob", "conc-v00", "-n", NS)
    await asyncio.to_thread(cp.kubectl, "delete", "aiperfsweep", SWEEP, "-n", NS)
    await until("the sweep is forgotten", lambda: key not in a.controller.judged and key not in a.controller.published)


async def test_a_quota_lowered_under_a_suspended_trainjob_fails_it_and_raised_again_passes_it(
    cluster: ControlPlane, start_audit: Callable[..., Any]
) -> None:
    cp = cluster
    cp.apply(sample_runtime(RUNTIME))
    cp.apply(initializer_claim(NS))
    _quota(cp, "tj-quota", "100")
    cp.apply(suspended_trainjob("quota-ft", NS, RUNTIME, "2"))
    a = await start_audit("quota-a")
    await until("the controller leads and scanned once", lambda: a.controller.is_leader and a.controller.scans >= 1)
    key = ("trainjobs", NS, "quota-ft")
    assert key in a.controller.judged
    assert key in a.controller.index.jobs_for("resourcequotas", NS, "tj-quota")
    await until("the Report passes the TrainJob",
                lambda: report_says(cp, ("quota-ft", "Resource Quotas"), "pass"))  # fmt: skip
    assert await events(cp, "quota-ft") == []

    await asyncio.to_thread(_quota, cp, "tj-quota", "1")
    await until("a PreflightFailed Event on the TrainJob", lambda: events(cp, "quota-ft", FAILED))
    await until("the Report holds the fail", lambda: report_says(cp, ("quota-ft", "Resource Quotas"), "fail"))
    # the quota check's arithmetic; the apiserver's own quota admission refuses the dry run too, once its quota
    # informer saw the change. It may lag the first re-check: then only Resource Quotas fails, and a later
    # re-check (the quota's status patch) adds the Dry Run line, a changed failure, so a second PreflightFailed
    # (webhook/audit/events.py writes when the result changes). Either way every PreflightFailed names the
    # quota and the fix, and no Event repeats the one before it.
    header_1 = f'TrainJob "quota-ft" in namespace "{NS}" failed 1 preflight check:'
    header_2 = f'TrainJob "quota-ft" in namespace "{NS}" failed 2 preflight checks:'
    quota_line = (
        '[Resource Quotas] ResourceQuota "tj-quota": requests.cpu would be 2 (used 0 + job 2 at its peak stage) but '
        f"hard is 1. Fix: raise hard requests.cpu to at least 2 (kubectl edit resourcequota tj-quota -n {NS}), or "
        "reduce the job's pods or requests."
    )
    quota = "exceeded quota: tj-quota, requested: requests.cpu=2, used: requests.cpu=0, limited: requests.cpu=1"
    fix = f"Fix: see Resource Quotas (kubectl describe resourcequota -n {NS})."
    dry_run_line = (
        '[Dry Run] Pod for model-initializer rejected by the apiserver: pods "quota-ft-model-initializer-0-0-dryrn" '
        f'is forbidden: {quota}. {fix} Pod for node rejected by the apiserver: pods "quota-ft-node-0-0-dryrn" is '
        f"forbidden: {quota}. {fix}"
    )
    lowered = {"\n".join([header_1, quota_line]), "\n".join([header_2, quota_line, dry_run_line])}
    got = await events(cp, "quota-ft")
    assert got and {e["reason"] for e in got} == {FAILED}
    assert {e["message"] for e in got} <= lowered, [e["message"] for e in got]
    no_repeats(got)

    await asyncio.to_thread(_quota, cp, "tj-quota", "100")
    got = await until("a PreflightPassed Event on the TrainJob", lambda: events(cp, "quota-ft", PASSED))
    assert [e["reason"] for e in got][-1] == PASSED and {e["reason"] for e in got[:-1]} == {FAILED}
    assert got[-1]["message"] == "TrainJob quota-ft passes its preflight checks again"
    no_repeats(got)
    await until("the Report passes again", lambda: report_says(cp, ("quota-ft", "Resource Quotas"), "pass"))
    await asyncio.to_thread(cp.kubectl, "delete", "trainjob", "quota-ft", "-n", NS)
