"""Endpoint Service: in-cluster URLs name an existing Service; external URLs are skipped."""

from __future__ import annotations

import pytest

from tests.fakeview import FakeView, meta, run_check, workload
from webhook.checks.endpoint import EndpointService
from webhook.models.endpoint import service_of
from webhook.results import Status


def _aiperf(*urls: str) -> object:
    obj = {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "metadata": {"name": "b", "namespace": "bench"},
        "spec": {"benchmark": {"endpoint": {"urls": list(urls)}}},
    }
    return workload(kind="AIPerfJob", name="b", namespace="bench", obj=obj)


@pytest.mark.parametrize(
    "url,expected",
    [
        ("http://llm.models.svc.cluster.local:8000", ("llm", "models")),
        ("http://llm.models.svc:8000/v1", ("llm", "models")),
        ("https://LLM.Models.svc.corp.local", ("llm", "models")),
        ("http://pod-0.llm.models.svc.cluster.local", ("llm", "models")),
        ("llm.models.svc.cluster.local:8000", ("llm", "models")),
        ("http://api.openai.com", None),
        ("http://llm.models:8000", None),
        ("http://[::1", None),
    ],
)
def test_service_of(url: str, expected: tuple[str, str] | None) -> None:
    assert service_of(url) == expected


async def test_external_is_skipped() -> None:
    r = await run_check(EndpointService(), _aiperf("https://api.example.com/v1"), FakeView())
    assert (r.status, r.message) == (
        Status.SKIP,
        "No in-cluster Service endpoint (*.svc) in spec.benchmark.endpoint.urls",
    )


async def test_missing_service_fails() -> None:
    r = await run_check(EndpointService(), _aiperf("http://llm.models.svc.cluster.local:8000"), FakeView())
    assert r.status is Status.FAIL
    assert r.message == (
        'Service "llm" not found in namespace "models" (endpoint URL http://llm.models.svc.cluster.local:8000). '
        "Fix: create the Service, or correct spec.benchmark.endpoint.urls."
    )


SLICES = ("endpointslices", "models", "kubernetes.io/service-name=llm")


def _slice(*ready: bool | None) -> dict:
    eps = [{"addresses": [f"10.1.0.{i}"], "conditions": {} if r is None else {"ready": r}} for i, r in enumerate(ready)]
    return {"metadata": meta("llm-abc", "models"), "endpoints": eps}


async def test_existing_service_passes_and_wrong_port_warns() -> None:
    svc = {"metadata": meta("llm", "models"), "spec": {"clusterIP": "10.0.0.5", "ports": [{"port": 8000}]}}
    view = FakeView({"services": [svc]}, lists={SLICES: [_slice(False, None)]})
    r = await run_check(EndpointService(), _aiperf("http://llm.models.svc.cluster.local:8000"), view)
    assert (r.status, r.message) == (Status.PASS, 'Service "llm" in namespace "models" exists and has ready endpoints')
    r = await run_check(EndpointService(), _aiperf("http://llm.models.svc.cluster.local:9000"), view)
    assert (r.status, r.message) == (
        Status.WARN,
        'Service "llm" in "models" exposes port 8000, not 9000 (http://llm.models.svc.cluster.local:9000). '
        "Fix: use port 8000 in spec.benchmark.endpoint.urls, or expose 9000 on the Service",
    )


SVC = {
    "metadata": meta("llm", "models"),
    "spec": {"clusterIP": "10.0.0.5", "ports": [{"port": 8000}], "selector": {"app": "llm"}},
}
URL = "http://llm.models.svc.cluster.local:8000"


async def test_no_ready_endpoint_warns_naming_the_service() -> None:
    view = FakeView({"services": [SVC]}, lists={SLICES: [_slice(False, False), _slice()]})
    r = await run_check(EndpointService(), _aiperf(URL), view)
    assert (r.status, r.message) == (
        Status.WARN,
        'Service "llm" in "models" has no ready endpoint (0 of 2 endpoints ready in 2 EndpointSlices): the '
        "benchmark's requests would fail until one is. Fix: start the server's pods (kubectl get pods -n models -l app=llm)",
    )
    r = await run_check(EndpointService(), _aiperf(URL), FakeView({"services": [SVC]}))
    assert (r.status, r.message) == (
        Status.WARN,
        'Service "llm" in "models" has no ready endpoint (no EndpointSlice labelled kubernetes.io/service-name=llm): '
        "the benchmark's requests would fail until one is. Fix: start the server's pods (kubectl get pods -n models -l app=llm)",
    )


async def test_endpoints_unreadable_warns_and_external_name_is_not_listed() -> None:
    from webhook.kube import ApiError

    view = FakeView({"services": [SVC]}, lists={SLICES: ApiError(403, "forbidden", "Forbidden")})
    r = await run_check(EndpointService(), _aiperf(URL), view)
    assert (r.status, r.message) == (
        Status.WARN,
        'Cannot verify the endpoints of Service "llm" in "models" (not permitted to list endpointslices)',
    )
    ext = {"metadata": meta("llm", "models"), "spec": {"type": "ExternalName", "externalName": "llm.corp"}}
    view = FakeView({"services": [ext]})
    r = await run_check(EndpointService(), _aiperf(URL), view)
    assert (r.status, r.message) == (Status.PASS, 'Service "llm" in namespace "models" exists')


async def test_a_list_that_never_answers_is_cut_before_the_deadline() -> None:
    import asyncio

    class Hanging(FakeView):
        async def list_objects(self, *args: object, **kw: object) -> list:
            await asyncio.Event().wait()  # the apiserver never answers
            return []

    r = await run_check(EndpointService(), _aiperf(URL), Hanging({"services": [SVC]}), budget=0.2)
    assert (r.status, r.message) == (
        Status.WARN,
        'Cannot verify the endpoints of Service "llm" in "models" (timed out)',
    )


def test_a_url_whose_host_part_is_longer_than_any_host_is_not_read_whole() -> None:
    """Only scheme://authority is split, at most 1 KiB of it (issue 25: urlsplit's IPv6 check took
    132 ms on a 1 MB "http://[:::…]"); a long path or query is never read."""
    from webhook.models.endpoint import service_of, url_port

    assert service_of("http://[" + ":" * 1_000_000 + "]") is None
    assert url_port("http://[" + ":" * 1_000_000 + "]") is None
    long_path = "http://llm.team-a.svc.cluster.local:8000/v1/" + "x" * 1_000_000
    assert service_of(long_path) == ("llm", "team-a")
    assert url_port(long_path) == 8000
