"""What the audit tests share: a condition with a deadline, the audit controller's Events on one job
(e2e/test_audit_live.py on the bare control plane, e2e/test_audit_stack.py on the real node), and
the setup of e2e/test_audit_live.py, e2e/test_audit_sweep_live.py and e2e/test_audit_reports_live.py:
in-process controllers with short Lease timings, the sample runtime, the openreports.io CRDs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane
from webhook.audit.events import FAILED, PASSED
from webhook.audit.runner import AuditRun
from webhook.checks import all_checks
from webhook.config import Settings

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "tests" / "oracle" / "samples"
#: the openreports.io CRDs the chart installs (from reports-api v0.2.1)
OPENREPORTS_CRDS = REPO / "charts" / "preflight-webhook" / "files" / "openreports"


async def until(what: str, cond: Callable[[], Any], timeout: float, every: float = 0.2) -> Any:
    """Wait for ``cond()`` to be truthy (it may be a coroutine function) and return it; at the
    deadline, fail the test with ``what`` (a condition wait, not a sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:.0f}s: {what} (the condition stayed false; last: {got!r})")
        await asyncio.sleep(every)


def _preflight_events(cp: ControlPlane, namespace: str, job: str) -> list[dict[str, Any]]:
    out = cp.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    return [
        e for e in json.loads(out)["items"]
        if e.get("reason") in (FAILED, PASSED) and (e.get("involvedObject") or {}).get("name") == job
    ]  # fmt: skip


async def preflight_events(cp: ControlPlane, namespace: str, job: str) -> list[dict[str, Any]]:
    """The PreflightFailed/PreflightPassed Events on the object ``job`` in ``namespace``, in the
    apiserver's order (kubectl runs in a thread: the controller under test shares the loop)."""
    return await asyncio.to_thread(_preflight_events, cp, namespace, job)


def quick_settings(namespace: str) -> Settings:
    """The audit controller's settings in a test: its Lease in ``namespace``, and a debounce and Lease
    timings short enough that a leader and a re-check come within seconds."""
    return Settings.model_validate(
        {"audit": {"leaseNamespace": namespace, "debounceSeconds": 0.5, "leaseDurationSeconds": 4,
                   "renewDeadlineSeconds": 3, "retryPeriodSeconds": 0.5}}
    )  # fmt: skip


@contextlib.asynccontextmanager
async def audit_runs(settings: Settings, cp: ControlPlane) -> AsyncIterator[Callable[[str], Awaitable[AuditRun]]]:
    """Factory: ``run = await start("a")``, an in-process audit controller on ``cp`` (`AuditRun`, what
    `preflight-webhook audit` runs) with every check; each one started is stopped on leaving."""
    runs: list[AuditRun] = []

    async def start(identity: str) -> AuditRun:
        run = await AuditRun.start(settings, kubeconfig=str(cp.kubeconfig), identity=identity, checks=all_checks())
        runs.append(run)
        return run

    try:
        yield start
    finally:
        for r in runs:
            await r.stop()


def sample_runtime(name: str) -> dict[str, Any]:
    """The sample ClusterTrainingRuntime (tests/oracle/samples), named ``name``."""
    rt: dict[str, Any] = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())
    rt["metadata"]["name"] = name
    rt["spec"]["mlPolicy"]["torch"] = {}  # the sample's numProcPerNode is not in Trainer v2.3's CRD schema
    return rt


def initializer_claim(namespace: str) -> dict[str, Any]:
    """The PersistentVolumeClaim the sample runtime's initializer mounts (Volume Claims reads it)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "initializer", "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def suspended_trainjob(name: str, namespace: str, runtime: str, cpu: str, **trainer: Any) -> dict[str, Any]:
    """A suspended TrainJob on ``runtime``: stored and judged, never started (no pods); ``trainer``
    adds fields to its spec.trainer (env, ...)."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "suspend": True,
            "runtimeRef": {"name": runtime},
            "trainer": {
                "image": "registry.example/acme/ft:1.0",
                "numNodes": 1,
                "resourcesPerNode": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                **trainer,
            },
        },
    }


def install_openreports(cp: ControlPlane) -> None:
    """Apply the chart's openreports.io CRDs and wait until they are served."""
    args = ["apply", "--server-side", "--field-manager=preflight-e2e"]
    for f in sorted(OPENREPORTS_CRDS.glob("*.yaml")):
        args += ["-f", str(f)]
    cp.kubectl(*args)
    cp.wait_for_crds(["reports.openreports.io", "clusterreports.openreports.io"])
