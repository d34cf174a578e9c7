"""What the live view may read: the namespaces whose Secrets it never reads, and the declared reads.

Both are client-side rules under RBAC: they keep a request the settings and the checks do not
call for from ever being sent (docs/cluster.md, docs/security.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from webhook.config import Settings
from webhook.kube import ApiError, Permission

#: never judged, never read: the control plane's own namespace
ALWAYS_EXCLUDED = ("kube-system",)
#: where a pod finds its own namespace when POD_NAMESPACE is not set
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def own_namespace(env: Mapping[str, str] | None = None, sa_file: str = SA_NAMESPACE_FILE) -> str | None:
    """The webhook's own namespace: $POD_NAMESPACE (the chart sets it), else the ServiceAccount's file."""
    environ: Mapping[str, str] = os.environ if env is None else env
    ns = (environ.get("POD_NAMESPACE") or "").strip()
    if ns:
        return ns
    try:
        return Path(sa_file).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def never_read_namespaces(settings: Settings, own: str | None) -> frozenset[str]:
    """Namespaces whose Secrets the webhook never reads, whatever the request says.

    RBAC cannot grant `get secrets` in "every namespace but these" (it has no deny), so the
    ClusterRole is cluster-wide and this client-side rule narrows it: kube-system, the
    webhook's own namespace (its certificate Secret, Helm release Secrets) and every
    namespace the chart excludes from judging (Settings.excluded_namespaces).
    """
    out = set(ALWAYS_EXCLUDED) | set(settings.excluded_namespaces)
    if own:
        out.add(own)
    return frozenset(out)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


class DeclaredReads:
    """What the view may GET or LIST: the declared permissions, and nothing a bug could add.

    RBAC is the real limit; this client-side rule keeps a wrong call from ever being sent (and
    from reading more when the webhook runs with wider credentials, e.g. an admin kubeconfig
    for `preflight-webhook check`). A resource granted only by name (the named permissions of
    the settings in force: a controller's Lease, the cluster-autoscaler status ConfigMap) may be
    read only by that namespace and name; any other read of it is refused as not permitted,
    without a request."""

    def __init__(self, cluster_wide: Sequence[Permission], named: Sequence[Permission]) -> None:
        self.gets = {(p.group, p.resource) for p in cluster_wide if p.verb == "get" and not p.subresource}
        self.subresource_gets = {(p.group, p.resource, p.subresource) for p in cluster_wide if p.verb == "get"}
        self.lists = {(p.group, p.resource) for p in cluster_wide if p.verb == "list" and not p.subresource}
        self.named = {(p.group, p.resource, p.namespace, p.name) for p in named if p.verb == "get"}

    def check_get(self, api_version: str, resource: str, namespace: str, name: str, subresource: str = "") -> None:
        group = _group(api_version)
        if subresource:
            if (group, resource, subresource) in self.subresource_gets:
                return
            what = Permission("get", resource, group, subresource).what
            raise ApiError(403, f'the webhook does not read {what} of "{name}" (not a declared read)', "Forbidden")
        if (group, resource) in self.gets or (group, resource, namespace, name) in self.named:
            return
        what = Permission("get", resource, group).what
        where = f' in namespace "{namespace}"' if namespace else ""
        raise ApiError(403, f'the webhook does not read {what} "{name}"{where} (not a declared read)', "Forbidden")

    def check_list(self, api_version: str, resource: str) -> None:
        group = _group(api_version)
        if (group, resource) not in self.lists:
            what = Permission("list", resource, group).what
            raise ApiError(403, f"the webhook does not list {what} (not a declared read)", "Forbidden")
