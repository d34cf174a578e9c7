"""The webhook's watch caches survive a real kube-apiserver restart end to end.

Unlike e2e/test_deadline.py (a proxy cuts the webhook's path while the apiserver runs),
here the kube-apiserver process itself is stopped by PID and started again on the same
port with the same certificates; etcd keeps the cluster's state. The webhook's reflectors
see their watches cut and connections refused, retry with backoff, and re-establish the
watch (rewatch or relist after 410). The proof that they follow the cluster again: a
Service deleted *after* the restart turns the Endpoint Service verdict into "not found".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane
from e2e.harness.runner import RunningWebhook, findings_of, wait_until

LABEL = "preflight-webhook/apiserver-restart-e2e"
NS = "e2e-apiserver-restart"
SERVICE, JOB = "llm", "restart-bench"
#: the reflector's retry line (webhook/cluster/cache.py, Reflector.run) for the services cache
SERVICES_RETRY = re.compile(r"cache services: .+; retrying in [0-9.]+s \(data is \d+s old\)")


def aiperfjob() -> dict[str, Any]:
    """An AIPerfJob whose endpoint is the Service "llm" in this module's namespace."""
    return {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "metadata": {"name": JOB, "namespace": NS},
        "spec": {
            "image": "nvcr.io/nvidia/aiperf:0.13.0",
            "benchmark": {
                "models": ["meta/llama-3.1-8b-instruct"],
                "endpoint": {"urls": [f"http://{SERVICE}.{NS}.svc.cluster.local:8000"]},
                "datasets": [{"name": "main", "type": "synthetic", "entries": 10}],
                "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 1, "requests": 10}],
            },
        },
    }


SERVICE_MISSING = (
    f'[Endpoint Service] Service "{SERVICE}" not found in namespace "{NS}" '
    f"(endpoint URL http://{SERVICE}.{NS}.svc.cluster.local:8000). "
    "Fix: create the Service, or correct spec.benchmark.endpoint.urls."
)


def endpoint_findings(cp: ControlPlane) -> list[str]:
    """The Endpoint Service warnings of a server-side dry-run apply of the job (which must succeed)."""
    out = cp.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(aiperfjob(), sort_keys=False), check=False
    )
    assert out.returncode == 0, out.stderr  # mode warn, failurePolicy Ignore: never denied
    return [w for w in findings_of(out.stderr) if w.startswith("[Endpoint Service]")]


@pytest.fixture(scope="module")
def restart_webhook(control_plane: ControlPlane) -> Iterator[RunningWebhook]:
    """The namespace and Service "llm" first (listed at start-up), then this module's own webhook."""
    control_plane.ensure_namespace(NS)
    control_plane.kubectl("label", "namespace", NS, f"{LABEL}=true", "--overwrite")
    control_plane.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": SERVICE, "namespace": NS},
                "spec": {"selector": {"app": SERVICE}, "ports": [{"name": "http", "port": 8000}]},
            },
            {  # what the endpoint slice controller would write (none runs here): one ready endpoint
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{SERVICE}-1",
                    "namespace": NS,
                    "labels": {"kubernetes.io/service-name": SERVICE},
                },
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["10.244.7.10"], "conditions": {"ready": True}}],
            },
        ]
    )
    with RunningWebhook(
        control_plane,
        vwc_name="preflight-webhook-apiserver-restart",
        name="apiserver-restart.preflight.webhook.io",
        config={"mode": "warn", "secretTtlSeconds": 0},
        failure_policy="Ignore",
        namespace_selector={"matchLabels": {LABEL: "true"}},
        probe_namespace=NS,
    ) as hook:
        yield hook
    control_plane.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=false", check=False)


def test_caches_follow_the_cluster_after_the_apiserver_restarts(
    control_plane: ControlPlane, restart_webhook: RunningWebhook
) -> None:
    hook = restart_webhook
    assert endpoint_findings(control_plane) == []  # the Service is in the cache: the check passes

    logged = len(hook.log_text())
    old_pid = control_plane.pids["kube-apiserver"]
    control_plane.restart_apiserver()
    assert control_plane.pids["kube-apiserver"] != old_pid

    # a change made only after the restart: the cache can learn it only from a new watch or list
    control_plane.kubectl("delete", "service", SERVICE, "-n", NS)
    wait_until(
        "the Endpoint Service verdict to see the Service deleted after the restart",
        lambda: endpoint_findings(control_plane) == [SERVICE_MISSING],
        timeout=90,
        every=0.2,
    )

    assert hook.proc is not None and hook.proc.poll() is None, hook.log_tail()  # the webhook rode it out
    assert SERVICES_RETRY.search(hook.log_text()[logged:]), hook.log_tail()  # it retried, with backoff
