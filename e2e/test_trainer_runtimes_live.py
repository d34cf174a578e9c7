"""Trainer's own runtimes end to end: installed in the real kube-apiserver, a TrainJob on each is
evaluated with the live view.

- torchtune (Trainer v2.3.0 manifests/base/runtimes/torchtune): its pods mount the PVC JobSet
  adds from `volumeClaimPolicies`; the Dry Run of every pod group is accepted (it was denied with
  `volumeMounts[0].name: Not found` before the adapter added JobSet's volumes).
- deepspeed-distributed (MPI, runLauncherAsNode): `numNodes: 4` is 3 `node` pods + 1 `launcher`,
  each with `resourcesPerNode`, so the quota verdict counts 4 pods and 4 × 4 GPUs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane, read_versions
from e2e.harness.live import live_evaluate, result_of
from e2e.harness.trainer_manifests import train_job
from webhook.checks import all_checks
from webhook.cluster.live import LiveClusterView, open_cluster_view
from webhook.config import Settings
from webhook.results import Status


def _trainer_module() -> Path:
    """Trainer's Go module directory (the version e2e/versions.env pins), as e2e/build.sh finds it."""
    version = read_versions()["TRAINER_VERSION"]
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"github.com/kubeflow/trainer/v2@{version}"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    return Path(json.loads(out.stdout)["Dir"])


@pytest.fixture(scope="module")
def runtimes(control_plane: ControlPlane) -> dict[str, dict[str, Any]]:
    base = _trainer_module() / "manifests" / "base" / "runtimes"
    rts = {
        "torchtune": yaml.safe_load((base / "torchtune" / "llama3_2" / "llama3_2_1B.yaml").read_text()),
        "deepspeed": yaml.safe_load((base / "deepspeed_distributed.yaml").read_text()),
    }
    control_plane.apply(list(rts.values()))
    return rts


@pytest.fixture
async def view(open_view: Any, runtimes: dict[str, Any]) -> LiveClusterView:
    return await open_view()


async def test_torchtune_trainjob_passes_dry_run(
    control_plane: ControlPlane, runtimes: dict[str, Any], view: LiveClusterView
) -> None:
    ns = "trainer-torchtune"
    control_plane.ensure_namespace(ns)
    tj = train_job("tune", runtimes["torchtune"]["metadata"]["name"], namespace=ns)
    ev = await live_evaluate(tj, view)
    r = result_of(ev, "Dry Run")
    assert (r.status, r.message) == (
        Status.PASS,
        'The apiserver accepts (dryRun=All) JobSet "tune", a Job of each replicatedJob (dataset-initializer, '
        "model-initializer, node) and a pod of each group (dataset-initializer, model-initializer, node)",
    )
    assert ev.workload is not None
    pvc = {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer-tune"}}
    assert [(g.name, g.pods, pvc in (g.pod_spec.get("volumes") or [])) for g in ev.workload.pod_groups] == [
        ("dataset-initializer", 1, True),
        ("model-initializer", 1, True),
        ("node", 1, True),
    ]
    # nothing was written
    assert control_plane.kubectl("get", "pods,jobsets,pvc", "-n", ns, "-o", "name").stdout.strip() == ""


async def test_deepspeed_trainjob_pod_counts_in_quota(control_plane: ControlPlane, runtimes: dict[str, Any]) -> None:
    ns = "trainer-deepspeed"
    control_plane.ensure_namespace(ns)
    hard = {"requests.nvidia.com/gpu": "64", "pods": "20"}
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpus", "namespace": ns},
            "spec": {"hard": hard},
        }
    )
    # no quota controller here: set status.used as it would
    status = {"status": {"hard": hard, "used": {"requests.nvidia.com/gpu": "0", "pods": "0"}}}
    control_plane.kubectl(
        "patch", "resourcequota", "gpus", "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(status)
    )
    # the view opens after the quota exists: its watch cache lists it at start-up
    fresh = await open_cluster_view(
        Settings(), kubeconfig=str(control_plane.kubeconfig), checks=all_checks(), wait_seconds=60
    )
    try:
        assert await fresh.wait_synced(60), fresh.ready_reason
        resources = {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}
        tj = train_job(
            "ds",
            runtimes["deepspeed"]["metadata"]["name"],
            namespace=ns,
            trainer={"numNodes": 4, "resourcesPerNode": resources},
        )
        ev = await live_evaluate(tj, fresh)
    finally:
        await fresh.close()
    assert ev.workload is not None
    assert [(g.name, g.pods) for g in ev.workload.pod_groups] == [("node", 3), ("launcher", 1)]
    assert ev.workload.managed_secrets == {"ds-mpi-ssh-auth"}
    r = result_of(ev, "Resource Quotas")
    assert r.status is Status.PASS, r.message
    assert 'ResourceQuota "gpus": requests.nvidia.com/gpu 16 of 64 (used 0 + job 16)' in r.details
    assert 'ResourceQuota "gpus": pods 4 of 20 (used 0 + job 4)' in r.details
