"""Training Runtime: PASS naming the runtime; missing → SKIP deferring to Trainer's webhook."""

from __future__ import annotations

from tests.fakeview import FakeView, meta, run_check, workload
from webhook.checks.runtime import TrainingRuntime
from webhook.results import Status


def _tj(ref: dict) -> dict:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama-ft", "namespace": "team-a"},
        "spec": {"runtimeRef": ref},
    }


async def test_cluster_runtime_found() -> None:
    view = FakeView({"clustertrainingruntimes": [{"metadata": meta("torch-distributed")}]})
    r = await run_check(TrainingRuntime(), workload(obj=_tj({"name": "torch-distributed"})), view)
    assert (r.status, r.message) == (Status.PASS, 'Uses ClusterTrainingRuntime "torch-distributed"')


async def test_namespaced_runtime_found_via_workload() -> None:
    wl = workload(obj=_tj({"name": "rt", "kind": "TrainingRuntime"}), runtime={"kind": "TrainingRuntime"})
    r = await run_check(TrainingRuntime(), wl, FakeView())
    assert (r.status, r.message) == (Status.PASS, 'Uses TrainingRuntime "rt" in namespace "team-a"')


async def test_missing_runtime_is_skipped_not_failed() -> None:
    r = await run_check(TrainingRuntime(), workload(obj=_tj({"name": "nope"})), FakeView())
    assert r.status is Status.SKIP
    assert r.message == (
        'Skipped: ClusterTrainingRuntime "nope" does not exist; Trainer\'s own webhook rejects the TrainJob '
        "and the checks that need the runtime's pods are skipped"
    )
    # a runtime in another namespace is not the TrainJob's
    view = FakeView({"trainingruntimes": [{"metadata": meta("rt", "team-b")}]})
    r = await run_check(TrainingRuntime(), workload(obj=_tj({"name": "rt", "kind": "TrainingRuntime"})), view)
    assert r.status is Status.SKIP and 'TrainingRuntime "rt" in namespace "team-a" does not exist' in r.message
