"""Endpoint Service: an AIPerfJob aimed at an in-cluster Service names one that exists.

A benchmark pointed at `http://llm.models.svc.cluster.local:8000` whose Service is
missing (or misspelled) runs its whole setup and then fails on the first request. The
AIPerf operator probes the URL over HTTP; the webhook answers from the Service cache
instead (no outbound traffic from the admission path). External URLs are skipped.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from webhook.checks.base import AIPERFJOB, AIPERFSWEEP, Check, CheckContext
from webhook.checks.common import cached, with_stale
from webhook.results import CheckResult, Status


def endpoint_urls(obj: dict[str, Any]) -> list[str]:
    ep = (((obj.get("spec") or {}).get("benchmark") or {}).get("endpoint")) or {}
    urls = ep.get("urls")
    if isinstance(urls, str):
        urls = [urls]
    out = [u for u in (urls or []) if isinstance(u, str) and u]
    if isinstance(ep.get("url"), str) and ep["url"]:
        out.append(ep["url"])
    return out


def service_of(url: str) -> tuple[str, str] | None:
    """(service, namespace) for `<svc>.<ns>.svc[.<cluster domain>]` (or `<pod>.<svc>.<ns>.svc…`) hosts."""
    try:
        host = urlsplit(url if "://" in url else f"http://{url}").hostname or ""
    except ValueError:
        return None
    labels = host.lower().rstrip(".").split(".")
    for i in (2, 3):
        if len(labels) > i and labels[i] == "svc":
            return labels[i - 2], labels[i - 1]
    return None


def url_port(url: str) -> int | None:
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None


class EndpointService(Check):
    name = "Endpoint Service"
    synchronous = True  # reads only the Workload and cached state
    kinds = frozenset({AIPERFJOB, AIPERFSWEEP})
    needs_cluster = True
    needs_pod_groups = False
    permissions = cached("services")
    apis = ("v1",)
    summary = "An endpoint URL under *.svc / *.svc.cluster.local names a Service that exists (and exposes the port)."

    async def run(self, ctx: CheckContext) -> CheckResult:
        assert ctx.view is not None
        urls = endpoint_urls(ctx.workload.obj)
        internal = [(u, s) for u in urls if (s := service_of(u)) is not None]
        if not internal:
            return CheckResult(
                self.name, Status.SKIP, "No in-cluster Service endpoint (*.svc) in spec.benchmark.endpoint.urls"
            )
        fails: list[str] = []
        warns: list[str] = []
        found: list[str] = []
        for url, (svc, ns) in internal:
            obj = ctx.view.get_cached("services", ns, svc)
            if obj is None:
                fails.append(
                    f'Service "{svc}" not found in namespace "{ns}" (endpoint URL {url}). '
                    f"Fix: create the Service, or correct spec.benchmark.endpoint.urls."
                )
                continue
            found.append(f'"{svc}" in namespace "{ns}"')
            spec = obj.get("spec") or {}
            port = url_port(url)
            ports = [p.get("port") for p in spec.get("ports") or []]
            headless = spec.get("clusterIP") == "None"
            if port is not None and ports and not headless and port not in ports and spec.get("type") != "ExternalName":
                exposed = ", ".join(map(str, ports))
                warns.append(
                    f'Service "{svc}" in "{ns}" exposes port {exposed}, not {port} ({url}). '
                    f"Fix: use port {ports[0]} in spec.benchmark.endpoint.urls, or expose {port} on the Service"
                )
        if fails:
            return with_stale(
                CheckResult(self.name, Status.FAIL, " ".join(fails), details=fails + warns), ctx, "services"
            )
        if warns:
            return with_stale(CheckResult(self.name, Status.WARN, "; ".join(warns), details=warns), ctx, "services")
        return with_stale(CheckResult(self.name, Status.PASS, f"Service {', '.join(found)} exists"), ctx, "services")


CHECKS = [EndpointService()]
