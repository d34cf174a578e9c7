"""Caller authentication against the real kube-apiserver: the apiserver presents a client
certificate to the webhook (AdmissionConfiguration kubeConfigFile, set up by
e2e/harness/controlplane.py), the webhook verifies it (clientAuth), and nobody else gets a verdict."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

import yaml

from e2e.conftest import SAMPLES_DIR
from e2e.harness.controlplane import WEBHOOK_CLIENT_NAME, ControlPlane
from e2e.harness.runner import RunningWebhook

NS = "e2e-client-auth"
HOOK = "preflight.webhook.io"


def broken_job() -> dict[str, Any]:
    job = yaml.safe_load((SAMPLES_DIR / "aiperfjob-broken.yaml").read_text())
    job["metadata"]["namespace"] = NS
    return job


def post_review(hook: RunningWebhook, ctx: ssl.SSLContext) -> tuple[int, Any]:
    body = json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "direct-1",
                "kind": {"group": "aiperf.nvidia.com", "version": "v1alpha1", "kind": "AIPerfJob"},
                "resource": {"group": "aiperf.nvidia.com", "version": "v1alpha1", "resource": "aiperfjobs"},
                "namespace": NS,
                "operation": "CREATE",
                "userInfo": {"username": "mallory"},
                "object": broken_job(),
            },
        }
    ).encode()
    req = urllib.request.Request(
        f"{hook.url}/validate", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_apiserver_authenticates_with_its_client_certificate_and_nobody_else_is_judged(
    control_plane: ControlPlane,
) -> None:
    cp = control_plane
    cp.ensure_namespace(NS)
    assert cp.webhook_client_port and cp.webhook_client_ca_path
    config = {
        "mode": "enforce",
        # nvcr.io declared private, as the samples webhook does: the missing pull Secret denies (else it
        # only warns, and the denial would rest on whatever else this shared cluster lacks)
        "privateRegistries": ["nvcr.io"],
        "clientAuth": {"caFile": str(cp.webhook_client_ca_path), "allowedNames": [WEBHOOK_CLIENT_NAME]},
    }
    with RunningWebhook(
        cp,
        vwc_name="preflight-webhook-client-auth",
        config=config,
        port=cp.webhook_client_port,
        namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": NS}},
        probe_namespace=NS,
    ) as hook:  # start() waits until the apiserver's calls are counted: they were authenticated
        out = cp.kubectl("apply", "-f", "-", "--dry-run=server", input=yaml.safe_dump(broken_job()), check=False)
        assert out.returncode != 0, out.stderr
        assert f'admission webhook "{HOOK}" denied the request: ' in out.stderr
        assert f'[Secrets] Secret "ngc" not found in namespace "{NS}"' in out.stderr

        # the same review sent directly, without the apiserver's certificate: no verdict
        status, answer = post_review(hook, hook._ssl())
        assert (status, answer) == (401, {"error": "a client certificate is required (clientAuth)"})
        assert "refused /validate from 127.0.0.1: no client certificate" in hook.log_text()
