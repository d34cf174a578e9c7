"""No Secret value ever leaves the webhook: not in kubectl's output, its log, its metrics,
the audit annotations it returns, or the CLI's JSON — even with debug logging on.

The sample Secrets (e2e/samples/00-prerequisites.yaml) hold known values; the webhook reads
those Secrets for every sample (key names only) and judges good and broken jobs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from e2e.conftest import SAMPLES_DIR, SAMPLES_LABEL
from e2e.harness.controlplane import ControlPlane
from e2e.harness.runner import ROOT, RunningWebhook

#: the values stored in the sample Secrets hf-token and ghcr-pull
VALUES = ("not-a-real-token", "ZGVtbzpkZW1v", '"auths"')
SAMPLES = ("trainjob-good", "trainjob-broken", "aiperfjob-good", "aiperfjob-broken")


@pytest.fixture(scope="module")
def debug_hook(samples_cluster: ControlPlane) -> RunningWebhook:
    with RunningWebhook(
        samples_cluster,
        vwc_name="preflight-webhook-no-secret-values",
        config={"mode": "warn", "secretTtlSeconds": 0},
        namespace_selector={"matchLabels": SAMPLES_LABEL},
        probe_namespace="demo-bench",
        log_level="debug",
    ) as hook:
        yield hook


def _leaks(text: str) -> list[str]:
    return [v for v in VALUES if v in text]


def test_secret_values_appear_nowhere(debug_hook: RunningWebhook, samples_cluster: ControlPlane) -> None:
    cp = samples_cluster
    before = debug_hook.requests_total()
    outputs = []
    for sample in SAMPLES:
        proc = cp.kubectl("apply", "--dry-run=server", "-f", str(SAMPLES_DIR / f"{sample}.yaml"), check=False)
        assert proc.returncode == 0, proc.stderr  # warn mode: nothing is denied
        outputs.append(proc.stdout + proc.stderr)
    assert debug_hook.requests_total() == before + len(SAMPLES)  # every sample was judged
    assert any("[Secrets]" in o for o in outputs)  # the Secrets check really ran and spoke

    assert _leaks("".join(outputs)) == []
    log = debug_hook.log_text()
    assert "admission decision" in log  # debug logging really was on
    assert _leaks(log) == []
    assert _leaks(json.dumps(sorted(map(str, debug_hook.metrics().items())))) == []
    ours = [
        {k: v for k, v in (e.get("annotations") or {}).items() if k.startswith(f"{debug_hook.name}/")}
        for e in cp.audit_events()
    ]
    assert any(ours) and _leaks(json.dumps(ours)) == []

    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "check",
            "-o",
            "json",
            "--kubeconfig",
            str(cp.kubeconfig),
            "-f",
            str(SAMPLES_DIR / "trainjob-good.yaml"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert cli.returncode in (0, 1), cli.stderr
    assert '"checks"' in cli.stdout and _leaks(cli.stdout + cli.stderr) == []
