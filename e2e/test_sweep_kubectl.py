"""AIPerfSweep through `kubectl` against the real kube-apiserver and the registered webhook.

A good sweep is admitted; a sweep over the 200-variation cap, one whose child names overflow
the 35-character job id, and one whose 7th child does not fit the namespace's ResourceQuota
next to the sweep-controller pod are each denied, the denial naming the cause and the fix.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from e2e.conftest import SAMPLES_DIR, SAMPLES_LABEL
from e2e.harness.controlplane import ControlPlane
from e2e.harness.runner import RunningWebhook, stored

HOOK = "preflight.webhook.io"
NS = "e2e-sweep"
QUOTA_NS = "e2e-sweep-quota"


def _sweep(name: str, namespace: str = NS, **spec: Any) -> dict[str, Any]:
    obj = yaml.safe_load((SAMPLES_DIR / "aiperfsweep-good.yaml").read_text())
    obj["metadata"] = {"name": name, "namespace": namespace}
    obj["spec"]["benchmark"]["endpoint"]["urls"] = [f"http://llm.{namespace}.svc.cluster.local:8000"]
    obj["spec"].update(copy.deepcopy(spec))
    return obj


def _apply(cp: ControlPlane, obj: dict[str, Any]) -> Any:
    return cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj, sort_keys=False), check=False)


@pytest.fixture(scope="module")
def webhook_setup(samples_cluster: ControlPlane) -> None:
    """Two labelled namespaces with the endpoint Service; the second has a pods quota of 8."""
    cp = samples_cluster
    for ns in (NS, QUOTA_NS):
        cp.ensure_namespace(ns)
        cp.kubectl("label", "namespace", ns, *(f"{k}={v}" for k, v in SAMPLES_LABEL.items()), "--overwrite")
        cp.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llm", "namespace": ns},
                  "spec": {"ports": [{"name": "http", "port": 8000}]}})  # fmt: skip
    hard = {"pods": "8"}
    cp.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "bench-pods", "namespace": QUOTA_NS},
              "spec": {"hard": hard}})  # fmt: skip
    cp.kubectl("patch", "resourcequota", "bench-pods", "-n", QUOTA_NS, "--subresource=status", "--type=merge",
               "-p", json.dumps({"status": {"hard": hard, "used": {"pods": "0"}}}))  # fmt: skip


def test_a_good_sweep_is_admitted(sample_webhook: RunningWebhook) -> None:
    cp = sample_webhook.cp
    obj = _sweep("llama-grid")
    out = _apply(cp, obj)
    assert out.returncode == 0, out.stderr
    assert "aiperfsweep.aiperf.nvidia.com/llama-grid created" in out.stdout
    assert stored(cp, obj)


def test_over_the_variation_cap_is_denied_with_the_fix(sample_webhook: RunningWebhook) -> None:
    cp = sample_webhook.cp
    obj = _sweep(
        "too-many", sweep={"type": "grid", "parameters": {"phases.profiling.concurrency": list(range(1, 202))}}
    )
    out = _apply(cp, obj)
    assert out.returncode != 0 and not stored(cp, obj)
    assert (
        f'admission webhook "{HOOK}" denied the request: AIPerfSweep "too-many" in namespace "{NS}" failed'
        in out.stderr
    )
    assert (
        "[Job Render] AIPerfSweep expands to 201 variations, exceeding the 200-variation child-name budget (variation "
        "index 0..199), so the AIPerf operator rejects the sweep. Fix: reduce the sweep cardinality to at most 200 "
        "variations (fewer values per parameter), or split it into several AIPerfSweeps."
    ) in out.stderr


def test_an_overlong_child_name_is_denied_with_the_allowed_length(sample_webhook: RunningWebhook) -> None:
    cp = sample_webhook.cp
    name = "llama-3-1-8b-instruct-grid-sweep"  # 32 characters: -v02 makes a 36-character child job id
    obj = _sweep(name)
    out = _apply(cp, obj)
    assert out.returncode != 0 and not stored(cp, obj)
    assert (
        f"[Job Render] AIPerfSweep name '{name}' (32 chars) leaves no room for the child job_id suffix (worst case "
        "'-v2', 4 chars); the derived child name would exceed the 35-char job_id cap, so the AIPerf operator rejects "
        "the sweep. Fix: rename the AIPerfSweep to at most 31 characters for this cardinality (3 variation(s) x 1 "
        "trial(s))."
    ) in out.stderr


def test_the_seventh_child_over_the_quota_is_denied_by_name(sample_webhook: RunningWebhook) -> None:
    cp = sample_webhook.cp
    spec = {
        "connectionsPerWorker": 100,
        "sweep": {"type": "grid", "parameters": {"phases.profiling.concurrency": [100 * i for i in range(1, 11)]}},
    }
    obj = _sweep("conc", QUOTA_NS, **spec)
    obj["spec"]["benchmark"]["runtime"] = {"workersPerPod": 1}
    out = _apply(cp, obj)
    assert out.returncode != 0 and not stored(cp, obj)
    assert (
        '[Sweep Child Quotas] 4 of 10 children of AIPerfSweep conc would not fit ResourceQuota "bench-pods" next to '
        "the sweep-controller pod (children run one at a time; the first to fail is conc-v06 "
        "(phases.profiling.concurrency=700)): conc-v09 (phases.profiling.concurrency=1000)"
    ) in out.stderr
    assert (
        "worst conc-v09: pods would be 12 (used 0 + controller and child 12) but hard is 8. Fix: raise hard (kubectl "
        f"edit resourcequota bench-pods -n {QUOTA_NS}), or remove those values from spec.sweep so every child fits."
    ) in out.stderr
