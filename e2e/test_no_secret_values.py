"""No Secret value ever leaves the webhook: not in kubectl's output, its log, its metrics,
the audit annotations it returns, or the CLI's JSON — even with debug logging on.

The sample Secrets (e2e/samples/00-prerequisites.yaml) hold known values; the webhook reads
those Secrets for every sample (key names only) and judges good and broken jobs.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import trustme
import yaml

from e2e.conftest import SAMPLES_DIR, SAMPLES_LABEL
from e2e.harness.controlplane import ControlPlane
from e2e.harness.registry import Registry, push_image
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


def test_pull_secret_values_appear_nowhere_when_registries_are_asked(
    samples_cluster: ControlPlane, tmp_path: Path
) -> None:
    """The Image Pull check reads pull-Secret values (registryAccess on): with the real registry, a
    right and a wrong credential, the webhook at debug level, none of the values (nor their base64,
    nor the Authorization header) shows in kubectl's output, the log, the metrics or the annotations."""
    cp = samples_cluster
    ns = "no-secret-values-registry"
    right, wrong = "right-Pa55-4e1c8b", "wrong-Pa55-93d7aa"
    with Registry(tmp_path / "registry", trustme.CA(), {"puller": right}) as reg:
        push_image(reg, "team/app", "1.0")
        cp.ensure_namespace(ns)
        cp.kubectl("label", "namespace", ns, "e2e.preflight/no-secret-values-registry=yes", "--overwrite")
        for name, password in (("regcred", right), ("badcred", wrong)):
            cp.kubectl("delete", "secret", name, "-n", ns, "--ignore-not-found")
            cp.kubectl("create", "secret", "docker-registry", name, "-n", ns, f"--docker-server={reg.address}",
                       "--docker-username=puller", f"--docker-password={password}")  # fmt: skip
        values = [
            right, wrong,
            base64.b64encode(f"puller:{right}".encode()).decode(),
            base64.b64encode(f"puller:{wrong}".encode()).decode(),
        ]  # fmt: skip
        with RunningWebhook(
            cp,
            vwc_name="preflight-webhook-no-secret-values-registry",
            name="nsv-registry.preflight.webhook.io",
            config={
                "mode": "warn",
                "registryAccess": {"mode": "all", "caFile": str(reg.ca_file), "internalRegistries": [reg.address]},
            },
            namespace_selector={"matchLabels": {"e2e.preflight/no-secret-values-registry": "yes"}},
            probe_namespace=ns,
            log_level="debug",
            workdir=tmp_path / "hook",
        ) as hook:
            outputs = []
            for tag, secret in (("1.0", "regcred"), ("1.0", "badcred"), ("9.9", "regcred")):
                job = yaml.safe_load((SAMPLES_DIR / "aiperfjob-good.yaml").read_text())
                job["metadata"]["namespace"] = ns
                job["spec"]["image"] = f"{reg.address}/team/app:{tag}"
                job["spec"]["podTemplate"] = {"imagePullSecrets": [{"name": secret}]}
                proc = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(job), check=False)
                assert proc.returncode == 0, proc.stderr  # warn mode
                outputs.append(proc.stdout + proc.stderr)
            text = "".join(outputs)
            assert '[Image Pull] Registry "' in text and 'Secret "badcred"' in text  # it really asked
            assert "[Image Pull] Image " in text
            log = hook.log_text()
            metrics = json.dumps(sorted(map(str, hook.metrics().items())))
        leaks = [v for v in values if v in text or v in log or v in metrics]
        assert leaks == []
        assert "Basic cHVsbGVy" not in log  # no Authorization header of user "puller"
