"""Controllers: every status and the exact wording, from Lease and Deployment reads."""

from __future__ import annotations

import pytest

from tests.fakeview import FakeView, meta, run_check, workload
from webhook.checks import controllers
from webhook.checks.controllers import Controllers
from webhook.config import Settings
from webhook.kube import ApiError
from webhook.results import Status

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
JOBSET_LEASE = ("leases", "jobset-system", "6d4f6a47.jobset.x-k8s.io")
JOBSET_DEP = ("deployments", "jobset-system", "jobset-controller-manager")
TRAINER_LEASE = ("leases", "kubeflow-system", "trainer.kubeflow.org")
TRAINER_DEP = ("deployments", "kubeflow-system", "kubeflow-trainer-controller-manager")
AIPERF_DEP = ("deployments", "aiperf-system", "aiperf-operator")
KUEUE_LEASE = ("leases", "kueue-system", "c1f6bfd2.kueue.x-k8s.io")
KUEUE_DEP = ("deployments", "kueue-system", "kueue-controller-manager")


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(controllers, "now", lambda: NOW)


def _stamp(age: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(NOW - age, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease(age: float, holder: str = "pod-1", duration: int = 15) -> dict:
    return {
        "metadata": meta("l"),
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": _stamp(age)},
    }


def deployment(ready: int, replicas: int = 1) -> dict:
    return {"metadata": meta("d"), "spec": {"replicas": replicas}, "status": {"readyReplicas": ready} if ready else {}}


def running_trainer() -> dict:
    return {TRAINER_LEASE: lease(3), TRAINER_DEP: deployment(1), JOBSET_LEASE: lease(2), JOBSET_DEP: deployment(1)}


async def test_pass_names_what_was_read() -> None:
    view = FakeView(live=running_trainer())
    r = await run_check(Controllers(), workload([]), view)
    assert (r.status, r.message) == (
        Status.PASS,
        "Running: Trainer (Lease kubeflow-system/trainer.kubeflow.org renewed 3s ago; Deployment "
        "kubeflow-system/kubeflow-trainer-controller-manager 1/1 ready), JobSet (Lease "
        "jobset-system/6d4f6a47.jobset.x-k8s.io renewed 2s ago; Deployment jobset-system/jobset-controller-manager 1/1 ready)",
    )


async def test_stale_lease_is_down_even_with_a_ready_deployment() -> None:
    live = running_trainer() | {JOBSET_LEASE: lease(300)}
    r = await run_check(Controllers(), workload([]), FakeView(live=live))
    assert (r.status, r.message) == (
        Status.WARN,
        "JobSet controller looks down (Lease jobset-system/6d4f6a47.jobset.x-k8s.io renewed 5m ago "
        "(leaseDurationSeconds 15): its leader stopped renewing; Deployment jobset-system/jobset-controller-manager "
        "1/1 ready): a TrainJob admitted now waits until it runs. Fix: kubectl get pods -n jobset-system, or set "
        "controllers.jobset to where it runs",
    )


async def test_released_lease_and_zero_ready_replicas() -> None:
    live = running_trainer() | {TRAINER_LEASE: lease(1, holder=""), TRAINER_DEP: deployment(0)}
    r = await run_check(Controllers(), workload([]), FakeView(live=live))
    assert r.status is Status.WARN
    assert r.message.startswith(
        "Trainer controller looks down (Lease kubeflow-system/trainer.kubeflow.org has no holder (released); "
        "Deployment kubeflow-system/kubeflow-trainer-controller-manager 0/1 ready): a TrainJob admitted now waits"
    )
    # no Lease at all, Deployment scaled to 0 ready
    live = running_trainer() | {TRAINER_DEP: deployment(0, 2)}
    del live[TRAINER_LEASE]
    r = await run_check(Controllers(), workload([]), FakeView(live=live))
    assert r.message.startswith(
        "Trainer controller looks down (no Lease kubeflow-system/trainer.kubeflow.org; Deployment "
        "kubeflow-system/kubeflow-trainer-controller-manager 0/2 ready)"
    )


async def test_not_installed() -> None:
    r = await run_check(Controllers(), workload([], kind="AIPerfJob"), FakeView())
    assert r.status is Status.WARN
    assert r.message == (
        "AIPerf operator controller not found (no Deployment aiperf-system/aiperf-operator): an AIPerfJob admitted now "
        "waits until it runs. Fix: kubectl get pods -n aiperf-system, or set controllers.aiperf to where it runs; "
        "JobSet controller not found (no Lease jobset-system/6d4f6a47.jobset.x-k8s.io; no Deployment "
        "jobset-system/jobset-controller-manager): an AIPerfJob admitted now waits until it runs. Fix: kubectl get "
        "pods -n jobset-system, or set controllers.jobset to where it runs"
    )


async def test_ready_deployment_without_lease_is_running() -> None:
    live = {AIPERF_DEP: deployment(1), JOBSET_DEP: deployment(2, 2)}
    r = await run_check(Controllers(), workload([], kind="AIPerfJob"), FakeView(live=live))
    assert (r.status, r.message) == (
        Status.PASS,
        "Running: AIPerf operator (Deployment aiperf-system/aiperf-operator 1/1 ready), JobSet (no Lease "
        "jobset-system/6d4f6a47.jobset.x-k8s.io; Deployment jobset-system/jobset-controller-manager 2/2 ready)",
    )


async def test_unreadable_is_cannot_verify() -> None:
    forbidden = ApiError(403, "forbidden", "Forbidden")
    live = {AIPERF_DEP: forbidden, JOBSET_LEASE: ApiError(0, "timed out"), JOBSET_DEP: forbidden}
    r = await run_check(Controllers(), workload([], kind="AIPerfSweep"), FakeView(live=live))
    assert (r.status, r.message) == (
        Status.WARN,
        "Cannot verify the AIPerf operator controller (Deployment aiperf-system/aiperf-operator unreadable: not "
        "permitted to get deployments); Cannot verify the JobSet controller (Lease "
        "jobset-system/6d4f6a47.jobset.x-k8s.io unreadable: timed out; Deployment "
        "jobset-system/jobset-controller-manager unreadable: not permitted to get deployments)",
    )
    # a fresh Lease is enough even when the Deployment cannot be read
    live = {AIPERF_DEP: deployment(1), JOBSET_LEASE: lease(1), JOBSET_DEP: forbidden}
    r = await run_check(Controllers(), workload([], kind="AIPerfJob"), FakeView(live=live))
    assert r.status is Status.PASS


async def test_kueue_only_when_queued_and_namespaces_configurable() -> None:
    obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama-ft", "namespace": "team-a"},
        "spec": {},
    }
    view = FakeView(live=running_trainer() | {KUEUE_LEASE: lease(30, duration=15)})
    r = await run_check(Controllers(), workload([], obj=obj), view)
    assert r.status is Status.PASS and KUEUE_LEASE not in view.object_reads  # not queued: Kueue not read
    r = await run_check(Controllers(), workload([], obj=obj, queue_name="team-a"), view)
    assert r.status is Status.WARN
    assert r.message.startswith(
        "Kueue controller looks down (Lease kueue-system/c1f6bfd2.kueue.x-k8s.io renewed 30s ago (leaseDurationSeconds 15)"
    )
    settings = Settings.model_validate({"controllers": {"kueue": {"namespace": "queues", "lease": "kueue-leader"}}})
    view = FakeView(live=running_trainer() | {("leases", "queues", "kueue-leader"): lease(1)})
    r = await run_check(Controllers(), workload([], obj=obj, queue_name="team-a"), view, settings)
    assert r.status is Status.PASS
    assert r.message.endswith("Kueue (Lease queues/kueue-leader renewed 1s ago)")


async def test_multikueue_needs_only_kueue_here() -> None:
    view = FakeView(live={KUEUE_LEASE: lease(1), KUEUE_DEP: deployment(1)})
    r = await run_check(Controllers(), workload([], managed_by="kueue.x-k8s.io/multikueue"), view)
    assert (r.status, r.message) == (
        Status.PASS,
        "Running: Kueue (Lease kueue-system/c1f6bfd2.kueue.x-k8s.io renewed 1s ago; Deployment "
        "kueue-system/kueue-controller-manager 1/1 ready)",
    )


def test_a_reused_read_is_not_stale_by_its_reuse() -> None:
    from webhook.checks.controllers import judge
    from webhook.config import ControllerRef

    ref = ControllerRef(namespace="jobset-system", lease="l")
    assert judge("JobSet", ref, lease(18), None, reused_for=5).running is True  # 18 s <= 15 + 5
    assert judge("JobSet", ref, lease(21), None, reused_for=5).running is False
    assert judge("JobSet", ref, lease(16), None).running is False
