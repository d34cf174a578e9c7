"""Endpoint Service: an AIPerfJob aimed at an in-cluster Service names one that exists.

A benchmark pointed at `http://llm.models.svc.cluster.local:8000` whose Service is
missing (or misspelled) runs its whole setup and then fails on the first request. The
AIPerf operator probes the URL over HTTP; the webhook answers from the Service cache
instead (no outbound traffic from the admission path). External URLs are skipped.

A Service that exists but has no ready endpoint fails the same way, later: its
EndpointSlices (discovery.k8s.io/v1, label `kubernetes.io/service-name`, the label
kube-proxy associates slices by) are listed on demand, and an endpoint counts as ready when
`conditions.ready` is true or unset (k8s.io/api discovery/v1 types.go: "a nil value should
be interpreted as ready"). No ready endpoint is a warning (the server may be starting, or
scale up), never a denial. ExternalName Services have no EndpointSlices and are not listed.
"""

from __future__ import annotations

from typing import Any

from webhook.checks.base import AIPERFJOB, AIPERFSWEEP, Check, CheckContext
from webhook.checks.common import cached, plural, with_stale
from webhook.kube import ApiError, Permission
from webhook.models.context import LiveRead, read_live
from webhook.models.endpoint import endpoint_urls, service_of, url_port
from webhook.results import CheckResult, Status

DISCOVERY_API = "discovery.k8s.io/v1"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def ready_endpoints(slices: list[dict[str, Any]]) -> tuple[int, int]:
    """(ready, all) endpoints over a Service's EndpointSlices; a nil `ready` counts as ready."""
    ready = total = 0
    for sl in slices:
        for ep in sl.get("endpoints") or []:
            if not isinstance(ep, dict):
                continue
            total += 1
            if (ep.get("conditions") or {}).get("ready") is not False:
                ready += 1
    return ready, total


def selector_hint(spec: dict[str, Any], ns: str) -> str:
    sel = spec.get("selector") or {}
    if not sel:
        return "the Service has no selector: its EndpointSlices are managed by hand"
    labels = ",".join(f"{k}={v}" for k, v in sel.items())
    return f"kubectl get pods -n {ns} -l {labels}"


class EndpointService(Check):
    name = "Endpoint Service"
    kinds = frozenset({AIPERFJOB, AIPERFSWEEP})
    needs_cluster = True
    needs_pod_groups = False
    kept_reads = True
    permissions = cached("services")
    optional_permissions = (Permission("list", "endpointslices", "discovery.k8s.io"),)
    apis = ("v1",)
    summary = (
        "An endpoint URL under *.svc / *.svc.cluster.local names a Service that exists (and exposes the port), "
        "with at least one ready endpoint in its EndpointSlices."
    )

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
        listed: set[tuple[str, str]] = set()
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
            if spec.get("type") != "ExternalName" and (svc, ns) not in listed:
                listed.add((svc, ns))
                line = await self._endpoints(ctx, svc, ns, spec)
                if line:
                    warns.append(line)
        if fails:
            return with_stale(
                CheckResult(self.name, Status.FAIL, " ".join(fails), details=fails + warns), ctx, "services"
            )
        if warns:
            return with_stale(CheckResult(self.name, Status.WARN, "; ".join(warns), details=warns), ctx, "services")
        return with_stale(
            CheckResult(
                self.name,
                Status.PASS,
                f"Service {', '.join(found)} exists" + (" and has ready endpoints" if listed else ""),
            ),
            ctx,
            "services",
        )

    @staticmethod
    async def _endpoints(ctx: CheckContext, svc: str, ns: str, spec: dict[str, Any]) -> str:
        """A warning line when the Service has no ready endpoint (or its slices cannot be read); "" when it has."""
        selector = f"{SERVICE_NAME_LABEL}={svc}"
        ttl = ctx.settings.endpoint_slice_ttl_seconds
        (slices,) = await read_live(
            ctx, [LiveRead("list_objects", (DISCOVERY_API, "endpointslices", ns, selector, ctx.deadline), {"ttl": ttl})]
        )
        if isinstance(slices, ApiError):
            why = "not permitted to list endpointslices" if slices.forbidden else slices.message
            return f'Cannot verify the endpoints of Service "{svc}" in "{ns}" ({why})'
        if isinstance(slices, BaseException):
            raise slices  # not an answer of the apiserver: the engine reports it
        ready, total = ready_endpoints(slices)
        if ready:
            return ""
        seen = (
            f"no EndpointSlice labelled {SERVICE_NAME_LABEL}={svc}"
            if not slices
            else f"0 of {plural(total, 'endpoint')} ready in {plural(len(slices), 'EndpointSlice')}"
        )
        return (
            f'Service "{svc}" in "{ns}" has no ready endpoint ({seen}): the benchmark\'s requests would fail '
            f"until one is. Fix: start the server's pods ({selector_hint(spec, ns)})"
        )


CHECKS = [EndpointService()]
