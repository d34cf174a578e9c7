"""Capabilities, proven once at start-up: what the webhook may see and use.

Every permission a registered check declares (Check.permissions), plus what the caches
and the live reads need, is asked of the apiserver with a SelfSubjectAccessReview; the
served APIs come from discovery. From those answers each check gets a value:

* yes     — every permission granted and every API it names is served (source: probed);
            a check that needs no cluster access is yes by declaration (source: declared).
* no      — something is missing; the engine lowers the check to skip with the reason
            ("not permitted to list resourcequotas", "kueue.x-k8s.io/v1beta2 is not served").
* unknown — the question could not be asked (apiserver unreachable, SSAR failed); the
            check runs and reports what it meets (403 → "cannot verify").

`required_permissions(all_checks())` is the single list the Helm chart's RBAC is generated from and
compared against: deterministic (sorted) and complete.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.cluster.cache import CACHE_SPECS, SPECS_BY_RESOURCE, CacheSpec
from webhook.cluster.view import CheckNeeds
from webhook.config import Settings
from webhook.kube import ApiError, Permission

YES, NO, UNKNOWN = "yes", "no", "unknown"
PROBED, DECLARED = "probed", "declared"

SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

#: what the view itself needs besides the checks: list+watch for every cache, get for
#: on-demand Secret reads, and the right to ask SelfSubjectAccessReviews
VIEW_PERMISSIONS: tuple[Permission, ...] = (
    *(Permission(verb, s.resource, s.group) for s in CACHE_SPECS for verb in ("list", "watch")),
    Permission("get", "secrets"),
    Permission("create", "selfsubjectaccessreviews", "authorization.k8s.io"),
)


#: (group, resource) the chart grants only in the namespaces where jobs live (rbac.jobNamespaces), never
#: cluster-wide by default: RBAC has no deny, and a cluster-wide `get secrets` reads kube-system's too
JOB_NAMESPACE_RESOURCES: frozenset[tuple[str, str]] = frozenset({("", "secrets")})
#: at most this many job namespaces are asked at start-up (the chart binds each the same way)
JOB_NAMESPACE_PROBES = 50


def probed_permissions(checks: Sequence[CheckNeeds], settings: Settings | None) -> list[Permission]:
    """What the start-up probe asks: `required_permissions` and `named_permissions`; with
    `settings.job_namespaces` (the chart's rbac.jobNamespaces), each job-namespace permission is asked
    in those namespaces (at most JOB_NAMESPACE_PROBES) instead of cluster-wide. An empty list is asked
    cluster-wide: granted nowhere, the answer is "no" and the checks that need it are lowered."""
    perms = required_permissions(checks)
    scoped_in = None if settings is None else settings.job_namespaces
    if scoped_in:
        scoped = [p for p in perms if (p.group, p.resource) in JOB_NAMESPACE_RESOURCES]
        perms = [p for p in perms if p not in scoped]
        perms += [
            Permission(p.verb, p.resource, p.group, p.subresource, namespace=ns)
            for p in scoped
            for ns in sorted(set(scoped_in))[:JOB_NAMESPACE_PROBES]
        ]
    return perms + (named_permissions(checks, settings) if settings is not None else [])


def answer_for(p: Permission, perms: dict[Permission, PermissionResult]) -> PermissionResult:
    """The answer for a cluster-wide permission `p`: its own SSAR's, or, when it was asked only per namespace
    (probed_permissions), granted if some namespace grants it, denied if every one denies it."""
    got = perms.get(p)
    if got is not None or p.namespace or p.name:
        return got or PermissionResult(None)
    same = (p.verb, p.resource, p.group, p.subresource)
    scoped = [
        (q.namespace, r)
        for q, r in perms.items()
        if q.namespace and not q.name and (q.verb, q.resource, q.group, q.subresource) == same
    ]
    if not scoped:
        return PermissionResult(None)
    granted = sorted(ns for ns, r in scoped if r.allowed)
    if granted:
        shown = ", ".join(granted[:3]) + (f" and {len(granted) - 3} more" if len(granted) > 3 else "")
        return PermissionResult(True, f"only in the job namespaces ({shown}; rbac.jobNamespaces)")
    if all(r.allowed is False for _, r in scoped):
        return PermissionResult(False, "in none of the job namespaces")
    return PermissionResult(None, next((r.reason for _, r in scoped if r.allowed is None), ""))


def cache_permissions(spec: CacheSpec) -> tuple[Permission, Permission]:
    return (Permission("list", spec.resource, spec.group), Permission("watch", spec.resource, spec.group))


def _perm_key(p: Permission) -> tuple[str, str, str, str, str, str]:
    return (p.namespace, p.group, p.resource, p.subresource, p.verb, p.name)


def required_permissions(checks: Iterable[CheckNeeds]) -> list[Permission]:
    """Every cluster-wide permission the webhook may use: the union over `checks` and the view, sorted.

    The named single-object reads the settings configure are not here: `named_permissions`."""
    perms: set[Permission] = set(VIEW_PERMISSIONS)
    for c in checks:
        perms.update(c.permissions)
        perms.update(c.optional_permissions)
    return sorted(perms, key=_perm_key)


def named_permissions(checks: Iterable[CheckNeeds], settings: Settings) -> list[Permission]:
    """The namespaced, named reads `settings` configure for `checks` (the controllers' Deployments
    and Leases, the cluster-autoscaler status ConfigMap, the Kueue admission Lease), sorted by
    namespace: the chart grants each by a Role with `resourceNames` in its namespace."""
    perms: set[Permission] = set()
    for c in checks:
        perms.update(named_of(c, settings))
    return sorted(perms, key=_perm_key)


def named_of(check: CheckNeeds, settings: Settings | None) -> tuple[Permission, ...]:
    """The named reads of one check under `settings` (none without settings); a read without a
    namespace or a name (a setting left empty) is no read."""
    if settings is None:
        return ()
    return tuple(sorted({p for p in check.named_permissions(settings) if p.namespace and p.name}, key=_perm_key))


def rbac_rules(perms: Iterable[Permission]) -> list[dict[str, Any]]:
    """RBAC PolicyRules for `perms`, one rule per (group, resource), deterministic; named
    permissions give one rule per (group, resource) with their `resourceNames`."""
    grouped: dict[tuple[str, str], set[str]] = {}
    names: dict[tuple[str, str], set[str]] = {}
    for p in perms:
        res = f"{p.resource}/{p.subresource}" if p.subresource else p.resource
        grouped.setdefault((p.group, res), set()).add(p.verb)
        if p.name:
            names.setdefault((p.group, res), set()).add(p.name)
    out: list[dict[str, Any]] = []
    for (g, r), v in sorted(grouped.items()):
        rule: dict[str, Any] = {"apiGroups": [g], "resources": [r]}
        if (g, r) in names:
            rule["resourceNames"] = sorted(names[(g, r)])
        rule["verbs"] = sorted(v)
        out.append(rule)
    return out


def rbac_roles(perms: Iterable[Permission]) -> list[dict[str, Any]]:
    """`[{"namespace", "rules"}]`, one Role per namespace of the named permissions, by namespace."""
    by_ns: dict[str, list[Permission]] = {}
    for p in perms:
        if p.namespace:
            by_ns.setdefault(p.namespace, []).append(p)
    return [{"namespace": ns, "rules": rbac_rules(ps)} for ns, ps in sorted(by_ns.items())]


@dataclass(frozen=True)
class PermissionResult:
    """Answer of one SSAR: allowed True/False, or None when it could not be asked."""

    allowed: bool | None
    reason: str = ""


def ssar_body(p: Permission) -> dict[str, Any]:
    attrs: dict[str, str] = {"verb": p.verb, "resource": p.resource, "group": p.group}
    if p.subresource:
        attrs["subresource"] = p.subresource
    if p.namespace:
        attrs["namespace"] = p.namespace
    if p.name:
        attrs["name"] = p.name
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attrs},
    }


def parse_ssar(doc: dict[str, Any]) -> PermissionResult:
    status = doc.get("status") or {}
    allowed = bool(status.get("allowed")) and not status.get("denied")
    reason = str(status.get("reason") or status.get("evaluationError") or "")
    return PermissionResult(allowed, reason)


async def probe_permissions(
    client: Any, perms: Sequence[Permission], timeout: float
) -> dict[Permission, PermissionResult]:
    """One SSAR per permission (cluster-wide: all namespaces; a named permission: that object in its
    namespace), concurrently, within `timeout`."""

    async def one(p: Permission) -> PermissionResult:
        try:
            doc = await client.request("POST", SSAR_PATH, body=ssar_body(p), timeout=timeout, kind="SSAR")
        except ApiError as exc:
            return PermissionResult(None, f"SelfSubjectAccessReview failed: {exc.message}")
        return parse_ssar(doc)

    answers = await asyncio.gather(*(one(p) for p in perms))
    return dict(zip(perms, answers))


@dataclass(frozen=True)
class Capability:
    check: str
    value: str
    source: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"check": self.check, "value": self.value, "source": self.source, "reason": self.reason}


def unverified_of(check: CheckNeeds) -> tuple[tuple[str, str], ...]:
    """What the check declares it cannot verify on any cluster ((id, text) pairs; checks.base.Check.unverified)."""
    return tuple(getattr(check, "unverified", ()) or ())


def not_permitted(perms: Iterable[Permission]) -> str:
    return "not permitted to " + ", ".join(str(p) for p in perms)


def cache_absence_reason(
    spec: CacheSpec, served: Callable[[str], bool] | None, perms: dict[Permission, PermissionResult]
) -> str:
    """Why the cache of `spec` cannot run ("" when it can). Unknown permissions count as granted:
    the watch will say so itself if they are not."""
    if served is not None and not served(spec.group_version):
        return f"{spec.group_version} is not served"
    denied = [p for p in cache_permissions(spec) if perms.get(p, PermissionResult(None)).allowed is False]
    return not_permitted(denied) if denied else ""


def _cache_needed(check: CheckNeeds) -> list[CacheSpec]:
    """Caches a check reads: those it declares list or watch for."""
    out: list[CacheSpec] = []
    for p in check.permissions:
        spec = SPECS_BY_RESOURCE.get(p.resource)
        if spec is not None and spec.group == p.group and p.verb in ("list", "watch") and spec not in out:
            out.append(spec)
    return out


def capability_of(
    check: CheckNeeds,
    *,
    served: Callable[[str], bool] | None,
    perms: dict[Permission, PermissionResult] | None,
    discovery_error: str = "",
    settings: Settings | None = None,
    namespace_exists: Callable[[str], bool] | None = None,
) -> Capability:
    """The capability of one check from discovery (`served`, None = unavailable) and SSARs.

    `settings`: those in force, for the check's named reads (`check.named_permissions`). When
    the check declares them required (`named_permissions_required`), it is lowered only when not
    one of them is permitted (then it has nothing to read); otherwise a denied one only turns
    that read into "cannot verify". A named read in a namespace that does not exist
    (`namespace_exists`, None = unknown: every namespace counts) is not counted: its object
    cannot exist, the read answers "not found" (the chart renders no Role there by default)."""
    required_named: tuple[Permission, ...] = ()
    if check.named_permissions_required:
        required_named = tuple(
            p for p in named_of(check, settings) if namespace_exists is None or namespace_exists(p.namespace)
        )
    if not check.needs_cluster and not check.permissions and not check.apis:
        return Capability(check.name, YES, DECLARED, "needs no cluster access")
    if served is None or perms is None:
        why = discovery_error or "capabilities not probed yet"
        return Capability(check.name, UNKNOWN, PROBED, why)
    missing_apis = [gv for gv in check.apis if not served(gv)]
    if missing_apis:
        verb = "is" if len(missing_apis) == 1 else "are"
        return Capability(check.name, NO, PROBED, f"{', '.join(missing_apis)} {verb} not served")
    denied: list[Permission] = []
    for p in check.permissions:
        if answer_for(p, perms).allowed is False and p not in denied:
            denied.append(p)
    # a cache the check reads needs list AND watch, even if the check only declared one
    for spec in _cache_needed(check):
        if served(spec.group_version):
            for p in cache_permissions(spec):
                if perms.get(p, PermissionResult(None)).allowed is False and p not in denied:
                    denied.append(p)
    if required_named and all(perms.get(p, PermissionResult(None)).allowed is False for p in required_named):
        denied += [p for p in required_named if p not in denied]
    if denied:
        return Capability(check.name, NO, PROBED, not_permitted(denied))
    unknown = [p for p in check.permissions if answer_for(p, perms).allowed is None]
    if required_named and all(perms.get(p, PermissionResult(None)).allowed is None for p in required_named):
        unknown += list(required_named[:1])
    if unknown:
        detail = answer_for(unknown[0], perms).reason or "not asked"
        return Capability(check.name, UNKNOWN, PROBED, f"could not verify {unknown[0]}: {detail}")
    if not check.permissions and not check.apis and not named_of(check, settings):
        return Capability(check.name, YES, DECLARED, "needs no permission beyond discovery")
    scoped = [f"{p} {r.reason}" for p in check.permissions if p not in perms and (r := answer_for(p, perms)).allowed]
    return Capability(check.name, YES, PROBED, "; ".join(scoped))


#: without these the webhook cannot apply the per-namespace mode label, so it cannot decide
ESSENTIAL_PERMISSIONS = (Permission("list", "namespaces"), Permission("watch", "namespaces"))


def fatal_reason(
    checks: Sequence[CheckNeeds],
    served: Callable[[str], bool],
    perms: dict[Permission, PermissionResult],
    settings: Settings | None = None,
) -> str:
    """Why the webhook cannot decide anything with these answers ("" when it can)."""
    essential = [p for p in ESSENTIAL_PERMISSIONS if perms.get(p, PermissionResult(None)).allowed is False]
    if essential:
        return f"cannot decide anything: {not_permitted(essential)} (namespace mode labels cannot be read)"
    caps = [capability_of(c, served=served, perms=perms, settings=settings) for c in checks if c.needs_cluster]
    if caps and all(c.value == NO for c in caps):
        return (
            "cannot decide anything: every cluster check is lowered ("
            + "; ".join(f"{c.check}: {c.reason}" for c in caps)
            + ")"
        )
    return ""
