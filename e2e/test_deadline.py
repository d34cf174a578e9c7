"""The deadline holds under a slow or failing apiserver end to end.

Real kube-apiserver, real `preflight-webhook serve`, real kubectl. Only the webhook's own
traffic to the apiserver goes through e2e/harness/delayproxy.py (its kubeconfig names the proxy);
kubectl and the apiserver's calls to the webhook stay direct. Every change to the proxy
is made after the webhook is ready (caches synced) and called by the apiserver.

* slow: 3 s added to every request, timeoutSeconds 3 (budget 2.5 s). The apiserver still
  gets an answer from the webhook — no "context deadline exceeded", which is what
  failurePolicy Fail turns a webhook timeout into — and the answer names the checks whose
  live reads did not finish.
* unreachable (blackhole: connections hang, nothing answers): cached checks answer from the
  last synced state and say how old it is; live checks time out into warnings. When the
  path heals, the stalled watch resumes and the cache catches up.
* refused (connection refused, watches cut): the same answers, the live checks say the
  apiserver cannot be reached, and the caches retry with backoff, not in a storm.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane
from e2e.harness.delayproxy import DelayProxy, proxied_kubeconfig
from e2e.harness.runner import RunningWebhook, findings_of, wait_until

LABEL = "preflight-webhook/deadline-e2e"
SECRET, SERVICE, JOB = "api-key", "llm", "slow-bench"
DEADLINE_EXCEEDED = "context deadline exceeded"
#: what the live checks say when their reads did not come back within the budget
DRY_RUN_TIMED_OUT = (
    f'[Dry Run] Could not dry-run the JobSet "aiperf-{JOB}" (timed out); '
    "Could not dry-run the Pod for controller (timed out); Could not dry-run the Pod for workers (timed out); "
    "Could not dry-run the Job for controller (timed out); Could not dry-run the Job for workers (timed out)"
)


#: the caveat a verdict from the services cache carries once it is older than cacheStaleSeconds 1
STALE = re.compile(
    r"\[Endpoint Service\] cached services are (\d+)s old \(over cacheStaleSeconds 1\); this verdict may be out of date"
)


def secrets_timed_out(ns: str) -> str:
    return f'[Secrets] Cannot verify Secret "{SECRET}" in namespace "{ns}" (timed out)'


def endpoints_timed_out(ns: str) -> str:
    return f'[Endpoint Service] Cannot verify the endpoints of Service "{SERVICE}" in "{ns}" (timed out)'


class _ThroughProxy:
    """The control plane as the webhook sees it: its kubeconfig names the proxy.

    RunningWebhook starts `serve` with `cp.kubeconfig`; everything else (kubectl, the VWC,
    the probe) is delegated to the real control plane and talks to the apiserver directly.
    """

    def __init__(self, cp: ControlPlane, kubeconfig: Path) -> None:
        self._cp = cp
        self.kubeconfig = kubeconfig

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cp, name)


def aiperfjob(ns: str) -> dict[str, Any]:
    """An AIPerfJob whose checks need live reads (its Secret; Dry Run) and a cached Service."""
    return {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "metadata": {"name": JOB, "namespace": ns},
        "spec": {
            "image": "nvcr.io/nvidia/aiperf:0.13.0",
            "benchmark": {
                "models": ["meta/llama-3.1-8b-instruct"],
                "endpoint": {"urls": [f"http://{SERVICE}.{ns}.svc.cluster.local:8000"]},
                "datasets": [{"name": "main", "type": "synthetic", "entries": 10}],
                "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 1, "requests": 10}],
            },
            "podTemplate": {
                "env": [{"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "token"}}}]
            },
        },
    }


def service(ns: str) -> list[dict[str, Any]]:
    """The Service and one EndpointSlice with a ready endpoint (no endpoint slice controller runs here)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": ns},
            "spec": {"selector": {"app": SERVICE}, "ports": [{"name": "http", "port": 8000}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": f"{SERVICE}-1", "namespace": ns, "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["10.244.7.10"], "conditions": {"ready": True}}],
        },
    ]


def prepare(cp: ControlPlane, ns: str, *, with_service: bool) -> None:
    """Namespace (labelled for this module's VWC), default ServiceAccount, the Secret, maybe the Service."""
    cp.ensure_namespace(ns)
    cp.kubectl("label", "namespace", ns, f"{LABEL}={ns}", "--overwrite")
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": ns},
            "stringData": {"token": "not-a-real-token"},
        },
    ]
    if with_service:
        objs += service(ns)
    cp.apply(objs)


def dry_run_apply(cp: ControlPlane, obj: dict[str, Any]) -> Any:
    return cp.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(obj, sort_keys=False), check=False)


def endpoint_missing(ns: str) -> str:
    return (
        f'Service "{SERVICE}" not found in namespace "{ns}" (endpoint URL http://{SERVICE}.{ns}.svc.cluster.local:8000). '
        "Fix: create the Service, or correct spec.benchmark.endpoint.urls."
    )


def endpoint_verdicts(warnings: list[str]) -> list[str]:
    """The Endpoint Service's own warnings (its verdict), without its stale-cache caveat."""
    return [w for w in warnings if w.startswith("[Endpoint Service]") and not STALE.fullmatch(w)]


def answer_from_stale_cache(cp: ControlPlane, job: dict[str, Any]) -> Any:
    """Apply until the answer says its cached services are stale (polled, never slept for)."""

    def stale() -> Any:
        out = dry_run_apply(cp, job)
        return out if any(STALE.fullmatch(w) for w in findings_of(out.stderr)) else None

    out = wait_until("a verdict that says its cached services are stale", stale, timeout=60, every=0.2)
    assert DEADLINE_EXCEEDED not in out.stderr and out.returncode == 0, out.stderr  # answered, not timed out
    return out


def endpoint_passes(cp: ControlPlane, job: dict[str, Any]) -> bool:
    out = dry_run_apply(cp, job)
    return out.returncode == 0 and endpoint_verdicts(findings_of(out.stderr)) == []


@pytest.fixture
def proxied_webhook(
    control_plane: ControlPlane, tmp_path: Path
) -> Iterator[Callable[..., tuple[RunningWebhook, DelayProxy]]]:
    """Factory: (webhook, proxy) — `serve` reaching the apiserver only through a DelayProxy."""
    started: list[tuple[RunningWebhook, DelayProxy]] = []

    def start(ns: str, **kw: Any) -> tuple[RunningWebhook, DelayProxy]:
        assert control_plane.server_url
        proxy = DelayProxy(control_plane.server_url).start()
        kubeconfig = proxied_kubeconfig(control_plane.kubeconfig, proxy.url, tmp_path / f"{ns}.kubeconfig")
        hook = RunningWebhook(
            _ThroughProxy(control_plane, kubeconfig),  # type: ignore[arg-type]
            vwc_name=f"preflight-webhook-{ns}",
            name=f"{ns}.preflight.webhook.io",
            namespace_selector={"matchLabels": {LABEL: ns}},
            probe_namespace=ns,
            **kw,
        )
        started.append((hook, proxy))
        hook.start()
        assert proxy.stats.chunks_up > 0, "the webhook's apiserver traffic does not go through the proxy"
        return hook, proxy

    yield start
    for hook, proxy in reversed(started):
        hook.stop()
        proxy.stop()


def test_slow_apiserver_answer_arrives_and_names_unfinished_checks(
    control_plane: ControlPlane, proxied_webhook: Callable[..., tuple[RunningWebhook, DelayProxy]]
) -> None:
    ns = "e2e-deadline-slow"
    prepare(control_plane, ns, with_service=True)
    hook, proxy = proxied_webhook(
        ns,
        failure_policy="Fail",
        timeout_seconds=3,
        # dryRunCacheSeconds 0: the second apply is the same job and would reuse the first Dry Run outcome
        config={
            "mode": "enforce",
            "secretTtlSeconds": 0,
            "endpointSliceTtlSeconds": 0,
            "dryRunCacheSeconds": 0,
            "budgetSeconds": 4,
            "safetyMarginSeconds": 0.5,
        },
    )
    job = aiperfjob(ns)
    # healthy first: the same job passes every check, so what follows is the delay's doing
    fast = dry_run_apply(control_plane, job)
    assert fast.returncode == 0, fast.stderr
    assert findings_of(fast.stderr) == []

    warned = hook.requests_total(decision="warned")
    delayed = proxy.stats.delayed_up
    proxy.set_delay(3.0)
    slow = dry_run_apply(control_plane, job)

    assert DEADLINE_EXCEEDED not in slow.stderr, slow.stderr  # failurePolicy Fail was not needed
    assert slow.returncode == 0, slow.stderr
    assert slow.stdout == f"aiperfjob.aiperf.nvidia.com/{JOB} created (server dry run)\n"
    assert findings_of(slow.stderr) == [secrets_timed_out(ns), endpoints_timed_out(ns), DRY_RUN_TIMED_OUT]
    assert hook.requests_total(decision="warned") == warned + 1
    assert proxy.stats.delayed_up > delayed  # the live reads were sent, and held back 3 s


def test_unreachable_apiserver_cached_checks_answer_with_their_age(
    control_plane: ControlPlane, proxied_webhook: Callable[..., tuple[RunningWebhook, DelayProxy]]
) -> None:
    ns = "e2e-deadline-down"
    prepare(control_plane, ns, with_service=False)
    hook, proxy = proxied_webhook(
        ns,
        failure_policy="Fail",
        timeout_seconds=3,
        config={"mode": "warn", "secretTtlSeconds": 0, "endpointSliceTtlSeconds": 0, "cacheStaleSeconds": 1},
    )
    job = aiperfjob(ns)
    proxy.blackhole()
    # the cluster changes while the webhook cannot see it: the Service now exists
    control_plane.apply(service(ns))

    out = answer_from_stale_cache(control_plane, job)
    got = findings_of(out.stderr)
    age = [int(m.group(1)) for w in got if (m := STALE.fullmatch(w))]
    assert len(age) == 1 and age[0] >= 1
    assert endpoint_verdicts(got) == [f"[Endpoint Service] {endpoint_missing(ns)}"]  # the last synced state
    assert secrets_timed_out(ns) in got
    assert DRY_RUN_TIMED_OUT in got

    # the path heals: the stalled watch delivers the Service, and the verdict follows
    proxy.forward()
    wait_until(
        "the Endpoint Service verdict to see the new Service",
        lambda: endpoint_passes(control_plane, job),
        timeout=60,
        every=0.2,
    )


def test_refused_apiserver_live_checks_say_so_and_caches_back_off(
    control_plane: ControlPlane, proxied_webhook: Callable[..., tuple[RunningWebhook, DelayProxy]]
) -> None:
    ns = "e2e-deadline-refused"
    prepare(control_plane, ns, with_service=False)
    hook, proxy = proxied_webhook(
        ns,
        failure_policy="Fail",
        timeout_seconds=3,
        config={"mode": "warn", "secretTtlSeconds": 0, "endpointSliceTtlSeconds": 0, "cacheStaleSeconds": 1},
    )
    job = aiperfjob(ns)
    logged = len(hook.log_text())
    proxy.refuse()
    control_plane.apply(service(ns))

    out = answer_from_stale_cache(control_plane, job)
    got = findings_of(out.stderr)
    unreachable = "cannot reach the apiserver: "
    secrets = f'[Secrets] Cannot verify Secret "{SECRET}" in namespace "{ns}" ({unreachable}'
    dry_run = f'[Dry Run] Could not dry-run the JobSet "aiperf-{JOB}" (transient error): {unreachable}'
    assert [w for w in got if w.startswith("[Secrets]")] == [w for w in got if w.startswith(secrets)] != []
    assert [w for w in got if w.startswith("[Dry Run]")] == [w for w in got if w.startswith(dry_run)] != []
    assert endpoint_verdicts(got) == [f"[Endpoint Service] {endpoint_missing(ns)}"]
    assert any(STALE.fullmatch(w) for w in got)

    retry = re.compile(r"cache services: (.*); retrying in ([0-9.]+)s")

    def retries() -> list[tuple[str, float]]:
        found = [(m.group(1), float(m.group(2))) for m in retry.finditer(hook.log_text()[logged:])]
        return found if len(found) >= 3 else []

    found = wait_until("three retries of the services watch", retries, timeout=60)
    delays = [d for _, d in found]
    assert delays == sorted(delays), delays  # exponential backoff: each wait at least as long as the last

    proxy.forward()
    wait_until(
        "the Endpoint Service verdict to see the new Service",
        lambda: endpoint_passes(control_plane, job),
        timeout=60,
        every=0.2,
    )
