"""Hostile input through the real kube-apiserver: a broken AIPerfJob cannot get
past enforce mode by being big, and a big one is not refused for its size alone; big
broken AIPerfSweeps, one or three at once, are never admitted, within the chart's memory limit
(issue 33).

The apiserver admits an AIPerfJob of any shape up to its 3 MiB request limit (the CRD keeps
unknown fields), and etcd stores at most 1.5 MiB. The first case is over etcd's limit, so the
webhook answers from the envelope's head without parsing the body: it proves the head is where
the real apiserver writes it. The second is well within it and is judged in full.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from e2e.conftest import SAMPLES_DIR
from e2e.harness.runner import RunningWebhook
from e2e.harness.runner import stored as exists
from webhook.quantity import parse_quantity

HOOK = "preflight.webhook.io"


def sample(job_name: str) -> dict[str, Any]:
    obj = yaml.safe_load((SAMPLES_DIR / "aiperfjob-broken.yaml").read_text())
    obj["metadata"]["name"] = job_name
    return obj


def kubectl_create(hook: RunningWebhook, obj: dict[str, Any]) -> Any:
    """`kubectl create` (no last-applied annotation doubling the request) from JSON on stdin."""
    return hook.cp.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)


def test_a_broken_job_over_etcds_limit_is_denied_by_object_size(sample_webhook: RunningWebhook) -> None:
    obj = sample("huge-models")
    obj["spec"]["benchmark"]["models"] = ["m"] * 500_000  # 1.9 MiB as JSON: etcd stores at most 1.5 MiB
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    before = sample_webhook.requests_total(kind="AIPerfJob", operation="CREATE")
    proc = kubectl_create(sample_webhook, obj)
    assert proc.returncode == 1, proc.stdout
    assert (
        f'admission webhook "{HOOK}" denied the request: AIPerfJob "{name}" in namespace "{ns}" failed 1 preflight '
        "check:\n[Object Size] the object is 1.9 MiB as JSON, over the 1.5 MiB etcd stores by default (its "
        "--max-request-bytes; objectLimits.maxBytes), so the apiserver cannot store it and no controller would ever "
        "see it. Fix: remove what the job does not need (inline data belongs in a ConfigMap, a volume or a URL)"
        in proc.stderr
    ), proc.stderr
    assert sample_webhook.requests_total(kind="AIPerfJob", operation="CREATE") == before + 1, sample_webhook.log_tail()
    assert not exists(sample_webhook.cp, obj)


def test_a_broken_job_with_1001_models_is_judged_in_full(sample_webhook: RunningWebhook) -> None:
    """No round-number bound: 1,001 models are checked like one, and the denial names what is broken."""
    obj = sample("many-models")
    obj["spec"]["benchmark"]["models"] = [f"m{i}" for i in range(1001)]
    proc = kubectl_create(sample_webhook, obj)
    assert proc.returncode == 1, proc.stdout
    assert (
        'AIPerfJob "many-models" in namespace "demo-bench" failed 1 preflight check:\n'
        '[Secrets] Secret "ngc" not found in namespace "demo-bench" (referenced by imagePullSecrets of the '
        'controller, workers pods); private registry "nvcr.io" needs it for image "nvcr.io/nvidia/aiperf:0.13.0". '
        in proc.stderr
    ), proc.stderr
    assert "Object Size" not in proc.stderr
    assert not exists(sample_webhook.cp, obj)


CHART_VALUES = Path(__file__).resolve().parents[1] / "charts" / "preflight-webhook" / "values.yaml"
#: the chart's webhook memory limit (charts/preflight-webhook/values.yaml resources.limits.memory: 800Mi)
#: the chart's webhook memory limit (charts/preflight-webhook/values.yaml resources.limits.memory), in MiB
CHART_LIMIT_MIB = float(
    parse_quantity(yaml.safe_load(CHART_VALUES.read_text())["resources"]["limits"]["memory"]) / 2**20
)


def padded_broken_sweep(name: str, size: int) -> dict[str, Any]:
    """200 variations x 10 trials whose pods read a Secret that does not exist, podTemplate.env grown to `size`."""
    obj = yaml.safe_load((SAMPLES_DIR / "aiperfsweep-good.yaml").read_text())
    obj["metadata"]["name"] = name
    env: list[dict[str, Any]] = [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-missing", "key": "token"}}}
    ]
    obj["spec"]["podTemplate"] = {"env": env}
    obj["spec"]["multiRun"] = {"numRuns": 10}
    obj["spec"]["sweep"] = {"type": "grid", "parameters": {
        "concurrency": [10 * (i + 1) for i in range(10)], "requests": [100 + i for i in range(20)]}}  # fmt: skip
    env += [{"name": f"E{i}", "value": "x" * 10} for i in range((size - len(json.dumps(obj))) // 40)]
    return obj


def vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmHWM")


def test_a_big_broken_sweep_is_denied_within_the_memory_limit(sample_webhook: RunningWebhook) -> None:
    """The issue's reproduction: a broken sweep padded to 577 KB was admitted (its review ran out of the
    budget rendering 200 children and timeoutAction warn let it through) while at 289 KB it was denied."""
    obj = padded_broken_sweep("big-sweep", 577 * 1024)
    proc = sample_webhook.cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f'admission webhook "{HOOK}" denied the request: AIPerfSweep "big-sweep" in namespace "demo-bench"' in (
        proc.stderr
    ), proc.stderr
    assert '[Secrets] Secret "hf-missing" not found in namespace "demo-bench"' in proc.stderr, proc.stderr
    assert sample_webhook.pid is not None
    assert vm_hwm_mib(sample_webhook.pid) < CHART_LIMIT_MIB


def test_three_big_broken_sweeps_at_once_are_never_admitted(sample_webhook: RunningWebhook) -> None:
    """3 parallel dry-run creates of the broken sweep took the webhook to 1,185 MiB (past the chart's 800Mi).
    Now one large review is judged at a time (the byte gate); the others wait, then get a 503 with
    Retry-After, which the apiserver retries within timeoutSeconds: each is denied by Secrets, or refused
    under failurePolicy Fail when its retries ran out of time. Never admitted."""
    objs = [padded_broken_sweep(f"big-sweep-{i}", 577 * 1024) for i in range(3)]

    def create(obj: dict[str, Any]) -> Any:
        return sample_webhook.cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False)

    with ThreadPoolExecutor(3) as pool:
        procs = list(pool.map(create, objs))
    denied = 0
    for obj, proc in zip(objs, procs):
        name = obj["metadata"]["name"]
        assert proc.returncode == 1, proc.stdout + proc.stderr
        if "denied the request" in proc.stderr:
            assert f'AIPerfSweep "{name}" in namespace "demo-bench"' in proc.stderr, proc.stderr
            assert '[Secrets] Secret "hf-missing" not found in namespace "demo-bench"' in proc.stderr, proc.stderr
            denied += 1
        else:
            assert f'Internal error occurred: failed calling webhook "{HOOK}"' in proc.stderr, proc.stderr
    assert denied >= 1  # the first in is judged in full
    assert sample_webhook.pid is not None
    assert vm_hwm_mib(sample_webhook.pid) < CHART_LIMIT_MIB
