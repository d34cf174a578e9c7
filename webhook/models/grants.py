"""The namespaces the chart lets the webhook read Secrets in (rbac.jobNamespaces: a RoleBinding each, no
cluster-wide `get secrets`): whether a refusal means a namespace lacks the grant, and the fix to say.
Secrets and Image Pull's pull secrets both read Secrets this way.
"""

from __future__ import annotations

from webhook.kube import ApiError


def not_granted(exc: BaseException) -> bool:
    """A 403 of RBAC: the namespace lacks the grant (not a never-read namespace, where none is due)."""
    return isinstance(exc, ApiError) and exc.forbidden and "(never-read namespace)" not in exc.message


def grant_fix(ns: str) -> str:
    """How to let the webhook read there: the chart grants `get secrets` per namespace (a RoleBinding each)."""
    return (
        f'Fix: add "{ns}" to the chart\'s rbac.jobNamespaces and run helm upgrade '
        "(the webhook may get Secrets only in the namespaces listed there)"
    )
