"""A re-check judges what the cluster view's cache holds once it holds the change that triggered it (the
audit controller against the real kube-apiserver + etcd).

The controller's own watches, which said a job needs a re-check, and the view's caches the checks read
(webhook/cluster/live.py) were separate Reflectors on separate watches. A re-check judged before the
view's cache applied the change judged the old state: the job passed again, and the change was lost
until the period (10 min). Since issue 38 the controller follows the view's own cache of each kind it
caches (`ResourceCache.object_listeners`, webhook/audit/controller.py `_follow_view`): the change that
triggers the re-check is the change the view's cache just applied.

Here the lag is held open on purpose: the view's ResourceQuota cache is stopped (it keeps its old
state) while the quota is lowered under a waiting TrainJob. Nothing re-checks the job on the stale view;
once the view's cache runs again and lists the lowered quota (a relist: its difference is told as a
change), the re-check follows and its `PreflightFailed` names the quota. Only spec.hard is lowered
(status.hard, which the apiserver's quota admission reads, stays 100): the Dry Run passes, so the
failure can only come from what the view's cache holds.
"""

from __future__ import annotations

import asyncio
import json

from e2e.harness.audit import (
    initializer_claim,
    preflight_events,
    quick_settings,
    sample_runtime,
    suspended_trainjob,
    until,
)
from e2e.harness.controlplane import ControlPlane
from webhook.audit.events import FAILED
from webhook.audit.runner import AuditRun
from webhook.checks import all_checks

NS = "audit-view-lag"
JOB = "lag-ft"
QUOTA = "lag-quota"
RUNTIME = "audit-lag-torch"
WAIT = 30.0


def _quota(cp: ControlPlane) -> None:
    """hard requests.cpu 100, in spec and in status (used 0), as the quota controller would write it."""
    hard = {"requests.cpu": "100"}
    cp.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": QUOTA, "namespace": NS},
              "spec": {"hard": hard}})  # fmt: skip
    cp.kubectl("patch", "resourcequota", QUOTA, "-n", NS, "--subresource=status", "--type=merge", "-p",
               json.dumps({"status": {"hard": hard, "used": {"requests.cpu": "0"}}}))  # fmt: skip


async def test_a_recheck_waits_for_the_views_cache_to_hold_the_change(control_plane: ControlPlane) -> None:
    cp = control_plane
    cp.ensure_namespace(NS)
    cp.apply(sample_runtime(RUNTIME))
    cp.apply(initializer_claim(NS))
    _quota(cp)
    cp.apply(suspended_trainjob(JOB, NS, RUNTIME, "2"))
    run = await AuditRun.start(quick_settings(NS), kubeconfig=str(cp.kubeconfig), identity="lag-a",
                               checks=all_checks())  # fmt: skip
    try:
        c = run.controller
        key = ("trainjobs", NS, JOB)
        await until("the controller leads and scanned once", lambda: c.is_leader and c.scans >= 1, timeout=WAIT)
        assert key in c.index.jobs_for("resourcequotas", NS, QUOTA)
        assert await preflight_events(cp, NS, JOB) == []  # it fits: nothing to say

        view_cache = run.view.reflectors["resourcequotas"]
        # one watch of ResourceQuotas: the view's, which the controller follows
        assert "resourcequotas" not in c.reflectors and c.followed["resourcequotas"][0] is view_cache.cache
        await view_cache.stop()  # the view lags: it keeps hard 100
        await asyncio.to_thread(cp.kubectl, "patch", "resourcequota", QUOTA, "-n", NS, "--type=merge", "-p",
                                json.dumps({"spec": {"hard": {"requests.cpu": "1"}}}))  # fmt: skip
        assert c.evaluations["resourcequotas"] == 0, "a re-check judged the view's stale ResourceQuota"

        view_cache.start()  # the view catches up (a list), and the re-check runs on what it holds
        got = await until("a PreflightFailed Event", lambda: preflight_events(cp, NS, JOB), timeout=WAIT)
        assert [e["reason"] for e in got] == [FAILED]
        assert got[0]["message"] == "\n".join([
            f'TrainJob "{JOB}" in namespace "{NS}" failed 1 preflight check:',
            f'[Resource Quotas] ResourceQuota "{QUOTA}": requests.cpu would be 2 (used 0 + job 2 at its peak stage) '
            f"but hard is 1. Fix: raise hard requests.cpu to at least 2 (kubectl edit resourcequota {QUOTA} -n {NS}), "
            "or reduce the job's pods or requests.",
        ])  # fmt: skip
        assert c.evaluations["resourcequotas"] == 1
        assert c.view_waits == 0
    finally:
        await run.stop()
        await asyncio.to_thread(cp.kubectl, "delete", "trainjob", JOB, "-n", NS, "--ignore-not-found")
