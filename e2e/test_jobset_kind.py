"""A JobSet applied directly is judged; a JobSet a judged job owns never reaches the webhook.

Against the real kube-apiserver: the JobSet webhook entry's matchCondition is the chart's own
(rendered by `helm template`), evaluated by the apiserver's CEL; the verdicts are the webhook's.
"""

from __future__ import annotations

import copy
import subprocess
from typing import Any

import pytest
import yaml

from e2e.fidelity import scenarios_base
from e2e.fidelity.scenarios_base import secret_env
from e2e.harness.controlplane import ControlPlane
from e2e.harness.runner import RULES, RunningWebhook, chart_jobset_hook

NS = "jobset-direct"
LABEL = {"preflight-webhook/jobsets": "true"}
HOOK = "preflight.webhook.io"


def jobset(name: str, *, secret: str = "hf-token", owner: dict[str, Any] | None = None) -> dict[str, Any]:
    container = {
        "name": "trainer",
        "image": "registry.example/trainer:v1",
        "env": [secret_env("HF_TOKEN", secret, "token")],
    }
    obj = scenarios_base.jobset(name, NS, container)
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner]
    return obj


@pytest.fixture(scope="module")
def hook(control_plane: ControlPlane) -> Any:
    cp = control_plane
    cp.apply(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": LABEL}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": NS}},
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "hf-token", "namespace": NS},
                "stringData": {"token": "not-a-real-token"},
            },
        ]
    )
    chart = chart_jobset_hook(cp)
    owned_condition = [c for c in chart["matchConditions"] if c["name"] == "not-owned-by-a-judged-job"]
    assert owned_condition, chart["matchConditions"]
    with RunningWebhook(
        cp,
        name=HOOK,
        vwc_name="preflight-webhook-jobsets",
        config={"mode": "enforce", "secretTtlSeconds": 0, "publicRegistries": ["registry.example"]},
        namespace_selector={"matchLabels": LABEL},
        probe_namespace=NS,
        rules=[*RULES, *chart["rules"]],
        match_conditions=owned_condition,
    ) as running:
        yield running


def apply(cp: ControlPlane, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj, sort_keys=False), check=False)


def test_a_good_jobset_is_admitted(hook: RunningWebhook) -> None:
    before = hook.requests_total()
    proc = apply(hook.cp, jobset("good-ddp"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no warning on a good job
    assert hook.requests_total() == before + 1


def test_a_broken_jobset_is_denied_with_the_fix(hook: RunningWebhook) -> None:
    proc = apply(hook.cp, jobset("broken-ddp", secret="no-such-token"))
    assert proc.returncode != 0
    assert f'admission webhook "{HOOK}" denied the request: JobSet "broken-ddp" in namespace "{NS}"' in proc.stderr
    assert f'Secret "no-such-token" not found in namespace "{NS}"' in proc.stderr
    assert "Fix: kubectl create secret generic no-such-token" in proc.stderr
    assert hook.cp.kubectl("get", "jobset", "broken-ddp", "-n", NS, check=False).returncode != 0


@pytest.mark.parametrize("controller", [True, False])
def test_a_jobset_a_trainjob_owns_never_reaches_the_webhook(hook: RunningWebhook, controller: bool) -> None:
    """Its owner was judged at its own apply; judging it again would wedge Trainer's controller. Without
    the controller flag it is the Dry Run check's twin of a TrainJob's JobSet (dryrun_probe.twin_of):
    judging it would nest a review of the job's JobSet inside the job's own."""
    name = f"owned-ddp-{str(controller).lower()}"
    owner = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": name,
        "uid": "8d1c4a8e-0000-4000-8000-000000000001",
        "controller": controller,
    }
    before = hook.requests_total()
    proc = apply(hook.cp, jobset(name, secret="no-such-token", owner=owner))
    assert proc.returncode == 0, proc.stderr
    assert hook.requests_total() == before  # the apiserver's CEL said: not sent


def test_a_jobset_another_controller_owns_is_judged(hook: RunningWebhook) -> None:
    owner = {
        "apiVersion": "example.com/v1",
        "kind": "Launcher",
        "name": "l",
        "uid": "8d1c4a8e-0000-4000-8000-000000000002",
        "controller": True,
    }
    proc = apply(hook.cp, jobset("launched-ddp", secret="no-such-token", owner=copy.deepcopy(owner)))
    assert proc.returncode != 0
    assert 'Secret "no-such-token" not found' in proc.stderr
