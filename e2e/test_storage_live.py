"""Volume Claims against the real kube-apiserver: kubectl through the registered webhook, and the
live view for the exact pass messages and the permissions.

- Trainer v2.3.0's torchtune runtime (manifests/base/runtimes/torchtune/llama3_2/llama3_2_1B.yaml) claims
  a 20Gi ReadWriteOnce volume through JobSet's volumeClaimPolicies. With no StorageClass and no
  PersistentVolume the claim would stay Pending and the pods Unschedulable: denied, with the exact text.
  With a default StorageClass, or with a PersistentVolume that matches: admitted.
- A runtime whose pods mount `persistentVolumeClaim.claimName: data`: denied while the claim does not
  exist; admitted with a warning while it is Pending with nothing to bind it; admitted once Bound (its
  volumeName and status written as the PV controller would, none runs here).
- Without `get persistentvolumeclaims` the check is lowered (`/capabilities`); without the StorageClass
  cache its verdict is "cannot verify", never a deny.

Each kubectl scenario starts its webhook after the cluster state it needs exists (its caches list
StorageClasses and PersistentVolumes at start-up), so nothing waits on a watch. The StorageClass and
PersistentVolume are cluster-scoped: each test removes what it created (the PV's protection finalizer
first: no controller here removes it).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane, read_versions
from e2e.harness.live import live_evaluate, result_of
from e2e.harness.runner import RunningWebhook, findings_of, stored
from e2e.harness.trainer_manifests import train_job, training_runtime
from webhook.config import Settings
from webhook.results import Status

NS = "storage-e2e"
LABEL = {"preflight-webhook/storage-e2e": "true"}
HOOK = "preflight.webhook.io"
CLAIM_RUNTIME = "storage-e2e-claim"


def _trainer_module() -> Path:
    version = read_versions()["TRAINER_VERSION"]
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"github.com/kubeflow/trainer/v2@{version}"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    return Path(json.loads(out.stdout)["Dir"])


def _claim_runtime() -> dict[str, Any]:
    """One `node` pod mounting the existing claim "data"."""
    pod = {
        "containers": [
            {
                "name": "node",
                "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }
        ],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    }
    return training_runtime(
        CLAIM_RUNTIME,
        pod,
        kind="ClusterTrainingRuntime",
        labels={"trainer.kubeflow.org/framework": "torch"},
        ml_policy={"torch": {}},
    )


@pytest.fixture(scope="module")
def torchtune(control_plane: ControlPlane) -> str:
    """The namespace and both runtimes; returns the torchtune runtime's name."""
    rt = yaml.safe_load((_trainer_module() / "manifests/base/runtimes/torchtune/llama3_2/llama3_2_1B.yaml").read_text())
    control_plane.ensure_namespace(NS)
    control_plane.kubectl("label", "namespace", NS, *(f"{k}={v}" for k, v in LABEL.items()), "--overwrite")
    control_plane.apply([rt, _claim_runtime()])
    return str(rt["metadata"]["name"])


@pytest.fixture
def hook(
    control_plane: ControlPlane, torchtune: str, start_webhook: Callable[..., RunningWebhook]
) -> Callable[[], RunningWebhook]:
    """Start the webhook (enforce) for NS, once the test has made the cluster state it judges."""

    def start() -> RunningWebhook:
        return start_webhook(
            vwc_name="preflight-webhook-storage",
            config={"mode": "enforce"},
            namespace_selector={"matchLabels": LABEL},
            probe_namespace=NS,
        )

    return start


def _trainjob(name: str, runtime: str) -> dict[str, Any]:
    return train_job(name, runtime, namespace=NS)


def _apply(cp: ControlPlane, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj, sort_keys=False), check=False)


def _denial(name: str, finding: str) -> str:
    return (
        f'Error from server (Forbidden): error when creating "STDIN": admission webhook "{HOOK}" denied the request: '
        f'TrainJob "{name}" in namespace "{NS}" failed 1 preflight check:\n[Volume Claims] {finding}\n'
    )


def _errors(stderr: str) -> str:
    """kubectl's stderr without its `Warning:` lines (other checks may warn; the denial is judged whole)."""
    return "".join(line + "\n" for line in stderr.splitlines() if not line.startswith("Warning: "))


def _tune(name: str) -> str:
    return (
        f'PersistentVolumeClaim "initializer-{name}" (JobSet volumeClaimPolicies template "initializer", used by '
        "the dataset-initializer, model-initializer, node pods)"
    )


@pytest.fixture
def cluster_scoped(control_plane: ControlPlane) -> Iterator[list[tuple[str, str]]]:
    """(kind, name) of the cluster-scoped objects a test creates; removed at teardown."""
    made: list[tuple[str, str]] = []
    yield made
    for kind, name in made:
        if kind == "persistentvolume":  # kubernetes.io/pv-protection: no controller here removes it
            control_plane.kubectl(
                "patch", kind, name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False
            )
        control_plane.kubectl("delete", kind, name, "--ignore-not-found", "--wait=false")


def test_torchtune_without_storage_is_denied(
    control_plane: ControlPlane, hook: Callable[[], RunningWebhook], torchtune: str
) -> None:
    assert control_plane.kubectl("get", "storageclasses,persistentvolumes", "-o", "name").stdout == ""
    h = hook()
    tj = _trainjob("tune-none", torchtune)
    proc = _apply(h.cp, tj)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert _errors(proc.stderr) == _denial(
        "tune-none",
        f"{_tune('tune-none')} can never bind: it names no StorageClass and the cluster has no default StorageClass, "
        'so only a PersistentVolume can bind it, and none matches (class "", 20Gi, ReadWriteOnce): no '
        'PersistentVolume has class ""; the pods would stay Pending (pod has unbound immediate '
        "PersistentVolumeClaims). Fix: mark a StorageClass default (annotation storageclass.kubernetes.io/"
        'is-default-class: "true"), set storageClassName in the template, or create a PersistentVolume of class "" '
        "with at least 20Gi and ReadWriteOnce",
    )
    assert not stored(h.cp, tj)


async def test_torchtune_with_a_default_storage_class_is_admitted(
    control_plane: ControlPlane,
    hook: Callable[[], RunningWebhook],
    torchtune: str,
    open_view: Any,
    cluster_scoped: list[tuple[str, str]],
) -> None:
    sc = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "e2e-standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "rancher.io/local-path",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    control_plane.apply(sc)
    cluster_scoped.append(("storageclass", "e2e-standard"))
    h = hook()
    tj = _trainjob("tune-sc", torchtune)
    proc = _apply(h.cp, tj)
    assert (proc.returncode, proc.stdout, _errors(proc.stderr)) == (
        0,
        "trainjob.trainer.kubeflow.org/tune-sc created\n",
        "",
    )
    assert "[Volume Claims]" not in proc.stderr
    assert stored(h.cp, tj)
    ev = await live_evaluate(tj, await open_view(Settings()))
    r = result_of(ev, "Volume Claims")
    assert (r.status, r.message) == (
        Status.PASS,
        f'Every claim can bind: {_tune("tune-sc")}: the default StorageClass "e2e-standard" provisions it '
        "(rancher.io/local-path, WaitForFirstConsumer; provisioner health not judged)",
    )


async def test_torchtune_with_a_matching_pv_is_admitted(
    control_plane: ControlPlane,
    hook: Callable[[], RunningWebhook],
    torchtune: str,
    open_view: Any,
    cluster_scoped: list[tuple[str, str]],
) -> None:
    pvs = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": f"/tmp/{name}"},
            },
        }
        for name, size in (("e2e-pv-10g", "10Gi"), ("e2e-pv-50g", "50Gi"))
    ]
    control_plane.apply(pvs)
    cluster_scoped.extend(("persistentvolume", p["metadata"]["name"]) for p in pvs)
    # the PV controller (not running here) makes an unclaimed PV Available
    for p in pvs:
        control_plane.kubectl(
            "patch",
            "pv",
            p["metadata"]["name"],
            "--subresource=status",
            "--type=merge",
            "-p",
            '{"status":{"phase":"Available"}}',
        )
    h = hook()
    tj = _trainjob("tune-pv", torchtune)
    proc = _apply(h.cp, tj)
    assert (proc.returncode, proc.stdout, _errors(proc.stderr)) == (
        0,
        "trainjob.trainer.kubeflow.org/tune-pv created\n",
        "",
    )
    assert "[Volume Claims]" not in proc.stderr
    ev = await live_evaluate(tj, await open_view(Settings()))
    r = result_of(ev, "Volume Claims")
    assert (r.status, r.message) == (
        Status.PASS,
        f"Every claim can bind: {_tune('tune-pv')}: it names no StorageClass and the cluster has no default "
        'StorageClass; PersistentVolume "e2e-pv-50g" matches it',
    )


def test_a_missing_claim_is_denied_then_admitted_once_it_exists(
    control_plane: ControlPlane, hook: Callable[[], RunningWebhook], torchtune: str
) -> None:
    h = hook()
    tj = _trainjob("claim-missing", CLAIM_RUNTIME)
    proc = _apply(h.cp, tj)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert _errors(proc.stderr) == _denial(
        "claim-missing",
        f'PersistentVolumeClaim "data" not found in namespace "{NS}" (volume "data" of the node pods): the pods would '
        'stay Pending (persistentvolumeclaim "data" not found). Fix: create PersistentVolumeClaim "data" in '
        f'namespace "{NS}", or correct the claimName',
    )
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": NS},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    control_plane.apply(claim)
    # Pending, no class, no default StorageClass, no PV: it can never bind, but it is the cluster's
    # state (an administrator may add a PV): a warning, not a denial
    tj = _trainjob("claim-pending", CLAIM_RUNTIME)
    proc = _apply(h.cp, tj)  # the claim is read by name on every review: no restart, no wait
    assert (proc.returncode, proc.stdout, _errors(proc.stderr)) == (
        0,
        "trainjob.trainer.kubeflow.org/claim-pending created\n",
        "",
    )
    assert [f for f in findings_of(proc.stderr) if f.startswith("[Volume Claims]")] == [
        '[Volume Claims] PersistentVolumeClaim "data" (volume "data" of the node pods) is Pending and can never bind: '
        "it names no StorageClass and the cluster has no default StorageClass, so only a PersistentVolume can bind "
        'it, and none matches (class "", 1Gi, ReadWriteOnce): no PersistentVolume has class ""; the pods would stay '
        "Pending (pod has unbound immediate PersistentVolumeClaims). Fix: mark a StorageClass default (annotation "
        'storageclass.kubernetes.io/is-default-class: "true"), set storageClassName in the claim, or create a '
        'PersistentVolume of class "" with at least 1Gi and ReadWriteOnce'
    ]
    # as the PV controller would once it bound a PV: spec.volumeName, then status.phase
    control_plane.kubectl("patch", "pvc", "data", "-n", NS, "--type=merge", "-p", '{"spec":{"volumeName":"pv-data"}}')
    control_plane.kubectl(
        "patch", "pvc", "data", "-n", NS, "--subresource=status", "--type=merge", "-p", '{"status":{"phase":"Bound"}}'
    )
    tj = _trainjob("claim-present", CLAIM_RUNTIME)
    proc = _apply(h.cp, tj)
    assert (proc.returncode, proc.stdout, _errors(proc.stderr)) == (
        0,
        "trainjob.trainer.kubeflow.org/claim-present created\n",
        "",
    )
    assert "[Volume Claims]" not in proc.stderr
    assert stored(h.cp, tj)


async def test_permissions_lower_or_caveat_the_check(
    control_plane: ControlPlane, torchtune: str, open_view: Any
) -> None:
    base = [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["clustertrainingruntimes"], "verbs": ["list", "watch"]},
    ]
    no_pvc = control_plane.write_user_kubeconfig("storage-no-pvc")
    control_plane.grant(base, user="storage-no-pvc")
    view = await open_view(Settings(), kubeconfig=no_pvc)
    caps = {c["check"]: c for c in view.capabilities()}
    assert caps["Volume Claims"] == {
        "check": "Volume Claims",
        "value": "no",
        "source": "probed",
        "reason": "not permitted to get persistentvolumeclaims",
    }
    ev = await live_evaluate(_trainjob("tune-perm", torchtune), view)
    assert result_of(ev, "Volume Claims").status is Status.SKIP

    no_sc = control_plane.write_user_kubeconfig("storage-no-sc")
    control_plane.grant(
        [*base, {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get"]}], user="storage-no-sc"
    )
    view = await open_view(Settings(), kubeconfig=no_sc)
    assert {c["check"]: c["value"] for c in view.capabilities()}["Volume Claims"] == "yes"
    ev = await live_evaluate(_trainjob("tune-perm", torchtune), view)
    r = result_of(ev, "Volume Claims")
    assert (r.status, r.message) == (
        Status.WARN,
        f"Cannot verify {_tune('tune-perm')}: StorageClasses cannot be read (not permitted to list "
        "storageclasses.storage.k8s.io)",
    )
