"""Cluster basics: Kubernetes version, JobSet API, Trainer API (blocking), exact wording."""

from __future__ import annotations

from tests.fakeview import FakeView, run_check, workload
from webhook.checks.base import CheckContext
from webhook.checks.basics import JobSetAPI, KubernetesVersion, TrainerAPI, parse_version
from webhook.checks.common import stale_details
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.results import Status


def test_parse_version() -> None:
    assert parse_version("1.27") == (1, 27)
    assert parse_version("v1.30.2") == (1, 30)
    assert parse_version("1.29+") == (1, 29)
    assert parse_version("2") == (2, 0)


async def test_version_pass_fail_and_unknown() -> None:
    wl = workload()
    r = await run_check(KubernetesVersion(), wl, FakeView(version=(1, 34)))
    assert (r.status, r.message) == (Status.PASS, "Kubernetes 1.34 (>= 1.27)")
    r = await run_check(KubernetesVersion(), wl, FakeView(version=(1, 26)))
    assert r.status is Status.FAIL
    assert r.message == (
        "Kubernetes 1.26 is older than 1.27, the oldest version these checks support. "
        "Fix: upgrade the cluster to Kubernetes 1.27 or later."
    )
    r = await run_check(KubernetesVersion(), wl, FakeView(version=(1, 29)), Settings(minKubernetesVersion="1.30"))
    assert r.status is Status.FAIL and r.message.startswith("Kubernetes 1.29 is older than 1.30")
    r = await run_check(KubernetesVersion(), wl, FakeView(version=None))
    assert (r.status, r.message) == (
        Status.WARN,
        "Could not read the cluster's Kubernetes version (discovery has not answered)",
    )


async def test_jobset_api() -> None:
    r = await run_check(JobSetAPI(), workload(kind="AIPerfJob"), FakeView())
    assert (r.status, r.message) == (Status.PASS, "jobset.x-k8s.io/v1alpha2 is served")
    r = await run_check(JobSetAPI(), workload(kind="AIPerfJob"), FakeView(served={"v1"}))
    assert r.status is Status.FAIL
    assert r.message == (
        "The cluster does not serve jobset.x-k8s.io/v1alpha2, so the AIPerfJob's JobSet cannot be created. "
        "Fix: install JobSet v0.12 or later: kubectl apply --server-side -f "
        "https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml"
    )
    assert JobSetAPI.apis == ()  # a missing API is the verdict, not a reason to skip


async def test_trainer_api() -> None:
    assert TrainerAPI.kinds == frozenset({"TrainJob"})
    r = await run_check(TrainerAPI(), workload(), FakeView())
    assert (r.status, r.message) == (Status.PASS, "trainer.kubeflow.org/v1alpha1 is served")
    r = await run_check(TrainerAPI(), workload(), FakeView(served={"v1", "jobset.x-k8s.io/v1alpha2"}))
    assert r.status is Status.FAIL
    assert r.message.startswith(
        "The cluster does not serve trainer.kubeflow.org/v1alpha1, so no controller runs the TrainJob. "
    )
    assert (
        'Fix: install Kubeflow Trainer v2.3: kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git'
        in r.message
    )


def test_stale_details() -> None:
    view = FakeView(cache_ages={"nodes": 300.0, "resourcequotas": None, "services": 3.0})
    ctx = CheckContext(workload=workload(), deadline=Deadline(1), settings=Settings(), view=view)
    assert stale_details(ctx, "nodes", "resourcequotas", "services") == [
        "cached nodes are 300s old (over cacheStaleSeconds 120); this verdict may be out of date",
        "cached resourcequotas have not synced yet; this verdict may miss objects",
    ]
