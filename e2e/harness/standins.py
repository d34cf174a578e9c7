"""What a controller would have written, for the control plane that runs none (e2e tests, `make demo`).

The samples' Service "llm" in demo-bench stands in for a model server; on a cluster the
endpoint slice controller would list its ready pods in an EndpointSlice, which the Endpoint
Service check reads. The control plane runs no controller and no pod, so this writes that
EndpointSlice with one ready endpoint. Never applied to the real node: there kube-proxy would
route the Service to the address, and the node's own controllers write the real slices.
"""

from __future__ import annotations

from typing import Any

#: an address in the node's default pod range; on the control plane nothing routes it
STAND_IN_ADDRESS = "10.244.0.250"


def endpoint_slice(service: str, namespace: str, port: int = 8000, port_name: str = "http") -> dict[str, Any]:
    """An EndpointSlice of `service` with one ready endpoint, as the endpoint slice controller writes it."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-stand-in",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [STAND_IN_ADDRESS], "conditions": {"ready": True}}],
    }


def sample_endpoints() -> list[dict[str, Any]]:
    """The EndpointSlices of the Services in e2e/samples/00-prerequisites.yaml."""
    return [endpoint_slice("llm", "demo-bench")]
