"""Kueue cohort trees and whole warnings, through kubectl against the real kube-apiserver
(Kueue v0.17.0's CRDs installed, no Kueue controller: the queues' Active status is patched).

* A ClusterQueue with no quota of its own, in a Cohort whose parent Cohort object holds the
  quota (apis/kueue/v1beta2/cohort_types.go: a Cohort's own resourceGroups are shared by its
  subtree), admits the job: no denial, no warning.
* A ClusterQueue whose cohort tree cannot hold the job: denied, with the exact message.
* A Cohort whose parent does not exist: the tree cannot be read fully, so the same verdict is
  only a warning — and that long finding reaches kubectl whole, as consecutive `Warning:`
  lines of at most 256 characters (k8s.io/apiserver pkg/endpoints/filters/warning.go).
* `preflight-webhook check` against the same cluster says what the webhook says (exit 1 for
  the denial, 0 with a warning for the rest, 0 when the check's action is warn).
"""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import SAMPLES_DIR
from e2e.harness.controlplane import ControlPlane
from e2e.harness.kueue import active_status
from e2e.harness.runner import RunningWebhook, findings_of, stored, warnings_of
from webhook.quantity import format_quantity

ROOT = Path(__file__).resolve().parents[1]
HOOK = "preflight.webhook.io"
NS = "demo-bench"  # the samples' namespace: its Service, ServiceAccount and Secrets exist
FLAVOR = "e2e-cohort-flavor"
#: aiperfjob-good's pods, all at once (controller 450m + workers 3350m; 1792Mi + 6Gi)
NEED_CPU = format_quantity(Decimal("3.8"), "cpu")
ACTIVE = active_status()


def _groups(cpu: str, memory: str) -> list[dict[str, Any]]:
    return [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": FLAVOR,
                    "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}],
                }
            ],
        }
    ]


def _cohort(name: str, parent: str = "", quota: tuple[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if quota:
        spec["resourceGroups"] = _groups(*quota)
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _queue(name: str, cohort: str, quota: tuple[str, str]) -> list[dict[str, Any]]:
    """ClusterQueue `name`-cq in `cohort` and LocalQueue `name` in NS pointing at it."""
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": f"{name}-cq"},
            "spec": {"cohortName": cohort, "namespaceSelector": {}, "resourceGroups": _groups(*quota)},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"clusterQueue": f"{name}-cq"},
        },
    ]


KUEUE_OBJECTS: list[dict[str, Any]] = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
    # the quota lives in the root Cohort object; the ClusterQueue has none of its own
    _cohort("e2e-org", quota=("64", "256Gi")),
    _cohort("e2e-team", parent="e2e-org"),
    *_queue("e2e-borrow", "e2e-team", ("0", "0")),
    # a closed tree: 1 + 1 cpu at most
    _cohort("e2e-closed", quota=("1", "64Gi")),
    *_queue("e2e-closed", "e2e-closed", ("1", "64Gi")),
    # the same, under a parent that does not exist
    _cohort("e2e-orphan", parent="e2e-nowhere", quota=("1", "64Gi")),
    *_queue("e2e-orphan", "e2e-orphan", ("1", "64Gi")),
]

CLOSED_MESSAGE = (
    f'The job needs cpu {NEED_CPU} but ClusterQueue "e2e-closed-cq" can provide at most 2 (flavor "{FLAVOR}": nominalQuota 1 '
    '+ 1 borrowable in cohort "e2e-closed"), so Kueue would never admit it. Fix: reduce the job\'s pods or requests, or raise '
    'nominalQuota/borrowingLimit for cpu in ClusterQueue "e2e-closed-cq" or the quota cohort "e2e-closed" can lend.'
)
ORPHAN_MESSAGE = (
    f'The job needs cpu {NEED_CPU} but ClusterQueue "e2e-orphan-cq" can provide at most 2 (flavor "{FLAVOR}": nominalQuota 1 '
    '+ 1 borrowable in cohort "e2e-orphan" → "e2e-nowhere") as far as its cohort tree can be read (Cohort "e2e-nowhere" '
    '(parentName of Cohort "e2e-orphan") does not exist), so Kueue may never admit it. Fix: correct the cohort tree, or '
    'reduce the job\'s pods or requests, or raise nominalQuota/borrowingLimit for cpu in ClusterQueue "e2e-orphan-cq" or '
    'the quota cohort "e2e-orphan" → "e2e-nowhere" can lend.'
)


def job(queue: str) -> dict[str, Any]:
    obj = yaml.safe_load((SAMPLES_DIR / "aiperfjob-good.yaml").read_text())
    obj["metadata"]["name"] = f"llama-bench-{queue}"
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return obj


def kubectl_apply(cp: ControlPlane, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj, sort_keys=False), check=False)


@pytest.fixture(scope="module")
def webhook_setup(samples_cluster: ControlPlane) -> None:
    """The Kueue objects, before the webhook starts (its caches list them at start-up)."""
    cp = samples_cluster
    cp.apply(KUEUE_OBJECTS)
    for o in KUEUE_OBJECTS:
        if o["kind"] in ("ClusterQueue", "LocalQueue"):
            ns = ["-n", NS] if o["kind"] == "LocalQueue" else []
            cp.kubectl(
                "patch",
                o["kind"].lower(),
                o["metadata"]["name"],
                *ns,
                "--subresource=status",
                "--type=merge",
                "-p",
                json.dumps(ACTIVE),
            )


@pytest.fixture
def hook(sample_webhook: RunningWebhook) -> RunningWebhook:
    assert sample_webhook.proc is not None and sample_webhook.proc.poll() is None, sample_webhook.log_tail()
    return sample_webhook


def test_a_job_that_fits_only_by_borrowing_a_cohorts_own_quota_is_admitted(hook: RunningWebhook) -> None:
    obj = job("e2e-borrow")
    proc = kubectl_apply(hook.cp, obj)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0,
        f"aiperfjob.aiperf.nvidia.com/{obj['metadata']['name']} created\n",
        "",
    )
    assert stored(hook.cp, obj)


def test_a_job_the_cohort_tree_can_never_hold_is_denied(hook: RunningWebhook) -> None:
    obj = job("e2e-closed")
    proc = kubectl_apply(hook.cp, obj)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (
        f'Error from server (Forbidden): error when creating "STDIN": admission webhook "{HOOK}" denied the request: '
        f'AIPerfJob "{obj["metadata"]["name"]}" in namespace "{NS}" failed 1 preflight check:\n'
        f"[Kueue Capacity] {CLOSED_MESSAGE}\n"
    )
    assert not stored(hook.cp, obj)


def test_a_parent_that_does_not_exist_warns_and_the_long_finding_arrives_whole(hook: RunningWebhook) -> None:
    obj = job("e2e-orphan")
    proc = kubectl_apply(hook.cp, obj)
    assert (proc.returncode, proc.stdout) == (0, f"aiperfjob.aiperf.nvidia.com/{obj['metadata']['name']} created\n"), (
        proc.stderr
    )
    lines = warnings_of(proc.stderr)
    assert proc.stderr == "".join(f"Warning: {w}\n" for w in lines)  # nothing but warnings
    assert len(lines) == 3 and all(len(w) <= 256 for w in lines)  # one finding, over three warnings
    assert all(w.startswith("[Kueue Capacity] … ") for w in lines[1:])
    assert findings_of(proc.stderr) == [f"[Kueue Capacity] {ORPHAN_MESSAGE}"]  # every word, in order
    assert stored(hook.cp, obj)


def _check(
    cp: ControlPlane, obj: dict[str, Any], tmp_path: Path, config: dict[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(obj))
    argv = [sys.executable, "-m", "webhook", "check", "-f", str(manifest), "--kubeconfig", str(cp.kubeconfig)]
    if config is not None:
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        argv += ["--config", str(tmp_path / "config.yaml")]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _line(out: str, check: str) -> tuple[str, str]:
    """(symbol, message) of a check's line in the text report."""
    line = next(x for x in out.splitlines() if x[4:].startswith(f"{check} "))
    return line[2], line[4:].removeprefix(check).strip()


def _verdict(stdout: str) -> str:
    """The job's verdict line (`  PASSED …` / `  FAILED …`), above the run's `Summary:` line."""
    return [line for line in stdout.splitlines() if line.startswith(("  PASSED", "  FAILED"))][-1]


def test_the_cli_says_what_the_webhook_says(hook: RunningWebhook, tmp_path: Path) -> None:
    cp = hook.cp
    closed = job("e2e-closed")
    proc = _check(cp, closed, tmp_path)
    assert proc.returncode == 1, proc.stderr  # the webhook denies it (above)
    assert _line(proc.stdout, "Kueue Capacity") == ("✗", CLOSED_MESSAGE)
    assert _verdict(proc.stdout).endswith("; the webhook would deny it")

    orphan = job("e2e-orphan")
    orphan["metadata"]["name"] += "-cli"
    proc = _check(cp, orphan, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the webhook admits it with a warning (above)
    assert _line(proc.stdout, "Kueue Capacity") == ("!", ORPHAN_MESSAGE)
    assert _verdict(proc.stdout).startswith("  PASSED with warnings: ")

    # the check's action is warn: the webhook would warn, so the CLI warns and exits 0
    proc = _check(cp, closed, tmp_path, {"checks": {"Kueue Capacity": "warn"}})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _line(proc.stdout, "Kueue Capacity") == ("!", CLOSED_MESSAGE)
    out = proc.stdout.rstrip("\n").splitlines()
    assert "      the webhook admits it with this warning (the check's action is warn)" in out
    assert _verdict(proc.stdout).startswith("  PASSED with warnings: ") and "0 failed" in _verdict(proc.stdout)
