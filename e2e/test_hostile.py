"""Hostile input through the real kube-apiserver: a broken AIPerfJob cannot get
past enforce mode by being big.

The apiserver admits an AIPerfJob of any shape up to its 3 MiB request limit (the CRD keeps
unknown fields). The first case is big enough that the webhook answers from the envelope's
head without parsing the body: it proves the head is where the real apiserver writes it.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from e2e.conftest import SAMPLES_DIR
from e2e.harness.runner import RunningWebhook
from e2e.harness.runner import stored as exists

HOOK = "preflight.webhook.io"


def sample(job_name: str) -> dict[str, Any]:
    obj = yaml.safe_load((SAMPLES_DIR / "aiperfjob-broken.yaml").read_text())
    obj["metadata"]["name"] = job_name
    return obj


def kubectl_create(hook: RunningWebhook, obj: dict[str, Any]) -> Any:
    """`kubectl create` (no last-applied annotation doubling the request) from JSON on stdin."""
    return hook.cp.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)


def test_a_broken_job_with_280k_models_is_denied_as_too_large_to_check(sample_webhook: RunningWebhook) -> None:
    obj = sample("huge-models")
    obj["spec"]["benchmark"]["models"] = ["m"] * 280_000
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    before = sample_webhook.requests_total(kind="AIPerfJob", operation="CREATE")
    proc = kubectl_create(sample_webhook, obj)
    assert proc.returncode == 1, proc.stdout
    assert (
        f'admission webhook "{HOOK}" denied the request: AIPerfJob "{name}" in namespace "{ns}" failed 1 preflight check:'
        in proc.stderr
    )
    assert "[Object Size] too large to check: request.object holds about 28" in proc.stderr
    assert sample_webhook.requests_total(kind="AIPerfJob", operation="CREATE") == before + 1, sample_webhook.log_tail()
    assert not exists(sample_webhook.cp, obj)


def test_a_broken_job_just_past_max_items_is_denied_naming_the_field(sample_webhook: RunningWebhook) -> None:
    obj = sample("many-models")
    obj["spec"]["benchmark"]["models"] = [f"m{i}" for i in range(1001)]
    proc = kubectl_create(sample_webhook, obj)
    assert proc.returncode == 1, proc.stdout
    assert (
        "[Object Size] too large to check: 1001 models in spec.benchmark.models (limit 1000). Fix: keep "
        "spec.benchmark.models to at most 1000 entries" in proc.stderr
    )
    assert not exists(sample_webhook.cp, obj)
