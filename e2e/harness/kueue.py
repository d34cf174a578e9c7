"""Kueue v1beta2 objects for the control-plane e2e tests (no Kueue controller runs there: a test writes
the status a ClusterQueue would have through the status subresource). One builder per shape, so every
test's ClusterQueue has the shape Kueue's API defines (kueue.x-k8s.io/v1beta2 ClusterQueueSpec:
resourceGroups of coveredResources and flavors, each flavor's nominalQuota per resource)."""

from __future__ import annotations

from typing import Any

KUEUE = "kueue.x-k8s.io/v1beta2"

#: the condition Kueue's ClusterQueue controller sets on a queue that admits (status.conditions)
ACTIVE_CONDITION: dict[str, str] = {
    "type": "Active",
    "status": "True",
    "reason": "Ready",
    "message": "ok",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def cluster_queue(
    name: str, *, flavor: str, quotas: dict[str, str], namespace: str | None = None, **spec: Any
) -> dict[str, Any]:
    """ClusterQueue `name` with one resource group: `flavor` with a nominalQuota per resource of `quotas`
    (which are its coveredResources), open to the namespace `namespace` only (every namespace when None);
    `spec` adds fields (cohortName, stopPolicy...)."""
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}} if namespace else {}
    resources = [{"name": r, "nominalQuota": q} for r, q in quotas.items()]
    group = {"coveredResources": list(quotas), "flavors": [{"name": flavor, "resources": resources}]}
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": selector, "resourceGroups": [group], **spec},
    }


def active_status(**fields: Any) -> dict[str, Any]:
    """A ClusterQueue status that admits (Active), with `fields` (pendingWorkloads, flavorsUsage...)."""
    return {"status": {"conditions": [dict(ACTIVE_CONDITION)], **fields}}
