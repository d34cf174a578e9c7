"""Endpoint Service: in-cluster URLs name an existing Service; external URLs are skipped."""

from __future__ import annotations

import pytest

from tests.fakeview import FakeView, meta, run_check, workload
from webhook.checks.endpoint import EndpointService, service_of
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


async def test_existing_service_passes_and_wrong_port_warns() -> None:
    svc = {"metadata": meta("llm", "models"), "spec": {"clusterIP": "10.0.0.5", "ports": [{"port": 8000}]}}
    view = FakeView({"services": [svc]})
    r = await run_check(EndpointService(), _aiperf("http://llm.models.svc.cluster.local:8000"), view)
    assert (r.status, r.message) == (Status.PASS, 'Service "llm" in namespace "models" exists')
    r = await run_check(EndpointService(), _aiperf("http://llm.models.svc.cluster.local:9000"), view)
    assert (r.status, r.message) == (
        Status.WARN,
        'Service "llm" in "models" exposes port 8000, not 9000 (http://llm.models.svc.cluster.local:9000). '
        "Fix: use port 8000 in spec.benchmark.endpoint.urls, or expose 9000 on the Service",
    )
