"""Smoke tests of the harness itself: a real apiserver, the CRDs, RBAC for the dev user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.harness.controlplane import ControlPlane, _pid_alive

ROOT = Path(__file__).resolve().parents[1]


def test_server_version_is_at_least_1_27(control_plane: ControlPlane) -> None:
    out = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    server = out["serverVersion"]
    assert server["gitVersion"].startswith("v1.")
    assert (int(server["major"]), int(server["minor"].rstrip("+"))) >= (1, 27), server


@pytest.mark.parametrize(
    "crd",
    [
        "jobsets.jobset.x-k8s.io",
        "trainjobs.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "localqueues.kueue.x-k8s.io",
        "clusterqueues.kueue.x-k8s.io",
        "aiperfjobs.aiperf.nvidia.com",
        "aiperfsweeps.aiperf.nvidia.com",
    ],
)
def test_crd_established(control_plane: ControlPlane, crd: str) -> None:
    obj = json.loads(control_plane.kubectl("get", "crd", crd, "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
    assert conditions.get("Established") == "True", conditions


@pytest.mark.parametrize("resource", ["localqueues", "clusterqueues"])
def test_kueue_v1beta2_served(control_plane: ControlPlane, resource: str) -> None:
    status, body = control_plane.get_raw("/apis/kueue.x-k8s.io/v1beta2")
    assert status == 200, body
    assert resource in {r["name"] for r in json.loads(body)["resources"]}


def test_custom_resources_round_trip(control_plane: ControlPlane) -> None:
    control_plane.ensure_namespace("e2e-smoke")
    control_plane.apply(
        {
            "apiVersion": "aiperf.nvidia.com/v1alpha1",
            "kind": "AIPerfJob",
            "metadata": {"name": "smoke", "namespace": "e2e-smoke"},
            "spec": {"anything": {"goes": [1, 2, 3]}},
        }
    )
    got = json.loads(control_plane.kubectl("get", "aiperfjob", "smoke", "-n", "e2e-smoke", "-o", "json").stdout)
    assert got["spec"] == {"anything": {"goes": [1, 2, 3]}}
    sa = control_plane.kubectl("get", "serviceaccount", "default", "-n", "e2e-smoke", check=False)
    assert sa.returncode == 0, sa.stderr


def test_dev_user_is_forbidden_until_granted(control_plane: ControlPlane) -> None:
    dev = control_plane.dev_kubeconfig
    denied = control_plane.kubectl("get", "secrets", "-n", "default", kubeconfig=dev, check=False)
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower(), denied.stderr
    assert 'User "dev" cannot list resource "secrets"' in denied.stderr

    name = control_plane.grant([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}], namespace="default")
    try:
        allowed = control_plane.kubectl("get", "secrets", "-n", "default", kubeconfig=dev, check=False)
        assert allowed.returncode == 0, allowed.stderr
    finally:
        control_plane.revoke(name, namespace="default")


def test_audit_log_records_custom_resource_writes(control_plane: ControlPlane) -> None:
    control_plane.ensure_namespace("e2e-audit")
    control_plane.apply(
        {
            "apiVersion": "aiperf.nvidia.com/v1alpha1",
            "kind": "AIPerfJob",
            "metadata": {"name": "audited", "namespace": "e2e-audit"},
            "spec": {},
        }
    )
    events = [
        e
        for e in control_plane.audit_events()
        if e.get("objectRef", {}).get("resource") == "aiperfjobs"
        and e["objectRef"].get("name") == "audited"
        and e.get("stage") == "ResponseComplete"
    ]
    assert events, "no audit event for the AIPerfJob write"
    assert events[-1]["level"] == "Request"
    assert events[-1]["requestObject"]["metadata"]["name"] == "audited"


def test_cli_up_status_down(tmp_path: Path) -> None:
    """`up` leaves a working control plane behind and `down` stops it by the recorded PIDs
    (what `make demo` / `make demo-down` rely on)."""
    state = tmp_path / "cluster"
    cli = [sys.executable, "-m", "e2e.harness.controlplane"]  # as make demo runs it, from the repository root
    up = subprocess.run([*cli, "up", "--state-dir", str(state)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    try:
        assert up.returncode == 0, up.stderr
        exports = dict(
            line.removeprefix("export ").split("=", 1) for line in up.stdout.splitlines() if line.startswith("export ")
        )
        assert exports["KUBECONFIG"] == str(state / "admin.kubeconfig")
        recorded = json.loads((state / "controlplane.json").read_text())["pids"]
        pids = [info["pid"] for info in recorded.values()]
        assert all(_pid_alive(pid) for pid in pids)

        status = subprocess.run([*cli, "status", "--state-dir", str(state)], capture_output=True, text=True, cwd=ROOT)
        assert status.returncode == 0 and json.loads(status.stdout)["running"] == {"etcd": True, "kube-apiserver": True}

        kubectl = Path(exports["PATH"].split(":")[0]) / "kubectl"
        ns = subprocess.run(
            [str(kubectl), "get", "crd", "aiperfjobs.aiperf.nvidia.com", "-o", "name"],
            env={**os.environ, "KUBECONFIG": exports["KUBECONFIG"]},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ns.returncode == 0, ns.stderr
    finally:
        down = subprocess.run(
            [*cli, "down", "--state-dir", str(state)], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
    assert down.returncode == 0, down.stderr
    assert "stopped kube-apiserver" in down.stderr and "stopped etcd" in down.stderr
    assert not any(_pid_alive(pid) for pid in pids)  # (a zombie awaiting its reaper counts as gone)
    assert not state.exists()
