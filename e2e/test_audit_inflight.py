"""A change of what a job's judgement read, made while that judgement still runs, re-checks the job
(the audit controller against the real kube-apiserver + etcd).

The regression behind issue 20's quarantined node test (e2e/test_audit_stack.py): the reverse
index learnt a job's reads only when its judgement ended, after the sinks published. A Secret
deleted after the Secrets check read it, but before the end of that first judgement, touched no
indexed job: no re-check, no `PreflightFailed` until the period (10 min). On the node the first
judgement of the held TrainJob was still running when the test deleted its Secret.

Here the window is held open on purpose: a sink holds the first judgement in `publish` (the
evaluation is done, its Secret read and found) while the Secret is deleted and the controller's
watch delivers the deletion; then the judgement ends, and the Event must follow.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from e2e.harness.audit import initializer_claim, preflight_events, sample_runtime, until
from e2e.harness.controlplane import ControlPlane
from e2e.test_audit_live import RUNTIME, _secret, _trainjob
from webhook.audit.events import FAILED
from webhook.audit.runner import AuditRun
from webhook.audit.sink import JobRef, Judgement
from webhook.checks import all_checks
from webhook.config import Settings

NS = "audit-inflight"
JOB = "waiting-ft"  # the name e2e/test_audit_live.py's TrainJob builder gives
WAIT = 30.0
SETTINGS = Settings.model_validate({"audit": {"leaseNamespace": NS, "debounceSeconds": 0.5}})


def _here(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = NS
    return obj


class HoldFirstJudgement:
    """A FindingSink that holds the first complete judgement of JOB in `publish` until `release` is set
    (the full scan's cheap pass judges it first without the Secrets check, which sends a request:
    webhook/audit/passes.py; the complete judgement is the one that read the Secret)."""

    def __init__(self) -> None:
        self.holding = asyncio.Event()
        self.release = asyncio.Event()
        self.held: Judgement | None = None

    async def publish(self, judgement: Judgement) -> None:
        if judgement.job.name == JOB and judgement.complete and self.held is None:
            self.held = judgement
            self.holding.set()
            await self.release.wait()

    async def forget(self, job: JobRef, why: str) -> None:
        return None

    async def scan_done(self, judged: int, not_judged: dict[str, int]) -> None:
        return None


async def test_a_secret_deleted_while_the_first_judgement_runs_is_not_lost(control_plane: ControlPlane) -> None:
    cp = control_plane
    cp.apply(sample_runtime(RUNTIME))
    cp.ensure_namespace(NS)
    cp.apply([_here(_secret()), initializer_claim(NS), _here(_trainjob())])
    gate = HoldFirstJudgement()
    run = await AuditRun.start(
        SETTINGS, kubeconfig=str(cp.kubeconfig), identity="inflight-a", checks=all_checks(), extra_sinks=[gate]
    )
    try:
        c = run.controller
        key = ("trainjobs", NS, JOB)
        await asyncio.wait_for(gate.holding.wait(), WAIT)
        assert gate.held is not None and gate.held.evaluation.decision.allowed  # read while the Secret existed

        await asyncio.to_thread(cp.kubectl, "delete", "secret", "hf-token", "-n", NS)
        await until("the controller's watch saw the deletion", lambda: c.reflectors["secrets"].cache.get(NS, "hf-token")
                    is None, timeout=WAIT)  # fmt: skip
        # the deletion touched the job in the middle of its judgement: a re-check is due
        assert key in c.index.jobs_for("secrets", NS, "hf-token")
        gate.release.set()

        got = await until("a PreflightFailed Event", lambda: preflight_events(cp, NS, JOB), timeout=WAIT)
        assert [e["reason"] for e in got] == [FAILED]
        assert f'[Secrets] Secret "hf-token" not found in namespace "{NS}"' in got[0]["message"]
        assert c.evaluations["secrets"] == 1  # the re-check the deletion caused
    finally:
        gate.release.set()
        await run.stop()
        # the control plane is the session's: a job left waiting would be judged by every later audit test
        await asyncio.to_thread(cp.kubectl, "delete", "trainjob", JOB, "-n", NS, "--ignore-not-found")
