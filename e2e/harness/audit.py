"""What the audit tests share: a condition with a deadline, the audit controller's Events on one job
(e2e/test_audit_live.py on the bare control plane, e2e/test_audit_stack.py on the real node), and
the setup of e2e/test_audit_live.py, e2e/test_audit_sweep_live.py and e2e/test_audit_reports_live.py:
in-process controllers with short Lease timings, the sample runtime, the openreports.io CRDs; and
what the quota tests share on the control plane (e2e/test_audit_sweep_live.py) and on the real node
(e2e/test_audit_quota_node.py): the two-child sweep, the Events sorted, the Report's results, and
the rule that no Event repeats the one before it."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane
from e2e.harness.trainer_manifests import train_job
from webhook.audit.controller import AuditController
from webhook.audit.events import FAILED, PASSED
from webhook.audit.runner import AuditRun
from webhook.audit.sink import JobRef, Judgement
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


def preflight_events_now(cp: ControlPlane, namespace: str, job: str) -> list[dict[str, Any]]:
    """The PreflightFailed/PreflightPassed Events on the object ``job`` in ``namespace`` (one kubectl call)."""
    out = cp.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    return [
        e for e in json.loads(out)["items"]
        if e.get("reason") in (FAILED, PASSED) and (e.get("involvedObject") or {}).get("name") == job
    ]  # fmt: skip


async def preflight_events(cp: ControlPlane, namespace: str, job: str) -> list[dict[str, Any]]:
    """The PreflightFailed/PreflightPassed Events on the object ``job`` in ``namespace``, in the
    apiserver's order (kubectl runs in a thread: the controller under test shares the loop)."""
    return await asyncio.to_thread(preflight_events_now, cp, namespace, job)


def quick_settings(namespace: str, checks: dict[str, str] | None = None) -> Settings:
    """The audit controller's settings in a test: its Lease in ``namespace``, and a debounce and Lease
    timings short enough that a leader and a re-check come within seconds; ``checks``: per-check
    actions (``{"Per-Node Schedulability": "warn"}``)."""
    return Settings.model_validate(
        {"checks": checks or {},
         "audit": {"leaseNamespace": namespace, "debounceSeconds": 0.5, "leaseDurationSeconds": 4,
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


def live_lease(name: str, namespace: str) -> dict[str, Any]:
    """A leader-election Lease renewed now, for an hour (no controller renews it in a test)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": f"{name}-pod", "renewTime": now, "acquireTime": now, "leaseDurationSeconds": 3600},
    }  # fmt: skip


async def judged_completely(controller: AuditController, keys: set[tuple[str, str, str]], timeout: float) -> None:
    """Wait until a full scan of ``controller`` has judged every job of ``keys`` completely."""
    c = controller
    await until(
        f"a full scan judged the {len(keys)} jobs completely",
        lambda: c.scans >= 1 and keys <= set(c.judged) and not (keys & c.partial),
        timeout,
    )


class LastJudgements:
    """A sink (`extra_sinks`) that keeps each job's last judgement, by job name."""

    def __init__(self) -> None:
        self.last: dict[str, Judgement] = {}

    async def publish(self, j: Judgement) -> None:
        self.last[j.job.name] = j

    async def forget(self, job: JobRef, why: str) -> None:
        return None

    async def scan_done(self, judged: int, not_judged: dict[str, int]) -> None:
        return None


@contextlib.asynccontextmanager
async def counted_audit(
    settings: Settings, cp: ControlPlane, identity: str, kind_of: Callable[[str, dict[str, Any]], str]
) -> AsyncIterator[tuple[AuditRun, LastJudgements, Counter[str]]]:
    """An in-process audit controller on ``cp`` with every check, the sink of each job's last judgement,
    and a count of the requests its client sends, by ``"<METHOD> <kind_of(path, query)>"`` (stripped)."""
    last = LastJudgements()
    run = await AuditRun.start(
        settings, kubeconfig=str(cp.kubeconfig), identity=identity, checks=all_checks(), extra_sinks=[last]
    )
    sent: Counter[str] = Counter()
    client = run.view.client
    inner = client.request

    async def counted(method: str, path: str, **kw: Any) -> Any:
        sent[f"{method} {kind_of(path, kw.get('query') or {})}".strip()] += 1
        return await inner(method, path, **kw)

    client.request = counted  # type: ignore[method-assign]
    try:
        yield run, last, sent
    finally:
        await run.stop()


def count_judgements(controller: AuditController) -> Counter[tuple[str, str, str]]:
    """From now on, how many times ``controller`` judges each job (its key), in any pass."""
    judged: Counter[tuple[str, str, str]] = Counter()
    judge = controller.judge

    async def counting(key: Any, reason: str, *, cheap: bool = False) -> str:
        judged[key] += 1
        return await judge(key, reason, cheap=cheap)

    controller.judge = counting  # type: ignore[method-assign]
    return judged


async def a_rescan_judges_each_once(controller: AuditController, last: LastJudgements, keys: set[Any]) -> None:
    """A periodic full scan of ``controller`` judges each job of ``keys`` once: complete from the cheap
    pass, none left for the request pass (webhook/audit/passes.py)."""
    judged = count_judgements(controller)
    await controller.full_scan("period")
    assert {k: judged[k] for k in keys} == dict.fromkeys(keys, 1)
    assert not (keys & controller.partial) and all(last.last[name].complete for _, _, name in keys)


def result_named(j: Judgement, check: str) -> Any:
    """The result of ``check`` in the judgement ``j``."""
    return {r.name: r for r in j.evaluation.results.checks}[check]


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


def suspended_trainjob(
    name: str, namespace: str, runtime: str, cpu: str, *, labels: dict[str, str] | None = None, **trainer: Any
) -> dict[str, Any]:
    """A suspended TrainJob on ``runtime``: stored and judged, never started (no pods); ``trainer``
    adds fields to its spec.trainer (env, ...), ``labels`` to its metadata (a Kueue queue, ...)."""
    return train_job(
        name,
        runtime,
        namespace=namespace,
        labels=labels,
        suspend=True,
        image="registry.example/acme/ft:1.0",
        num_nodes=1,
        trainer={"resourcesPerNode": {"requests": {"cpu": cpu, "memory": "1Gi"}}, **trainer},
    )


def install_openreports(cp: ControlPlane) -> None:
    """Apply the chart's openreports.io CRDs and wait until they are served."""
    args = ["apply", "--server-side", "--field-manager=preflight-e2e"]
    for f in sorted(OPENREPORTS_CRDS.glob("*.yaml")):
        args += ["-f", str(f)]
    cp.kubectl(*args)
    cp.wait_for_crds(["reports.openreports.io", "clusterreports.openreports.io"])


def quota_sweep(name: str, namespace: str) -> dict[str, Any]:
    """An AIPerfSweep of two children, ``<name>-v00`` at concurrency 100 (one worker pod) and
    ``<name>-v01`` at 700 (seven worker pods: 23900m requests.cpu in all)."""
    return {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfSweep",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": "nvcr.io/nvidia/aiperf:0.13.0",
            "connectionsPerWorker": 100,
            "benchmark": {
                "models": ["m"],
                "endpoint": {"urls": ["http://127.0.0.1:8000"]},
                "datasets": [{"name": "main", "type": "synthetic", "entries": 10, "prompts": {"isl": 128, "osl": 64}}],
                "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 100, "requests": 100}],
                "runtime": {"workersPerPod": 1},
            },
            "sweep": {"type": "grid", "parameters": {"concurrency": [100, 700]}},
        },
    }


def sweep_child(sweep: dict[str, Any], child: str, uid: str) -> dict[str, Any]:
    """The AIPerfJob ``child`` as the sweep controller creates it: the sweep's spec without
    ``sweep``, labelled with the sweep's name and uid (what makes it no longer a remaining child)."""
    job = copy.deepcopy(sweep)
    job["kind"] = "AIPerfJob"
    name, ns = sweep["metadata"]["name"], sweep["metadata"]["namespace"]
    job["metadata"] = {"name": child, "namespace": ns,
                       "labels": {"aiperf.nvidia.com/sweep": name, "aiperf.nvidia.com/sweep-uid": uid}}  # fmt: skip
    del job["spec"]["sweep"]
    return job


async def sorted_events(
    cp: ControlPlane, namespace: str, name: str, reason: str | None = None
) -> list[dict[str, Any]] | None:
    """The Preflight Events on ``name``, oldest first; with ``reason``, None until one has it."""
    got = sorted(
        await preflight_events(cp, namespace, name),
        key=lambda e: e["metadata"]["creationTimestamp"] + e["metadata"]["name"],
    )
    return got if reason is None or any(e["reason"] == reason for e in got) else None


def report_results(cp: ControlPlane, namespace: str, **match: str) -> dict[tuple[str, str], str]:
    """(child or job name, check) -> result, of the namespace's Report (``match``: fields the
    result's subject must have, e.g. ``kind="AIPerfJob"``); {} while there is none."""
    proc = cp.kubectl("get", "reports.openreports.io", "preflight-webhook", "-n", namespace, "-o", "json", check=False)
    if proc.returncode != 0:
        return {}
    out: dict[tuple[str, str], str] = {}
    for r in json.loads(proc.stdout).get("results") or []:
        subject = r["resources"][0]
        if any(subject.get(k) != v for k, v in match.items()):
            continue
        out[((r.get("properties") or {}).get("child") or subject["name"], r["policy"])] = r["result"]
    return out


async def report_says(cp: ControlPlane, namespace: str, key: tuple[str, str], result: str, **match: str) -> bool:
    return (await asyncio.to_thread(report_results, cp, namespace, **match)).get(key) == result


def no_repeats(got: list[dict[str, Any]]) -> None:
    """No Event says what the one before it said: the sink writes only when the result changes."""
    said = [(e["reason"], e["message"]) for e in got]
    assert all(a != b for a, b in zip(said, said[1:], strict=False)), said
