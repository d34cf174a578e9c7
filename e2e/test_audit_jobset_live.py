"""The audit controller judges the JobSets users apply directly, against the real kube-apiserver + etcd.

JobSet is a kind like the others (webhook/workloads/jobset `KIND_SPEC`): the controller watches JobSets,
reads whether one started with `jobset_state` (suspended or its Kueue Workload not admitted: waiting,
judged), and leaves a JobSet a judged job owns to its owner (`KindSpec.skips`, the chart's
matchCondition not-owned-by-a-judged-job). No JobSet controller runs here: a JobSet stays as applied.

Rows:
- a suspended JobSet whose Secret is missing: judged, a `PreflightFailed` Event on it names the Secret;
  the Secret is created: `PreflightPassed`;
- a JobSet that is not suspended (its Jobs would be made at once): running, not judged;
- a suspended JobSet a TrainJob owns (the one Trainer makes): not a job of its own, never judged.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from e2e.fidelity.scenarios_base import jobset, secret, secret_env
from e2e.harness.audit import audit_runs, preflight_events, quick_settings
from e2e.harness.audit import until as wait_until
from e2e.harness.controlplane import ControlPlane
from webhook.audit.events import FAILED, PASSED

NS = "audit-jobsets"
WAITING, RUNNING, OWNED = "js-waiting", "js-running", "js-owned"
#: what the Events must show within (as e2e/test_audit_live.py)
WAIT = 30.0
SETTINGS = quick_settings(NS)


def _jobset(name: str, *, suspend: bool, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    container = {
        "name": "trainer",
        "image": "registry.example/trainer:v1",
        "env": [secret_env("HF_TOKEN", "js-token", "token")],
    }
    obj = jobset(name, NS, container)
    obj["spec"]["suspend"] = suspend
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner]
    return obj


def _secret() -> dict[str, Any]:
    obj = secret("js-token", token="value-that-must-not-leak")
    obj["metadata"]["namespace"] = NS
    return obj


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> ControlPlane:
    cp = control_plane
    cp.ensure_namespace(NS)
    owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": OWNED,
             "uid": "7d1f6a3e-0000-4000-8000-000000000001", "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    cp.apply(
        [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": NS}},
            _jobset(WAITING, suspend=True),
            _jobset(RUNNING, suspend=False),
            _jobset(OWNED, suspend=True, owner=copy.deepcopy(owner)),
        ]
    )
    return cp


@pytest.fixture
async def start_audit(cluster: ControlPlane) -> AsyncIterator[Callable[..., Any]]:
    async with audit_runs(SETTINGS, cluster) as start:
        yield start


async def _has(cp: ControlPlane, job: str, reason: str) -> list[dict[str, Any]] | None:
    got = await preflight_events(cp, NS, job)
    return got if any(e["reason"] == reason for e in got) else None


async def test_a_jobset_applied_directly_is_judged_while_it_waits(
    cluster: ControlPlane, start_audit: Callable[..., Any]
) -> None:
    a = await start_audit("audit-js")
    await wait_until(
        "the controller leads and scanned once", lambda: a.controller.is_leader and a.controller.scans >= 1, WAIT
    )
    assert ("jobsets", NS, WAITING) in a.controller.judged  # suspended: waits, judged
    assert ("jobsets", NS, RUNNING) not in a.controller.judged  # its Jobs are made at once: running
    assert ("jobsets", NS, OWNED) not in a.controller.judged  # its TrainJob is the job
    assert await a.controller.judge(("jobsets", NS, RUNNING), "test") == "running"
    assert ("jobsets", NS, OWNED) not in a.controller.job_keys()

    got = await wait_until("a PreflightFailed Event on the JobSet", lambda: _has(cluster, WAITING, FAILED), WAIT)
    [ev] = [e for e in got if e["reason"] == FAILED]
    assert ev["involvedObject"]["kind"] == "JobSet" and ev["involvedObject"]["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert ev["message"].startswith(f'JobSet "{WAITING}" in namespace "{NS}" failed')
    assert f'[Secrets] Secret "js-token" not found in namespace "{NS}"' in ev["message"]
    assert await preflight_events(cluster, NS, OWNED) == [] and await preflight_events(cluster, NS, RUNNING) == []

    # the Secret is created: the reverse index re-checks the JobSet, and it passes
    await asyncio.to_thread(cluster.apply, _secret())
    await wait_until("a PreflightPassed Event on the JobSet", lambda: _has(cluster, WAITING, PASSED), WAIT)
    assert await preflight_events(cluster, NS, OWNED) == []
